//! The process around the protocol: refused settings and arguments exit 2
//! naming what was refused, and `--http` answers only requests that carry
//! its bearer token (another local user) and whose Host and Origin name
//! the server itself (DNS rebinding).

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// Runs the server with `args` and `envs` on the local backend, without
/// stdin, and returns its exit code and stderr.
fn run(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(support::BINARY);
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") || name.starts_with("RAYITO_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("TMPDIR", tmp.path())
        .env("RAYITO_BACKEND", "local")
        .args(args)
        .stdin(Stdio::null());
    for (name, value) in envs {
        cmd.env(name, value);
    }
    let out = cmd.output().expect("the server runs");
    assert!(out.stdout.is_empty(), "stdout is the protocol's");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_invalid_setting_exits_2_naming_the_variable() {
    let cases = [
        (
            "RAYITO_MCP_TIMEOUT_SECONDS",
            "59",
            "rayito-mcp: invalid RAYITO_MCP_TIMEOUT_SECONDS: a whole number of seconds from 60 to 28800\n",
        ),
        (
            "RAYITO_MCP_IDLE_SECONDS",
            "30",
            "rayito-mcp: invalid RAYITO_MCP_IDLE_SECONDS: 0 (no idle suspension) or a whole number of seconds from 60 to less than RAYITO_MCP_TIMEOUT_SECONDS\n",
        ),
        (
            "RAYITO_MCP_LOG_LEVEL",
            "loud",
            "rayito-mcp: invalid RAYITO_MCP_LOG_LEVEL: one of DEBUG, INFO, WARNING, ERROR, CRITICAL\n",
        ),
        (
            "RAYITO_TEMPLATE_VERSION",
            "latest",
            "rayito-mcp: invalid RAYITO_TEMPLATE_VERSION: a positive whole number\n",
        ),
        (
            "RAYITO_EXECUTION_ROLE_ARN",
            "admin",
            "rayito-mcp: invalid RAYITO_EXECUTION_ROLE_ARN: an IAM role ARN (arn:aws:iam::<account>:role/<name>)\n",
        ),
    ];
    for (variable, value, message) in cases {
        let (code, stderr) = run(&[], &[(variable, value)]);
        assert_eq!(code, Some(2), "{variable}: {stderr}");
        assert_eq!(stderr, message);
    }
    // The backend too (the SDK would refuse it only at the first call).
    let (code, stderr) = run(&[], &[("RAYITO_BACKEND", "lcoal")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "rayito-mcp: invalid RAYITO_BACKEND: local or aws (unset: aws)\n"
    );
}

#[test]
fn refused_arguments_exit_2() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--port", "9000"],
            "rayito-mcp: --host and --port need --http\n",
        ),
        (
            &["--host", "127.0.0.1"],
            "rayito-mcp: --host and --port need --http\n",
        ),
        (
            &["--http", "--host", "0.0.0.0"],
            "rayito-mcp: --host must be one address, not a wildcard (0.0.0.0 or ::): anyone who can reach it would see the server\n",
        ),
        (
            &["--http", "--host", "::"],
            "rayito-mcp: --host must be one address, not a wildcard (0.0.0.0 or ::): anyone who can reach it would see the server\n",
        ),
    ];
    for (args, message) in cases {
        let (code, stderr) = run(args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr, message, "{args:?}");
    }
    // A given token too short to be one: refused before serving.
    let (code, stderr) = run(
        &["--http", "--port", "0"],
        &[("RAYITO_MCP_TOKEN", "short-token")],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "rayito-mcp: invalid RAYITO_MCP_TOKEN: at least 32 printable ASCII characters, no spaces\n"
    );
    assert!(!stderr.contains("short-token"));
    let (code, _) = run(&["--no-such-flag"], &[]);
    assert_eq!(code, Some(2));
}

/// The `initialize` request of an MCP client.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

/// The token the tests give the server in `RAYITO_MCP_TOKEN`.
const GIVEN_TOKEN: &str = "test-token-0123456789abcdefghijklmnopqrstuvwxyz";
/// The answer to a request without the token: pinned, and quoted by
/// docs/mcp.md.
const UNAUTHORIZED: &str =
    "Unauthorized: send the server's bearer token (Authorization: Bearer <token>)";
const CHALLENGE: &str = "Bearer realm=\"rayito-mcp\"";

