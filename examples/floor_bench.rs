//! Close to the floor (issue 13): each SDK path timed against its raw baseline
//! in the same run, interleaved round by round so that load on a shared
//! machine hits both alike, and printed as a p50 ratio.
//!
//! - `files().write` / `files().read` of 64 MiB vs a raw tonic
//!   `FilesystemService` client moving the same bytes through the same agent
//!   and the same emulated proxy, and the agent's disk path (raw tonic) vs a
//!   plain `std::fs` write / read of the same size on the same filesystem;
//! - `run_code("1 + 1")` vs a Health round trip on the SDK's own channel
//!   (`is_running`);
//! - `commands.run("true")` vs `std::process::Command` `bash -c true`;
//! - create-to-first-result: `create()`, then the first `run_code("1")`.
//!
//! ```text
//! cargo run --release --example floor_bench [rounds] [file_rounds] [creates]
//! ```
//!
//! Defaults: 200 rounds for the small calls, 5 rounds of 64 MiB each way,
//! 10 creates. An example rather than a `benches/` target: it needs the
//! emulator, a live sandbox and a second raw client set up once, and prints
//! ratios, which a harness's per-function timing would not.

use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms as lmv;
use bytes::Bytes;
use lmv::config::retry::RetryConfig;
use lmv::config::{BehaviorVersion, Credentials, Region};
use lmv::types::PortSpecification;
use rayito::{AwsOptions, Sandbox};
use rayito_agent::emulator::{Emulator, EmulatorConfig};
use rayito_agent::pb;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Endpoint;

type Error = Box<dyn std::error::Error>;

const FILE_BYTES: usize = 64 * 1024 * 1024;
const WRITE_CHUNK: usize = 1024 * 1024;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.5);
    println!(
        "{name:<44} n={:<4} p50={:>10.3?} p90={:>10.3?} p99={:>10.3?} min={:>10.3?}",
        samples.len(),
        p50,
        percentile(&samples, 0.9),
        percentile(&samples, 0.99),
        samples[0]
    );
    p50
}

