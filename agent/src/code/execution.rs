//! One Execute call: waits for its context, runs the cell on the kernel and
//! turns what the kernel reports into the `ExecuteEvent` stream (started
//! first, output as produced, results, errors, then end; keepalives on
//! silence; `seq` per execution). Every numbered event is also kept in the
//! execution's log so that a cut client can Reattach. It also enforces the
//! cell's timeout and the agent's phase, and interrupts a cell nobody
//! follows any more (no Execute stream, no Reattach) for [`DETACH_GRACE`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tonic::Status;

use super::context::Context;
use super::kernel::{Kernel, KernelEvent};
use super::log::{ExecutionLog, Executions, LOG_BYTES};
use super::messages;
use crate::pb;
use crate::pb::execute_event::Event;
use crate::phase::Phase;
use crate::sandbox::SandboxEnv;

/// Silence after which a keepalive is sent (docs/local.md, "What it serves").
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// How long an interrupted kernel has to become idle before it is restarted.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// Largest text of one `OutputChunk`, in bytes.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;
/// How long a running cell may go unfollowed (its Execute stream gone, no
/// Reattach stream, the agent's phase open) before it is interrupted: long
/// enough for a client cut by a reset or a proxy error to reconnect and
/// reattach, short enough that a cancelled cell does not hold its context.
pub const DETACH_GRACE: Duration = Duration::from_secs(10);

/// The sending half of an Execute stream.
pub(crate) type EventSender = mpsc::Sender<Result<pb::ExecuteEvent, Status>>;

/// What the caller asked to run.
#[derive(Debug)]
pub(crate) struct Cell {
    pub(crate) code: String,
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) timeout_ms: u64,
}

/// Sends events to the client, numbering them; remembers whether the client
/// is still there.
struct Outbox {
    tx: EventSender,
    seq: u64,
    attached: bool,
    last_sent: Instant,
    /// Where numbered events are kept for Reattach (from `started` on).
    log: Option<Arc<ExecutionLog>>,
    /// Set when the agent is killed (fault injection): from then on nothing
    /// more is sent or kept, as if the process had died, so a client sees
    /// its stream cut, not the `ContextDestroyed` end of a graceful
    /// shutdown racing the connection's drop.
    cut: Arc<AtomicBool>,
}

impl Outbox {
    async fn emit(&mut self, event: Event) {
        if self.cut.load(Ordering::SeqCst) {
            self.attached = false;
            self.log = None;
            return;
        }
        if !self.attached && (self.log.is_none() || matches!(event, Event::Keepalive(_))) {
            return;
        }
        let seq = if matches!(event, Event::Keepalive(_)) {
            0
        } else {
            self.seq += 1;
            self.seq
        };
        let message = pb::ExecuteEvent {
            event: Some(event),
            seq,
        };
        if seq > 0
            && let Some(log) = &self.log
        {
            log.push(&message);
        }
        if !self.attached {
            return;
        }
        if self.tx.send(Ok(message)).await.is_err() {
            self.attached = false;
        }
        self.last_sent = Instant::now();
    }

    async fn output(&mut self, text: String, wrap: fn(pb::OutputChunk) -> Event) {
        for piece in split_chunks(&text) {
            let chunk = pb::OutputChunk {
                text: piece.to_owned(),
                timestamp_unix_ns: now_unix_ns(),
            };
            self.emit(wrap(chunk)).await;
        }
    }

    async fn error(&mut self, name: &str, value: String) {
        self.emit(Event::Error(pb::ExecutionError {
            name: name.to_owned(),
            value,
            traceback: Vec::new(),
        }))
        .await;
    }

    /// Ends the stream with a status (no `end` event follows).
    async fn fail(&mut self, status: Status) {
        if self.attached && !self.cut.load(Ordering::SeqCst) {
            let _ = self.tx.send(Err(status)).await;
        }
        self.attached = false;
    }
}

/// How the cell's loop ended.
enum Outcome {
    /// The kernel reported the cell finished.
    Done,
    /// The kernel process died or broke its protocol.
    Died,
    /// The kernel was interrupted and did not become idle in time.
    Stuck,
}

