//! An emulator's own root does not outlive its process (issue 41, section
//! 6): a process that ends without dropping its emulator
//! (`std::process::exit`, SIGKILL) has its root removed by its exit
//! watcher, and when the watcher is gone too (killed with it), the next
//! emulator to start prunes the root, whose lock no process holds any
//! more; a live emulator's root is kept.
//!
//! Each emulator runs in a child process: this test binary started again
//! with only the ignored `root_child` test, under a fresh TMPDIR.
//!
//! The exit watcher's list holds the live directories only (issue 44, item
//! 5): a process that made many sandboxes, most of them ended, has every
//! live one removed after a SIGKILL, sandbox roots registered one by one
//! (an emulator on a root of the caller's, standalone agents) included.

use crate::emulator_support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rayito_emulator::{Emulator, EmulatorConfig};

const MODE_ENV: &str = "RAYITO_ROOT_TEST_MODE";

/// The child: starts an emulator with its default (own) root, prints the
/// root, then exits without dropping it (`exit`) or waits to be killed
/// (`hold`, bounded).
#[test]
#[ignore = "a helper: run as a child process by the test below"]
fn root_child() {
    let Ok(mode) = std::env::var(MODE_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let config = EmulatorConfig::default();
        let root = config.root.clone();
        if mode == "many" {
            many_sandboxes_then_hold().await;
            return;
        }
        let emulator = Emulator::start(config).await.expect("start");
        println!("root: {}", root.display());
        if mode == "exit" {
            std::process::exit(3);
        }
        tokio::time::sleep(Duration::from_secs(120)).await;
        drop(emulator);
    });
}

/// The child of `many`: an emulator on a root of the caller's (so each
/// sandbox root is registered with the exit watcher on its own) and
/// standalone agents with their own roots in the temp dir; most of both
/// ended before the kill. Prints `live: <dir>` for each live one, then
/// `ready`, then waits to be killed (bounded).
async fn many_sandboxes_then_hold() {
    use emulator_support::{Harness, wait_state};
    let given = std::env::temp_dir().join("given-root");
    std::fs::create_dir_all(&given).unwrap();
    let h = Harness::start_with(EmulatorConfig {
        root: given.clone(),
        ..EmulatorConfig::default()
    })
    .await;
    let mut live = Vec::new();
    for i in 0..12 {
        let (id, _) = h.run_ready().await;
        if i % 3 == 0 {
            live.push(given.join(&id));
            continue;
        }
        h.client
            .terminate_microvm()
            .microvm_identifier(&id)
            .send()
            .await
            .unwrap();
        wait_state(
            &h.client,
            &id,
            aws_sdk_lambdamicrovms::types::MicrovmState::Terminated,
        )
        .await;
    }
    let mut agents = Vec::new();
    for i in 0..30 {
        let agent = rayito_agent::agent::Agent::start(rayito_agent::agent::AgentConfig::default())
            .await
            .unwrap();
        if i % 3 == 0 {
            live.push(agent.env().root().to_path_buf());
            agents.push(agent);
        }
    }
    for dir in &live {
        assert!(dir.exists(), "{}", dir.display());
        println!("live: {}", dir.display());
    }
    println!("ready");
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop((agents, h));
}

/// Starts a child in `mode` under `tmp`; the child and its root.
fn spawn(mode: &str, tmp: &Path) -> (Child, PathBuf) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_path(module_path!(), "root_child"),
            "--ignored",
            "--nocapture",
        ])
        .env(MODE_ENV, mode)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let root = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("root: ").map(PathBuf::from))
        .expect("the child prints its root");
    // The rest of its output, drained so that it never blocks.
    std::thread::spawn(move || lines.for_each(drop));
    (child, root)
}

/// The live children of `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1) == Some(&parent.to_string().as_str()) && fields[0] != "Z" {
            found.push(pid);
        }
    }
    found
}

fn sigkill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

/// Waits (bounded) until `root` is gone.
fn gone_within(root: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while root.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    !root.exists()
}

#[test]
fn roots_of_gone_processes_are_removed_and_live_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut live, live_root) = spawn("hold", tmp.path());

    // SIGKILL, its exit watcher killed first: nothing cleans up at its
    // end, and its root stays.
    let (mut dead, dead_root) = spawn("hold", tmp.path());
    let watchers = children_of(dead.id());
    assert!(!watchers.is_empty(), "the child has an exit watcher");
    for watcher in watchers {
        sigkill(watcher);
    }
    dead.kill().unwrap();
    dead.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(dead_root.exists(), "nothing should have removed it yet");

    // The next start prunes it, and keeps the live one's.
    let (mut exiting, exiting_root) = spawn("exit", tmp.path());
    assert!(!dead_root.exists(), "the next start prunes a dead root");
    assert!(live_root.exists(), "a live emulator's root is kept");
    // `std::process::exit` without a drop: its watcher removes its root.
    assert_eq!(exiting.wait().unwrap().code(), Some(3));
    assert!(
        gone_within(&exiting_root, Duration::from_secs(20)),
        "an exited process's root stays"
    );
    assert!(live_root.exists());

    // SIGKILL with the watcher alive: the watcher removes it.
    live.kill().unwrap();
    live.wait().unwrap();
    assert!(
        gone_within(&live_root, Duration::from_secs(20)),
        "a killed process's root stays"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("rayito-emulator-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_killed_process_with_many_sandboxes_ended_and_live_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_path(module_path!(), "root_child"),
            "--ignored",
            "--nocapture",
        ])
        .env(MODE_ENV, "many")
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let live: Vec<PathBuf> = lines
        .by_ref()
        .map_while(Result::ok)
        .take_while(|l| l != "ready")
        .filter_map(|l| l.strip_prefix("live: ").map(PathBuf::from))
        .collect();
    std::thread::spawn(move || lines.for_each(drop));
    assert_eq!(live.len(), 14, "{live:?}");
    assert!(live.iter().all(|d| d.exists()));
    child.kill().unwrap();
    child.wait().unwrap();
    for dir in &live {
        assert!(
            gone_within(dir, Duration::from_secs(20)),
            "{} outlived its process",
            dir.display()
        );
    }
    // Nothing else of the child's either: the caller's root alone stays
    // (with the emulator's objects in it, as a bucket would keep them).
    let given = tmp.path().join("given-root");
    let sandboxes: Vec<_> = std::fs::read_dir(&given)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("microvm-"))
        .collect();
    assert!(sandboxes.is_empty(), "{sandboxes:?}");
    let agents: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("rayito-agent-"))
        .collect();
    assert!(agents.is_empty(), "{agents:?}");
}
