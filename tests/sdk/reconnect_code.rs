//! The reconnect contract for `run_code` (wire contract 2.7) against the
//! emulator's fault injection: a cell cut after `started` is re-attached
//! (`Reattach(last_seq + 1)`), never sent again. One test per fault row,
//! each asserting the variant or success, `classify()`, and the exact
//! output the caller saw: every line once, in order.

use crate::sdk_support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use rayito::error::{RetryPolicy, SandboxCode, TimeoutScope};
use rayito::{Execution, ExecutionEvent, RunCodeOptions, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState, Operation};
use sdk_support::{
    assert_stream_deadline, builder, emulator, lost_for_good_on_signal, patient_builder,
};
use tokio::sync::mpsc;

/// A cell that records each run in `/tmp/runs`, prints `n` numbered lines
/// `every_ms` apart, and ends with the value `'done'`.
fn lines_cell(n: u32, every_ms: u32) -> String {
    format!(
        "import time\nopen('/tmp/runs', 'a').write('x')\nfor i in range(1, {n} + 1):\n    print(f'line{{i}}', flush=True)\n    time.sleep({})\n'done'",
        f64::from(every_ms) / 1000.0
    )
}

fn expected_lines(n: u32) -> String {
    (1..=n).map(|i| format!("line{i}\n")).collect()
}