/// Runs `cell` on `ctx`, streaming into `tx` and keeping its events in
/// `executions` for Reattach. Returns when the cell is over and the context
/// is usable again (the client may have left long before).
pub(crate) async fn run(
    ctx: Arc<Context>,
    env: SandboxEnv,
    cell: Cell,
    tx: EventSender,
    mut phase: watch::Receiver<Phase>,
    executions: Arc<Executions>,
    cut: Arc<AtomicBool>,
) {
    let mut out = Outbox {
        tx,
        seq: 0,
        attached: true,
        last_sent: Instant::now(),
        log: None,
        cut,
    };
    let gate = phase.borrow_and_update().gate_status();
    if let Some(status) = gate {
        out.fail(status).await;
        return;
    }
    let mut phase_open = true;

    // Wait for the context (one cell at a time), keeping the stream alive.
    let lock = ctx.kernel.lock();
    tokio::pin!(lock);
    let mut slot = loop {
        tokio::select! {
            biased;
            guard = &mut lock => break guard,
            _ = out.tx.closed() => return,
            changed = phase.changed(), if phase_open => match changed {
                Err(_) => phase_open = false,
                Ok(()) => {
                    let gate = phase.borrow_and_update().gate_status();
                    if let Some(status) = gate {
                        out.fail(status).await;
                        return;
                    }
                }
            },
            _ = sleep_until(out.last_sent + KEEPALIVE_INTERVAL) => {
                out.emit(Event::Keepalive(pb::KeepAlive {})).await;
            }
        }
    };
    if ctx.destroyed.load(Ordering::SeqCst) {
        out.fail(Status::not_found(messages::CONTEXT_NOT_FOUND))
            .await;
        return;
    }
    let needs_start = match slot.as_mut() {
        None => true,
        Some(kernel) => kernel.has_exited(),
    };
    if needs_start && let Err(err) = ctx.start_kernel(&mut slot, &env).await {
        out.fail(messages::kernel_start_status(
            ctx.spec.language,
            &err,
            Status::unavailable(messages::KERNEL_NOT_READY),
        ))
        .await;
        return;
    }
    let Some(kernel) = slot.as_mut() else {
        out.fail(Status::unavailable(messages::KERNEL_NOT_READY))
            .await;
        return;
    };

    kernel.count += 1;
    let count = kernel.count;
    let execution_id = format!("exec-{:016x}", rand::random::<u64>());
    let log = ExecutionLog::new(ctx.id.clone(), LOG_BYTES);
    executions.insert(execution_id.clone(), log.clone());
    // Whatever way this task ends, a follower is not left waiting.
    let _close = CloseOnDrop(log.clone());
    out.log = Some(log.clone());
    out.emit(Event::Started(pb::ExecutionStarted {
        execution_id,
        execution_count: count,
    }))
    .await;

    let sent = kernel.send_cell(&cell.code, &cell.envs, count).await;
    // A timeout too large to add to the clock (u64::MAX ms) is no limit,
    // not a panic.
    let timeout_at = (cell.timeout_ms > 0)
        .then(|| Instant::now().checked_add(Duration::from_millis(cell.timeout_ms)))
        .flatten();
    let mut timed_out = false;
    let mut interrupted = false;
    let mut kill_at: Option<Instant> = None;
    let mut detached = false;
    // Since when nobody follows the cell while the phase is open.
    let mut unfollowed_since: Option<Instant> = None;

    let outcome = if sent.is_err() {
        Outcome::Died
    } else {
        loop {
            // A suspend, a terminate or the deadline ends the streams, not
            // the cell; otherwise a cell nobody follows is interrupted
            // after the grace (a cut client reattaches well within it).
            let followed = out.attached || log.subscribers() > 0;
            if followed || phase.borrow().gate_status().is_some() {
                unfollowed_since = None;
            } else if unfollowed_since.is_none() {
                unfollowed_since = Some(Instant::now());
            }
            let far = Instant::now() + Duration::from_secs(86_400);
            let detach_at = unfollowed_since.map(|since| since + DETACH_GRACE);
            tokio::select! {
                biased;
                changed = phase.changed(), if phase_open => match changed {
                    Err(_) => phase_open = false,
                    Ok(()) => {
                        let gate = phase.borrow_and_update().gate_status();
                        if let Some(status) = gate
                            && out.attached
                        {
                            // The cell keeps running; only this stream ends.
                            out.fail(status).await;
                        }
                    }
                },
                event = kernel.next_event() => match event {
                    KernelEvent::Stdout(text) => out.output(text, Event::Stdout).await,
                    KernelEvent::Stderr(text) => out.output(text, Event::Stderr).await,
                    KernelEvent::Result(result) => out.emit(Event::Result(*result)).await,
                    // After an interrupt, the kernel's own KeyboardInterrupt
                    // is replaced by the agent's ExecutionTimeout below.
                    KernelEvent::Error(error) if !interrupted => out.emit(Event::Error(error)).await,
                    KernelEvent::Error(_) | KernelEvent::Mark | KernelEvent::Running => {}
                    KernelEvent::Done => break Outcome::Done,
                    KernelEvent::Died => break Outcome::Died,
                },
                _ = sleep_until(timeout_at.unwrap_or(far)), if timeout_at.is_some() && !interrupted => {
                    kernel.interrupt();
                    interrupted = true;
                    timed_out = true;
                    kill_at = Some(Instant::now() + INTERRUPT_GRACE);
                }
                _ = sleep_until(kill_at.unwrap_or(far)), if kill_at.is_some() => break Outcome::Stuck,
                _ = sleep_until(detach_at.unwrap_or(far)), if detach_at.is_some() && !interrupted => {
                    if !out.attached && log.subscribers() == 0 {
                        kernel.interrupt();
                        interrupted = true;
                        detached = true;
                        kill_at = Some(Instant::now() + INTERRUPT_GRACE);
                    }
                    unfollowed_since = None;
                }
                _ = out.tx.closed(), if out.attached => out.attached = false,
                // A follower leaving must restart the grace: look again.
                _ = sleep_until(Instant::now() + FOLLOWER_CHECK), if !out.attached && unfollowed_since.is_none() && !interrupted => {}
                _ = sleep_until(out.last_sent + KEEPALIVE_INTERVAL), if out.attached => {
                    out.emit(Event::Keepalive(pb::KeepAlive {})).await;
                }
            }
        }
    };

    if detached && !timed_out {
        out.error(messages::DETACHED_NAME, messages::DETACHED_VALUE.to_owned())
            .await;
    }
    // The error the cell ends with, if any, and whether its kernel restarts.
    let timeout = || {
        (
            messages::TIMEOUT_NAME,
            messages::timeout_value(cell.timeout_ms),
        )
    };
    let fixed = |name, value: &str| Some((name, value.to_owned()));
    let (ending, restart) = match outcome {
        Outcome::Done => (timed_out.then(timeout), false),
        Outcome::Stuck => (timed_out.then(timeout), true),
        Outcome::Died if ctx.destroyed.load(Ordering::SeqCst) => (
            fixed(
                messages::CONTEXT_DESTROYED_NAME,
                messages::CONTEXT_DESTROYED_VALUE,
            ),
            false,
        ),
        Outcome::Died if ctx.restarting.load(Ordering::SeqCst) => (
            fixed(
                messages::KERNEL_RESTARTED_NAME,
                messages::KERNEL_RESTARTED_VALUE,
            ),
            false,
        ),
        Outcome::Died if timed_out => (Some(timeout()), true),
        Outcome::Died => (
            fixed(messages::KERNEL_DIED_NAME, messages::KERNEL_DIED_VALUE),
            true,
        ),
    };
    if let Some((name, value)) = ending {
        out.error(name, value).await;
    }
    if !matches!(outcome, Outcome::Done) {
        ctx.clear(&mut slot);
    }
    out.emit(Event::End(pb::ExecutionEnd {
        execution_count: count,
    }))
    .await;
    drop(out);
    if restart && !ctx.destroyed.load(Ordering::SeqCst) {
        // Still holding the lock: the next cell runs on the fresh kernel.
        let _ = ctx.start_kernel(&mut slot, &env).await;
    }
}

