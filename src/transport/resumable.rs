//! The one resumable agent stream (wire contract 2.7): a server stream read
//! across cuts. Each kind of stream (a process's output, a terminal, a code
//! cell, a directory watch, a file read) says what its messages are and
//! how it is opened again ([`Resume`]); this module does the rest once:
//! it tells a clean end from a cut, waits until the sandbox is back (the
//! one poller, within the call's deadline), opens the stream again from
//! the next sequence number, skips what was replayed, and reports a gap
//! the agent could not fill instead of inventing continuity. A stream that
//! keeps being cut without bringing anything new surfaces the cut.

use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use tokio::time::Instant;

use super::{AgentConn, AgentStream, Cut};
use crate::error::SandboxError;

/// Re-subscriptions in a row that bring nothing new before the cut is
/// surfaced (2.7: more than 3 consecutive reconnects).
const MAX_FRUITLESS_RESUBSCRIBES: u32 = 3;
/// How long the stream's trailers are waited for after its last message:
/// a stream dropped open is reset (RST_STREAM CANCEL) while the agent sends
/// them, and an HTTP/2 peer closes the connection after about a thousand
/// such streams (a long-lived handle's next call then fails once).
const STREAM_END_WAIT: Duration = Duration::from_millis(250);

/// Who waits on the stream, which decides whether the reconnect may wake a
/// suspended sandbox (2.7: only new requests and foreground calls may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A call its caller awaits (`commands.run`, `files.read`, `run_code`):
    /// the reconnect probes the agent, which wakes a sandbox with
    /// auto-resume, and the call's deadline bounds the wait.
    Foreground,
    /// A handle that outlives the call that made it (background commands,
    /// terminals, watches): asleep while the sandbox is suspended.
    Background,
}

/// What one message is, for the mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Numbered output: one numbered below the next expected sequence
    /// number was handed over before a cut and is skipped.
    Numbered(u64),
    /// News without a number (a watch event, a file chunk): the stream
    /// made progress.
    Progress,
    /// Neither (a keepalive, an event the reader judges itself).
    Other,
    /// The stream's last message (a process's end, a terminal's exit, a
    /// cell's end).
    End,
    /// The agent closed the stream because the sandbox is suspending: a
    /// cut, not an end.
    Suspending,
}

/// A stream opened again after a cut.
pub(crate) struct Reopened<M> {
    pub(crate) stream: AgentStream<M>,
    /// The agent no longer held the output from the asked sequence number
    /// on; the stream reads on with new output.
    pub(crate) gap: bool,
}

/// What a kind of stream tells the mechanism.
pub(crate) trait Resume: Send + 'static {
    /// The stream's messages.
    type Message: Send + Sync + 'static;

    /// What `message` is.
    fn mark(&self, message: &Self::Message) -> Mark;

    /// What a stream that ends cleanly without its [`Mark::End`] message
    /// is: `None` for a finished stream (a watch, a file read), else the
    /// error of a cut (a process, terminal or cell stream cut under it
    /// looks like that too: the reconnect contract decides, and a live
    /// agent that keeps doing it runs out of re-subscriptions).
    fn bare_end(&self) -> Option<SandboxError>;

    /// The error a `suspending` end is when the sandbox does not come back.
    fn suspending(&self) -> SandboxError;

    /// Opens the stream again as `at` says; checks its opening message.
    fn reopen<'a>(&'a mut self, at: Reopen<'a>) -> Reopening<'a, Self::Message>;
}

/// Where a cut stream is opened again.
pub(crate) struct Reopen<'a> {
    pub(crate) conn: &'a AgentConn,
    /// The sequence number to ask for.
    pub(crate) from_seq: u64,
    /// What is left of the call's deadline.
    pub(crate) total: Option<Duration>,
    /// The error that cut the stream.
    pub(crate) cut_error: &'a SandboxError,
}

/// A stream being opened again ([`Resume::reopen`]).
pub(crate) type Reopening<'a, M> = BoxFuture<'a, Result<Reopened<M>, SandboxError>>;

/// What a resumable stream yields.
pub(crate) enum Step<M> {
    /// A message of the agent's (replays skipped).
    Message(M),
    /// The stream was opened again after `cause` cut it. `lost_from`: the
    /// agent no longer held the output from that sequence number on, and
    /// the stream reads on with new output.
    Resumed {
        lost_from: Option<u64>,
        cause: SandboxError,
    },
}

/// A server stream read across cuts.
pub(crate) struct ResumableStream<R: Resume> {
    conn: AgentConn,
    resume: R,
    /// `None` once the stream ended (its last message, or an error).
    stream: Option<AgentStream<R::Message>>,
    /// The sequence number a re-subscription asks for: the last one
    /// received plus one (or where the reader started).
    next_seq: u64,
    /// The reconnect epoch the current stream was opened in.
    epoch: Option<u64>,
    waiter: Waiter,
    feature: &'static str,
    fruitless: u32,
    /// The end of the whole call (foreground streams), bounding the waits
    /// and each stream opened again.
    deadline: Option<Instant>,
}

impl<R: Resume> std::fmt::Debug for ResumableStream<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumableStream")
            .field("feature", &self.feature)
            .field("next_seq", &self.next_seq)
            .field("ended", &self.stream.is_none())
            .finish_non_exhaustive()
    }
}

