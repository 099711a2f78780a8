//! Ports on the local backend: a server started inside the sandbox is
//! reached from the host through the emulated proxy with the address and
//! headers `get_host` gives; the proxy refuses a request without them; the
//! failures of `get_host` by variant and exact message.

use crate::sdk_support;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{CommandEvent, CommandOptions, SandboxError, SandboxHost};
use sdk_support::{emulator, sandbox};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Generous: a loaded 2-core CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn assert_send<T: Send>(_: &T) {}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.1 GET through the proxy with `headers`; the raw answer.
async fn get(host: &SandboxHost, path: &str, headers: &[(&str, String)]) -> String {
    let authority = host.url().strip_prefix("http://").expect("a local URL");
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_the_sandbox_is_reached_from_the_host() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    sbx.files()
        .write(
            "/home/user/site/index.html",
            "<h1>hello from the sandbox</h1>",
        )
        .await
        .unwrap();
    let port = free_port();
    let mut server = sbx
        .commands()
        .spawn(
            &format!(
                "python3 -u -m http.server {port} --bind 127.0.0.1 --directory /home/user/site"
            ),
            CommandOptions::new().no_timeout(),
        )
        .await
        .expect("the server starts");
    // It says when it listens.
    let mut said = String::new();
    while !said.contains("Serving HTTP") {
        let event = tokio::time::timeout(PATIENCE, server.next())
            .await
            .expect("the server listens in time")
            .expect("still running")
            .expect("an event");
        if let CommandEvent::Stdout { data, .. } | CommandEvent::Stderr { data, .. } = event {
            said.push_str(&String::from_utf8_lossy(&data));
        }
    }

    let getting = sbx.get_host(port);
    assert_send(&getting);
    let host = getting.await.expect("get_host");
    assert_eq!(host.port(), port);
    assert!(
        host.url().starts_with("http://127.0.0.1:"),
        "{}",
        host.url()
    );
    let headers = host.headers().await.expect("headers");
    assert_eq!(headers[0], ("x-aws-proxy-port", port.to_string()));
    assert_eq!(headers[1].0, "x-aws-proxy-auth");
    assert!(!format!("{host:?}").contains(&headers[1].1));

    let answer = get(&host, "/index.html", &headers).await;
    // http.server answers in HTTP/1.0; the proxy passes that on.
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
    assert!(
        answer.ends_with("<h1>hello from the sandbox</h1>"),
        "{answer}"
    );

    // Without the token, or with another port's token, the proxy refuses.
    let answer = get(&host, "/index.html", &headers[..1]).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let other = sbx.get_host(port + 1).await.unwrap();
    let mut wrong = other.headers().await.unwrap();
    wrong[0].1 = port.to_string();
    let answer = get(&host, "/index.html", &wrong).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");

    assert!(server.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_host_failures() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    for port in [0, 9000] {
        let err = sbx.get_host(port).await.unwrap_err();
        assert!(
            matches!(err, SandboxError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "invalid port: port {port} cannot be opened; pass ports from 1 to 65535 other than 9000 (the hooks port)"
            )
        );
    }
    assert!(sbx.kill().await.unwrap());
    let err = sbx.get_host(8000).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the sandbox handle is closed; create a new sandbox or connect to it again"
    );
}
