//! Emulator benchmark: emulator start to first answer, and RunMicrovm to a
//! ready agent (Health through the proxy with `agent_ready && kernel_ready
//! && sandbox_id != ""`).
//!
//! Run: `cargo run --release -p rayito-emulator --example emulator_bench [ROUNDS]`

use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms as lmv;
use lmv::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
use lmv::types::PortSpecification;
use rayito_agent::pb;
use rayito_emulator::{Emulator, EmulatorConfig};
use tonic::metadata::AsciiMetadataValue;

fn client(emulator: &Emulator) -> lmv::Client {
    let key = emulator.access_key();
    lmv::Client::from_conf(
        lmv::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(
                key.id.clone(),
                key.secret.clone(),
                None,
                None,
                "bench",
            ))
            .endpoint_url(emulator.endpoint_url())
            .retry_config(RetryConfig::disabled())
            .build(),
    )
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name}: n={} min={:.1} ms p50={:.1} ms p90={:.1} ms max={:.1} ms",
        v.len(),
        ms(v[0]),
        ms(pct(0.5)),
        ms(pct(0.9)),
        ms(v[v.len() - 1])
    );
}

/// Health through the proxy until the ready predicate holds.
async fn wait_ready(endpoint: &str, token: &str) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{endpoint}"))
        .expect("uri")
        .connect_lazy();
    let auth = AsciiMetadataValue::try_from(token).expect("ascii");
    let mut health = pb::health_service_client::HealthServiceClient::with_interceptor(
        channel,
        move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("x-aws-proxy-auth", auth.clone());
            req.metadata_mut()
                .insert("x-aws-proxy-port", AsciiMetadataValue::from_static("8080"));
            Ok(req)
        },
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = health.health(pb::HealthRequest {}).await {
            let r = r.into_inner();
            if r.agent_ready && r.kernel_ready && !r.sandbox_id.is_empty() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "agent not ready in 30 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);

    let mut first_answer = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        let emulator = Emulator::start(EmulatorConfig::default())
            .await
            .expect("start");
        client(&emulator)
            .list_microvms()
            .send()
            .await
            .expect("first answer");
        first_answer.push(t0.elapsed());
        drop(emulator);
    }

    let emulator = Emulator::start(EmulatorConfig::default())
        .await
        .expect("start");
    let sdk = client(&emulator);
    let image = emulator.image_arn("rayito-base");
    let payload = r#"{"v":1,"token_sha256":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
    let (mut run_api, mut run_ready) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let out = sdk
            .run_microvm()
            .image_identifier(&image)
            .run_hook_payload(payload)
            .send()
            .await
            .expect("RunMicrovm");
        run_api.push(t0.elapsed());
        let token = sdk
            .create_microvm_auth_token()
            .microvm_identifier(out.microvm_id())
            .expiration_in_minutes(60)
            .allowed_ports(PortSpecification::Port(8080))
            .send()
            .await
            .expect("token");
        let token = token.auth_token()["X-aws-proxy-auth"].clone();
        wait_ready(out.endpoint(), &token).await;
        run_ready.push(t0.elapsed());
        sdk.terminate_microvm()
            .microvm_identifier(out.microvm_id())
            .send()
            .await
            .expect("terminate");
    }
    summary(
        "emulator start -> first answer (ListMicrovms)",
        first_answer,
    );
    summary("RunMicrovm API call", run_api);
    summary("RunMicrovm -> ready agent through the proxy", run_ready);
    emulator.shutdown().await;
}