/// Where a resumable stream starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    /// The reconnect epoch read before the stream was opened
    /// ([`AgentConn::reconnect_epoch`]).
    pub(crate) epoch: Option<u64>,
    /// The first sequence number the reader wants (0: only new output).
    pub(crate) next_seq: u64,
    pub(crate) waiter: Waiter,
    /// The whole call's time (foreground streams).
    pub(crate) total: Option<Duration>,
    pub(crate) feature: &'static str,
}

impl Start {
    /// A background reader's start from `next_seq` (0: only new output),
    /// with no deadline of its own; `epoch` read before the stream opened.
    pub(crate) fn background(epoch: Option<u64>, next_seq: u64, feature: &'static str) -> Self {
        Self {
            epoch,
            next_seq,
            waiter: Waiter::Background,
            total: None,
            feature,
        }
    }
}

impl<R: Resume> ResumableStream<R> {
    /// `stream`, opened (its opening message read) as `start` says.
    pub(crate) fn new(
        conn: AgentConn,
        resume: R,
        stream: AgentStream<R::Message>,
        start: Start,
        opened_at: Instant,
    ) -> Self {
        Self {
            conn,
            resume,
            stream: Some(stream),
            next_seq: start.next_seq,
            epoch: start.epoch,
            waiter: start.waiter,
            feature: start.feature,
            fruitless: 0,
            deadline: start.total.and_then(|total| opened_at.checked_add(total)),
        }
    }

    /// The next step; `None` after the last message (or a clean end).
    pub(crate) async fn next(&mut self) -> Option<Result<Step<R::Message>, SandboxError>> {
        loop {
            let stream = self.stream.as_mut()?;
            let (cut, err) = match stream.message().await {
                Ok(Some(message)) => match self.resume.mark(&message) {
                    Mark::Suspending => (Cut::Suspending, self.resume.suspending()),
                    Mark::Numbered(seq) => {
                        // Replayed after a re-subscription: seen already.
                        if seq < self.next_seq {
                            continue;
                        }
                        self.next_seq = seq.saturating_add(1);
                        self.fruitless = 0;
                        return Some(Ok(Step::Message(message)));
                    }
                    Mark::Progress => {
                        self.fruitless = 0;
                        return Some(Ok(Step::Message(message)));
                    }
                    Mark::Other => return Some(Ok(Step::Message(message))),
                    Mark::End => {
                        // Read to the trailers (see STREAM_END_WAIT).
                        let _ = tokio::time::timeout(STREAM_END_WAIT, stream.message()).await;
                        self.stream = None;
                        return Some(Ok(Step::Message(message)));
                    }
                },
                Ok(None) => match self.resume.bare_end() {
                    None => {
                        self.stream = None;
                        return None;
                    }
                    Some(err) => (Cut::Transport, err),
                },
                Err(err) => match stream.cut() {
                    Some(cut) => (cut, err),
                    None => {
                        self.stream = None;
                        return Some(Err(err));
                    }
                },
            };
            // The call's deadline bounds the wait for the sandbox too.
            let cut_stream = self.stream.take();
            let waited = match &cut_stream {
                Some(stream) => stream.within_deadline(self.after_cut(cut, &err)).await,
                None => Err(err.clone()),
            };
            drop(cut_stream);
            if let Err(err) = waited {
                return Some(Err(err));
            }
            let total = self
                .deadline
                .map(|deadline| deadline.saturating_duration_since(Instant::now()));
            match self
                .resume
                .reopen(Reopen {
                    conn: &self.conn,
                    from_seq: self.next_seq,
                    total,
                    cut_error: &err,
                })
                .await
            {
                Ok(Reopened { stream, gap }) => {
                    self.stream = Some(stream);
                    if gap {
                        tracing::warn!(target: "rayito::reconnect", feature = self.feature, from_seq = self.next_seq, "output lost during a reconnect: the agent no longer keeps it; reading on from new output");
                    }
                    return Some(Ok(Step::Resumed {
                        lost_from: gap.then_some(self.next_seq),
                        cause: err,
                    }));
                }
                Err(err) => return Some(Err(err)),
            }
        }
    }

    /// After a cut that ended the stream with `err`: `Ok` when the sandbox
    /// is back and the stream should be opened again.
    ///
    /// # Errors
    /// `err` itself without the reconnect contract or after more than 3
    /// fruitless re-subscriptions in a row; else what the wait found:
    /// `SandboxNotFound`, `SandboxLifetime`, `SandboxState`,
    /// `Sandbox { connection_lost }`.
    async fn after_cut(&mut self, cut: Cut, err: &SandboxError) -> Result<(), SandboxError> {
        self.fruitless += 1;
        if self.fruitless > MAX_FRUITLESS_RESUBSCRIBES {
            return Err(err.clone());
        }
        let back = self
            .conn
            .reconnect(self.waiter, self.epoch, cut, self.feature)
            .await?;
        if !back {
            return Err(err.clone());
        }
        self.epoch = self.conn.reconnect_epoch();
        Ok(())
    }

    /// The steps as a `Stream` that ends after the first error.
    pub(crate) fn into_stream(self) -> BoxStream<'static, Result<Step<R::Message>, SandboxError>> {
        Box::pin(futures_util::stream::unfold(
            Some(self),
            |state| async move {
                let mut stream = state?;
                match stream.next().await? {
                    Ok(step) => Some((Ok(step), Some(stream))),
                    Err(err) => Some((Err(err), None)),
                }
            },
        ))
    }
}
