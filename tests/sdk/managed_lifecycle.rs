//! A sandbox's life through the SDK on the local backend: the managed
//! lifecycle (`set_timeout`, `on_timeout`, `max_lifetime`), `kill()` while
//! work runs, many concurrent calls on one handle, `connect()` to a running
//! sandbox, dropping a cell's stream.

use crate::sdk_support;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::error::{SandboxCode, TimeoutScope};
use rayito::{
    CommandOptions, ExecutionEvent, OnTimeout, RunCodeOptions, Sandbox, SandboxError, SandboxState,
};
use tokio::sync::oneshot;
use tokio::time::timeout;

/// Far above what anything here needs on a loaded 2-core machine; only a
/// hang reaches it.
const HANG: Duration = Duration::from_secs(120);

fn is_sandbox_timeout(err: &SandboxError) -> bool {
    matches!(
        err,
        SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            ..
        }
    )
}

/// Waits until the control plane reports `state` (polling GetMicrovm).
async fn wait_state(sbx: &Sandbox, state: SandboxState) -> rayito::SandboxInfo {
    timeout(HANG, async {
        loop {
            let info = sbx.get_info().await.expect("get_info");
            if info.state == state {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the sandbox never became {state}"))
}

/// Kill mode: the deadline ends a running command with `Timeout { Sandbox }`
/// and the control plane terminates the MicroVM (the agent exits 124).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_mode_deadline_ends_work_and_terminates() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emulator)
        .timeout(Duration::from_secs(2))
        .on_timeout(OnTimeout::Kill)
        .create()
        .await
        .unwrap();
    let err = timeout(
        HANG,
        sbx.commands()
            .run_with("sleep 600", CommandOptions::new().no_timeout()),
    )
    .await
    .expect("the deadline ends the command")
    .expect_err("the command cannot succeed");
    assert!(is_sandbox_timeout(&err), "{err:?}");
    let info = wait_state(&sbx, SandboxState::Terminated).await;
    assert_eq!(
        info.state_reason.as_deref(),
        Some("Container Stopped with Exit Code: 124")
    );
}

/// `set_timeout` moves the deadline both ways, within the cap that
/// `max_lifetime` sets; a sandbox without a managed lifecycle refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_timeout_moves_the_deadline_within_the_cap() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emulator)
        .timeout(Duration::from_secs(600))
        .max_lifetime(Duration::from_secs(900))
        .create()
        .await
        .unwrap();
    // The agent's cap is max_lifetime - 60 s = 840 s.
    let err = sbx
        .set_timeout(Duration::from_secs(850))
        .await
        .expect_err("beyond the cap");
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    sbx.set_timeout(Duration::from_secs(800))
        .await
        .expect("within the cap");
    // Shortened: a command that would run for 10 minutes meets it.
    sbx.set_timeout(Duration::from_secs(2)).await.unwrap();
    let err = timeout(
        HANG,
        sbx.commands()
            .run_with("sleep 600", CommandOptions::new().no_timeout()),
    )
    .await
    .expect("the shortened deadline ends the command")
    .expect_err("the command cannot succeed");
    assert!(is_sandbox_timeout(&err), "{err:?}");
    sbx.kill().await.unwrap();

    // Extended: a deadline 3 s after start moved to 50 s (within the agent's
    // cap: the default max_lifetime of 120 s less 60 s) lets a 5 s command
    // finish.
    let sbx = sdk_support::builder(&emulator)
        .timeout(Duration::from_secs(3))
        .on_timeout(OnTimeout::Kill)
        .create()
        .await
        .unwrap();
    sbx.set_timeout(Duration::from_secs(50)).await.unwrap();
    let done = sbx.commands().run("sleep 5; echo lived").await.unwrap();
    assert_eq!(done.stdout, "lived\n");
    sbx.kill().await.unwrap();

    // Without a managed lifecycle there is no deadline to move.
    let plain = sdk_support::sandbox(&emulator).await;
    let err = plain
        .set_timeout(Duration::from_secs(60))
        .await
        .expect_err("no managed lifecycle");
    assert!(
        matches!(&err, SandboxError::LifecycleUnsupported { feature, .. } if &**feature == "set_timeout"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "this sandbox cannot set_timeout: it was created without a managed lifecycle; create it with Sandbox::builder().max_lifetime(..) or .on_timeout(..) to make its timeout movable"
    );
    plain.kill().await.unwrap();
}

/// `kill()` while a command and a cell run: both end with an error, at once,
/// and `kill()` again is harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_while_a_command_and_a_cell_run() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let (cmd_started, cmd_running) = oneshot::channel();
    let mut cmd_started = Some(cmd_started);
    let handle = sbx.clone();
    let command = tokio::spawn(async move {
        handle
            .commands()
            .run_with(
                "echo started; sleep 600",
                CommandOptions::new().on_stdout(move |_| {
                    if let Some(tx) = cmd_started.take() {
                        let _ = tx.send(());
                    }
                }),
            )
            .await
    });
    let (cell_started, cell_running) = oneshot::channel();
    let mut cell_started = Some(cell_started);
    let handle = sbx.clone();
    let cell = tokio::spawn(async move {
        handle
            .run_code_with(
                "import time\nprint('started', flush=True)\ntime.sleep(600)",
                RunCodeOptions::new().on_stdout(move |_| {
                    if let Some(tx) = cell_started.take() {
                        let _ = tx.send(());
                    }
                }),
            )
            .await
    });
    timeout(HANG, cmd_running).await.unwrap().unwrap();
    timeout(HANG, cell_running).await.unwrap().unwrap();

    assert!(sbx.kill().await.expect("kill"));
    let cmd_err = timeout(HANG, command)
        .await
        .expect("the command ends after kill")
        .unwrap()
        .expect_err("a killed command is an error");
    let cell_err = timeout(HANG, cell)
        .await
        .expect("the cell ends after kill")
        .unwrap()
        .expect_err("a killed cell is an error");
    // Which end a caller sees is a race, each says the sandbox went away:
    // the agent's SIGKILL of the group as it terminates (the command's end,
    // with what it printed), the agent's `terminating`, the connection
    // closing under the stream (a `Sandbox` error), or, once the reconnect
    // contract looked at the control plane after that cut, `SandboxNotFound`.
    match &cmd_err {
        SandboxError::CommandExit {
            exit_code, stdout, ..
        } => {
            assert_eq!(*exit_code, 137);
            assert_eq!(stdout.as_str(), "started\n");
        }
        SandboxError::Sandbox { .. }
        | SandboxError::SandboxState { .. }
        | SandboxError::SandboxNotFound { .. } => {}
        other => panic!("unexpected end of a killed command: {other:?}"),
    }
    assert!(
        matches!(
            cell_err,
            SandboxError::SandboxState { .. }
                | SandboxError::Sandbox { .. }
                | SandboxError::SandboxNotFound { .. }
        ),
        "{cell_err:?}"
    );

    // Twice: no error, and later calls fail without I/O.
    sbx.kill().await.expect("a second kill is harmless");
    let err = sbx.commands().run("true").await.unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::Closed), "{err:?}");
    assert!(!sbx.is_running().await);
    wait_state(&sbx, SandboxState::Terminated).await;
}