/// One request's headers: Host, Origin, session, Authorization.
#[derive(Clone, Copy)]
struct Headers<'a> {
    host: &'a str,
    origin: Option<&'a str>,
    session: Option<&'a str>,
    authorization: Option<&'a str>,
}

/// What the server answered: status, session id, `WWW-Authenticate`, body
/// (an event stream for a request, read until it ends).
struct Answer {
    status: u16,
    session: Option<String>,
    challenge: Option<String>,
    body: String,
}

/// A POST of `body` to `http://<addr>/mcp` with these headers, by a plain
/// HTTP client as another local user's `curl` would send it.
async fn post(addr: &str, headers: Headers<'_>, body: &str) -> Answer {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::post("/mcp")
        .header("host", headers.host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(origin) = headers.origin {
        request = request.header("origin", origin);
    }
    if let Some(authorization) = headers.authorization {
        request = request.header("authorization", authorization);
    }
    if let Some(session) = headers.session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (session, challenge) = (header("mcp-session-id"), header("www-authenticate"));
    let body = tokio::time::timeout(Duration::from_secs(60), response.into_body().collect())
        .await
        .expect("the answer ends")
        .unwrap()
        .to_bytes();
    Answer {
        status,
        session,
        challenge,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The server with `--http --port 0` on the local backend and `envs`: the
/// child, its authority (`127.0.0.1:<port>`), its stderr lines so far and
/// the rest of them.
async fn http_server(
    tmp: &std::path::Path,
    envs: &[(&str, &str)],
) -> (
    tokio::process::Child,
    String,
    Vec<String>,
    tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
) {
    let mut cmd = support::command(tmp);
    cmd.args(["--http", "--port", "0"])
        .env("RAYITO_BACKEND", "local")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in envs {
        cmd.env(name, value);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line.clone());
            if let Some(at) = line.find("serving MCP at ") {
                return line[at + "serving MCP at ".len()..].trim().to_owned();
            }
        }
        panic!("the server ended without serving: {seen:?}");
    })
    .await
    .expect("the server says where it listens");
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned();
    assert!(authority.starts_with("127.0.0.1:"), "{authority}");
    (child, authority, seen, lines)
}

/// SIGTERM stops the server cleanly; its remaining stderr.
async fn stop(
    mut child: tokio::process::Child,
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
) -> String {
    support::sigterm(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server stops")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    rest
}

/// Issue 41: without a token, or with a wrong one, a request gets 401 and
/// `WWW-Authenticate: Bearer`, whatever its Host and Origin.
async fn assert_refused_without_the_token(authority: &str, token: &str) {
    let bearer = format!("Bearer {token}");
    let wrong_last = format!("Bearer {}x", &token[..token.len() - 1]);
    let basic = format!("Basic {token}");
    let longer = format!("{bearer}0");
    for authorization in [
        None,
        Some("Bearer "),
        Some(wrong_last.as_str()),
        Some(basic.as_str()),
        Some(longer.as_str()),
        Some(token),
    ] {
        let answer = post(
            authority,
            Headers {
                host: authority,
                origin: None,
                session: None,
                authorization,
            },
            INITIALIZE,
        )
        .await;
        assert_eq!(
            (
                answer.status,
                answer.body.as_str(),
                answer.challenge.as_deref()
            ),
            (401, UNAUTHORIZED, Some(CHALLENGE)),
            "{authorization:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_only_its_token_and_its_own_host_and_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, authority, seen, lines) =
        http_server(tmp.path(), &[("RAYITO_MCP_TOKEN", GIVEN_TOKEN)]).await;
    let port = authority.rsplit(':').next().unwrap();
    // A given token: no file is written, and its path is not printed.
    assert!(
        !seen.iter().any(|l| l.contains("bearer token is in")),
        "{seen:?}"
    );
    assert_refused_without_the_token(&authority, GIVEN_TOKEN).await;
    let bearer = format!("Bearer {GIVEN_TOKEN}");
    let with = |host, origin, session| Headers {
        host,
        origin,
        session,
        authorization: Some(bearer.as_str()),
    };

    // Its own Host, with and without its own Origin: served.
    let answer = post(&authority, with(&authority, None, None), INITIALIZE).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("rayito-mcp"), "{}", answer.body);
    let own_origin = format!("http://{authority}");
    let answer = post(
        &authority,
        with(&authority, Some(&own_origin), None),
        INITIALIZE,
    )
    .await;
    assert_eq!(answer.status, 200);

    // A rebound name, another port, another origin: refused, token or not.
    let evil_host = format!("evil.example:{port}");
    let answer = post(&authority, with(&evil_host, None, None), INITIALIZE).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (403, "Forbidden: Host header is not allowed")
    );
    let localhost = format!("localhost:{port}");
    let answer = post(&authority, with(&localhost, None, None), INITIALIZE).await;
    assert_eq!(answer.status, 403);
    let answer = post(&authority, with("127.0.0.1:1", None, None), INITIALIZE).await;
    assert_eq!(answer.status, 403);
    let answer = post(
        &authority,
        with(&authority, Some("http://evil.example"), None),
        INITIALIZE,
    )
    .await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (403, "Forbidden: Origin header is not allowed")
    );
    let https_origin = format!("https://{authority}");
    let answer = post(
        &authority,
        with(&authority, Some(&https_origin), None),
        INITIALIZE,
    )
    .await;
    assert_eq!(answer.status, 403);

    // A whole conversation over HTTP: a session, then a tool call.
    let answer = post(&authority, with(&authority, None, None), INITIALIZE).await;
    assert_eq!(answer.status, 200);
    let session = answer.session.expect("a session id");
    let answer = post(
        &authority,
        with(&authority, None, Some(&session)),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(answer.status, 202);
    // Within the session, a request without the token is still refused.
    let answer = post(
        &authority,
        Headers {
            host: &authority,
            origin: None,
            session: Some(&session),
            authorization: None,
        },
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"cmd":"echo stolen"}}}"#,
    )
    .await;
    assert_eq!(answer.status, 401);
    let answer = post(
        &authority,
        with(&authority, Some(&own_origin), Some(&session)),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"cmd":"echo over http; env"}}}"#,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.contains(r#"\"stdout\":\"over http\\n"#),
        "{}",
        answer.body
    );
    // The sandbox's code never sees the server's token.
    assert!(!answer.body.contains(GIVEN_TOKEN), "{}", answer.body);

    let rest = stop(child, lines).await;
    assert!(!rest.contains(GIVEN_TOKEN) && !seen.concat().contains(GIVEN_TOKEN));
}