/// Runs `code` with `run_code_with`, calling `fault` once `after` lines
/// arrived; the outcome, everything the stdout callback saw, and when the
/// fault fired.
async fn cell_with_fault<F, Fut>(
    sbx: &Sandbox,
    code: &str,
    after: usize,
    fault: F,
) -> (Result<Execution, SandboxError>, String, Instant)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let options = RunCodeOptions::new()
        .timeout(Duration::from_secs(120))
        .on_stdout(move |message| {
            let _ = tx.send(message.line.clone());
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
    let outcome = sbx.run_code_with(code, options).await;
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

/// The cell ran to its end, once: all its lines in the result and in the
/// callback, its value, and one mark per run in `/tmp/runs`.
async fn assert_whole(
    sbx: &Sandbox,
    outcome: Result<Execution, SandboxError>,
    seen: &str,
    n: u32,
    runs: &str,
) {
    let execution = outcome.expect("the cell survives the fault");
    assert_eq!(execution.logs.stdout.concat(), expected_lines(n));
    assert_eq!(seen, expected_lines(n), "the callback saw each line once");
    assert_eq!(execution.text(), Some("'done'"));
    assert_eq!(execution.error, None);
    assert_eq!(
        sbx.files().read_to_string("/tmp/runs").await.unwrap(),
        runs,
        "the cell was never sent again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_mid_cell_is_reattached_and_never_re_run() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let (outcome, seen, _) = cell_with_fault(&sbx, &lines_cell(40, 25), 8, cut(&emu, &sbx)).await;
    assert_whole(&sbx, outcome, &seen, 40, "x").await;
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_mid_cell_stream_is_reattached_and_every_event_comes_once() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let mut events = sbx
        .run_code_stream(&lines_cell(40, 25), RunCodeOptions::new())
        .await
        .unwrap();
    let mut stdout = String::new();
    let mut cut = Some(cut(&emu, &sbx));
    let mut end = None;
    let mut results = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .expect("an event within 60 s")
    {
        match event.expect("the stream survives the cut") {
            ExecutionEvent::Stdout(message) => {
                stdout.push_str(&message.line);
                if stdout.lines().count() >= 8
                    && let Some(cut) = cut.take()
                {
                    cut().await;
                }
            }
            ExecutionEvent::Result(result) => results.push(result),
            ExecutionEvent::End { execution_count } => end = Some(execution_count),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(cut.is_none(), "the cut fired");
    assert_eq!(stdout, expected_lines(40));
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].text.as_deref(), Some("'done'"));
    assert!(end.is_some(), "the end event came, once");
    assert_eq!(sbx.files().read_to_string("/tmp/runs").await.unwrap(), "x");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_502_twice_503_and_429_mid_cell_are_waited_out() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let mut runs = String::new();
    for (count, status) in [(2, 502), (1, 503), (1, 429)] {
        // The connection is cut mid-cell, and the next calls through the
        // proxy (the poller's Health probes, the Reattach) meet the status.
        let faults = emu.faults().clone();
        let id = sbx.id().to_owned();
        let (outcome, seen, _) = cell_with_fault(&sbx, &lines_cell(30, 25), 6, move || {
            assert!(faults.proxy_status(count, status));
            assert!(faults.cut_connections(&id));
            std::future::ready(())
        })
        .await;
        runs.push('x');
        let execution = outcome.unwrap_or_else(|e| panic!("{count} x {status}: {e}"));
        assert_eq!(
            execution.logs.stdout.concat(),
            expected_lines(30),
            "{status}"
        );
        assert_eq!(seen, expected_lines(30), "{status}");
        assert_eq!(execution.text(), Some("'done'"));
        assert_eq!(
            sbx.files().read_to_string("/tmp/runs").await.unwrap(),
            runs,
            "{status}: the cell was never sent again"
        );
    }
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_resume_mid_cell_loses_no_line() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let pauser = sbx.clone();
    let generation = sbx.resume_generation();
    let (outcome, seen, _) = cell_with_fault(&sbx, &lines_cell(40, 25), 8, move || async move {
        assert!(pauser.pause().await.unwrap());
        pauser.resume().await.unwrap();
    })
    .await;
    assert_whole(&sbx, outcome, &seen, 40, "x").await;
    assert_eq!(emu.calls(Operation::SuspendMicrovm), 1);
    assert_eq!(sbx.resume_generation(), generation + 1);
    assert!(sbx.kill().await.unwrap());
}

/// The agent's Health, read directly (not through the proxy, so it never
/// wakes the sandbox).
async fn agent_health(emu: &Emulator, id: &str) -> rayito_agent::pb::HealthResponse {
    let addr = emu.agent_grpc_addr(id).expect("a live agent");
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = rayito_agent::pb::health_service_client::HealthServiceClient::new(channel);
    client
        .health(rayito_agent::pb::HealthRequest::default())
        .await
        .unwrap()
        .into_inner()
}

async fn agent_generation(emu: &Emulator, id: &str) -> u64 {
    agent_health(emu, id).await.resume_generation
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_auto_suspend_mid_cell_is_woken_by_auto_resume() {
    // Every idle policy counts as 2 s: a cell silent for longer is
    // suspended by the platform (not by any client), and the poller's
    // Health probe wakes it through auto-resume.
    let emu = Emulator::start(EmulatorConfig {
        max_idle_override: Some(Duration::from_secs(2)),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let sbx = builder(&emu).create().await.unwrap();
    let before = agent_generation(&emu, sbx.id()).await;
    let code = "import time\nopen('/tmp/runs', 'a').write('x')\nfor i in range(1, 4):\n    print(f'line{i}', flush=True)\nt = time.monotonic()\nwhile time.monotonic() - t < 4:\n    time.sleep(0.1)\nfor i in range(4, 7):\n    print(f'line{i}', flush=True)\n'done'";
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let options = RunCodeOptions::new().on_stdout(move |m| {
        let _ = tx.send(m.line.clone());
    });
    let outcome = sbx.run_code_with(code, options).await;
    let mut seen = String::new();
    while let Some(chunk) = rx.recv().await {
        seen.push_str(&chunk);
    }
    assert_whole(&sbx, outcome, &seen, 6, "x").await;
    assert!(
        agent_generation(&emu, sbx.id()).await > before,
        "the sandbox was suspended for idleness and resumed"
    );
    assert_eq!(emu.calls(Operation::SuspendMicrovm), 0);
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 0, "woken by traffic");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_killed_mid_cell_is_sandbox_not_found_within_a_second() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let (outcome, seen, fired_at) = cell_with_fault(&sbx, &lines_cell(200, 25), 5, move || {
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
    assert!(noticed < Duration::from_secs(1), "{noticed:?}");
    let info = err.classify();
    assert_eq!(info.kind, "sandbox_not_found");
    assert!(!info.retryable);
    assert_eq!(
        err.to_string(),
        format!(
            "the sandbox {} does not exist or has terminated; create a new sandbox",
            sbx.id()
        )
    );
    // What arrived before the kill arrived once, in order.
    assert!(expected_lines(200).starts_with(&seen), "{seen}");
    assert!(seen.lines().count() >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_duration_reached_mid_cell_is_sandbox_lifetime() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .timeout(Duration::from_secs(3))
        .create()
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let options = RunCodeOptions::new().on_stdout(move |m| {
        let _ = tx.send(m.line.clone());
    });
    let started = Instant::now();
    let err = sbx
        .run_code_with(&lines_cell(400, 25), options)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(15));
    let mut seen = String::new();
    while let Some(chunk) = rx.recv().await {
        seen.push_str(&chunk);
    }
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    let info = err.classify();
    assert_eq!(info.kind, "sandbox_lifetime");
    assert!(!info.retryable);
    assert_eq!(
        err.to_string(),
        format!(
            "the sandbox {} reached its maximum duration and was terminated; create a new sandbox, with a longer timeout if needed",
            sbx.id()
        )
    );
    assert!(
        !seen.is_empty() && expected_lines(400).starts_with(&seen),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_mid_cell_is_a_sandbox_timeout_not_a_reconnect() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .on_timeout(rayito::OnTimeout::Kill)
        .create()
        .await
        .unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let gets = emu.calls(Operation::GetMicrovm);
    let (outcome, seen, _) = cell_with_fault(&sbx, &lines_cell(200, 25), 5, move || {
        assert!(faults.expire_deadline(&id));
        std::future::ready(())
    })
    .await;
    let err = outcome.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Sandbox,
                ..
            }
        ),
        "{err:?}"
    );
    let info = err.classify();
    assert_eq!(info.kind, "timeout");
    assert!(!info.retryable);
    assert!(info.retry_with_larger_limits);
    assert_eq!(
        err.to_string(),
        "the sandbox reached its timeout (run_code); extend it with set_timeout before it expires, or create a new sandbox"
    );
    assert!(expected_lines(200).starts_with(&seen), "{seen}");
    // Not a cut: the poller never asked the control plane.
    assert_eq!(emu.calls(Operation::GetMicrovm), gets);
    let _ = sbx.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_reconnect_budget_mid_cell_is_connection_lost_with_attempts_and_elapsed() {
    let emu = emulator().await;
    let mut policy = RetryPolicy::default();
    policy.reconnect.total_budget = Some(Duration::from_secs(1));
    let sbx = builder(&emu).retry_policy(policy).create().await.unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let (outcome, seen, fired_at) = cell_with_fault(&sbx, &lines_cell(100, 25), 5, move || {
        assert!(faults.proxy_status(10_000, 502));
        assert!(faults.cut_connections(&id));
        std::future::ready(())
    })
    .await;
    let waited = fired_at.elapsed();
    emu.faults().clear();
    let err = outcome.unwrap_err();
    assert_eq!(
        err.sandbox_code(),
        Some(&SandboxCode::ConnectionLost),
        "{err:?}"
    );
    let info = err.classify();
    assert_eq!(info.kind, "connection_lost");
    assert!(info.retryable);
    assert!(err.meta().attempts() >= 2, "{}", err.meta().attempts());
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(10));
    // The poller's own wait, in the meta: the budget, give or take a probe.
    let elapsed = err.meta().elapsed().expect("the wait is in the meta");
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed <= waited,
        "{elapsed:?} of {waited:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(
            "lost the connection to the sandbox during run_code and it did not come back within "
        ),
        "{text}"
    );
    assert!(expected_lines(100).starts_with(&seen), "{seen}");
    assert!(sbx.kill().await.unwrap());
}

/// Waits (bounded) until the emulator says the MicroVM is `state`.
async fn wait_state(emu: &Emulator, id: &str, state: MicrovmState) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while emu.state(id) != Some(state) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{id} never became {state:?}"));
}

fn lifecycle_of(health: &rayito_agent::pb::HealthResponse) -> (i32, u32, u64) {
    let l = health.lifecycle.as_ref().expect("a managed lifecycle");
    (l.phase, l.extensions, l.timeout_ms)
}

/// After a resume (3.3) and a connect (3.4), `SetTimeout(AT_LEAST)` is sent
/// only when the lifecycle phase asks for it: a sandbox resumed past its
/// timeout (RESUME_GRACE) is re-opened for its own timeout; an ordinary
/// resume leaves the timeout alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_and_connect_reopen_a_sandbox_only_past_its_timeout() {
    use rayito_agent::pb::LifecyclePhase;
    let emu = emulator().await;
    let sbx = builder(&emu)
        .on_timeout(rayito::OnTimeout::Pause)
        .timeout(Duration::from_secs(600))
        .max_lifetime(Duration::from_secs(3_600))
        .create()
        .await
        .unwrap();
    let id = sbx.id().to_owned();
    let active = LifecyclePhase::Active as i32;

    // An ordinary pause and resume: nothing is sent.
    assert!(sbx.pause().await.unwrap());
    sbx.resume().await.unwrap();
    assert_eq!(
        lifecycle_of(&agent_health(&emu, &id).await),
        (active, 0, 600_000)
    );

    // Past its timeout every call but Health and SetTimeout is refused...
    assert!(emu.faults().expire_deadline(&id));
    let err = sbx.commands().run("echo refused").await.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Sandbox,
                ..
            }
        ),
        "{err:?}"
    );
    // ... and a resume after it re-opens it for its own timeout.
    let _ = sbx.pause().await.unwrap();
    wait_state(&emu, &id, MicrovmState::Suspended).await;
    sbx.resume().await.unwrap();
    assert_eq!(
        lifecycle_of(&agent_health(&emu, &id).await),
        (active, 1, 600_000)
    );
    let back = sbx.commands().run("echo back").await.unwrap();
    assert_eq!(back.stdout, "back\n");

    // The same through connect (its readiness probe wakes it by
    // auto-resume, into RESUME_GRACE).
    assert!(emu.faults().expire_deadline(&id));
    let _ = sbx.pause().await.unwrap();
    wait_state(&emu, &id, MicrovmState::Suspended).await;
    let again = builder(&emu)
        .connect(&id, sbx.access_token().clone())
        .await
        .expect("connect re-opens it before its first authenticated call");
    assert_eq!(
        lifecycle_of(&agent_health(&emu, &id).await),
        (active, 2, 600_000)
    );
    assert_eq!(
        again.commands().run("echo again").await.unwrap().stdout,
        "again\n"
    );
    assert!(again.kill().await.unwrap());
}