/// 100 tasks on one handle, mixing commands, cells and files: every one
/// gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_calls_on_one_handle() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let mut tasks = Vec::new();
    for i in 0..100u32 {
        let sbx = sbx.clone();
        tasks.push(tokio::spawn(async move {
            match i % 3 {
                0 => {
                    let out = sbx.commands().run(&format!("echo {i}")).await?;
                    assert_eq!(out.stdout, format!("{i}\n"));
                }
                1 => {
                    let out = sbx.run_code(&format!("{i} * 2")).await?;
                    assert_eq!(out.text(), Some((i * 2).to_string().as_str()));
                }
                _ => {
                    let path = format!("/home/user/concurrent-{i}.txt");
                    sbx.files().write(&path, format!("file {i}")).await?;
                    assert_eq!(
                        sbx.files().read_to_string(&path).await?,
                        format!("file {i}")
                    );
                }
            }
            Ok::<(), SandboxError>(())
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        timeout(HANG, task)
            .await
            .unwrap_or_else(|_| panic!("task {i} hangs"))
            .unwrap()
            .unwrap_or_else(|err| panic!("task {i}: {err:?}"));
    }
    sbx.kill().await.unwrap();
}

/// `connect()` with the id and access token reaches the same sandbox: its
/// files, its kernel state; a wrong token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_then_calls_on_the_reattached_handle() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    sbx.files()
        .write("/home/user/before.txt", "written before")
        .await
        .unwrap();
    sbx.run_code("kept = 41").await.unwrap();

    let again = sdk_support::builder(&emulator)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect("connect");
    assert_eq!(again.id(), sbx.id());
    assert_eq!(
        again
            .files()
            .read_to_string("/home/user/before.txt")
            .await
            .unwrap(),
        "written before"
    );
    assert_eq!(again.run_code("kept + 1").await.unwrap().text(), Some("42"));
    assert_eq!(
        again
            .commands()
            .run("echo reattached")
            .await
            .unwrap()
            .stdout,
        "reattached\n"
    );

    let err = sdk_support::builder(&emulator)
        .connect(sbx.id(), "A".repeat(43))
        .await
        .expect_err("a wrong token is refused");
    assert!(
        matches!(err, SandboxError::Authentication { .. }),
        "{err:?}"
    );

    // Killing through the second handle ends the sandbox for both.
    assert!(again.kill().await.unwrap());
    wait_state(&sbx, SandboxState::Terminated).await;
    let err = sdk_support::builder(&emulator)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect_err("a terminated sandbox cannot be reached");
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
}

/// Dropping a cell's stream mid-cell interrupts the cell once nobody has
/// followed it for the agent's 10 s detach grace: the next cell on the same
/// kernel (kept alive by keepalives meanwhile) runs then, not after the
/// 10-minute sleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_cell_stream_interrupts_the_cell() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let mut events = sbx
        .run_code_stream(
            "import time\nprint('sleeping', flush=True)\ntime.sleep(600)",
            RunCodeOptions::new(),
        )
        .await
        .unwrap();
    loop {
        match timeout(HANG, events.next()).await.expect("output") {
            Some(Ok(ExecutionEvent::Stdout(msg))) if msg.line.contains("sleeping") => break,
            Some(Ok(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(events);
    let next = timeout(HANG, sbx.run_code("'after'"))
        .await
        .expect("the next cell is not stuck behind the dropped one")
        .unwrap();
    assert_eq!(next.text(), Some("'after'"));
    sbx.kill().await.unwrap();
}

/// Every public future of a `Sandbox` is `Send` (checked when this compiles;
/// `run_code_with` with callbacks was not).
#[allow(dead_code)]
fn public_futures_are_send(sbx: &Sandbox) {
    fn send<T: Send>(_: T) {}
    send(sbx.run_code_with("1", RunCodeOptions::new().on_stdout(|_| {})));
    send(sbx.run_code_stream("1", RunCodeOptions::new().on_stdout(|_| {})));
    send(sbx.run_code("1"));
    send(
        sbx.commands()
            .run_with("true", CommandOptions::new().on_stdout(|_| {})),
    );
    send(sbx.files().read("/x"));
    send(sbx.kill());
    send(sbx.set_timeout(Duration::from_secs(1)));
    send(sbx.get_info());
    send(sbx.is_running());
}

/// `health()` gives the agent's Health as typed values: readiness, the
/// sandbox's own id and metadata, its managed lifecycle as the agent runs
/// it (moved by `set_timeout`), and the guest's size; after `kill` it is
/// `SandboxClosed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_the_agent_and_the_managed_lifecycle() {
    use rayito::{LifecyclePhase, SandboxHealth};

    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emulator)
        .timeout(Duration::from_secs(600))
        .max_lifetime(Duration::from_secs(900))
        .metadata([("team", "red")])
        .create()
        .await
        .unwrap();
    let before = std::time::SystemTime::now();
    let health: SandboxHealth = sbx.health().await.unwrap();
    assert!(health.agent_ready && health.kernel_ready, "{health:?}");
    assert_eq!(health.sandbox_id, sbx.id());
    assert_eq!(health.metadata.get("team").map(String::as_str), Some("red"));
    assert!(!health.agent_version.is_empty());
    assert!(
        health.cpu_count >= 1 && health.memory_total_bytes > 0,
        "{health:?}"
    );
    assert_eq!(health.resume_generation, 0);
    let lifecycle = health.lifecycle.expect("a managed lifecycle");
    assert_eq!(lifecycle.phase, LifecyclePhase::Active);
    assert_eq!(lifecycle.on_timeout, OnTimeout::Kill);
    assert_eq!(lifecycle.timeout, Duration::from_secs(600));
    let deadline = lifecycle.deadline.expect("a deadline");
    let left = deadline.duration_since(before).unwrap();
    assert!(
        left > Duration::from_secs(590) && left <= Duration::from_secs(601),
        "{left:?}"
    );
    assert!(lifecycle.cap.is_some());

    sbx.set_timeout(Duration::from_secs(120)).await.unwrap();
    let moved = sbx.health().await.unwrap().lifecycle.unwrap();
    assert_eq!(moved.timeout, Duration::from_secs(120));
    assert!(moved.deadline.unwrap() < deadline);

    assert!(sbx.kill().await.unwrap());
    let err = sbx.health().await.expect_err("killed");
    assert_eq!(
        err.to_string(),
        "the sandbox handle is closed; create a new sandbox or connect to it again"
    );
}
