//! The reconnect contract (wire contract 2.7) for streams that outlive one
//! call: background commands, terminals, watches and file reads, against
//! the emulator's fault injection. One test per fault row, each asserting
//! the variant (or success), `classify()`, and what the caller saw: every
//! line or byte exactly once, in order.

mod sdk_support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use rayito::{CommandEvent, CommandHandle, CommandOptions, CommandResult, Sandbox, SandboxError};
use rayito_agent::emulator::{Emulator, EmulatorConfig, Faults, MicrovmState, Operation};
use sdk_support::{builder, emulator};

/// How long any one event may take on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(90);

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

/// An emulator whose idle policies suspend after `idle` without traffic
/// (AWS's floor is 60 s).
async fn idle_emulator(idle: Duration) -> Emulator {
    Emulator::start(EmulatorConfig {
        max_idle_override: Some(idle),
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts")
}

/// What a background command's stream gave its reader.
struct Seen {
    /// Stdout, in the order received.
    text: String,
    /// Every sequence number received.
    seqs: Vec<u64>,
    /// `OutputLost` markers, by first lost seq.
    lost: Vec<u64>,
}

/// Reads `handle` to its end, calling `fault` once `after` lines arrived;
/// then `wait()`'s outcome, what was seen, and when the fault fired.
async fn drain_with_fault(
    mut handle: CommandHandle,
    after: usize,
    fault: impl FnOnce(),
) -> (Result<CommandResult, SandboxError>, Seen, Option<Instant>) {
    let mut seen = Seen {
        text: String::new(),
        seqs: Vec::new(),
        lost: Vec::new(),
    };
    let mut fault = Some(fault);
    let mut fired_at = None;
    loop {
        let event = tokio::time::timeout(PATIENCE, handle.next())
            .await
            .expect("an event in time");
        match event {
            Some(Ok(CommandEvent::Stdout { data, seq })) => {
                seen.seqs.push(seq);
                seen.text.push_str(std::str::from_utf8(&data).unwrap());
                if seen.text.lines().count() >= after
                    && let Some(fault) = fault.take()
                {
                    fired_at = Some(Instant::now());
                    fault();
                }
            }
            Some(Ok(CommandEvent::OutputLost { from_seq })) => seen.lost.push(from_seq),
            Some(Ok(other)) => panic!("unexpected {other:?}"),
            // The error is also what `wait` returns.
            Some(Err(_)) | None => break,
        }
    }
    let outcome = tokio::time::timeout(PATIENCE, handle.wait())
        .await
        .expect("wait in time");
    (outcome, seen, fired_at)
}

async fn spawn(sbx: &Sandbox, cmd: &str) -> CommandHandle {
    sbx.commands()
        .spawn(cmd, CommandOptions::new().timeout(Duration::from_secs(120)))
        .await
        .expect("spawned")
}

fn assert_in_order_once(seen: &Seen) {
    assert!(seen.seqs.windows(2).all(|w| w[0] < w[1]), "{:?}", seen.seqs);
}

/// Waits until `probe` holds, checking every 50 ms (an event seen by
/// polling; bounded by `PATIENCE`).
async fn until(what: &str, mut probe: impl FnMut() -> bool) {
    let started = Instant::now();
    while !probe() {
        assert!(started.elapsed() < PATIENCE, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn cut_now(faults: &Faults, id: &str) {
    assert!(faults.cut_connections(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_a_cut_loses_no_line_and_repeats_none() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let handle = spawn(&sbx, &lines_command(60, 20)).await;
    let (faults, id) = (emu.faults().clone(), sbx.id().to_owned());
    let (outcome, seen, _) = drain_with_fault(handle, 10, || cut_now(&faults, &id)).await;
    let result = outcome.expect("the command survives the cut");
    assert_eq!(seen.text, expected_lines(60));
    assert_eq!(result.stdout, expected_lines(60));
    assert!(!result.truncated);
    assert!(seen.lost.is_empty());
    assert_in_order_once(&seen);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_proxy_502_twice_503_and_429_after_a_cut_are_waited_out() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    for (count, status) in [(2, 502), (1, 503), (1, 429)] {
        let handle = spawn(&sbx, &lines_command(30, 20)).await;
        let (faults, id) = (emu.faults().clone(), sbx.id().to_owned());
        // The stream is cut; its way back meets the proxy's refusals.
        let (outcome, seen, _) = drain_with_fault(handle, 5, || {
            assert!(faults.proxy_status(count, status));
            cut_now(&faults, &id);
        })
        .await;
        let result = outcome.unwrap_or_else(|e| panic!("{count} x {status}: {e}"));
        assert_eq!(seen.text, expected_lines(30), "{count} x {status}");
        assert_eq!(result.stdout, expected_lines(30));
        assert_in_order_once(&seen);
    }
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_the_agent_killed_is_sandbox_not_found_within_a_second() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let handle = spawn(&sbx, &lines_command(400, 20)).await;
    let (faults, id) = (emu.faults().clone(), sbx.id().to_owned());
    let (outcome, seen, fired_at) = drain_with_fault(handle, 5, || {
        assert!(faults.kill_agent(&id));
    })
    .await;
    let noticed = fired_at.expect("the fault fired").elapsed();
    let err = outcome.unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert_eq!(err.classify().kind, "sandbox_not_found");
    assert!(!err.classify().retryable);
    assert!(noticed < Duration::from_secs(1), "{noticed:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "the sandbox {} does not exist or has terminated; create a new sandbox",
            sbx.id()
        )
    );
    // What arrived is a prefix of the output, each line once.
    assert!(expected_lines(400).starts_with(&seen.text), "{}", seen.text);
    assert!(seen.text.lines().count() >= 5);
    assert_in_order_once(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_a_pause_sleeps_without_waking_the_sandbox_then_reads_on() {
    let emu = emulator().await;
    // Auto-resume is on (the default idle policy): a Health probe from the
    // stream would wake the sandbox. It must not.
    let sbx = builder(&emu).create().await.unwrap();
    let generation = sbx.resume_generation();
    let handle = spawn(&sbx, &lines_command(40, 50)).await;
    let pauser = sbx.clone();
    let emu_id = sbx.id().to_owned();
    let (pause_tx, pause_rx) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(drain_with_fault(handle, 8, move || {
        let _ = pause_tx.send(());
    }));
    pause_rx.await.unwrap();
    assert!(pauser.pause().await.unwrap());
    // The stream is asleep: it asks the control plane (GetMicrovm) and
    // nothing else. Once it has asked while SUSPENDED, the sandbox is still
    // suspended and nobody resumed it.
    let checks = emu.calls(Operation::GetMicrovm);
    until("the sleeping stream checks the control plane", || {
        emu.calls(Operation::GetMicrovm) > checks
    })
    .await;
    assert_eq!(
        emu.state(&emu_id),
        Some(MicrovmState::Suspended),
        "the stream woke the sandbox"
    );
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 0);
    pauser.resume().await.unwrap();
    let (outcome, seen, _) = reader.await.unwrap();
    let result = outcome.expect("the command survives the pause");
    assert_eq!(seen.text, expected_lines(40));
    assert_eq!(result.stdout, expected_lines(40));
    assert_in_order_once(&seen);
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 1);
    assert_eq!(sbx.resume_generation(), generation + 1);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_an_idle_auto_suspend_sleeps_until_traffic_wakes_it() {
    // Longer than the sleeping stream's 5 s between control-plane checks,
    // so that it sees the sandbox running before it idles again.
    let emu = idle_emulator(Duration::from_secs(8)).await;
    let sbx = builder(&emu).create().await.unwrap();
    let id = sbx.id().to_owned();
    // Quiet until the test wakes it: the sandbox goes idle and suspends.
    let handle = spawn(
        &sbx,
        "echo a1; echo a2; while [ ! -e /tmp/wake ]; do sleep 0.1; done; echo b1; echo b2",
    )
    .await;
    let reader = tokio::spawn(drain_with_fault(handle, usize::MAX, || {}));
    until("the idle sandbox suspends", || {
        emu.state(&id) == Some(MicrovmState::Suspended)
    })
    .await;
    // The background stream sleeps: it checks the control plane, and the
    // sandbox stays suspended.
    let checks = emu.calls(Operation::GetMicrovm);
    until("the sleeping stream checks the control plane", || {
        emu.calls(Operation::GetMicrovm) > checks
    })
    .await;
    assert_eq!(emu.state(&id), Some(MicrovmState::Suspended));
    // A new request wakes it (auto-resume); the stream reads on.
    sbx.files().write("/tmp/wake", "").await.unwrap();
    let (outcome, seen, _) = reader.await.unwrap();
    let result = outcome.expect("the command survives the idle suspension");
    assert_eq!(seen.text, "a1\na2\nb1\nb2\n");
    assert_eq!(result.stdout, "a1\na2\nb1\nb2\n");
    assert_in_order_once(&seen);
    assert_eq!(
        emu.calls(Operation::SuspendMicrovm),
        0,
        "suspended for idleness"
    );
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 0, "woken by traffic");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_an_idle_auto_suspend_is_woken_by_the_command_itself() {
    let emu = idle_emulator(Duration::from_secs(2)).await;
    let sbx = builder(&emu).create().await.unwrap();
    // Silent for 5 s: the sandbox suspends for idleness in the middle; the
    // foreground command wakes it (auto-resume) and reads on.
    let result = sbx
        .commands()
        .run("echo a1; echo a2; sleep 5; echo b1; echo b2")
        .await
        .expect("the command survives the idle suspension");
    assert_eq!(result.stdout, "a1\na2\nb1\nb2\n");
    assert!(!result.truncated);
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 0, "woken by traffic");
    // It was suspended and resumed meanwhile: a new handle sees the
    // agent's resume generation moved on.
    let other = builder(&emu)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap();
    assert!(other.resume_generation() >= 1, "never suspended");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_the_maximum_duration_reached_is_sandbox_lifetime() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .timeout(Duration::from_secs(4))
        .create()
        .await
        .unwrap();
    let handle = spawn(&sbx, &lines_command(600, 25)).await;
    let started = Instant::now();
    let (outcome, seen, _) = drain_with_fault(handle, usize::MAX, || {}).await;
    assert!(started.elapsed() < Duration::from_secs(30));
    let err = outcome.unwrap_err();
    assert!(!err.classify().retryable);
    // As for a foreground command: the agent's SIGKILL at `/terminate` may
    // reach the stream before the connection closes (exit 137); the
    // reconnect verdict, when it is the one, is exact.
    match &err {
        SandboxError::SandboxLifetime { .. } => {
            assert_eq!(err.classify().kind, "sandbox_lifetime");
            assert_eq!(
                err.to_string(),
                format!(
                    "the sandbox {} reached its maximum duration and was terminated; create a new sandbox, with a longer timeout if needed",
                    sbx.id()
                )
            );
        }
        SandboxError::CommandExit { exit_code, .. } => assert_eq!(*exit_code, 137),
        other => panic!("unexpected end at the maximum duration: {other:?}"),
    }
    assert!(expected_lines(600).starts_with(&seen.text));
    assert_in_order_once(&seen);
}

/// Writes 3 MB (three times the agent's 1 MiB ring) once `/tmp/flood`
/// exists, then `flooded`, then `last` once `/tmp/go-on` exists.
const FLOOD: &str = "echo first; while [ ! -e /tmp/flood ]; do sleep 0.05; done; head -c 3000000 /dev/zero | tr '\\0' x; echo; touch /tmp/flooded; while [ ! -e /tmp/go-on ]; do sleep 0.05; done; echo last";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_output_the_ring_dropped_during_a_cut_is_marked_as_lost() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let mut handle = spawn(&sbx, FLOOD).await;
    let first = tokio::time::timeout(PATIENCE, handle.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        first,
        CommandEvent::Stdout {
            data: b"first\n".to_vec(),
            seq: 1
        }
    );
    // Cut while nobody reads; the process then overflows the ring before
    // the handle is polled again (and re-subscribes from seq 2).
    assert!(emu.faults().cut_connections(sbx.id()));
    sbx.files().write("/tmp/flood", "").await.unwrap();
    let files = sbx.files();
    until_async("the flood is written", || files.exists("/tmp/flooded")).await;
    let lost = tokio::time::timeout(PATIENCE, handle.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(lost, CommandEvent::OutputLost { from_seq: 2 });
    assert!(handle.output_lost());
    // Reading on: new output only, each chunk once.
    sbx.files().write("/tmp/go-on", "").await.unwrap();
    let (outcome, seen, _) = drain_with_fault(handle, usize::MAX, || {}).await;
    let result = outcome.expect("the command ends normally");
    assert_eq!(seen.text, "last\n");
    assert!(seen.lost.is_empty());
    assert_eq!(result.stdout, "first\nlast\n");
    assert!(result.truncated, "the gap is reported");
    assert!(sbx.kill().await.unwrap());
}

/// As [`FLOOD`], but ends after the flood (the foreground reader is held
/// until then, so nothing after it could be told apart from the gap).
const FLOOD_THEN_END: &str = "echo first; while [ ! -e /tmp/flood ]; do sleep 0.05; done; head -c 3000000 /dev/zero | tr '\\0' x; echo; touch /tmp/flooded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_output_the_ring_dropped_during_a_cut_sets_truncated() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let (faults, id) = (emu.faults().clone(), sbx.id().to_owned());
    let flooder = sbx.clone();
    let mut cut = Some(move || {
        // Inside the command's own reader: cut, then hold the reader until
        // the process has overflowed the ring (another task drives it).
        assert!(faults.cut_connections(&id));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        tokio::spawn(async move {
            flooder.files().write("/tmp/flood", "").await.unwrap();
            let files = flooder.files();
            until_async("the flood is written", || files.exists("/tmp/flooded")).await;
            let _ = done_tx.send(());
        });
        tokio::task::block_in_place(|| done_rx.recv().unwrap());
    });
    let result = sbx
        .commands()
        .run_with(
            FLOOD_THEN_END,
            CommandOptions::new().on_stdout(move |_| {
                if let Some(cut) = cut.take() {
                    cut();
                }
            }),
        )
        .await
        .expect("the command ends normally");
    // The process ended before the reader was back: only its end is new.
    assert_eq!(result.stdout, "first\n");
    assert!(result.truncated, "the gap is reported");
    assert!(sbx.kill().await.unwrap());
}

/// Waits until `probe` answers `Ok(true)`, every 50 ms.
async fn until_async<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, SandboxError>>,
{
    let started = Instant::now();
    while !probe().await.unwrap_or(false) {
        assert!(started.elapsed() < PATIENCE, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
