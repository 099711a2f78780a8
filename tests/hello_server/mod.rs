//! A one-line HTTP server for the egress tests (the SDK's and the
//! agent's): answers every request with `hello from the host`.

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Serves on `bind` (`127.0.0.1:0`, `0.0.0.0:0`) until the runtime ends;
/// returns the port.
pub async fn hello_server(bind: &str) -> u16 {
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let body = "hello from the host";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}