/// A re-open never asks beyond the cap: with the default cap (timeout +
/// 60 s, of which the agent keeps 60 s back) the timeout is clamped to
/// what is left of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_is_clamped_to_the_cap() {
    use rayito_agent::pb::LifecyclePhase;
    let emu = emulator().await;
    let sbx = builder(&emu)
        .on_timeout(rayito::OnTimeout::Pause)
        .timeout(Duration::from_secs(600))
        .create()
        .await
        .unwrap();
    let id = sbx.id().to_owned();
    assert!(emu.faults().expire_deadline(&id));
    let _ = sbx.pause().await.unwrap();
    wait_state(&emu, &id, MicrovmState::Suspended).await;
    sbx.resume().await.unwrap();
    let (phase, extensions, timeout_ms) = lifecycle_of(&agent_health(&emu, &id).await);
    assert_eq!((phase, extensions), (LifecyclePhase::Active as i32, 1));
    assert!(
        (500_000..600_000).contains(&timeout_ms),
        "{timeout_ms} ms: the cap's remainder less the margin"
    );
    assert_eq!(sbx.commands().run("echo ok").await.unwrap().stdout, "ok\n");
    assert!(sbx.kill().await.unwrap());
}

/// The agent dropped what the cell printed while the client was away (more
/// than its 4 MiB log): the cell ends with `NotFound`
/// (`sdk.cell_output_dropped`), after the lines seen before the cut, and is
/// not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_dropped_while_cut_is_not_found_and_the_cell_is_not_re_run() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    // 5 MiB right after the cut, while the poller meets four 502s.
    let code = "import time\nopen('/tmp/runs', 'a').write('x')\nprint('line1', flush=True)\ntime.sleep(0.5)\nfor i in range(80):\n    print('y' * 65535, flush=True)\n'done'";
    let (outcome, seen, _) = cell_with_fault(&sbx, code, 1, move || {
        assert!(faults.proxy_status(4, 502));
        assert!(faults.cut_connections(&id));
        std::future::ready(())
    })
    .await;
    let err = outcome.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    let info = err.classify();
    assert_eq!(info.kind, "not_found");
    assert!(!info.retryable);
    assert_eq!(
        err.to_string(),
        "the run_code cell ran on after the connection was cut, but the agent already dropped the output it produced meanwhile (more than its 4 MiB log); the cell was not run again, run it again if still needed"
    );
    assert_eq!(
        err.meta().server_message(),
        Some("execution output already discarded")
    );
    assert_eq!(seen, "line1\n");
    assert_eq!(sbx.files().read_to_string("/tmp/runs").await.unwrap(), "x");
    assert!(sbx.kill().await.unwrap());
}