fn ratio(name: &str, measured: Duration, baseline: Duration, goal: &str) {
    println!(
        "  ratio {name:<38} {:>6.2}   (goal {goal})",
        measured.as_secs_f64() / baseline.as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let file_rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let creates: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);

    let emulator = Emulator::start(EmulatorConfig::default()).await?;
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

    // Create-to-first-result first, on fresh sandboxes.
    let mut create_times = Vec::with_capacity(creates);
    let mut first_cell_times = Vec::with_capacity(creates);
    let mut total_times = Vec::with_capacity(creates);
    for _ in 0..creates {
        let started = Instant::now();
        let sbx = builder().create().await?;
        let created = started.elapsed();
        let execution = sbx.run_code("1").await?;
        let total = started.elapsed();
        assert_eq!(execution.text(), Some("1"));
        create_times.push(created);
        first_cell_times.push(total - created);
        total_times.push(total);
        sbx.kill().await?;
    }
    println!("== create ==");
    report("create() to ready", create_times);
    report("first run_code(\"1\") after create", first_cell_times);
    report("create-to-first-result", total_times);

    let sbx = builder().create().await?;
    assert_eq!(sbx.run_code("1 + 1").await?.text(), Some("2"));
    assert!(sbx.commands().run("true").await?.exit_code == 0);

    // run_code vs Health on the SDK's own channel.
    let mut code_times = Vec::with_capacity(rounds);
    let mut health_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let execution = sbx.run_code("1 + 1").await?;
        code_times.push(started.elapsed());
        assert_eq!(execution.text(), Some("2"));

        let started = Instant::now();
        assert!(sbx.is_running().await);
        health_times.push(started.elapsed());
    }
    println!("== run_code ==");
    let code = report("SDK run_code(\"1 + 1\")", code_times);
    let health = report("SDK Health round trip (is_running)", health_times);
    ratio("run_code / Health", code, health, "<= 2.5");

    // commands.run vs a plain spawn in this process: `bash -c true` (the
    // issue's baseline) and `bash -l -c true` with a clean environment, which
    // is what commands.run starts (a login shell reads /etc/profile, which
    // itself runs `id -u`: a second process).
    let mut command_times = Vec::with_capacity(rounds);
    let mut spawn_times = Vec::with_capacity(rounds);
    let mut login_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let result = sbx.commands().run("true").await?;
        command_times.push(started.elapsed());
        assert_eq!(result.exit_code, 0);

        let started = Instant::now();
        let status = std::process::Command::new("bash")
            .args(["-c", "true"])
            .status()?;
        spawn_times.push(started.elapsed());
        assert!(status.success());

        let started = Instant::now();
        let status = std::process::Command::new("/bin/bash")
            .args(["-l", "-c", "true"])
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("HOME", "/nonexistent")
            .env("LANG", "C.UTF-8")
            .status()?;
        login_times.push(started.elapsed());
        assert!(status.success());
    }
    println!("== command start ==");
    let command = report("SDK commands.run(\"true\")", command_times);
    let spawn = report("std::process::Command bash -c true", spawn_times);
    let login = report("std::process::Command bash -l -c true", login_times);
    ratio("commands.run / Command", command, spawn, "<= 1.5");
    ratio(
        "commands.run / Command (login shell)",
        command,
        login,
        "like for like",
    );

    // Files: a raw tonic client through the same proxy, with its own token.
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
    let mut raw = pb::filesystem_service_client::FilesystemServiceClient::with_interceptor(
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
    )
    .max_decoding_message_size(8 * 1024 * 1024);

    let payload: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
    let payload_bytes = Bytes::from(payload.clone());
    let disk_dir = tempfile::tempdir()?;
    let disk_path = disk_dir.path().join("floor.bin");

    let mut sdk_write = Vec::with_capacity(file_rounds);
    let mut raw_write = Vec::with_capacity(file_rounds);
    let mut fs_write = Vec::with_capacity(file_rounds);
    let mut sdk_read = Vec::with_capacity(file_rounds);
    let mut raw_read = Vec::with_capacity(file_rounds);
    let mut fs_read = Vec::with_capacity(file_rounds);
    for _ in 0..file_rounds {
        // The SDK gets its own copy of the payload, as a caller's Vec.
        let data = payload.clone();
        let started = Instant::now();
        let entry = sbx.files().write("/home/user/sdk.bin", data).await?;
        sdk_write.push(started.elapsed());
        assert_eq!(entry.size, FILE_BYTES as u64);

        let started = Instant::now();
        let pieces: Vec<pb::WriteRequest> = (0..FILE_BYTES)
            .step_by(WRITE_CHUNK)
            .enumerate()
            .map(|(i, at)| pb::WriteRequest {
                path: (i == 0).then(|| "/home/user/raw.bin".to_owned()),
                chunk: payload_bytes.slice(at..(at + WRITE_CHUNK).min(FILE_BYTES)),
                ..Default::default()
            })
            .collect();
        raw.write(tokio_stream::iter(pieces)).await?;
        raw_write.push(started.elapsed());

        let started = Instant::now();
        std::fs::write(&disk_path, &payload)?;
        fs_write.push(started.elapsed());

        let started = Instant::now();
        let back = sbx.files().read("/home/user/sdk.bin").await?;
        sdk_read.push(started.elapsed());
        assert_eq!(back.len(), FILE_BYTES);

        let started = Instant::now();
        let mut stream = raw
            .read(pb::ReadRequest {
                path: "/home/user/raw.bin".into(),
                user: None,
            })
            .await?
            .into_inner();
        let mut back = Vec::with_capacity(FILE_BYTES);
        while let Some(message) = stream.message().await? {
            back.extend_from_slice(&message.chunk);
        }
        raw_read.push(started.elapsed());
        assert_eq!(back.len(), FILE_BYTES);

        let started = Instant::now();
        let back = std::fs::read(&disk_path)?;
        fs_read.push(started.elapsed());
        assert_eq!(back.len(), FILE_BYTES);
    }
    println!("== files (64 MiB) ==");
    let sdk_w = report("SDK files().write", sdk_write);
    let raw_w = report("raw tonic Write, same agent and proxy", raw_write);
    let fs_w = report("std::fs::write, same filesystem", fs_write);
    let sdk_r = report("SDK files().read", sdk_read);
    let raw_r = report("raw tonic Read, same agent and proxy", raw_read);
    let fs_r = report("std::fs::read, same filesystem", fs_read);
    ratio("SDK write / raw write", sdk_w, raw_w, "<= 1.15");
    ratio("SDK read / raw read", sdk_r, raw_r, "<= 1.15");
    // Throughput ratios (agent / std::fs), i.e. std::fs time / agent time.
    ratio("agent / std::fs write throughput", fs_w, raw_w, ">= 0.7");
    ratio("agent / std::fs read throughput", fs_r, raw_r, ">= 0.7");

    sbx.kill().await?;
    emulator.shutdown().await;
    Ok(())
}
