//! The emulator's warm spare (`EmulatorConfig::warm_spare`, on in the
//! embedded local backend): a sandbox made ahead of its RunMicrovm, its
//! default kernel already started, so a new sandbox's first cell does not
//! wait for an interpreter; a run payload with envs still gets a kernel
//! that sees them; nothing of the spare outlives the emulator.

use crate::sdk_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rayito::Sandbox;
use rayito_emulator::{Emulator, EmulatorConfig};

/// Seconds since boot, as `/proc/uptime` says.
fn uptime() -> f64 {
    let text = std::fs::read_to_string("/proc/uptime").expect("/proc/uptime");
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("an uptime")
}

/// When `pid` started, in seconds since boot (`/proc/<pid>/stat` field 22,
/// in USER_HZ = 100 ticks per second).
fn started_at(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the kernel's stat");
    let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let ticks: u64 = after_name
        .split_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .expect("a start time");
    ticks as f64 / 100.0
}

/// Every live pid whose environment carries a sandbox marker.
fn sandbox_processes() -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(b"RAYITO_SANDBOX="))
        {
            pids.insert(pid);
        }
    }
    pids
}

async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let by = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < by, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn pid_of_kernel(sbx: &Sandbox) -> u32 {
    sbx.run_code("import os; os.getpid()")
        .await
        .expect("run_code")
        .text()
        .expect("a value")
        .parse()
        .expect("a pid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_sandbox_gets_the_spare_kernel_and_nothing_outlives_the_emulator() {
    let before = sandbox_processes();
    let emulator = Emulator::start(EmulatorConfig {
        warm_spare: true,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    until("a spare is ready", || emulator.warm_spare_ready()).await;

    // The first cell runs in a kernel older than the create itself.
    let create_at = uptime();
    let sbx = sdk_support::builder(&emulator).create().await.unwrap();
    let pid = pid_of_kernel(&sbx).await;
    let started = started_at(pid);
    assert!(
        started < create_at,
        "the kernel started at {started}, the create at {create_at}"
    );
    // The next spare is made at once.
    until("the next spare is ready", || emulator.warm_spare_ready()).await;

    // Envs in the run payload: a fresh kernel, which sees them.
    let create_at = uptime();
    let with_envs = sdk_support::builder(&emulator)
        .env("RAYITO_SPARE_TEST", "from-the-payload")
        .create()
        .await
        .unwrap();
    let seen = with_envs
        .run_code("import os; os.environ['RAYITO_SPARE_TEST']")
        .await
        .unwrap();
    assert_eq!(seen.text(), Some("'from-the-payload'"));
    let pid = pid_of_kernel(&with_envs).await;
    assert!(started_at(pid) >= create_at - 0.02);

    assert!(sbx.kill().await.unwrap());
    assert!(with_envs.kill().await.unwrap());
    // The spare made after the second create, and everything else, goes
    // with the emulator.
    until("a spare is ready again", || emulator.warm_spare_ready()).await;
    drop(emulator);
    until("no sandbox process is left", || {
        sandbox_processes().difference(&before).next().is_none()
    })
    .await;
}