/// The client came back after the agent's retention of the ended cell (30 s
/// by default, 1 s here): the agent no longer keeps it, and the cell ends
/// with `NotFound` (`sdk.cell_expired`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_expired_while_cut_is_not_found_and_not_re_run() {
    let retained = Duration::from_secs(1);
    let emu = Emulator::start(EmulatorConfig {
        agent_retained_after_end: retained,
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let sbx = builder(&emu).create().await.unwrap();
    let faults = emu.faults().clone();
    let id = sbx.id().to_owned();
    let code = "import time\nopen('/tmp/runs', 'a').write('x')\nprint('line1', flush=True)\ntime.sleep(0.5)\nprint('line2', flush=True)";
    let (outcome, seen, _) = cell_with_fault(&sbx, code, 1, move || async move {
        // Every call through the proxy fails until the ended cell's
        // retention is over (the cell ends 0.5 s after the cut; 3 s of
        // margin for a loaded host; the reconnect budget is 60 s).
        assert!(faults.proxy_status(100_000, 502));
        assert!(faults.cut_connections(&id));
        tokio::spawn(async move {
            tokio::time::sleep(retained + Duration::from_secs(3)).await;
            faults.clear();
        });
    })
    .await;
    let err = outcome.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert!(!err.classify().retryable);
    assert_eq!(
        err.to_string(),
        "the run_code cell ran on after the connection was cut, but the agent no longer keeps it, so its output from then on is lost; the cell was not run again, run it again if still needed"
    );
    assert_eq!(err.meta().server_message(), Some("execution not found"));
    assert_eq!(seen, "line1\n");
    assert_eq!(sbx.files().read_to_string("/tmp/runs").await.unwrap(), "x");
    assert!(sbx.kill().await.unwrap());
}

/// The cell's deadline bounds the reconnect wait too: a cut after which
/// the sandbox never answers again ends `run_code` when the cell's stream
/// would have ended (its 1 s timeout plus the 15 s slack), with the stream
/// deadline's `Timeout { Request }`, not after a reconnect budget of
/// minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cell_deadline_bounds_the_reconnect_wait() {
    let emu = emulator().await;
    let sbx = patient_builder(&emu).create().await.unwrap();
    let (signal, lost) = lost_for_good_on_signal(&emu, &sbx);
    let options = RunCodeOptions::new()
        .timeout(Duration::from_secs(1))
        .on_stdout(move |_| {
            let _ = signal.send(());
        });
    let started = Instant::now();
    let cell = "import time\nprint('up', flush=True)\ntime.sleep(30)";
    let (outcome, ()) = tokio::join!(sbx.run_code_with(cell, options), lost);
    let waited = started.elapsed();
    emu.faults().clear();
    let err = outcome.unwrap_err();
    assert_stream_deadline(&err, "run_code", Duration::from_secs(16), waited);
    assert!(sbx.kill().await.unwrap());
}
