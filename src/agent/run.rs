//! One run: the runtime's command started in the background (tagged
//! `rayito-agent-run`, `kill_tree`), the run request as one JSON line on its
//! stdin, its stdout read as protocol v1 lines into events, the limits
//! applied to them, and the process tree killed (and waited for) when a
//! limit passes or the caller aborts. The pump runs in a task of its own so
//! that the stream can be aborted from anywhere and dropped safely.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use super::events::AgentEvent;
use super::plan::{Mode, Plan};
use super::protocol::{Decoder, Limits, LineBuffer};
use crate::commands::{CommandEvent, CommandHandle};
use crate::error::{AgentFailure, AgentFailureReason, SandboxError, TimeoutScope};

/// Events queued between the pump and the caller.
const QUEUE: usize = 64;

/// The events of one run, ending after `Done` or `AgentFailed`
/// ([`AgentView::stream`](super::AgentView::stream)). An `Err` item is a
/// failure of the sandbox itself (transport, the sandbox gone), after which
/// the stream ends. Dropping the stream aborts the run (its process tree is
/// killed).
pub struct AgentStream {
    events: mpsc::Receiver<Result<AgentEvent, SandboxError>>,
    abort: watch::Sender<bool>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentStream")
            .field("dropped_lines", &self.dropped_lines())
            .finish_non_exhaustive()
    }
}

impl AgentStream {
    /// Aborts the run: its process tree is killed and the stream ends with
    /// `AgentFailed` of reason `aborted` (unless it had already ended).
    /// Idempotent; callable from any task.
    pub fn abort(&self) {
        self.abort.send_replace(true);
    }

    /// A handle that aborts this run from elsewhere (another task).
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.abort.clone())
    }

    /// The runtime's lines dropped so far (not protocol v1, malformed, of
    /// an unknown type, or longer than 4 MiB).
    pub fn dropped_lines(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A stream that yields `event` and ends (a run refused before its
    /// command started: another run in progress).
    pub(crate) fn ended(event: AgentEvent) -> Self {
        let (tx, rx) = mpsc::channel(1);
        let _ = tx.try_send(Ok(event));
        let (abort, _) = watch::channel(false);
        Self {
            events: rx,
            abort,
            dropped: Arc::default(),
        }
    }

    /// Starts pumping `handle` (the runtime's command) in a task.
    pub(crate) fn start(handle: CommandHandle, plan: &Plan) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (abort, abort_rx) = watch::channel(false);
        let dropped = Arc::new(AtomicU64::new(0));
        let pump = Pump {
            handle,
            mode: plan.mode,
            lines: LineBuffer::default(),
            decoder: Decoder::new(plan.reasoning),
            limits: Limits::new(plan.limits),
            text: Vec::new(),
            max_text: plan.limits.max_output_bytes,
            session_id: plan.session_id.clone(),
            tx,
            dropped: Arc::clone(&dropped),
        };
        tokio::spawn(pump.run(abort_rx));
        Self {
            events: rx,
            abort,
            dropped,
        }
    }
}

impl Drop for AgentStream {
    fn drop(&mut self) {
        // A run nobody reads any more is stopped, never left running.
        self.abort.send_replace(true);
    }
}

impl futures_util::Stream for AgentStream {
    type Item = Result<AgentEvent, SandboxError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

/// Aborts a run from another task ([`AgentStream::abort_handle`]).
#[derive(Clone, Debug)]
pub struct AbortHandle(watch::Sender<bool>);

impl AbortHandle {
    /// As [`AgentStream::abort`].
    pub fn abort(&self) {
        self.0.send_replace(true);
    }
}

struct Pump {
    handle: CommandHandle,
    mode: Mode,
    lines: LineBuffer,
    decoder: Decoder,
    limits: Limits,
    /// With the text protocol: stdout, up to `max_text` bytes.
    text: Vec<u8>,
    max_text: usize,
    /// The session a text runtime's run gets.
    session_id: String,
    tx: mpsc::Sender<Result<AgentEvent, SandboxError>>,
    dropped: Arc<AtomicU64>,
}

/// How the reading ended.
enum Ended {
    /// The command's stream ended: its exit decides.
    Exited,
    /// The run must stop for this reason (a limit, an abort).
    Stop(AgentFailureReason),
    /// The caller is gone or the sandbox failed (already sent).
    Gone,
}

impl Pump {
    async fn run(mut self, mut abort: watch::Receiver<bool>) {
        let ended = self.read(&mut abort).await;
        let last = match ended {
            Ended::Gone => {
                let _ = self.handle.kill().await;
                return;
            }
            Ended::Stop(reason) => {
                let _ = self.handle.kill().await;
                // Drain: the end comes only once the whole tree is gone, so
                // the next run never finds this one's process (busy).
                while self.handle.next().await.is_some() {}
                self.failure(reason, None)
            }
            Ended::Exited => {
                let tx = self.tx.clone();
                match self.exit().await {
                    Ok(event) => {
                        let _ = tx.send(Ok(event)).await;
                    }
                    Err(err) => {
                        let _ = tx.send(Err(err)).await;
                    }
                }
                return;
            }
        };
        let _ = self.tx.send(Ok(last)).await;
    }

