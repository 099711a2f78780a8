//! Agent benchmark: round trip of `bash -c true` through ProcessService.Start
//! and Write/Read throughput of a 64 MiB file, over loopback h2c.
//!
//! Run: `cargo run --release -p rayito-agent --example agent_bench`

use std::time::{Duration, Instant};

use base64::Engine as _;
use rayito_agent::pb;
use rayito_agent::{Agent, AgentConfig};
use sha2::{Digest as _, Sha256};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

const SECRET: [u8; 32] = *b"rayito-agent-bench-secret-32byte";
const START_ROUNDS: usize = 200;
const FILE_BYTES: usize = 64 << 20;
const CHUNK: usize = 1 << 20;
const FILE_ROUNDS: usize = 3;

type Authed = InterceptedService<Channel, Token>;

#[derive(Clone)]
struct Token(AsciiMetadataValue);

impl tonic::service::Interceptor for Token {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        r.metadata_mut().insert("x-access-token", self.0.clone());
        Ok(r)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn start_true(c: &mut pb::process_service_client::ProcessServiceClient<Authed>) {
    let req = pb::StartRequest {
        process: Some(pb::ProcessConfig {
            cmd: "/bin/bash".into(),
            args: vec!["-c".into(), "true".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut s = c.start(req).await.expect("Start").into_inner();
    while let Some(ev) = s.message().await.expect("stream") {
        if let Some(pb::process_event::Event::End(e)) = ev.event {
            assert_eq!(e.exit_code, 0);
        }
    }
}

#[tokio::main]
async fn main() {
    let agent = Agent::start(AgentConfig::default()).await.expect("agent");
    let digest: String = Sha256::digest(SECRET)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let payload = serde_json::json!({"v": 1, "token_sha256": digest}).to_string();
    let body = rayito_agent::hooks::run_body("microvm-bench", &payload);
    rayito_agent::hooks::post_hook(agent.hooks_addr(), "run", Some(body))
        .await
        .expect("run hook");
    let channel = Endpoint::from_shared(format!("http://{}", agent.grpc_addr()))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    let token = Token(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(SECRET)
            .parse()
            .unwrap(),
    );
    let mut proc = pb::process_service_client::ProcessServiceClient::with_interceptor(
        channel.clone(),
        token.clone(),
    );
    let mut files =
        pb::filesystem_service_client::FilesystemServiceClient::with_interceptor(channel, token)
            .max_decoding_message_size(64 << 20);

    println!(
        "isolation: {}",
        if agent.env().is_isolated() {
            "mount namespace"
        } else {
            "none (HOME on host)"
        }
    );
    for _ in 0..10 {
        start_true(&mut proc).await;
    }
    let mut times = Vec::with_capacity(START_ROUNDS);
    for _ in 0..START_ROUNDS {
        let t0 = Instant::now();
        start_true(&mut proc).await;
        times.push(t0.elapsed());
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "Start `bash -c true` x{START_ROUNDS}: p50 {:.2} ms, p95 {:.2} ms, mean {:.2} ms",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.95).as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3
    );

    let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 253) as u8).collect();
    let mib = FILE_BYTES as f64 / (1 << 20) as f64;
    for round in 1..=FILE_ROUNDS {
        let msgs: Vec<pb::WriteRequest> = data
            .chunks(CHUNK)
            .enumerate()
            .map(|(i, c)| pb::WriteRequest {
                path: (i == 0).then(|| "/home/user/bench.bin".to_owned()),
                chunk: c.to_vec().into(),
                ..Default::default()
            })
            .collect();
        let t0 = Instant::now();
        files.write(tokio_stream::iter(msgs)).await.expect("Write");
        let write = t0.elapsed();
        let t0 = Instant::now();
        let mut s = files
            .read(pb::ReadRequest {
                path: "/home/user/bench.bin".into(),
                user: None,
            })
            .await
            .expect("Read")
            .into_inner();
        let mut n = 0usize;
        while let Some(m) = s.message().await.expect("read stream") {
            n += m.chunk.len();
        }
        let read = t0.elapsed();
        assert_eq!(n, FILE_BYTES);
        println!(
            "64 MiB round {round}: write {:.0} MiB/s ({:.0} ms), read {:.0} MiB/s ({:.0} ms)",
            mib / write.as_secs_f64(),
            write.as_secs_f64() * 1e3,
            mib / read.as_secs_f64(),
            read.as_secs_f64() * 1e3
        );
    }
    agent.shutdown().await;
}
