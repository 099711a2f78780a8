//! `commands().kill(pid)` and `CommandHandle::kill()` end the whole
//! command, on the embedded local backend: what it started in the
//! background and moved out of its process group (`setsid`, a double fork)
//! too, seen in the host's /proc; another command of the same sandbox
//! keeps running. Needs the sandbox's cgroup v2 (each command gets a
//! cgroup of its own inside it); elsewhere the tests skip.

mod sdk_support;

use std::time::Duration;

use rayito::{CommandHandle, CommandOptions, Sandbox};

/// A fresh token (`300.<random>`), so that concurrent tests never match
/// each other's processes.
fn token() -> String {
    format!("300.{:08}", rand::random::<u32>() % 100_000_000)
}

/// Pids of live (not zombie) processes whose command line holds `sleep <needle>`.
fn sleepers(needle: &str) -> Vec<(u32, String)> {
    let needle = format!("sleep\0{needle}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                stat.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(&needle) {
            out.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    out
}

/// Waits (bounded) until `sleepers(needle)` has `n` entries.
async fn wait_for_sleepers(needle: &str, n: usize) -> Vec<(u32, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = sleepers(needle);
        if found.len() == n || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Spawns a command that leaves its process group three ways and then
/// sleeps itself (`sleep <token>0`), and a bystander command
/// (`sleep <token>9`); returns both handles once all five sleep, or `None`
/// (after a skip) where the command has no cgroup of its own.
async fn spawn_escaping_command(
    sbx: &Sandbox,
    token: &str,
) -> Option<(CommandHandle, CommandHandle)> {
    let q = ">/dev/null 2>&1 </dev/null";
    let script = format!(
        "setsid sleep {token}1 {q} &\n\
         ( (sleep {token}2 {q} &) & )\n\
         setsid sh -c '(sleep {token}3 {q} &) &' {q} &\n\
         sleep {token}0"
    );
    let command = sbx
        .commands()
        .spawn(&script, CommandOptions::new().login_shell(false))
        .await
        .expect("spawn the escaping command");
    let bystander = sbx
        .commands()
        .spawn(
            &format!("sleep {token}9"),
            CommandOptions::new().login_shell(false),
        )
        .await
        .expect("spawn the bystander");
    let running = wait_for_sleepers(token, 5).await;
    assert_eq!(running.len(), 5, "every process runs: {running:?}");
    // No pid namespace: the SDK's pid is the host's.
    let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", command.pid()))
        .expect("the command's cgroup");
    if !cgroup.contains("/command-") {
        for handle in [&command, &bystander] {
            let _ = handle.kill().await;
        }
        sdk_support::skip::skip(format!(
            "needs a writable cgroup v2 with cgroup.kill (root on Linux 5.14+); the command is in {cgroup:?}"
        ));
        return None;
    }
    Some((command, bystander))
}

/// After the kill: nothing of the command is left (bounded wait), the
/// bystander still runs.
async fn assert_only_the_bystander_is_left(token: &str, how: &str) {
    let left = wait_for_sleepers(token, 1).await;
    let needle = format!("{token}9");
    assert!(
        left.len() == 1 && left[0].1.contains(&needle),
        "after {how}, only the bystander `sleep {needle}` may run: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_kill_ends_what_left_the_process_group() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let Some((command, bystander)) = spawn_escaping_command(&sbx, &token).await else {
        return;
    };
    assert!(sbx.commands().kill(command.pid()).await.expect("kill"));
    assert_only_the_bystander_is_left(&token, "commands().kill(pid)").await;
    assert!(bystander.kill().await.expect("kill the bystander"));
    sbx.kill().await.expect("kill the sandbox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_handle_kill_ends_what_left_the_process_group() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let Some((command, bystander)) = spawn_escaping_command(&sbx, &token).await else {
        return;
    };
    assert!(command.kill().await.expect("kill"));
    assert_only_the_bystander_is_left(&token, "CommandHandle::kill()").await;
    assert!(bystander.kill().await.expect("kill the bystander"));
    sbx.kill().await.expect("kill the sandbox");
}
