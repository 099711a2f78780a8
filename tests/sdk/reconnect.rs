//! The reconnect contract (wire contract 2.7) against the emulator's fault
//! injection: one test per fault row, each asserting the variant,
//! `classify()` and what the caller saw (for commands: every line exactly
//! once, in order).

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::error::RetryPolicy;
use rayito::{CommandOptions, Sandbox, SandboxError};
use rayito_emulator::{Emulator, Operation};
use sdk_support::{
    assert_stream_deadline, builder, emulator, lost_for_good_on_signal, patient_builder,
};
use tokio::sync::mpsc;

/// `n` numbered lines, one every `every_ms`.
fn lines_command(n: u32, every_ms: u32) -> String {
    format!(
        "for i in $(seq 1 {n}); do echo line$i; sleep {}; done",
        f64::from(every_ms) / 1000.0
    )
}

fn expected_lines(n: u32) -> String {
    (1..=n).map(|i| format!("line{i}\n")).collect()
}

/// Runs `cmd` on `sbx`, calling `fault` once `after` lines arrived; the
/// outcome and everything the stdout callback saw.
async fn run_with_fault<F, Fut>(
    sbx: &Sandbox,
    cmd: &str,
    after: usize,
    fault: F,
) -> (Result<rayito::CommandResult, SandboxError>, String, Instant)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let options = CommandOptions::new()
        .timeout(Duration::from_secs(60))
        .on_stdout(move |chunk| {
            let _ = tx.send(chunk.to_owned());
        });
    let seen = tokio::spawn(async move {
        let mut text = String::new();
        let mut fault = Some(fault);
        let mut fired_at = None;
        while let Some(chunk) = rx.recv().await {
            text.push_str(&chunk);
            if text.lines().count() >= after
                && let Some(fault) = fault.take()
            {
                fired_at = Some(Instant::now());
                fault().await;
            }
        }
        (text, fired_at.expect("the fault fired"))
    });
    let outcome = sbx.commands().run_with(cmd, options).await;
    let (text, fired_at) = seen.await.unwrap();
    (outcome, text, fired_at)
}

