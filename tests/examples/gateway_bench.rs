//! The cost of a secret gateway hop (issue 45): the same request to the
//! same HTTPS upstream on loopback, sent directly (TLS from this process)
//! and through an agent's gateway (plain HTTP to its listener, which adds
//! the header and forwards over its own TLS connection), interleaved round
//! by round (the order alternates) so that load on a shared machine hits
//! both alike. Prints p50/p90/p99 of each and the p50 added by the hop.
//!
//! ```text
//! cargo build --release -p rayito-tests --example gateway_bench
//! /work/bin/hold-slots ./target/release/examples/gateway_bench [rounds]
//! ```
//!
//! Default 2,000 rounds (after 100 of warm-up). Both clients keep one
//! HTTP/1.1 connection alive, as an SDK of an API does; the agent keeps its
//! upstream connections alive too (at most 4 idle per host). The agent runs
//! in this process, without a sandbox network namespace, so its listener is
//! on this host's loopback; the upstream is
//! [`rayito_emulator::TestUpstream`] (rustls, a CA of its own the agent is
//! told to trust). The rate is the highest the SDK allows (6,000 a minute):
//! the bucket starts full, so rounds past 6,000 would meet 429.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use rayito_agent::gateway::{GatewayOptions, LocalUpstreams};
use rayito_agent::{Agent, AgentConfig, pb};
use rayito_emulator::TestUpstream;
use sha2::{Digest as _, Sha256};
use tokio_rustls::rustls;

const HOST: &str = "api.bench.test";
const KEY: &str = "bench-key-not-a-secret";
const SECRET: [u8; 32] = *b"gateway-bench-access-token-32byt";
const MICROVM_ID: &str = "microvm-00000000-0000-0000-0000-0000000000be";
const PATH: &str = "/v1/models/bench";

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2_000);
    if rounds > 5_800 {
        return Err("at most 5,800 rounds: the gateway's bucket holds 6,000".into());
    }
    let upstream = TestUpstream::start(HOST).await?;
    let port = gateway(&upstream).await?;
    let mut direct = direct_client(&upstream).await?;
    let mut hop = plain_client(port).await?;

    for _ in 0..100 {
        once(&mut direct, true).await?;
        once(&mut hop, false).await?;
    }
    let (mut d, mut g) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        if round % 2 == 0 {
            d.push(once(&mut direct, true).await?);
            g.push(once(&mut hop, false).await?);
        } else {
            g.push(once(&mut hop, false).await?);
            d.push(once(&mut direct, true).await?);
        }
    }
    let seen = upstream.requests();
    let injected = seen
        .iter()
        .filter(|r| r.header("authorization") == [KEY])
        .count();
    println!(
        "{rounds} rounds, interleaved; the upstream saw {} requests, {injected} with the injected header",
        seen.len()
    );
    let (dp, gp) = (
        report("direct HTTPS ", &mut d),
        report("through gateway", &mut g),
    );
    println!(
        "added by the gateway hop: p50 {:.3} ms",
        (gp.as_secs_f64() - dp.as_secs_f64()) * 1e3
    );
    Ok(())
}

/// An agent trusting `upstream` with one route to it; the route's port.
async fn gateway(upstream: &TestUpstream) -> Result<u16, Box<dyn std::error::Error>> {
    let local = LocalUpstreams::default();
    upstream.trust_on(&local);
    let agent = Agent::start(AgentConfig {
        gateway: GatewayOptions {
            local_upstreams: local,
            ..GatewayOptions::default()
        },
        ..AgentConfig::default()
    })
    .await?;
    let token_sha256: String = Sha256::digest(SECRET)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let payload = serde_json::json!({
        "v": 1, "token_sha256": token_sha256, "user": "user", "workdir": "/home/user",
    })
    .to_string();
    let (status, body) = rayito_agent::hooks::post_hook(
        agent.hooks_addr(),
        "run",
        Some(rayito_agent::hooks::run_body(MICROVM_ID, &payload)),
    )
    .await?;
    if status != 200 {
        return Err(format!("/run answered {status}: {body}").into());
    }
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", agent.grpc_addr()))?
        .connect()
        .await?;
    let token: tonic::metadata::AsciiMetadataValue =
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(SECRET)
            .parse()?;
    let mut client = pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        channel,
        move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("x-access-token", token.clone());
            Ok(req)
        },
    );
    let route = pb::SecretGatewayRoute {
        name: "bench".into(),
        upstream: upstream.url(),
        headers: [("authorization".to_owned(), KEY.to_owned())].into(),
        allow: vec![pb::SecretGatewayAllowRule {
            method: "GET".into(),
            path: "/v1/*".into(),
        }],
        rate_per_minute: 6_000,
    };
    let applied = client
        .configure(pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            secret_gateway: Some(pb::SecretGatewayConfig {
                routes: vec![route],
            }),
            ..Default::default()
        })
        .await?
        .into_inner();
    if applied.results.iter().any(|r| !r.error_class.is_empty()) {
        return Err(format!("the section failed: {:?}", applied.results).into());
    }
    let status = client
        .configure_status(pb::ConfigureStatusRequest {})
        .await?
        .into_inner();
    let port = status
        .secret_gateway
        .and_then(|s| s.routes.into_iter().next())
        .map(|r| r.port)
        .ok_or("no route in the status")?;
    // The agent lives as long as the process.
    std::mem::forget(agent);
    Ok(u16::try_from(port)?)
}

/// A kept-alive HTTPS connection to `upstream`, trusting its CA.
async fn direct_client(upstream: &TestUpstream) -> Result<Sender, Box<dyn std::error::Error>> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(
        upstream.ca_pem().as_bytes(),
    )?)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(upstream.addr()).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from(HOST.to_owned())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    handshake(TokioIo::new(tls)).await
}

/// A kept-alive plain HTTP connection to the gateway on `port`.
async fn plain_client(port: u16) -> Result<Sender, Box<dyn std::error::Error>> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    handshake(TokioIo::new(tcp)).await
}

async fn handshake<T>(io: T) -> Result<Sender, Box<dyn std::error::Error>>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One GET to the end of its body; its duration. The direct request
/// carries the header itself (what the gateway adds).
async fn once(sender: &mut Sender, direct: bool) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut request = hyper::Request::get(PATH).header("host", HOST);
    if direct {
        request = request.header("authorization", KEY);
    }
    let request = request.body(Empty::new())?;
    sender.ready().await?;
    let started = Instant::now();
    let response = sender.send_request(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    let took = started.elapsed();
    if status != 200 {
        return Err(format!("answered {status}").into());
    }
    Ok(took)
}

/// Prints the percentiles of `samples`; returns the p50.
fn report(label: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label}: p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99))
    );
    at(0.5)
}
