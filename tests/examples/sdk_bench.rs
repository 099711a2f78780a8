//! SDK overhead on the local backend: create-to-ready, and the `run_code("1 + 1")`
//! round trip through the SDK versus a raw tonic client on the same agent,
//! through the same emulated proxy, in the same run.
//!
//! ```text
//! cargo run --release -p rayito-tests --example sdk_bench [creates] [round_trips]
//! ```

use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms as lmv;
use lmv::config::retry::RetryConfig;
use lmv::config::{BehaviorVersion, Credentials, Region};
use lmv::types::PortSpecification;
use rayito::{AwsOptions, Sandbox};
use rayito_agent::pb;
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Endpoint;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.5);
    println!(
        "{name:<40} n={:<4} p50={:>9.3?} p90={:>9.3?} min={:>9.3?}",
        samples.len(),
        p50,
        percentile(&samples, 0.9),
        samples[0]
    );
    p50
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let creates: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let round_trips: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);

    let emulator = Emulator::start(EmulatorConfig {
        access_keys: vec![AccessKey::new("AKIDBENCH", "bench")],
        ..EmulatorConfig::default()
    })
    .await?;
    let builder = || {
        Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url(emulator.endpoint_url())
                    .region("us-east-1")
                    .static_credentials("AKIDBENCH", "bench"),
            )
            .template(emulator.image_arn("rayito-base"))
    };

    // Create-to-ready.
    let mut create_times = Vec::new();
    for _ in 0..creates {
        let started = Instant::now();
        let sbx = builder().create().await?;
        create_times.push(started.elapsed());
        sbx.kill().await?;
    }
    report("create() to ready", create_times);

    let sbx = builder().create().await?;
    // Warm the kernel and the connection.
    assert_eq!(sbx.run_code("1 + 1").await?.text(), Some("2"));

    // The raw client: its own proxy token, same endpoint, same headers.
    let control = lmv::Client::from_conf(
        lmv::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("AKIDBENCH", "bench", None, None, "bench"))
            .endpoint_url(emulator.endpoint_url())
            .retry_config(RetryConfig::disabled())
            .build(),
    );
    let vm = control
        .get_microvm()
        .microvm_identifier(sbx.id())
        .send()
        .await?;
    let minted = control
        .create_microvm_auth_token()
        .microvm_identifier(sbx.id())
        .expiration_in_minutes(60)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await?;
    let proxy: AsciiMetadataValue = minted
        .auth_token()
        .values()
        .next()
        .ok_or("no proxy token")?
        .parse()?;
    let access: AsciiMetadataValue = sbx.access_token().expose().parse()?;
    let channel = Endpoint::from_shared(format!("http://{}", vm.endpoint()))?
        .connect()
        .await?;
    let mut raw = pb::code_service_client::CodeServiceClient::with_interceptor(
        channel,
        move |mut req: tonic::Request<()>| {
            let md = req.metadata_mut();
            md.insert("x-aws-proxy-auth", proxy.clone());
            md.insert("x-aws-proxy-port", AsciiMetadataValue::from_static("8080"));
            md.insert(
                "x-aws-proxy-force-h2",
                AsciiMetadataValue::from_static("true"),
            );
            md.insert("x-access-token", access.clone());
            Ok(req)
        },
    );
    // Interleaved, so that load on a shared machine hits both alike.
    let mut sdk_times = Vec::with_capacity(round_trips);
    let mut raw_times = Vec::with_capacity(round_trips);
    for _ in 0..round_trips {
        let started = Instant::now();
        let execution = sbx.run_code("1 + 1").await?;
        sdk_times.push(started.elapsed());
        assert_eq!(execution.text(), Some("2"));

        let started = Instant::now();
        let mut stream = raw
            .execute(pb::ExecuteRequest {
                code: "1 + 1".into(),
                timeout_ms: 300_000,
                ..Default::default()
            })
            .await?
            .into_inner();
        let mut text = None;
        while let Some(event) = stream.message().await? {
            match event.event {
                Some(pb::execute_event::Event::Result(r)) if r.is_main_result => text = r.text,
                Some(pb::execute_event::Event::End(_)) => break,
                _ => {}
            }
        }
        raw_times.push(started.elapsed());
        assert_eq!(text.as_deref(), Some("2"));
    }
    let sdk = report("SDK run_code(\"1 + 1\")", sdk_times);
    let raw_p50 = report("raw tonic Execute(\"1 + 1\")", raw_times);
    println!(
        "SDK / raw p50 ratio: {:.2}",
        sdk.as_secs_f64() / raw_p50.as_secs_f64()
    );

    sbx.kill().await?;
    emulator.shutdown().await;
    Ok(())
}