/// How often a cell whose Execute stream is gone checks whether its
/// Reattach followers are still there.
const FOLLOWER_CHECK: Duration = Duration::from_secs(1);

/// Ends a log when its execution's task ends, however it ends.
struct CloseOnDrop(Arc<ExecutionLog>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Splits `text` into pieces of at most [`MAX_CHUNK_BYTES`], on character
/// boundaries.
pub(crate) fn split_chunks(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > MAX_CHUNK_BYTES {
        let mut cut = MAX_CHUNK_BYTES;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        pieces.push(head);
        rest = tail;
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

fn now_unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Starts `ctx`'s kernel if it has none (warm-up and CreateContext).
pub(crate) async fn ensure_kernel(ctx: &Context, env: &SandboxEnv) -> std::io::Result<()> {
    let mut slot = ctx.kernel.lock().await;
    let needs_start = match slot.as_mut() {
        None => true,
        Some(kernel) => Kernel::has_exited(kernel),
    };
    if needs_start {
        ctx.start_kernel(&mut slot, env).await?;
    } else {
        ctx.unmark_starting();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_char_boundaries() {
        let text = "é".repeat(MAX_CHUNK_BYTES);
        let pieces = split_chunks(&text);
        assert!(pieces.iter().all(|p| p.len() <= MAX_CHUNK_BYTES));
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_chunks(""), Vec::<&str>::new());
    }
}
