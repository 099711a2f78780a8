//! Ports: start an HTTP server inside the sandbox, then fetch a page from
//! it on this machine through the sandbox's proxy, with the address and
//! headers `get_host` gives.
//!
//! ```text
//! cargo run --example ports          # local backend, no AWS account
//! ```

use futures_util::StreamExt as _;
use rayito::{CommandEvent, CommandOptions, Sandbox, SandboxError};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const PORT: u16 = 8765;

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let sandbox = Sandbox::builder().local().create().await?;
    sandbox
        .files()
        .write(
            "/home/user/site/index.html",
            "<h1>hello from the sandbox</h1>\n",
        )
        .await?;
    let mut server = sandbox
        .commands()
        .spawn(
            &format!(
                "python3 -u -m http.server {PORT} --bind 127.0.0.1 --directory /home/user/site"
            ),
            CommandOptions::new().no_timeout(),
        )
        .await?;
    // Wait until it says it listens.
    while let Some(event) = server.next().await {
        if let CommandEvent::Stdout { data, .. } = event?
            && String::from_utf8_lossy(&data).contains("Serving HTTP")
        {
            break;
        }
    }

    let host = sandbox.get_host(PORT).await?;
    println!("{host:?}");
    let headers = host.headers().await?;
    let authority = host
        .url()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_owned();
    // A plain HTTP/1.1 request (use any HTTP client: send these headers).
    let mut request =
        format!("GET /index.html HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n");
    for (name, value) in &headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut page = String::new();
    match tokio::net::TcpStream::connect(&authority).await {
        Ok(mut stream) => {
            let sent = stream.write_all(request.as_bytes()).await;
            if sent.is_ok() {
                let _ = stream.read_to_string(&mut page).await;
            }
        }
        Err(err) => eprintln!("cannot reach the proxy: {err}"),
    }
    println!("{page}");

    server.kill().await?;
    sandbox.kill().await?;
    Ok(())
}
