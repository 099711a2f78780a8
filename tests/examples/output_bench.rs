//! `commands().run` of a command writing 16 MiB of 0xff bytes (invalid
//! UTF-8: every byte becomes U+FFFD) on the local backend: the time of each
//! run and the growth of this process's peak RSS (the embedded emulator and
//! its agent included) over all of them.
//!
//! ```text
//! cargo build -p rayito-tests --example output_bench
//! ./target/debug/examples/output_bench [runs]
//! ```

use std::time::{Duration, Instant};

use rayito::{AwsOptions, CommandOptions, Sandbox};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};

/// This process's peak resident set, in KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    // The byte written (octal for tr): 377 (0xff, invalid) by default, or
    // e.g. `a` for valid ASCII, to compare.
    let byte = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "\\377".to_owned());
    let emulator = Emulator::start(EmulatorConfig {
        access_keys: vec![AccessKey::new("AKIDBENCH", "bench")],
        ..EmulatorConfig::default()
    })
    .await?;
    let sbx = Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emulator.endpoint_url())
                .region("us-east-1")
                .static_credentials("AKIDBENCH", "bench"),
        )
        .template(emulator.image_arn("rayito-base"))
        .create()
        .await?;
    sbx.commands().run("true").await?;
    let before = peak_rss_kib();
    let mut times = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let out = sbx
            .commands()
            .run_with(
                &format!("head -c 16777216 /dev/zero | tr '\\0' '{byte}'"),
                CommandOptions::new().timeout(Duration::from_secs(600)),
            )
            .await?;
        times.push(started.elapsed());
        assert!(out.stdout.len() >= 16 << 20);
    }
    times.sort();
    println!(
        "16 MiB of {byte}, {runs} runs: min {:?}, median {:?}, max {:?}; peak RSS growth {} MiB",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        (peak_rss_kib() - before) / 1024
    );
    sbx.kill().await?;
    Ok(())
}
