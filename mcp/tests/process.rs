//! The process around the protocol: refused settings and arguments exit 2
//! naming what was refused, and `--http` answers only requests whose Host
//! and Origin name the server itself (DNS rebinding).

mod support;

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
            "rayito-mcp: --host must be one address, not a wildcard (0.0.0.0 or ::): the server has no authentication\n",
        ),
        (
            &["--http", "--host", "::"],
            "rayito-mcp: --host must be one address, not a wildcard (0.0.0.0 or ::): the server has no authentication\n",
        ),
    ];
    for (args, message) in cases {
        let (code, stderr) = run(args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr, message, "{args:?}");
    }
    let (code, _) = run(&["--no-such-flag"], &[]);
    assert_eq!(code, Some(2));
}

/// The `initialize` request of an MCP client.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

/// A POST of `body` to `http://<addr>/mcp` with this Host, Origin and
/// session; the status, the session id the server answers with, and the
/// body (an event stream for a request, read until it ends).
async fn post(
    addr: &str,
    host: &str,
    origin: Option<&str>,
    session: Option<&str>,
    body: &str,
) -> (u16, Option<String>, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::post("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = tokio::time::timeout(Duration::from_secs(60), response.into_body().collect())
        .await
        .expect("the answer ends")
        .unwrap()
        .to_bytes();
    (status, session, String::from_utf8_lossy(&body).into_owned())
}

/// [`post`] of `initialize`: the status and body.
async fn initialize(addr: &str, host: &str, origin: Option<&str>) -> (u16, String) {
    let (status, _, body) = post(addr, host, origin, None, INITIALIZE).await;
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_only_its_own_host_and_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = support::command(tmp.path());
    cmd.args(["--http", "--port", "0"])
        .env("RAYITO_BACKEND", "local")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("serving MCP at ") {
                return line[at + "serving MCP at ".len()..].trim().to_owned();
            }
        }
        panic!("the server ended without serving");
    })
    .await
    .expect("the server says where it listens");
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned();
    assert!(authority.starts_with("127.0.0.1:"), "{authority}");
    let port = authority.rsplit(':').next().unwrap();

    // Its own Host, with and without its own Origin: served.
    let (status, body) = initialize(&authority, &authority, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("rayito-mcp"), "{body}");
    let own_origin = format!("http://{authority}");
    let (status, _) = initialize(&authority, &authority, Some(&own_origin)).await;
    assert_eq!(status, 200);

    // A rebound name, another port, another origin: refused.
    let (status, body) = initialize(&authority, &format!("evil.example:{port}"), None).await;
    assert_eq!(
        (status, body.as_str()),
        (403, "Forbidden: Host header is not allowed")
    );
    let (status, _) = initialize(&authority, &format!("localhost:{port}"), None).await;
    assert_eq!(status, 403);
    let (status, _) = initialize(&authority, "127.0.0.1:1", None).await;
    assert_eq!(status, 403);
    let (status, body) = initialize(&authority, &authority, Some("http://evil.example")).await;
    assert_eq!(
        (status, body.as_str()),
        (403, "Forbidden: Origin header is not allowed")
    );
    let (status, _) = initialize(
        &authority,
        &authority,
        Some(&format!("https://{authority}")),
    )
    .await;
    assert_eq!(status, 403);

    // A whole conversation over HTTP: a session, then a tool call.
    let (status, session, _) = post(&authority, &authority, None, None, INITIALIZE).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let (status, _, _) = post(
        &authority,
        &authority,
        None,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(status, 202);
    let (status, _, body) = post(
        &authority,
        &authority,
        Some(&own_origin),
        Some(&session),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"cmd":"echo over http"}}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"\"stdout\":\"over http\\n\""#), "{body}");

    // SIGTERM stops it cleanly.
    support::sigterm(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server stops")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}
