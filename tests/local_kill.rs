//! `commands().kill(pid)` and `CommandHandle::kill()` end the whole
//! command, on the embedded local backend: what it started in the
//! background and moved out of its process group (`setsid`, a double fork)
//! too, seen in the host's /proc; another command of the same sandbox
//! keeps running. Needs the sandbox's cgroup v2 (each command gets a
//! cgroup of its own inside it); elsewhere the tests skip.

use crate::sdk_support;

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
    spawn_escaping_command_with(sbx, token, false).await
}

/// As [`spawn_escaping_command`], the command started with `kill_tree`.
async fn spawn_escaping_command_with(
    sbx: &Sandbox,
    token: &str,
    kill_tree: bool,
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
        .spawn(
            &script,
            CommandOptions::new()
                .login_shell(false)
                .kill_tree(kill_tree),
        )
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

// `CommandOptions::kill_tree` (issue 43): the timeout's SIGTERM reaches
// every process of the command, whatever is left after the grace is frozen
// and killed, and the end comes only once none is left.

/// Which of `pids` still run (not zombies), as another command of the
/// sandbox sees them with `ps`.
async fn running_in_sandbox(sbx: &Sandbox, pids: &[u32]) -> Vec<u32> {
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let out = sbx
        .commands()
        .run_with(
            &format!("ps -o pid=,stat= -p {} || true", list.join(",")),
            CommandOptions::new().login_shell(false),
        )
        .await
        .expect("ps");
    out.stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse().ok()?;
            let stat = fields.next().unwrap_or("");
            (!stat.starts_with('Z')).then_some(pid)
        })
        .collect()
}

/// With `kill_tree`, `kill()` ends what left the process group before the
/// command's end arrives: once `wait` returns, none of it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_with_kill_tree_ends_the_tree_before_the_end() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let Some((command, bystander)) = spawn_escaping_command_with(&sbx, &token, true).await else {
        return;
    };
    let tree: Vec<u32> = sleepers(&token)
        .into_iter()
        .filter(|(_, cmd)| !cmd.contains(&format!("{token}9")))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(tree.len(), 4, "the command and its three escapes");
    assert!(command.kill().await.expect("kill"));
    let ended = command.wait().await;
    assert!(ended.is_err(), "a killed command is no success: {ended:?}");
    // No wait: the end came after the last of them was gone.
    assert_eq!(
        running_in_sandbox(&sbx, &tree).await,
        Vec::<u32>::new(),
        "nothing of the command runs once its end arrived"
    );
    assert_eq!(
        running_in_sandbox(&sbx, &[bystander.pid()]).await,
        [bystander.pid()],
        "another command runs on"
    );
    sbx.kill().await.expect("kill the sandbox");
}

/// The script of the timeout tests: an escape (`setsid`) that records a
/// SIGTERM in `/tmp/term-<token>`, an escape that ignores SIGTERM
/// (`sleep <token>4`), a double fork inside the group (`sleep <token>2`),
/// then `sleep <token>0`.
fn timeout_script(token: &str) -> String {
    let q = ">/dev/null 2>&1 </dev/null";
    format!(
        "setsid sh -c 'trap \"echo term > /tmp/term-{token}; exit 0\" TERM; sleep {token}5 & wait' {q} &\n\
         setsid sh -c 'trap \"\" TERM; exec sleep {token}4' {q} &\n\
         ( (sleep {token}2 {q} &) & )\n\
         sleep {token}0"
    )
}

/// Runs [`timeout_script`] with a timeout (long enough for every process to
/// start on a loaded machine) and `kill_tree`; returns the error, or `None`
/// (after a skip) where the command has no cgroup of its own.
async fn run_into_timeout(
    sbx: &Sandbox,
    token: &str,
    kill_tree: bool,
) -> Option<rayito::SandboxError> {
    let probe = sbx
        .commands()
        .run_with(
            "cat /proc/self/cgroup",
            CommandOptions::new().login_shell(false),
        )
        .await
        .expect("cat the cgroup");
    if !probe.stdout.contains("/command-") {
        sdk_support::skip::skip(format!(
            "needs a writable cgroup v2 with cgroup.kill (root on Linux 5.14+); a command is in {:?}",
            probe.stdout
        ));
        return None;
    }
    let outcome = sbx
        .commands()
        .run_with(
            &timeout_script(token),
            CommandOptions::new()
                .login_shell(false)
                .timeout(Duration::from_secs(10))
                .kill_tree(kill_tree),
        )
        .await;
    Some(outcome.expect_err("the command times out"))
}

