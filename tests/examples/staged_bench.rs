//! Automatic staging against a raw S3 client, on the local backend's S3:
//! a staged `write_stream` and `read_stream` of N MiB (default 1024) and a
//! raw `aws-sdk-s3` PutObject / GetObject of the same bytes to the same
//! server, in the same run, with each side's peak RSS growth; and the
//! staged read's first hop alone (`export`: the agent's PUT of the file,
//! through `download_url`).
//!
//! ```sh
//! cargo run --release -p rayito-tests --example staged_bench -- 1024
//! ```
//!
//! Each measured step runs in a child process of its own (this program
//! again), so the emulator (its S3 server and the agent, which live in the
//! parent) never counts towards the client's RSS. The child gets what it
//! needs (endpoints, keys, the sandbox's access token) on its stdin, never
//! on its command line. Peak RSS growth is `VmHWM` at the end minus `VmRSS`
//! once the child is connected, from `/proc/self/status` (Linux).

use std::io::Write as _;
use std::time::{Duration, Instant};

use aws_sdk_s3 as s3;
use bytes::Bytes;
use futures_util::StreamExt as _;
use rayito::transfer::S3Staging;
use rayito::{AwsOptions, Sandbox};
use rayito_emulator::{Emulator, EmulatorConfig};

const BUCKET: &str = "staged-bench";
const MIB: u64 = 1 << 20;

/// What a child needs, sent on its stdin as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
struct Job {
    endpoint: String,
    s3_endpoint: String,
    key_id: String,
    secret: String,
    sandbox_id: String,
    access_token: String,
    source: String,
    mib: u64,
}

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn s3_client(job: &Job) -> s3::Client {
    s3::Client::from_conf(
        s3::Config::builder()
            .behavior_version(s3::config::BehaviorVersion::latest())
            .region(s3::config::Region::new("us-east-1"))
            .credentials_provider(s3::config::Credentials::new(
                &job.key_id,
                &job.secret,
                None,
                None,
                "bench",
            ))
            .endpoint_url(&job.s3_endpoint)
            .force_path_style(true)
            .build(),
    )
}

/// The source file as a stream of 1 MiB chunks.
fn chunks(path: String) -> impl futures_util::Stream<Item = Bytes> + Send + 'static {
    futures_util::stream::unfold(None, move |file: Option<tokio::fs::File>| {
        let path = path.clone();
        async move {
            use tokio::io::AsyncReadExt as _;
            let mut file = match file {
                Some(f) => f,
                None => tokio::fs::File::open(&path).await.ok()?,
            };
            let mut buf = vec![0u8; MIB as usize];
            let mut filled = 0;
            while filled < buf.len() {
                match file.read(&mut buf[filled..]).await {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(_) => return None,
                }
            }
            if filled == 0 {
                return None;
            }
            buf.truncate(filled);
            Some((Bytes::from(buf), Some(file)))
        }
    })
}

/// One measured step in this (child) process: prints `seconds rss_kib`.
async fn child(step: &str) -> Result<(), Box<dyn std::error::Error>> {
    let job: Job = serde_json::from_reader(std::io::stdin())?;
    let s3 = s3_client(&job);
    let sbx = Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(&job.endpoint)
                .region("us-east-1")
                .static_credentials(job.key_id.clone(), job.secret.clone())
                .s3_endpoint_url(&job.s3_endpoint),
        )
        .staging(S3Staging::new(BUCKET))
        .request_timeout(Duration::from_secs(120))
        .connect(&job.sandbox_id, job.access_token.clone())
        .await?;
    let base = status_kib("VmRSS:");
    let started = Instant::now();
    let bytes = match step {
        "staged-write" => {
            sbx.files()
                .write_stream("bench.bin", chunks(job.source.clone()))
                .await?
                .size
        }
        "export" => {
            // The first hop of a staged read alone: the agent's export of
            // the file (read, sha256, one presigned PUT).
            let link = sbx
                .files()
                .download_url(
                    "bench.bin",
                    rayito::transfer::DownloadUrlOptions::new(S3Staging::new(BUCKET)),
                )
                .await?;
            let size = link.size();
            link.delete().await?;
            size
        }
        "staged-read" => {
            let mut n = 0u64;
            let mut stream = sbx.files().read_stream("bench.bin").await?;
            while let Some(chunk) = stream.next().await {
                n += chunk?.len() as u64;
            }
            n
        }
        "raw-put" => {
            let body = s3::primitives::ByteStream::from_path(&job.source).await?;
            s3.put_object()
                .bucket(BUCKET)
                .key("raw/bench.bin")
                .body(body)
                .send()
                .await?;
            job.mib * MIB
        }
        "raw-get" => {
            let mut body = s3
                .get_object()
                .bucket(BUCKET)
                .key("raw/bench.bin")
                .send()
                .await?
                .body;
            let mut n = 0u64;
            while let Some(chunk) = body.next().await {
                n += chunk?.len() as u64;
            }
            n
        }
        other => return Err(format!("unknown step {other}").into()),
    };
    let secs = started.elapsed().as_secs_f64();
    let growth = status_kib("VmHWM:").saturating_sub(base);
    if bytes != job.mib * MIB {
        return Err(format!("moved {bytes} bytes, not {}", job.mib * MIB).into());
    }
    println!("{secs} {growth}");
    Ok(())
}

