//! Telemetry export (docs/observability.md, "Telemetry export"): the
//! sandbox's agent pushes its CPU, memory and disk gauges over OTLP/HTTP.
//! Here the collector is a few lines of tokio on 127.0.0.1 that counts the
//! export requests it gets; in production it is CloudWatch's OTLP endpoint
//! (the default) or your own collector (`TelemetryExport::endpoint`).
//!
//! ```text
//! cargo run --example telemetry
//! ```
//!
//! It runs on the embedded local backend, which calls no AWS endpoint: the
//! export goes to the endpoint given, signed with SigV4 by the key the
//! emulator hands the sandbox's execution role.

use std::time::Duration;

use rayito::Sandbox;
use rayito::telemetry::{TelemetryExport, TelemetryNames};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// The role the sandbox runs with.
const ROLE: &str = "arn:aws:iam::000000000000:role/rayito-sandbox";

/// A stand-in collector: answers every request 200 and sends the size of
/// each body (gzip-compressed OTLP protobuf) on the channel.
async fn collector() -> std::io::Result<(String, mpsc::UnboundedReceiver<usize>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/metrics", listener.local_addr()?);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head, then Content-Length bytes of body.
                let (head_end, length) = loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let _ = tx.send(length);
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    Ok((url, rx))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, mut exports) = collector().await?;
    let sbx = Sandbox::builder()
        .local()
        .template("rayito-base-caps")
        .execution_role_arn(ROLE)
        .telemetry(
            TelemetryExport::new()
                .interval(Duration::from_secs(15))
                .service_name("telemetry-example")
                .names(TelemetryNames::Rayito)
                .endpoint(&url),
        )
        .create()
        .await?;
    println!("sandbox {} exports its gauges to {url}", sbx.id());

    // The first export goes as soon as the section is applied.
    let bytes = tokio::time::timeout(Duration::from_secs(30), exports.recv())
        .await?
        .ok_or("the collector stopped")?;
    println!("the collector got an export of {bytes} bytes (gzip, OTLP protobuf)");

    let mut health = sbx.telemetry_status().await?;
    for _ in 0..50 {
        if health.exported > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        health = sbx.telemetry_status().await?;
    }
    println!(
        "telemetry status: exported {} points, dropped {}, last error {}",
        health.exported,
        health.dropped,
        health.last_error_class.as_deref().unwrap_or("none")
    );
    sbx.kill().await?;
    Ok(())
}