    /// Reads stdout until the command's stream ends or the run must stop.
    async fn read(&mut self, abort: &mut watch::Receiver<bool>) -> Ended {
        loop {
            if *abort.borrow_and_update() {
                return Ended::Stop(AgentFailureReason::Aborted);
            }
            let item = tokio::select! {
                biased;
                changed = abort.changed() => {
                    // The stream was dropped with no abort: stop too.
                    if changed.is_err() {
                        return Ended::Gone;
                    }
                    continue;
                }
                item = self.handle.next() => item,
            };
            match item {
                None => return Ended::Exited,
                Some(Ok(CommandEvent::Stdout { data, .. })) => {
                    if let Some(ended) = self.stdout(&data).await {
                        return ended;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => {
                    let _ = self.tx.send(Err(err)).await;
                    return Ended::Gone;
                }
            }
        }
    }

    /// Handles a chunk of stdout; `Some` when the run must end.
    async fn stdout(&mut self, data: &[u8]) -> Option<Ended> {
        if self.mode == Mode::Text {
            let room = self.max_text.saturating_sub(self.text.len());
            self.text.extend_from_slice(&data[..data.len().min(room)]);
            return None;
        }
        for line in self.lines.feed(data) {
            for event in self.decoder.line(&line) {
                if let Some(ended) = self.event(event).await {
                    return Some(ended);
                }
            }
        }
        self.count_dropped();
        None
    }

    /// Sends one decoded event on, or ends the run at a limit.
    async fn event(&mut self, event: AgentEvent) -> Option<Ended> {
        // A runtime's own failure is reported once, at its exit.
        if matches!(event, AgentEvent::AgentFailed(_)) {
            return None;
        }
        let passed = self.limits.track(&event);
        if let Some(reason) = passed {
            // The step that passes the budget is still reported; a step
            // past max_steps is not (it never runs).
            if reason == AgentFailureReason::TokenBudget && self.tx.send(Ok(event)).await.is_err() {
                return Some(Ended::Gone);
            }
            return Some(Ended::Stop(reason));
        }
        if self.tx.send(Ok(event)).await.is_err() {
            return Some(Ended::Gone);
        }
        None
    }

    fn count_dropped(&self) {
        self.dropped
            .store(self.lines.dropped + self.decoder.dropped, Ordering::Relaxed);
    }

    /// The last event once the command ended by itself.
    async fn exit(mut self) -> Result<AgentEvent, SandboxError> {
        if let Some(line) = self.lines.finish() {
            for event in self.decoder.line(&line) {
                if let Some(Ended::Stop(reason)) = self.event(event).await {
                    return Ok(self.failure(reason, None));
                }
            }
        }
        self.count_dropped();
        let session = self.session();
        let exit_code = match self.handle.wait().await {
            Ok(result) => result.exit_code,
            Err(SandboxError::CommandExit { exit_code, .. }) => exit_code,
            Err(SandboxError::Timeout {
                scope: TimeoutScope::Command,
                ..
            }) => {
                return Ok(failure_of(
                    &self.decoder,
                    &self.limits,
                    session,
                    AgentFailureReason::Timeout,
                    None,
                ));
            }
            Err(err) => return Err(err),
        };
        Ok(match self.mode {
            Mode::Text if exit_code != 0 => failure_of(
                &self.decoder,
                &self.limits,
                session,
                AgentFailureReason::RuntimeError,
                Some(exit_code),
            ),
            Mode::Text => {
                // A text runtime's end: its stdout as one `Text`, then `Done`.
                let text = String::from_utf8_lossy(&self.text).trim_end().to_owned();
                let _ = self.tx.send(Ok(AgentEvent::Text { text })).await;
                AgentEvent::Done {
                    session_id: self.session_id.clone(),
                    exit_code,
                    usage: Default::default(),
                    usage_reported: false,
                }
            }
            Mode::V1 => match self.decoder.finish(exit_code) {
                AgentEvent::AgentFailed(mut failure) => {
                    failure.usage = Some(self.limits.usage);
                    AgentEvent::AgentFailed(failure)
                }
                done => done,
            },
        })
    }

    /// The session a failure names when the runtime gave none: a text
    /// runtime's own.
    fn session(&self) -> Option<String> {
        (self.mode == Mode::Text).then(|| self.session_id.clone())
    }

    fn failure(&self, reason: AgentFailureReason, exit_code: Option<i32>) -> AgentEvent {
        failure_of(
            &self.decoder,
            &self.limits,
            self.session(),
            reason,
            exit_code,
        )
    }
}

fn failure_of(
    decoder: &Decoder,
    limits: &Limits,
    fallback_session: Option<String>,
    reason: AgentFailureReason,
    exit_code: Option<i32>,
) -> AgentEvent {
    let mut failure = AgentFailure::new(reason);
    failure.session_id = decoder.session_id.clone().or(fallback_session);
    failure.exit_code = exit_code;
    failure.usage = Some(limits.usage);
    AgentEvent::AgentFailed(failure)
}