/// Runs `step` in a child; its seconds and RSS growth (KiB).
fn run(step: &str, job: &Job) -> Result<(f64, u64), Box<dyn std::error::Error>> {
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg("--child")
        .arg(step)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(serde_json::to_string(job)?.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("the {step} step failed").into());
    }
    let text = String::from_utf8(out.stdout)?;
    let mut parts = text.split_whitespace();
    let secs: f64 = parts.next().ok_or("no time")?.parse()?;
    let kib: u64 = parts.next().ok_or("no rss")?.parse()?;
    Ok((secs, kib))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new()?;
    if args.get(1).map(String::as_str) == Some("--child") {
        let step = args.get(2).cloned().unwrap_or_default();
        return runtime.block_on(child(&step));
    }
    let mib: u64 = args.get(1).map_or(Ok(1024), |a| a.parse())?;
    runtime.block_on(async {
        let emu = Emulator::start(EmulatorConfig::default()).await?;
        let key = emu.access_key().clone();
        let job_base = Job {
            endpoint: emu.endpoint_url(),
            s3_endpoint: emu.s3_endpoint_url(),
            key_id: key.id.clone(),
            secret: key.secret.clone(),
            sandbox_id: String::new(),
            access_token: String::new(),
            source: String::new(),
            mib,
        };
        s3_client(&job_base)
            .create_bucket()
            .bucket(BUCKET)
            .send()
            .await?;
        let sbx = Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url(emu.endpoint_url())
                    .region("us-east-1")
                    .static_credentials(key.id.clone(), key.secret.clone())
                    .s3_endpoint_url(emu.s3_endpoint_url()),
            )
            .template(emu.image_arn("rayito-base"))
            .ready_timeout(Duration::from_secs(60))
            .create()
            .await?;
        // The bytes: pseudo-random, in a file both sides read.
        let dir = std::env::temp_dir().join(format!("staged-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let source = dir.join("source.bin");
        {
            let mut file = std::io::BufWriter::new(std::fs::File::create(&source)?);
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut buf = vec![0u8; MIB as usize];
            for _ in 0..mib {
                for b in buf.chunks_mut(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
                }
                file.write_all(&buf)?;
            }
        }
        let job = Job {
            sandbox_id: sbx.id().to_owned(),
            access_token: sbx.access_token().expose().to_owned(),
            source: source.display().to_string(),
            ..job_base
        };
        let mut rows = Vec::new();
        for step in [
            "staged-write",
            "raw-put",
            "export",
            "staged-read",
            "raw-get",
        ] {
            let (secs, kib) = tokio::task::block_in_place(|| run(step, &job))?;
            rows.push((step, secs, kib));
        }
        println!("{mib} MiB through the local backend's S3:");
        for (step, secs, kib) in &rows {
            println!(
                "  {step:<13} {secs:>8.2} s {:>9.1} MiB/s  peak RSS growth {:>7.1} MiB",
                mib as f64 / secs,
                *kib as f64 / 1024.0
            );
        }
        let ratio = |a: usize, b: usize| rows[b].1 / rows[a].1;
        println!(
            "staged/raw throughput: write {:.2}x, read {:.2}x (goal ≥ 0.6x; RSS growth < 64 MiB)",
            ratio(0, 1),
            ratio(3, 4)
        );
        sbx.kill().await?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
