//! Real git servers for the git helper tests: `git http-backend` (CGI)
//! behind a small HTTP server doing Basic auth and recording every request
//! it gets, and `git daemon` for anonymous access. Both on 127.0.0.1 (the
//! local sandbox shares the host's network).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use tokio::io::AsyncWriteExt as _;

/// The git program the tests use (Debian's in CI).
pub fn git_program() -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .arg("--exec-path")
        .output()
        .ok()?;
    let exec = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success()
        && exec.join("git-http-backend").exists()
        && exec.join("git-daemon").exists())
    .then(|| PathBuf::from("git"))
}

/// Runs git on the host (test set-up), panicking on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One request the HTTP server got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
}

struct Shared {
    root: PathBuf,
    user: String,
    password: String,
    delay: Duration,
    seen: Mutex<Vec<Seen>>,
}

/// `git http-backend` behind Basic auth: every repository under `root`,
/// read and write for `user` / `password`, nothing without them.
pub struct GitHttp {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl GitHttp {
    /// Starts the server; every answer waits `delay` first (a slow remote).
    pub async fn start(root: &Path, user: &str, password: &str, delay: Duration) -> Self {
        let shared = Arc::new(Shared {
            root: root.to_owned(),
            user: user.to_owned(),
            password: password.to_owned(),
            delay,
            seen: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Self { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("http://{}/{repo}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let authorization = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    shared.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or_else(String::new, |p| p.to_string()),
        authorization: authorization.clone(),
    });
    tokio::time::sleep(shared.delay).await;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", shared.user, shared.password))
    );
    if authorization.as_deref() != Some(expected.as_str()) {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("www-authenticate", "Basic realm=\"git\"")
            .body(Body::from("unauthorized"))
            .unwrap();
    }
    let body: Bytes = axum::body::to_bytes(body, 256 * 1024 * 1024)
        .await
        .unwrap_or_default();
    cgi(
        &shared,
        parts.method.as_ref(),
        &parts.uri,
        &parts.headers,
        body,
    )
    .await
}

/// Runs `git http-backend` for one request.
async fn cgi(
    shared: &Shared,
    method: &str,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &shared.root)
        .env("REMOTE_USER", &shared.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("git http-backend starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let out = child.wait_with_output().await.expect("http-backend output");
    let _ = feed.await;
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|at| (at, 2)));
    let Some((at, gap)) = split else {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::empty())
            .unwrap();
    };
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let mut response = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or("500");
            response = response.status(code.parse::<u16>().unwrap_or(500));
        } else if let Ok(v) = HeaderValue::from_str(value) {
            response = response.header(name, v);
        }
    }
    response.body(Body::from(raw[at + gap..].to_vec())).unwrap()
}

/// `git daemon` serving `root` read-write to anyone, on a free port.
pub struct GitDaemon {
    pub port: u16,
    child: tokio::process::Child,
}

impl GitDaemon {
    pub async fn start(root: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = tokio::process::Command::new("git")
            .args([
                "daemon",
                "--export-all",
                "--enable=receive-pack",
                "--reuseaddr",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", root.display()))
            .arg(root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("git daemon starts");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { port, child }
    }

    /// `git://127.0.0.1:<port>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A bare repository `name` under `root` with one commit on `main`
/// (`README` = "hello\n"), owned by everyone (the sandbox user pushes to
/// it through the servers, which run as the test's user).
pub fn seed_repo(root: &Path, name: &str) -> PathBuf {
    let work = tempfile::tempdir().expect("tempdir");
    let w = work.path();
    git(w, &["init", "-q", "--initial-branch=main"]);
    std::fs::write(w.join("README"), "hello\n").unwrap();
    git(w, &["add", "README"]);
    git(
        w,
        &[
            "-c",
            "user.name=seed",
            "-c",
            "user.email=seed@example.com",
            "commit",
            "-qm",
            "first",
        ],
    );
    let bare = root.join(name);
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            &w.display().to_string(),
            &bare.display().to_string(),
        ],
    );
    git(&bare, &["config", "http.receivepack", "true"]);
    git(&bare, &["config", "daemon.receivepack", "true"]);
    bare
}
