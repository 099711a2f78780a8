//! Code service benchmark: round trip of `1 + 1` on a warm Python context
//! (Execute to `end`, over a real tonic client on loopback), plus the time a
//! new context takes to start.
//!
//! Run: `cargo run --release -p rayito-agent --example code_bench [iterations]`

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rayito_agent::code::CodeServiceImpl;
use rayito_agent::pb;
use rayito_agent::pb::code_service_client::CodeServiceClient;
use rayito_agent::pb::execute_event::Event;
use rayito_agent::phase::PhaseCell;
use rayito_agent::sandbox::SandboxEnv;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Server};

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let root = tempfile::tempdir()?;
    let service = CodeServiceImpl::new(SandboxEnv::new(root.path())?, PhaseCell::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        // As the agent serves it: without TCP_NODELAY, Nagle and delayed
        // ACKs add ~40 ms to every small response.
        conn.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    tokio::spawn(
        Server::builder()
            .add_service(pb::code_service_server::CodeServiceServer::new(
                service.clone(),
            ))
            .serve_with_incoming(incoming),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut client = CodeServiceClient::new(channel);

    // Warm the default context, then measure.
    round_trip(&mut client, None).await?;
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let began = Instant::now();
        round_trip(&mut client, None).await?;
        samples.push(began.elapsed());
    }
    report(
        &format!("Execute `1 + 1`, warm default context ({iterations} runs)"),
        &mut samples,
    );

    let mut starts = Vec::new();
    for _ in 0..5 {
        let began = Instant::now();
        let id = client
            .create_context(pb::CreateContextRequest {
                language: "python".into(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .context_id;
        starts.push(began.elapsed());
        round_trip(&mut client, Some(&id)).await?;
        client
            .destroy_context(pb::DestroyContextRequest { context_id: id })
            .await?;
    }
    report(
        "CreateContext (python), until the kernel is ready (5 runs)",
        &mut starts,
    );
    service.shutdown();
    Ok(())
}

/// Runs `1 + 1` and checks the answer.
async fn round_trip(
    client: &mut CodeServiceClient<Channel>,
    context: Option<&str>,
) -> Result<(), Error> {
    let mut stream = client
        .execute(pb::ExecuteRequest {
            code: "1 + 1".into(),
            context_id: context.map(str::to_owned),
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut text = None;
    while let Some(event) = stream.message().await? {
        match event.event {
            Some(Event::Result(r)) => text = r.text,
            Some(Event::End(_)) => break,
            _ => {}
        }
    }
    if text.as_deref() != Some("2") {
        return Err("unexpected result".into());
    }
    Ok(())
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{what}: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
        ms(pick(0.5)),
        ms(pick(0.9)),
        ms(pick(0.99)),
        ms(mean)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