/// With `kill_tree`, the timeout's SIGTERM reaches an escape (it records
/// it), what ignores it is killed after the grace, and the end (the
/// `Timeout` error) comes only once none of them runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_tree_timeout_terms_the_whole_tree_and_ends_after_it() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let Some(err) = run_into_timeout(&sbx, &token, true).await else {
        return;
    };
    assert!(
        matches!(err, rayito::SandboxError::Timeout { .. }),
        "{err:?}"
    );
    assert_eq!(
        sleepers(&token),
        Vec::new(),
        "nothing runs once the end arrived"
    );
    let marker = sbx
        .commands()
        .run_with(
            &format!("cat /tmp/term-{token}"),
            CommandOptions::new().login_shell(false),
        )
        .await
        .expect("the escape recorded its SIGTERM");
    assert_eq!(marker.stdout, "term\n");
    sbx.kill().await.expect("kill the sandbox");
}

/// Without `kill_tree`, the timeout's SIGTERM reaches the process group
/// only: the escape never sees it (it is SIGKILLed after the grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_kill_tree_a_timeout_terms_the_process_group_only() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let Some(err) = run_into_timeout(&sbx, &token, false).await else {
        return;
    };
    assert!(
        matches!(err, rayito::SandboxError::Timeout { .. }),
        "{err:?}"
    );
    let left = wait_for_sleepers(&token, 0).await;
    assert_eq!(left, Vec::new(), "the rest is killed after the grace");
    let marker = sbx
        .commands()
        .run_with(
            &format!("cat /tmp/term-{token} 2>/dev/null || echo none"),
            CommandOptions::new().login_shell(false),
        )
        .await
        .expect("cat");
    assert_eq!(marker.stdout, "none\n", "the escape never got a SIGTERM");
    sbx.kill().await.expect("kill the sandbox");
}

/// A `kill_tree` command that exits by itself leaves what it daemonized
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_tree_command_that_exits_leaves_its_daemons_alone() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let token = token();
    let q = ">/dev/null 2>&1 </dev/null";
    let done = sbx
        .commands()
        .run_with(
            &format!("setsid sleep {token}6 {q} &\n( (sleep {token}7 {q} &) & )\necho started"),
            CommandOptions::new().login_shell(false).kill_tree(true),
        )
        .await
        .expect("the command exits by itself");
    assert_eq!(done.stdout, "started\n");
    let daemons: Vec<u32> = wait_for_sleepers(&token, 2)
        .await
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(daemons.len(), 2, "both daemons started");
    let mut running = running_in_sandbox(&sbx, &daemons).await;
    running.sort_unstable();
    let mut expected = daemons.clone();
    expected.sort_unstable();
    assert_eq!(running, expected, "both run on after their command ended");
    sbx.kill().await.expect("kill the sandbox");
    assert_eq!(wait_for_sleepers(&token, 0).await, Vec::new());
}

/// The agent's refusal of a `kill_tree` start where the command has no
/// cgroup of its own (pinned in the agent's own tests too).
const NEEDS_CGROUP: &str = "kill_tree needs a cgroup v2 with cgroup.kill (Linux 5.14+, root or a \
     delegated subtree), which this host does not give the agent; start the command without kill_tree";

/// How the SDK shows that refusal (this host has cgroups, so the status is
/// built as the agent sends it), and docs/errors.md transcribes it.
#[test]
fn a_kill_tree_start_without_a_cgroup_is_refused_naming_the_option() {
    use rayito::error::{GrpcCode, SandboxError};
    use rayito::test_util::{Call, agent_status};
    let e = agent_status(
        GrpcCode::FailedPrecondition,
        NEEDS_CGROUP,
        Call::new("commands.run"),
    );
    assert!(matches!(e, SandboxError::InvalidArgument { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "the agent refused an argument of commands.run: {NEEDS_CGROUP}; fix the value before retrying"
        )
    );
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/errors.md")).unwrap();
    assert!(
        doc.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(NEEDS_CGROUP),
        "docs/errors.md transcribes the refusal"
    );
}
