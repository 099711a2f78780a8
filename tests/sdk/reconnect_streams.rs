//! The reconnect contract (wire contract 2.7) for streams that outlive one
//! call: background commands, terminals, watches and file reads, against
//! the emulator's fault injection. One test per fault row, each asserting
//! the variant (or success), `classify()`, and what the caller saw: every
//! line or byte exactly once, in order.

use crate::sdk_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use rayito::{CommandEvent, CommandHandle, CommandOptions, CommandResult, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, Faults, MicrovmState, Operation};
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
    loop {
        let last = probe().await;
        if matches!(last, Ok(true)) {
            return;
        }
        // The last answer says whether the probe failed or saw the wrong thing.
        assert!(
            started.elapsed() < PATIENCE,
            "never: {what} (last: {last:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// File reads, directory watches and terminals: one row per fault, each
// driven the same way. A task reads the stream; once it has read `after`
// items it reports, the fault is injected, and it reads on when told.

/// The faults of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every connection of the sandbox's proxy dropped.
    Cut,
    /// A cut whose way back meets `n` proxy answers of `status`.
    Proxy(u32, u16),
    /// The agent killed: the sandbox terminates.
    AgentKilled,
    /// This handle's `pause()`, then `resume()`.
    PauseResume,
    /// Suspended for idleness, woken by traffic (auto-resume).
    IdleSuspend,
    /// The sandbox's maximum duration (3 s) reached.
    MaxDuration,
}

/// The emulator and the sandbox of a row.
async fn setup(fault: Fault, idle: Duration) -> (Emulator, Sandbox) {
    let emu = match fault {
        Fault::IdleSuspend => idle_emulator(idle).await,
        _ => emulator().await,
    };
    let mut b = builder(&emu);
    if fault == Fault::MaxDuration {
        b = b.timeout(Duration::from_secs(3));
    }
    let sbx = b.create().await.unwrap();
    (emu, sbx)
}

/// What a reading task gives back: how its stream ended, and what it saw.
type Reading = (Result<(), SandboxError>, Vec<u8>);

/// The two signals between a reading task and the row's driver.
struct Signals {
    reached: tokio::sync::oneshot::Sender<()>,
    go: tokio::sync::oneshot::Receiver<()>,
}

fn signals() -> (
    Signals,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (reached, reached_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go) = tokio::sync::oneshot::channel();
    (Signals { reached, go }, reached_rx, go_tx)
}

/// Waits until the sandbox's stream, asleep on a suspension, has asked the
/// control plane again, and checks that the sandbox is still suspended
/// (nothing woke it).
async fn assert_asleep(emu: &Emulator, id: &str) {
    let checks = emu.calls(Operation::GetMicrovm);
    until("the sleeping stream checks the control plane", || {
        emu.calls(Operation::GetMicrovm) > checks
    })
    .await;
    assert_eq!(
        emu.state(id),
        Some(MicrovmState::Suspended),
        "the stream woke the sandbox"
    );
}

/// Injects `fault` once the reader reached its point; `background` when
/// the stream may not wake the sandbox (it is then read on at once, to
/// show it sleeping); `wake` is the traffic that ends an idle suspension.
/// Returns when the fault fired.
async fn drive<W: Future<Output = ()>>(
    emu: &Emulator,
    sbx: &Sandbox,
    fault: Fault,
    background: bool,
    reached: tokio::sync::oneshot::Receiver<()>,
    go: tokio::sync::oneshot::Sender<()>,
    wake: W,
) -> Instant {
    reached.await.expect("the reader reached its point");
    let id = sbx.id().to_owned();
    let fired = Instant::now();
    match fault {
        Fault::Cut => assert!(emu.faults().cut_connections(&id)),
        Fault::Proxy(n, status) => {
            assert!(emu.faults().proxy_status(n, status));
            assert!(emu.faults().cut_connections(&id));
        }
        Fault::AgentKilled => assert!(emu.faults().kill_agent(&id)),
        // Read on once the sandbox is ending (its stream cut under it).
        Fault::MaxDuration => {
            until("the maximum duration ends the sandbox", || {
                matches!(
                    emu.state(&id),
                    Some(MicrovmState::Terminating | MicrovmState::Terminated)
                )
            })
            .await;
        }
        Fault::PauseResume => {
            assert!(sbx.pause().await.unwrap());
            if background {
                let _ = go.send(());
                assert_asleep(emu, &id).await;
                sbx.resume().await.unwrap();
            } else {
                // A foreground read waits for the resume (never waking the
                // sandbox this handle paused).
                let _ = go.send(());
                sbx.resume().await.unwrap();
            }
            return fired;
        }
        Fault::IdleSuspend => {
            until("the idle sandbox suspends", || {
                emu.state(&id) == Some(MicrovmState::Suspended)
            })
            .await;
            if background {
                let _ = go.send(());
                assert_asleep(emu, &id).await;
                wake.await;
            } else {
                // A foreground read wakes it itself.
                let _ = go.send(());
            }
            return fired;
        }
    }
    let _ = go.send(());
    fired
}

/// The rows' common checks on a stream that must survive `fault`.
fn assert_survived(fault: Fault, outcome: &Result<(), SandboxError>, emu: &Emulator) {
    if let Err(err) = outcome {
        panic!("{fault:?}: {err:?}");
    }
    if fault == Fault::IdleSuspend {
        assert_eq!(emu.calls(Operation::ResumeMicrovm), 0, "woken by traffic");
    }
}

/// The rows' common checks on a stream whose sandbox ended.
fn assert_sandbox_gone(fault: Fault, err: &SandboxError, fired: Instant, sbx: &Sandbox) {
    match fault {
        Fault::AgentKilled => {
            assert!(
                matches!(err, SandboxError::SandboxNotFound { .. }),
                "{err:?}"
            );
            assert_eq!(err.classify().kind, "sandbox_not_found");
            assert!(!err.classify().retryable);
            assert!(
                fired.elapsed() < Duration::from_secs(1),
                "{:?}",
                fired.elapsed()
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "the sandbox {} does not exist or has terminated; create a new sandbox",
                    sbx.id()
                )
            );
        }
        _ => {
            assert!(
                matches!(err, SandboxError::SandboxLifetime { .. }),
                "{err:?}"
            );
            assert_eq!(err.classify().kind, "sandbox_lifetime");
            assert!(!err.classify().retryable);
        }
    }
}