/// Without `RAYITO_MCP_TOKEN`, the server makes a token, writes it to a
/// file only its user can read, prints the file's path (never the token),
/// and removes the file when it stops. The client configuration of
/// docs/mcp.md (`Authorization: Bearer <the file's content>`) is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_makes_a_token_in_a_private_file_and_requires_it() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let tmp = tempfile::tempdir().unwrap();
    let (child, authority, seen, lines) = http_server(tmp.path(), &[]).await;
    let prefix = "rayito-mcp: the bearer token is in ";
    let suffix = " (readable only by you)";
    let path = seen
        .iter()
        .find_map(|l| l.strip_prefix(prefix)?.strip_suffix(suffix))
        .unwrap_or_else(|| panic!("no token path in {seen:?}"))
        .to_owned();
    let path = std::path::PathBuf::from(path);
    assert!(path.starts_with(tmp.path()), "{}", path.display());
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
    let dir = std::fs::metadata(path.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));

    assert_refused_without_the_token(&authority, &token).await;
    // The documented header, as `curl -H "Authorization: Bearer $(cat <file>)"`.
    let bearer = format!("Bearer {token}");
    let answer = post(
        &authority,
        Headers {
            host: &authority,
            origin: None,
            session: None,
            authorization: Some(&bearer),
        },
        INITIALIZE,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("rayito-mcp"), "{}", answer.body);

    let rest = stop(child, lines).await;
    assert!(!rest.contains(&token), "{rest}");
    assert!(!seen.concat().contains(&token));
    assert!(!path.exists(), "the token file outlived the server");
    assert!(!path.parent().unwrap().exists());
}

/// docs/mcp.md quotes the 401's body and challenge as they are.
#[test]
fn docs_mcp_md_quotes_the_refusal() {
    let doc = include_str!("../../docs/mcp.md");
    assert!(doc.contains(UNAUTHORIZED), "docs/mcp.md lacks the 401 body");
    assert!(doc.contains("WWW-Authenticate: Bearer realm=\"rayito-mcp\""));
    assert!(doc.contains("RAYITO_MCP_TOKEN"));
    assert!(doc.contains("rayito-mcp: the bearer token is in "));
}
