//! A soak of the local backend in one process (docs/performance.md,
//! "Scale in one process"): TASKS tasks loop create, a command, kill, for
//! CYCLES cycles in all, and the process's resident memory (the SDK and the
//! embedded emulator with its agents, all in this process) is printed every
//! tenth of the run; at the end, the growth after warm-up (the first tenth)
//! and how many sandbox directories the emulator still holds.
//!
//! ```text
//! cargo run --release --example soak [-- CYCLES [TASKS]]
//! ```
//!
//! Defaults: 10,000 cycles, 8 tasks. The client's pacing is off: the
//! default pacing holds creates to 5/s, as AWS's rates would (see
//! docs/local.md), and the soak measures memory, not pacing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayito::{Client, Pacing, SandboxError};

/// This process's resident set size, in KiB (`VmRSS`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The directories (sandbox roots) inside this process's emulator roots:
/// `rayito-emulator-<pid>-*` in the temp dir.
fn sandbox_dirs() -> usize {
    let prefix = format!("rayito-emulator-{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| std::fs::read_dir(e.path()).ok())
        .map(|inner| {
            inner
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("microvm-"))
                .count()
        })
        .sum()
}

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let mut args = std::env::args().skip(1);
    let cycles: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let client = Client::builder()
        .local()
        .pacing(Pacing::unlimited())
        .build()
        .await?;
    let done = Arc::new(AtomicUsize::new(0));
    let step = (cycles / 10).max(1);
    let started = Instant::now();
    println!(
        "soak: {cycles} create/command/kill cycles, {tasks} tasks, rss at start {} KiB",
        rss_kib()
    );
    let mut workers = Vec::new();
    for _ in 0..tasks {
        let (client, done) = (client.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let mut warm_rss = None;
            loop {
                let n = done.fetch_add(1, Ordering::SeqCst);
                if n >= cycles {
                    return Ok::<_, SandboxError>(warm_rss);
                }
                let sandbox = client.sandbox().create().await?;
                sandbox.commands().run("true").await?;
                sandbox.kill().await?;
                if (n + 1) % step == 0 {
                    let rss = rss_kib();
                    println!(
                        "cycles {:>6}  rss {:>7} KiB  {:>6.1} s",
                        n + 1,
                        rss,
                        started.elapsed().as_secs_f64()
                    );
                    if n + 1 == step {
                        warm_rss = Some(rss);
                    }
                }
            }
        }));
    }
    let mut warm = None;
    for worker in workers {
        if let Some(rss) = worker.await.expect("a soak task panicked")? {
            warm = Some(rss);
        }
    }
    let end = rss_kib();
    let warm = warm.unwrap_or(end);
    println!(
        "after warm-up ({step} cycles): {warm} KiB; at the end: {end} KiB; growth {:+.2} MiB over {} cycles; {:.1} cycles/s",
        (end as f64 - warm as f64) / 1024.0,
        cycles - step,
        cycles as f64 / started.elapsed().as_secs_f64()
    );
    println!(
        "sandbox directories left in the emulator's root: {}",
        sandbox_dirs()
    );
    Ok(())
}