// --- file reads ------------------------------------------------------------

/// 8 MB of numbered lines: any byte lost, repeated or moved shows.
fn big_file() -> Vec<u8> {
    (0..1_000_000u32)
        .map(|i| format!("{i:07}\n"))
        .collect::<String>()
        .into_bytes()
}

async fn read_row(fault: Fault) {
    let (emu, sbx) = setup(fault, Duration::from_secs(2)).await;
    let expected = big_file();
    sbx.files()
        .write("/tmp/big", expected.clone())
        .await
        .unwrap();
    let (signals, reached, go) = signals();
    let mut chunks = sbx.files().read_stream("/tmp/big").await.unwrap();
    let reader = tokio::spawn(async move {
        let Signals { reached, go } = signals;
        let mut data = Vec::new();
        let first = chunks.next().await.unwrap().unwrap();
        data.extend_from_slice(&first);
        let _ = reached.send(());
        let _ = go.await;
        while let Some(chunk) = tokio::time::timeout(PATIENCE, chunks.next())
            .await
            .expect("a chunk in time")
        {
            match chunk {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(err) => return (Err(err), data),
            }
        }
        (Ok(()), data)
    });
    let fired = drive(&emu, &sbx, fault, false, reached, go, async {}).await;
    let (outcome, data): Reading = reader.await.unwrap();
    match fault {
        Fault::AgentKilled | Fault::MaxDuration => {
            let err = outcome.unwrap_err();
            let fired = if fault == Fault::MaxDuration {
                Instant::now()
            } else {
                fired
            };
            assert_sandbox_gone(fault, &err, fired, &sbx);
            assert!(expected.starts_with(&data), "a prefix, in order");
        }
        _ => {
            assert_survived(fault, &outcome, &emu);
            assert!(
                data == expected,
                "every byte once, in order ({} bytes)",
                data.len()
            );
            assert!(sbx.kill().await.unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_a_cut_resumes_with_every_byte_once() {
    read_row(Fault::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_proxy_502_twice_after_a_cut_is_waited_out() {
    read_row(Fault::Proxy(2, 502)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_proxy_503_after_a_cut_is_waited_out() {
    read_row(Fault::Proxy(1, 503)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_proxy_429_after_a_cut_is_waited_out() {
    read_row(Fault::Proxy(1, 429)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_the_agent_killed_is_sandbox_not_found_within_a_second() {
    read_row(Fault::AgentKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_a_pause_and_resume_loses_no_byte() {
    read_row(Fault::PauseResume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_an_idle_auto_suspend_is_woken_by_the_read() {
    read_row(Fault::IdleSuspend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_the_maximum_duration_reached_is_sandbox_lifetime() {
    read_row(Fault::MaxDuration).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_of_a_file_changed_during_a_cut_is_never_spliced() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let expected = big_file();
    sbx.files()
        .write("/tmp/big", expected.clone())
        .await
        .unwrap();
    let mut chunks = sbx.files().read_stream("/tmp/big").await.unwrap();
    let first = chunks.next().await.unwrap().unwrap();
    assert!(emu.faults().cut_connections(sbx.id()));
    sbx.files().write("/tmp/big", "changed").await.unwrap();
    let mut data = first.to_vec();
    let err = loop {
        match tokio::time::timeout(PATIENCE, chunks.next()).await.unwrap() {
            Some(Ok(chunk)) => data.extend_from_slice(&chunk),
            Some(Err(err)) => break err,
            None => panic!("the read ended as if nothing changed"),
        }
    };
    // The cut itself is reported; what arrived is the old file's prefix.
    assert!(
        matches!(
            err.sandbox_code(),
            Some(rayito::error::SandboxCode::ConnectionLost)
        ),
        "{err:?}"
    );
    assert!(err.classify().retryable);
    assert!(expected.starts_with(&data));
    assert!(sbx.kill().await.unwrap());
}

// --- directory watches -----------------------------------------------------

/// Reads a watch: `before` first, then (after the fault) probe directories
/// until one is reported, then `after`; returns the names seen in order.
async fn watch_row(fault: Fault) {
    let (emu, sbx) = setup(fault, Duration::from_secs(8)).await;
    assert!(sbx.files().make_dir("/home/user/w").await.unwrap());
    // on_exit: never on a reconnect, once at the end (issue 43).
    let exits: Arc<std::sync::Mutex<Vec<Option<rayito::ErrorKind>>>> = Arc::default();
    let seen = exits.clone();
    let options = rayito::WatchOptions::new().on_exit(move |err| {
        seen.lock().unwrap().push(err.map(SandboxError::kind));
    });
    let mut watch = sbx
        .files()
        .watch_dir_with("/home/user/w", options)
        .await
        .unwrap();
    let reconnects = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let reconnects_seen = reconnects.clone();
    let (signals, reached, go) = signals();
    let prober = sbx.clone();
    let reader = tokio::spawn(async move {
        let Signals { reached, go } = signals;
        let mut names = Vec::new();
        prober
            .commands()
            .run("mkdir /home/user/w/before")
            .await
            .unwrap();
        let event = tokio::time::timeout(PATIENCE, watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        names.push(event.name);
        let _ = reached.send(());
        let _ = go.await;
        // Changes made while the watch was cut are lost: probe until the
        // reissued watch reports one, then expect exactly `after`.
        let started = Instant::now();
        let mut probe = 0;
        loop {
            assert!(started.elapsed() < PATIENCE, "the watch never came back");
            match tokio::time::timeout(Duration::from_millis(1500), watch.next()).await {
                Ok(Some(Ok(event))) => {
                    names.push(event.name);
                    break;
                }
                Ok(Some(Err(err))) => {
                    return (Err(err), names.join(" ").into_bytes());
                }
                Ok(None) => panic!("the watch ended"),
                Err(_) => {
                    probe += 1;
                    if let Err(err) = prober
                        .commands()
                        .run(&format!("mkdir /home/user/w/probe{probe:03}"))
                        .await
                    {
                        // The sandbox is gone: the watch says how.
                        let _ = err;
                    }
                }
            }
        }
        prober
            .commands()
            .run("mkdir /home/user/w/after")
            .await
            .unwrap();
        loop {
            let event = tokio::time::timeout(PATIENCE, watch.next())
                .await
                .expect("an event in time")
                .expect("the watch is open");
            match event {
                Ok(event) => {
                    let done = event.name == "after";
                    names.push(event.name);
                    if done {
                        reconnects_seen.store(watch.reconnects(), Ordering::SeqCst);
                        return (Ok(()), names.join(" ").into_bytes());
                    }
                }
                Err(err) => return (Err(err), names.join(" ").into_bytes()),
            }
        }
    });
    // The reader's own probes are traffic that wakes a suspended sandbox,
    // so this row does not show the watch asleep (the command and terminal
    // rows do, through the same code): it is told to read on once the
    // sandbox is suspended or resumed.
    let fired = drive(&emu, &sbx, fault, false, reached, go, async {}).await;
    let (outcome, names): Reading = reader.await.unwrap();
    let names = String::from_utf8(names).unwrap();
    let names: Vec<&str> = names.split(' ').collect();
    assert_eq!(names[0], "before");
    match fault {
        Fault::AgentKilled | Fault::MaxDuration => {
            let err = outcome.unwrap_err();
            let fired = if fault == Fault::MaxDuration {
                Instant::now()
            } else {
                fired
            };
            assert_sandbox_gone(fault, &err, fired, &sbx);
            // The watch ended with that error: on_exit saw it, once.
            assert_eq!(*exits.lock().unwrap(), [Some(err.kind())]);
        }
        _ => {
            assert_survived(fault, &outcome, &emu);
            // Reissued at least once, and the watch (dropped by the
            // reader) ended cleanly: on_exit once, with no error.
            assert!(reconnects.load(Ordering::SeqCst) >= 1, "{fault:?}");
            assert_eq!(*exits.lock().unwrap(), [None]);
            // `before`, the probes the reissued watch saw (each once, in
            // order), then `after`.
            assert_eq!(*names.last().unwrap(), "after", "{names:?}");
            let probes = &names[1..names.len() - 1];
            assert!(probes.iter().all(|n| n.starts_with("probe")), "{names:?}");
            assert!(probes.windows(2).all(|w| w[0] < w[1]), "{names:?}");
            assert!(sbx.kill().await.unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_a_cut_reissues_the_watch() {
    watch_row(Fault::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_proxy_502_twice_503_and_429_after_a_cut_are_waited_out() {
    for fault in [
        Fault::Proxy(2, 502),
        Fault::Proxy(1, 503),
        Fault::Proxy(1, 429),
    ] {
        watch_row(fault).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_the_agent_killed_is_sandbox_not_found_within_a_second() {
    watch_row(Fault::AgentKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_a_pause_sleeps_and_the_watch_is_reissued_after_the_resume() {
    watch_row(Fault::PauseResume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_an_idle_auto_suspend_sleeps_until_traffic_wakes_it() {
    watch_row(Fault::IdleSuspend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_the_maximum_duration_reached_is_sandbox_lifetime() {
    watch_row(Fault::MaxDuration).await;
}

// --- terminals -------------------------------------------------------------

/// Typed into the terminal: 40 numbered lines over 4 s, then, once a line
/// is typed, a marker (its echo shows `$((1+1))`, the output `DONE-2`).
const PTY_LINES: &[u8] =
    b"for i in $(seq 1 40); do echo L$i; sleep 0.1; done; read x; echo DONE-$((1+1))\n";

/// Each `L<i>` line appears once, in order, and (unless cut short) all 40.
fn assert_pty_lines(output: &str, complete: bool) {
    let mut at = 0;
    for i in 1..=40 {
        let line = format!("L{i}\r\n");
        match output.matches(&line).count() {
            0 if !complete => return,
            1 => {
                let found = output.find(&line).unwrap();
                assert!(found >= at, "L{i} out of order in {output:?}");
                at = found;
            }
            n => panic!("L{i} seen {n} times in {output:?}"),
        }
    }
}

async fn pty_row(fault: Fault) {
    let (emu, sbx) = setup(fault, Duration::from_secs(8)).await;
    let mut pty = sbx
        .pty()
        .create(rayito::PtySize::new(80, 24), rayito::PtyOptions::new())
        .await
        .unwrap();
    pty.send_input(PTY_LINES).await.unwrap();
    let pid = pty.pid();
    let (signals, reached, go) = signals();
    let reader = tokio::spawn(async move {
        let Signals { reached, go } = signals;
        let mut out = Vec::new();
        let mut reached = Some(reached);
        let mut go = Some(go);
        loop {
            let item = tokio::time::timeout(PATIENCE, pty.next())
                .await
                .expect("output in time");
            match item {
                Some(Ok(output)) => {
                    out.extend_from_slice(&output.data);
                    let text = String::from_utf8_lossy(&out);
                    if text.contains("DONE-2") {
                        assert!(!pty.output_lost());
                        return (Ok(()), out);
                    }
                    if text.contains("L5\r\n")
                        && let Some(reached) = reached.take()
                    {
                        let _ = reached.send(());
                        let _ = go.take().unwrap().await;
                    }
                }
                Some(Err(err)) => return (Err(err), out),
                None => return (Ok(()), out),
            }
        }
    });
    // The line that lets the shell print the marker: typed after the
    // fault (in the idle row, it is the traffic that wakes the sandbox).
    let waker = sbx.clone();
    let wake = async move {
        waker.pty().send_input(pid, b"\n".to_vec()).await.unwrap();
    };
    let fired = drive(&emu, &sbx, fault, true, reached, go, wake).await;
    if !matches!(fault, Fault::AgentKilled | Fault::MaxDuration) {
        sbx.pty().send_input(pid, b"\n".to_vec()).await.unwrap();
    }
    let (outcome, out): Reading = reader.await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    match fault {
        Fault::AgentKilled => {
            assert_sandbox_gone(fault, &outcome.unwrap_err(), fired, &sbx);
            assert_pty_lines(&text, false);
        }
        Fault::MaxDuration => {
            // The agent hangs the terminal up at `/terminate`: its end may
            // reach the stream before the connection closes.
            if let Err(err) = outcome {
                assert_sandbox_gone(fault, &err, Instant::now(), &sbx);
            }
            assert!(!text.contains("DONE-2"));
            assert_pty_lines(&text, false);
        }
        _ => {
            assert_survived(fault, &outcome, &emu);
            assert_pty_lines(&text, true);
            assert!(sbx.kill().await.unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_a_cut_loses_no_line_and_repeats_none() {
    pty_row(Fault::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_proxy_502_twice_503_and_429_after_a_cut_are_waited_out() {
    for fault in [
        Fault::Proxy(2, 502),
        Fault::Proxy(1, 503),
        Fault::Proxy(1, 429),
    ] {
        pty_row(fault).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_the_agent_killed_is_sandbox_not_found_within_a_second() {
    pty_row(Fault::AgentKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_a_pause_sleeps_without_waking_the_sandbox_then_reads_on() {
    pty_row(Fault::PauseResume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_an_idle_auto_suspend_sleeps_until_traffic_wakes_it() {
    pty_row(Fault::IdleSuspend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_the_maximum_duration_reached_is_sandbox_lifetime_or_its_end() {
    pty_row(Fault::MaxDuration).await;
}

// --- file writes -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_midway_is_never_half_applied_nor_sent_twice() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    sbx.files().write("/tmp/w/target", "old").await.unwrap();
    // A caller-fed write: the first MiB goes out, then the connection is
    // cut while the rest is still to come.
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(1);
    let writer = sbx.clone();
    let write = tokio::spawn(async move {
        writer
            .files()
            .write_stream(
                "/tmp/w/target",
                tokio_stream::wrappers::ReceiverStream::new(rx),
            )
            .await
    });
    tx.send(vec![b'n'; 1 << 20]).await.unwrap();
    // The agent has opened its temporary file: the write is under way.
    let files = sbx.files();
    until_async("the write is under way", || async {
        Ok(files
            .list("/tmp/w")
            .await?
            .iter()
            .any(|e| e.name.starts_with(".rayito-tmp-")))
    })
    .await;
    assert!(emu.faults().cut_connections(sbx.id()));
    let err = tokio::time::timeout(PATIENCE, write)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    drop(tx);
    // Never replayed (the stream was consumed), reported as the cut it was.
    assert!(
        matches!(
            err.sandbox_code(),
            Some(rayito::error::SandboxCode::ConnectionLost)
        ),
        "{err:?}"
    );
    assert!(err.classify().retryable);
    // The target is untouched and no temporary file is left behind.
    let files = sbx.files();
    until_async("the aborted write is cleaned up", || async {
        Ok(!files
            .list("/tmp/w")
            .await?
            .iter()
            .any(|e| e.name.starts_with(".rayito-tmp-")))
    })
    .await;
    assert_eq!(files.read_to_string("/tmp/w/target").await.unwrap(), "old");
    // A whole-buffer write cut before it is answered (a proxy 502, twice)
    // is sent again once the sandbox is back: applied once, whole.
    assert!(emu.faults().proxy_status(2, 502));
    files.write("/tmp/w/target", "new").await.unwrap();
    assert_eq!(files.read_to_string("/tmp/w/target").await.unwrap(), "new");
    let names: Vec<String> = files
        .list("/tmp/w")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["target"]);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_output_the_ring_dropped_during_a_cut_is_reported_as_lost() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let mut pty = sbx
        .pty()
        .create(rayito::PtySize::new(80, 24), rayito::PtyOptions::new())
        .await
        .unwrap();
    let pid = pty.pid();
    pty.send_input(
        b"echo first-$((1+1)); while [ ! -e /tmp/flood ]; do sleep 0.05; done; head -c 3000000 /dev/zero | tr '\\0' x; echo; touch /tmp/flooded; while [ ! -e /tmp/go-on ]; do sleep 0.05; done; echo last-$((1+1))\n".to_vec(),
    )
    .await
    .unwrap();
    let mut text = String::new();
    while !text.contains("first-2") {
        let output = tokio::time::timeout(PATIENCE, pty.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&output.data));
    }
    // Cut while nobody reads; the terminal overflows the agent's ring.
    assert!(emu.faults().cut_connections(sbx.id()));
    sbx.files().write("/tmp/flood", "").await.unwrap();
    let files = sbx.files();
    until_async("the flood is written", || files.exists("/tmp/flooded")).await;
    let (first_tx, mut first_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let reader = tokio::spawn(async move {
        let mut text = String::new();
        while !text.contains("last-2") {
            let output = tokio::time::timeout(PATIENCE, pty.next())
                .await
                .expect("output in time")
                .expect("the terminal is open")
                .expect("output, not an error");
            text.push_str(&String::from_utf8_lossy(&output.data));
            let _ = first_tx.send(());
        }
        (text, pty.output_lost())
    });
    // Keys typed now are echoed by the terminal: new output, which shows
    // the reader is back (from new output: the flood is gone).
    loop {
        sbx.pty().send_input(pid, b"z".to_vec()).await.unwrap();
        if tokio::time::timeout(Duration::from_millis(500), first_rx.recv())
            .await
            .is_ok()
        {
            break;
        }
    }
    sbx.files().write("/tmp/go-on", "").await.unwrap();
    let (text, lost) = tokio::time::timeout(PATIENCE, reader)
        .await
        .unwrap()
        .unwrap();
    assert!(lost, "the gap is reported");
    assert!(text.contains("last-2"));
    assert!(
        !text.contains("xxxx"),
        "old output never arrives after the gap"
    );
    assert!(sbx.kill().await.unwrap());
}
