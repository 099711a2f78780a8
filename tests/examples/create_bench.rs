//! Create to ready and create to the first result, this SDK against the
//! reference Python SDK (0.17.1, in `target/test-deps/venv`, installed by
//! `.ci/install-test-deps`), on one emulator and one agent, interleaved
//! round by round (issue 44 §1).
//!
//! ```sh
//! cargo build --release -p rayito-tests --example create_bench
//! ./target/release/examples/create_bench [rounds]     # default 30; needs root
//! ./target/release/examples/create_bench 40 --warm-spare
//! ```
//!
//! `--warm-spare` runs the emulator as the embedded local backend does
//! (`EmulatorConfig::warm_spare`: one MicroVM made ahead, its kernel
//! started), and waits before each timed create until the spare is ready,
//! so each side's create takes a warm one.
//!
//! The emulator runs in TLS mode (the reference dials port 443 of each
//! MicroVM's endpoint with TLS; binding it needs root) without the CA's
//! iPAddress name constraints (grpc-core refuses them), as
//! `tests/sdk/reference_interop.rs` runs it. The reference runs in a
//! process of its own (`tests/examples/create_bench_reference.py`) that
//! times its own calls; this process times ours the same way. Each round
//! does one create of each (who goes first alternates), then
//! `run_code("1 + 1")`, then a kill (untimed), and pauses 250 ms so
//! neither SDK's RunMicrovm pacing (5/s, a burst of 5, on both sides)
//! shapes the figures: they are one create's latency, not a rate. Both
//! sides warm up with one untimed round. Our side uses one `Client` (what
//! a program that creates many sandboxes holds), the reference its
//! per-process shared control plane.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rayito::{AwsOptions, Client};
use rayito_emulator::{Emulator, EmulatorConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The pause between rounds: one RunMicrovm token comes back in 200 ms.
const BETWEEN_ROUNDS: Duration = Duration::from_millis(250);

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
}

fn venv_python() -> PathBuf {
    repo_root().join("target/test-deps/venv/bin/python3")
}

/// Why the bench cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "the emulator's TLS mode binds port 443, where the reference dials: needs root".into(),
        );
    }
    let found = Command::new(venv_python())
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('rayito'))",
        ])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    match found.as_deref() {
        Some("0.17.1") => None,
        Some(other) => Some(format!("the reference in the venv is {other}, not 0.17.1")),
        None => Some("the reference SDK is not installed (.ci/install-test-deps)".into()),
    }
}

/// The reference's driver, pointed at `emu` and at nothing else of this
/// host's AWS setup.
fn reference(emu: &Emulator, home: &Path, template: &str) -> Result<std::process::Child, Error> {
    let config = home.join("aws-config");
    std::fs::write(&config, "[default]\ns3 =\n    addressing_style = path\n")?;
    let mut cmd = Command::new(venv_python());
    cmd.arg(repo_root().join("tests/examples/create_bench_reference.py"))
        .arg(template)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", &emu.access_key().id)
        .env("AWS_SECRET_ACCESS_KEY", &emu.access_key().secret)
        .env("AWS_ENDPOINT_URL", emu.endpoint_url())
        .env("AWS_ENDPOINT_URL_S3", emu.s3_endpoint_url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(ca) = emu.ca_path() {
        cmd.env("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca);
    }
    Ok(cmd.spawn()?)
}

/// One round of ours: (create to ready, create to the first result).
async fn ours(client: &Client, template: &str) -> Result<[Duration; 2], Error> {
    // With RUST_LOG (e.g. `rayito=debug,rayito_emulator=debug,create_bench=info`)
    // these marks and the SDK's own events give a create's timeline.
    tracing::info!(target: "create_bench", "create starts");
    let started = Instant::now();
    let sbx = client.sandbox().template(template).create().await?;
    let created = started.elapsed();
    tracing::info!(target: "create_bench", "create returned");
    let execution = sbx.run_code("1 + 1").await?;
    let first = started.elapsed();
    tracing::info!(target: "create_bench", "first result");
    assert_eq!(execution.text(), Some("2"));
    sbx.kill().await?;
    Ok([created, first])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits (untimed) until the emulator's warm spare is ready to be taken.
async fn spare_ready(emu: &Emulator) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !emu.warm_spare_ready() {
        if Instant::now() > deadline {
            return Err("the warm spare was not ready within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// p50, p90 and the fastest, in ms.
fn summary(mut values: Vec<f64>) -> [f64; 3] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.9), values[0]]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    if let Some(reason) = missing() {
        println!("SKIPPED: create_bench: {reason}");
        return Ok(());
    }
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let warm_spare = std::env::args().any(|a| a == "--warm-spare");
    let emu = Emulator::start(EmulatorConfig {
        tls: true,
        tls_ip_name_constraints: false,
        warm_spare,
        ..EmulatorConfig::default()
    })
    .await?;
    let template = emu.image_arn("rayito-base");
    let client = Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emu.endpoint_url())
                .region("us-east-1")
                .static_credentials(emu.access_key().id.clone(), emu.access_key().secret.clone())
                .add_root_certificate_pem(emu.ca_pem().ok_or("no CA in TLS mode")?.to_owned()),
        )
        .build()
        .await?;
    let home = tempfile::tempdir()?;
    let mut child = reference(&emu, home.path(), &template)?;
    let mut to_ref = child.stdin.take().ok_or("no stdin")?;
    let mut from_ref = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut next_line = move || -> Result<String, Error> {
        Ok(from_ref.next().ok_or("the reference driver ended")??)
    };

    // Warm-up, untimed: ours here, the reference's before it says "ready".
    ours(&client, &template).await?;
    let ready = tokio::task::block_in_place(&mut next_line)?;
    assert_eq!(ready, "ready", "the reference driver's first line");

    let mut times: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            if warm_spare {
                spare_ready(&emu).await?;
            }
            if side == 0 {
                let [created, first] = ours(&client, &template).await?;
                times[0].push(ms(created));
                times[1].push(ms(first));
            } else {
                writeln!(to_ref, "round")?;
                let line = tokio::task::block_in_place(&mut next_line)?;
                let mut it = line.split(' ').map(str::parse::<f64>);
                let (Some(Ok(created)), Some(Ok(first))) = (it.next(), it.next()) else {
                    return Err(format!("the reference driver said {line:?}").into());
                };
                times[2].push(created);
                times[3].push(first);
            }
        }
        tokio::time::sleep(BETWEEN_ROUNDS).await;
    }
    drop(to_ref);
    let _ = child.wait();

    let [ready_ours, first_ours, ready_ref, first_ref] = times.map(summary);
    let spare = if warm_spare { ", warm spare" } else { "" };
    println!("{rounds} rounds, interleaved{spare}; ms: p50 (p90) [fastest]");
    let row = |name: &str, [p50, p90, min]: [f64; 3]| {
        println!("{name:<40} {p50:7.1} ({p90:6.1}) [{min:5.1}]");
    };
    row("ours: create() to ready", ready_ours);
    row("reference: Sandbox.create() to ready", ready_ref);
    row("ours: create to first result", first_ours);
    row("reference: create to first result", first_ref);
    println!(
        "speed-up (reference p50 / ours p50): ready {:.2}x, first result {:.2}x",
        ready_ref[0] / ready_ours[0],
        first_ref[0] / first_ours[0]
    );
    emu.shutdown().await;
    Ok(())
}