fn cut(emu: &Emulator, sbx: &Sandbox) -> impl FnOnce() -> std::future::Ready<()> + Send + 'static {
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    move || {
        assert!(faults.cut_connections(&id));
        std::future::ready(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_mid_command_loses_no_line_and_repeats_none() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let (outcome, seen, _) =
        run_with_fault(&sbx, &lines_command(60, 20), 10, cut(&emu, &sbx)).await;
    let result = outcome.expect("the command survives the cut");
    assert_eq!(result.stdout, expected_lines(60));
    assert_eq!(seen, expected_lines(60), "the callback saw each line once");
    assert_eq!(result.exit_code, 0);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_502_twice_503_and_429_are_waited_out() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    sbx.files().write("/tmp/r.txt", "kept").await.unwrap();
    for (count, status) in [(2, 502), (1, 503), (1, 504), (1, 429)] {
        assert!(emu.faults().proxy_status(count, status));
        let entries = sbx
            .files()
            .list("/tmp")
            .await
            .unwrap_or_else(|e| panic!("{count} x {status}: {e}"));
        assert!(entries.iter().any(|e| e.path == "/tmp/r.txt"));
    }
    // A server stream opening (files.read) too.
    assert!(emu.faults().proxy_status(2, 502));
    assert_eq!(
        sbx.files().read_to_string("/tmp/r.txt").await.unwrap(),
        "kept"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_reconnect_budget_is_connection_lost_with_attempts() {
    let emu = emulator().await;
    let mut policy = RetryPolicy::default();
    policy.reconnect.total_budget = Some(Duration::from_secs(1));
    let sbx = builder(&emu).retry_policy(policy).create().await.unwrap();
    assert!(emu.faults().proxy_status(10_000, 502));
    let started = Instant::now();
    let err = sbx.files().list("/tmp").await.unwrap_err();
    let waited = started.elapsed();
    emu.faults().clear();
    assert!(
        matches!(
            err.sandbox_code(),
            Some(rayito::error::SandboxCode::ConnectionLost)
        ),
        "{err:?}"
    );
    let info = err.classify();
    assert_eq!(info.kind, "connection_lost");
    assert!(info.retryable);
    assert!(err.meta().attempts() >= 2, "{}", err.meta().attempts());
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(10));
    let text = err.to_string();
    assert!(
        text.starts_with(
            "lost the connection to the sandbox during files.list and it did not come back within "
        ),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            " ({} health probes); retry later, or check that the sandbox is still running",
            err.meta().attempts()
        )),
        "{text}"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_killed_mid_command_is_sandbox_not_found_within_a_second() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let (outcome, _, fired_at) = run_with_fault(&sbx, &lines_command(200, 20), 5, move || {
        assert!(faults.kill_agent(&id));
        std::future::ready(())
    })
    .await;
    let noticed = fired_at.elapsed();
    let err = outcome.unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert!(!err.classify().retryable);
    assert!(noticed < Duration::from_secs(1), "{noticed:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "the sandbox {} does not exist or has terminated; create a new sandbox",
            sbx.id()
        )
    );
    // A unary call on the same handle says the same at once.
    let started = Instant::now();
    let err = sbx.files().list("/tmp").await.unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_resume_mid_command_loses_no_line() {
    let emu = emulator().await;
    // Auto-resume is on (the default idle policy), yet the command's
    // stream sleeps while this handle's pause holds, and reads on after
    // the resume.
    let sbx = builder(&emu).create().await.unwrap();
    let pauser = sbx.clone();
    let generation = sbx.resume_generation();
    let (outcome, seen, _) = run_with_fault(&sbx, &lines_command(40, 25), 8, move || async move {
        assert!(pauser.pause().await.unwrap());
        pauser.resume().await.unwrap();
    })
    .await;
    let result = outcome.expect("the command survives the suspension");
    assert_eq!(result.stdout, expected_lines(40));
    assert_eq!(seen, expected_lines(40));
    assert_eq!(emu.calls(Operation::SuspendMicrovm), 1);
    assert_eq!(sbx.resume_generation(), generation + 1);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_by_someone_else_mid_command_is_woken_by_auto_resume() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    // Another client (no shared pause mark) suspends it; the poller's
    // Health wakes it through auto-resume (so the other client's wait for
    // SUSPENDED may well miss it: its outcome is not what is tested).
    let other = builder(&emu)
        .ready_timeout(Duration::from_secs(2))
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap();
    let (outcome, seen, _) = run_with_fault(&sbx, &lines_command(40, 25), 8, move || {
        tokio::spawn(async move {
            let _ = other.pause().await;
        });
        std::future::ready(())
    })
    .await;
    let result = outcome.expect("the command survives the suspension");
    assert_eq!(result.stdout, expected_lines(40));
    assert_eq!(seen, expected_lines(40));
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 0, "woken by traffic");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_sandbox_paused_without_auto_resume_says_call_resume() {
    let emu = emulator().await;
    let sbx = builder(&emu).no_idle_policy().create().await.unwrap();
    assert!(sbx.pause().await.unwrap());
    let started = Instant::now();
    let err = sbx.files().list("/tmp").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(matches!(err, SandboxError::SandboxState { .. }), "{err:?}");
    assert!(err.classify().retryable);
    assert_eq!(
        err.to_string(),
        "the sandbox is suspended; call resume() on the handle, then retry"
    );
    sbx.resume().await.unwrap();
    assert!(sbx.files().list("/tmp").await.is_ok());
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_duration_reached_mid_command_is_sandbox_lifetime() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .timeout(Duration::from_secs(3))
        .create()
        .await
        .unwrap();
    let started = Instant::now();
    let err = sbx
        .commands()
        .run(&lines_command(400, 25))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!err.classify().retryable);
    // The emulator calls `/terminate` at the maximum duration, and the
    // agent then kills the command: on a loaded machine that SIGKILL's end
    // event can reach the SDK before the connection closes, and the command
    // ends as killed (137) rather than through the reconnect verdict. Both
    // say what happened; the verdict, when it is the one, is exact.
    match &err {
        SandboxError::SandboxLifetime { .. } => assert_eq!(
            err.to_string(),
            format!(
                "the sandbox {} reached its maximum duration and was terminated; create a new sandbox, with a longer timeout if needed",
                sbx.id()
            )
        ),
        SandboxError::CommandExit { exit_code, .. } => assert_eq!(*exit_code, 137),
        other => panic!("unexpected end at the maximum duration: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_terminate_is_retried() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    emu.faults().throttle(Operation::TerminateMicrovm, 2, 0);
    assert!(sbx.kill().await.unwrap());
    assert_eq!(emu.calls(Operation::TerminateMicrovm), 3);
}

/// Every future of the reconnecting calls stays `Send` (compile time).
#[allow(dead_code)]
fn reconnecting_futures_are_send(sbx: Sandbox) {
    fn send<T: Send>(_: T) {}
    send(async move {
        let _ = sbx.commands().run("true").await;
        let _ = sbx.files().list("/").await;
    });
}

// The run_code rows live in tests/sdk/reconnect_code.rs.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_mid_command_is_a_sandbox_timeout_not_a_reconnect() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .on_timeout(rayito::OnTimeout::Kill)
        .create()
        .await
        .unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let (outcome, _, _) = run_with_fault(&sbx, &lines_command(200, 20), 5, move || {
        assert!(faults.expire_deadline(&id));
        std::future::ready(())
    })
    .await;
    let err = outcome.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: rayito::error::TimeoutScope::Sandbox,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.classify().retryable);
    assert_eq!(
        err.to_string(),
        "the sandbox reached its timeout (command for); extend it with set_timeout before it expires, or create a new sandbox"
    );
    let _ = sbx.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_cut_together_share_one_poller_and_all_succeed() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let gets = emu.calls(Operation::GetMicrovm);
    // Every one of the 8 calls meets a 502 first.
    assert!(emu.faults().proxy_status(8, 502));
    let files = sbx.files();
    let calls = (0..8).map(|_| files.list("/tmp"));
    for outcome in futures_util::future::join_all(calls).await {
        outcome.expect("each call is sent again once the sandbox is back");
    }
    // One poller, not eight: at most a couple of control-plane checks.
    let checks = emu.calls(Operation::GetMicrovm) - gets;
    assert!((1..=3).contains(&checks), "{checks} GetMicrovm calls");
    assert!(sbx.kill().await.unwrap());
}

