//! `AgentConfig::prestart_kernel`: the default Python kernel started before
//! `/run`, kept when the run payload leaves the environment as it was and
//! replaced when it does not; through a real agent, its hooks and gRPC.

use crate::support;

use std::time::Duration;

use rayito_agent::{AgentConfig, pb};
use support::TestAgent;

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
    // Fields after the command name (which may hold spaces) start at field 3.
    let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let ticks: u64 = after_name
        .split_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .expect("a start time");
    ticks as f64 / 100.0
}

/// Waits until Health says the kernel is ready.
async fn kernel_ready(t: &TestAgent) {
    let by = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let h = t
            .health()
            .health(pb::HealthRequest {})
            .await
            .expect("Health")
            .into_inner();
        if h.kernel_ready && !h.sandbox_id.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < by,
            "the kernel never became ready"
        );
    }
}

async fn prestarted_agent() -> TestAgent {
    TestAgent::start_config(AgentConfig {
        prestart_kernel: true,
        ..AgentConfig::default()
    })
    .await
}

/// With the default payload the kernel started before `/run` is the one
/// that runs the first cell: it is older than the hook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernel_started_before_run_runs_the_first_cell() {
    let t = prestarted_agent().await;
    // Time for the interpreter to start before the hook comes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run_at = uptime();
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    kernel_ready(&t).await;
    let pid: u32 = support::python_stdout(&t, "import os; print(os.getpid())")
        .await
        .trim()
        .parse()
        .expect("a pid");
    let started = started_at(pid);
    assert!(
        started < run_at - 0.5,
        "the kernel started at {started}, the hook came at {run_at}"
    );
}

/// A payload that changes the environment (here an env) gets a kernel
/// started after `/run`, which sees it; the early one is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_with_settings_gets_a_fresh_kernel() {
    let t = prestarted_agent().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run_at = uptime();
    let (status, body) = t
        .run(&support::payload(serde_json::json!({
            "envs": {"RAYITO_PRESTART": "from-the-payload"},
        })))
        .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    kernel_ready(&t).await;
    let out = support::python_stdout(
        &t,
        "import os; print(os.environ.get('RAYITO_PRESTART')); print(os.getpid())",
    )
    .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "from-the-payload", "{out}");
    let pid: u32 = lines[1].parse().expect("a pid");
    assert!(
        started_at(pid) >= run_at - 0.02,
        "the kernel is older than the hook"
    );
    // Exactly one interpreter of this sandbox is left: the early one was killed.
    let marker = t.agent.env().marker().to_owned();
    let by = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let kernels = python_processes_with(&marker);
        if kernels == [pid] {
            break;
        }
        assert!(
            std::time::Instant::now() < by,
            "kernels of the sandbox: {kernels:?}, expected only {pid}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pids of python processes whose environment carries `marker`.
fn python_processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let is_python = cmdline
            .split(|b| *b == 0)
            .next()
            .is_some_and(|argv0| argv0.ends_with(b"python3"));
        let marked = environ
            .split(|b| *b == 0)
            .any(|kv| kv.ends_with(marker.as_bytes()));
        if is_python && marked {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}
