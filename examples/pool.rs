//! A pool of 4 suspended sandboxes on the local backend, measured against
//! create-to-first-result in the same run (docs/performance.md, "Pool"):
//! takes from a warm pool (one at a time, the pool refilled before each),
//! then a burst where 4 tasks take 20 sandboxes (each runs one cell, then
//! is killed) faster than the pool refills: its hits and misses.
//!
//! ```text
//! cargo run --release --example pool [-- CREATES]
//! ```
//!
//! A take is measured to its first result (`run_code("1 + 1")`), like a
//! create; a take that found no parked sandbox (a miss) creates one, so
//! the misses show what the pool could not absorb at that rate. The floor
//! a take stands on is measured too: a paused sandbox resumed through its
//! handle, to ready and to its first result. With
//! `RAYITO_EMULATOR_LATENCY=aws` the embedded emulator's create, suspend
//! and resume take AWS-like times (docs/local.md, "Latency profile").

use std::sync::Arc;
use std::time::{Duration, Instant};

use rayito::{PoolConfig, Sandbox, SandboxError, WarmupStep};

const TASKS: usize = 4;
const TAKES_PER_TASK: usize = 5;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn show(what: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.5);
    println!(
        "{what:<28} n={:<3} p50 {:>7.1} ms  p90 {:>7.1} ms  max {:>7.1} ms",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        percentile(&samples, 0.9).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3,
    );
    p50
}

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let creates: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let builder = Sandbox::builder().local();

    // The baseline: create-to-first-result, one after another.
    let mut create_samples = Vec::new();
    for _ in 0..creates {
        let started = Instant::now();
        let sbx = builder.clone().create().await?;
        sbx.run_code("1 + 1").await?;
        create_samples.push(started.elapsed());
        sbx.kill().await?;
        // As for creates that are not back to back: the local backend's
        // MicroVM made ahead is ready again.
        tokio::time::sleep(Duration::from_millis(700)).await;
    }

    // The floor a take stands on: a paused sandbox resumed through its
    // handle (ResumeMicrovm, a proxy token, Health), then its first result.
    let mut resume_samples = Vec::new();
    let mut resumed_samples = Vec::new();
    let sbx = builder.clone().create().await?;
    for _ in 0..creates {
        sbx.pause().await?;
        let started = Instant::now();
        sbx.resume().await?;
        resume_samples.push(started.elapsed());
        sbx.run_code("1 + 1").await?;
        resumed_samples.push(started.elapsed());
    }
    sbx.kill().await?;

    let pool = builder
        .pool(PoolConfig::new(4).warmup(WarmupStep::run("python3 -c 'import json, csv'")))?;
    pool.start().await?;
    // Filled before the takes start.
    while pool.stats().await?.ready < 4 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Takes from a warm pool: one at a time, each once the pool is full.
    let mut warm_samples = Vec::new();
    for _ in 0..creates {
        while pool.stats().await?.ready < 4 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let started = Instant::now();
        let sbx = pool.take().await?;
        sbx.run_code("1 + 1").await?;
        warm_samples.push(started.elapsed());
        sbx.kill().await?;
    }
    let warm = pool.stats().await?;
    while pool.stats().await?.ready < 4 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let pool = Arc::new(pool);
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            for _ in 0..TAKES_PER_TASK {
                let started = Instant::now();
                let sbx = pool.take().await?;
                sbx.run_code("1 + 1").await?;
                samples.push(started.elapsed());
                sbx.kill().await?;
            }
            Ok::<_, SandboxError>(samples)
        }));
    }
    let mut take_samples = Vec::new();
    for task in tasks {
        take_samples.extend(task.await.expect("a take task")?);
    }
    let stats = pool.stats().await?;
    pool.close(true).await?;

    let create_p50 = show("create to first result", create_samples);
    let resume_p50 = show("resume to ready (handle)", resume_samples);
    show("resume to first result", resumed_samples);
    let warm_p50 = show("warm take to first result", warm_samples);
    println!("  warm takes: hits {}, misses {}", warm.hits, warm.misses);
    show("burst take to first result", take_samples);
    println!(
        "  burst takes: {} (hits {}, misses {}), launched {}, failed {}",
        stats.takes - warm.takes,
        stats.hits - warm.hits,
        stats.misses - warm.misses,
        stats.launched,
        stats.failed
    );
    println!(
        "warm take p50 / create p50: {:.2}",
        warm_p50.as_secs_f64() / create_p50.as_secs_f64()
    );
    println!(
        "warm take p50 / resume-to-ready p50: {:.2}",
        warm_p50.as_secs_f64() / resume_p50.as_secs_f64()
    );
    Ok(())
}