/// The command's deadline bounds the reconnect wait too: a cut after which
/// the sandbox never answers again ends the call when the command's stream
/// would have ended (its 1 s timeout plus the 15 s slack), with the stream
/// deadline's `Timeout { Request }`, not after a reconnect budget of
/// minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_deadline_bounds_the_reconnect_wait() {
    let emu = emulator().await;
    let sbx = patient_builder(&emu).create().await.unwrap();
    let (signal, lost) = lost_for_good_on_signal(&emu, &sbx);
    let options = CommandOptions::new()
        .timeout(Duration::from_secs(1))
        .on_stdout(move |_| {
            let _ = signal.send(());
        });
    let started = Instant::now();
    let commands = sbx.commands();
    let (outcome, ()) = tokio::join!(commands.run_with("echo up; sleep 30", options), lost);
    let waited = started.elapsed();
    emu.faults().clear();
    let err = outcome.unwrap_err();
    assert_stream_deadline(&err, "commands.run", Duration::from_secs(16), waited);
    assert!(sbx.kill().await.unwrap());
}

/// `SandboxBuilder::reconnect_timeout` is the handle's reconnect budget:
/// the same held cut (four proxy 502s in a row) is waited out by a handle
/// with the default budget (60 s) and ends `connection_lost` on one whose
/// budget is 1 s, even when its client's policy is patient (the shorthand
/// wins, for that sandbox only). Zero is refused before any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_timeout_is_the_handles_reconnect_budget() {
    let emu = emulator().await;
    let patient = patient_builder(&emu).create().await.unwrap();
    let hasty = patient_builder(&emu)
        .reconnect_timeout(Duration::from_secs(1))
        .create()
        .await
        .unwrap();

    assert!(emu.faults().proxy_status(4, 502));
    patient
        .files()
        .list("/tmp")
        .await
        .expect("the patient handle waits the cut out");
    emu.faults().clear();

    assert!(emu.faults().proxy_status(4, 502));
    let err = hasty.files().list("/tmp").await.unwrap_err();
    emu.faults().clear();
    assert!(
        matches!(
            err.sandbox_code(),
            Some(rayito::error::SandboxCode::ConnectionLost)
        ),
        "{err:?}"
    );
    // Once the cut is gone the hasty handle works again.
    hasty.files().list("/tmp").await.unwrap();

    // Zero is refused before any call, by create and by connect.
    let runs = emu.calls(Operation::RunMicrovm);
    let gets = emu.calls(Operation::GetMicrovm);
    let zero = || builder(&emu).reconnect_timeout(Duration::ZERO);
    for err in [
        zero().create().await.unwrap_err(),
        zero()
            .connect(hasty.id(), hasty.access_token().clone())
            .await
            .unwrap_err(),
    ] {
        assert_eq!(
            err.to_string(),
            "invalid reconnect_timeout: reconnect timeout must be positive; pass a positive duration"
        );
    }
    assert_eq!(emu.calls(Operation::RunMicrovm), runs);
    assert_eq!(emu.calls(Operation::GetMicrovm), gets);
    assert!(patient.kill().await.unwrap());
    assert!(hasty.kill().await.unwrap());
}
