//! What a background command's handle and a terminal's handle share: one
//! process's numbered output read across cuts ([`ResumableStream`],
//! re-subscribed with `Connect(pid, next_seq)`), the last sequence number
//! seen, the end (or the failure) that closed it, and the pid to kill.
//! [`super::CommandHandle`] and [`crate::PtyHandle`] wrap a [`ProcessCore`]
//! with their stream's [`Protocol`] and add only what a chunk means to
//! them.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::Stream;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use tokio::time::Instant;

use crate::error::{ErrorKind, GrpcCode, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;
use crate::transport::{
    AgentConn, AgentStream, Mark, Reopen, Reopened, Reopening, ResumableStream, Resume, Start, Step,
};

/// Opens a process's stream (`Connect`) for a re-subscription; errors name
/// the feature.
pub(crate) type ConnectFn<M> = for<'a> fn(
    &'a AgentConn,
    pb::ConnectRequest,
    Option<Duration>,
    &'static str,
) -> BoxFuture<'a, Result<AgentStream<M>, SandboxError>>;

/// What tells one kind of process stream from another: how its start
/// message names the pid, and the texts of its protocol violations.
pub(crate) struct Protocol<M> {
    /// The pid of a start message (`None` for any other message).
    pub(crate) started: fn(&M) -> Option<u32>,
    /// What a message is to the resumable stream.
    pub(crate) mark: fn(&M) -> Mark,
    /// Opens the stream again after a cut.
    pub(crate) connect: ConnectFn<M>,
    /// A re-subscribed stream that does not start with the process's start
    /// (given the stream's feature).
    pub(crate) bad_restart: fn(&'static str) -> SandboxError,
    /// The stream ended without its end message.
    pub(crate) no_end: &'static str,
    /// A second start message came.
    pub(crate) second_start: &'static str,
}

/// What one message of the stream is to the handle.
pub(crate) enum Decoded<T, E> {
    /// Numbered output: `seq` is now the last one seen; the item (if any)
    /// is yielded.
    Chunk(u64, Option<T>),
    /// The process's end: the stream is over.
    End(E),
    /// A keepalive or an empty message.
    Skip,
    /// A second start message: a protocol violation.
    Restart,
}

/// One process's output stream and what its reading has found so far.
pub(crate) struct ProcessCore<M: 'static, E> {
    sandbox: Sandbox,
    pid: u32,
    /// In a mutex only to make the handle `Sync` (so that the futures of
    /// its `&self` methods are `Send`); polling takes it with `get_mut`,
    /// without locking.
    messages: Mutex<BoxStream<'static, Result<Step<M>, SandboxError>>>,
    last_seq: Option<u64>,
    /// Set when re-subscribing after a cut could not bring all the output.
    output_lost: bool,
    end: Option<E>,
    failure: Option<SandboxError>,
    /// Names the call in the stream's errors.
    feature: &'static str,
    protocol: &'static Protocol<M>,
}

impl<M: Send + 'static, E> ProcessCore<M, E> {
    /// Reads the stream's first message, which must be a start of
    /// `expected` (any pid when `None`), else fails with `bad_start`; then
    /// reads the output from `start.next_seq` on across cuts. Errors of the
    /// stream name `feature`; `suspending_hint` says what the caller can do
    /// when the sandbox suspends.
    pub(crate) async fn open(
        sandbox: &Sandbox,
        mut stream: AgentStream<M>,
        (start, opened_at): (Start, Instant),
        expected: Option<u32>,
        bad_start: impl FnOnce() -> SandboxError,
        protocol: &'static Protocol<M>,
        (feature, suspending_hint): (&'static str, &'static str),
    ) -> Result<Self, SandboxError>
    where
        M: Sync,
    {
        let first = stream.message().await?;
        let pid = match first.as_ref().and_then(protocol.started) {
            Some(pid) if expected.is_none_or(|want| want == pid) => pid,
            _ => return Err(bad_start()),
        };
        let messages = ResumableStream::new(
            sandbox.conn().clone(),
            CoreResume {
                protocol,
                pid,
                feature,
                suspending_hint,
            },
            stream,
            start,
            opened_at,
        )
        .into_stream();
        Ok(Self {
            sandbox: sandbox.clone(),
            pid,
            messages: Mutex::new(messages),
            last_seq: None,
            output_lost: false,
            end: None,
            failure: None,
            feature,
            protocol,
        })
    }
}

impl<M: 'static, E> ProcessCore<M, E> {
    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    pub(crate) fn output_lost(&self) -> bool {
        self.output_lost
    }

    /// A handle's `Debug`: the pid, the last sequence number and whether
    /// the end came (as `ended`), never the output.
    pub(crate) fn fmt_handle(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        ended: &str,
    ) -> fmt::Result {
        f.debug_struct(name)
            .field("pid", &self.pid)
            .field("last_seq", &self.last_seq)
            .field(ended, &self.end.is_some())
            .finish_non_exhaustive()
    }

    fn violation(&self, text: &'static str) -> SandboxError {
        SandboxError::protocol_violation(self.feature, text)
    }

    fn fail<T>(&mut self, err: SandboxError) -> Poll<Option<Result<T, SandboxError>>> {
        self.failure = Some(err.clone());
        Poll::Ready(Some(Err(err)))
    }

    /// The next item of the handle's stream: `decode` says what a message
    /// is; `lost` what to yield when a re-subscription lost output from a
    /// sequence number on (`None`: only remember it). Once the end or a
    /// failure came, the stream is over.
    pub(crate) fn poll_next<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut decode: impl FnMut(M) -> Decoded<T, E>,
        lost: impl Fn(u64) -> Option<T>,
    ) -> Poll<Option<Result<T, SandboxError>>> {
        loop {
            if self.end.is_some() || self.failure.is_some() {
                return Poll::Ready(None);
            }
            let messages = self
                .messages
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(item) = ready!(messages.as_mut().poll_next(cx)) else {
                let err = self.violation(self.protocol.no_end);
                return self.fail(err);
            };
            let message = match item {
                Ok(Step::Message(message)) => message,
                Ok(Step::Resumed { lost_from, .. }) => {
                    self.output_lost |= lost_from.is_some();
                    match lost_from.and_then(&lost) {
                        Some(item) => return Poll::Ready(Some(Ok(item))),
                        None => continue,
                    }
                }
                Err(err) => return self.fail(err),
            };
            match decode(message) {
                Decoded::Chunk(seq, item) => {
                    self.last_seq = Some(seq);
                    if let Some(item) = item {
                        return Poll::Ready(Some(Ok(item)));
                    }
                }
                Decoded::End(end) => {
                    self.end = Some(end);
                    return Poll::Ready(None);
                }
                Decoded::Skip => {}
                Decoded::Restart => {
                    let err = self.violation(self.protocol.second_start);
                    return self.fail(err);
                }
            }
        }
    }

    /// After the stream was read to its end: the end message, or the
    /// failure that stopped the reading.
    pub(crate) fn take_end(&mut self) -> Result<E, SandboxError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        self.end
            .take()
            .ok_or_else(|| self.violation(self.protocol.no_end))
    }
}

/// A process's stream read across cuts as its [`Protocol`] says.
struct CoreResume<M: 'static> {
    protocol: &'static Protocol<M>,
    pid: u32,
    /// Names the call in errors.
    feature: &'static str,
    /// What the caller can do after a `suspending` end.
    suspending_hint: &'static str,
}

impl<M: Send + Sync + 'static> Resume for CoreResume<M> {
    type Message = M;

    fn mark(&self, message: &M) -> Mark {
        (self.protocol.mark)(message)
    }

    fn bare_end(&self) -> Option<SandboxError> {
        Some(SandboxError::protocol_violation(
            self.feature,
            self.protocol.no_end,
        ))
    }

    fn suspending(&self) -> SandboxError {
        SandboxError::sandbox_state("suspending", self.suspending_hint)
    }

    /// `Connect` from `at.from_seq`, and its start checked. When the agent
    /// no longer keeps that output (its 1 MiB ring moved past it:
    /// OUT_OF_RANGE), it reads on with only new output (`from_seq = 0`), as
    /// wire contract 1.5 says for the automatic re-subscription, and
    /// reports the gap, which the handle shows its caller (`truncated`,
    /// `CommandEvent::OutputLost`, `output_lost`).
    fn reopen<'a>(&'a mut self, at: Reopen<'a>) -> Reopening<'a, M> {
        Box::pin(async move {
            let (protocol, pid, feature) = (self.protocol, self.pid, self.feature);
            let open = |from_seq| {
                (protocol.connect)(
                    at.conn,
                    pb::ConnectRequest { pid, from_seq },
                    at.total,
                    feature,
                )
            };
            let (mut stream, gap) = match open(at.from_seq).await {
                Err(err) if err.meta().grpc_code() == Some(GrpcCode::OutOfRange) => {
                    (open(0).await?, true)
                }
                outcome => (outcome?, false),
            };
            match stream.message().await? {
                Some(message) if (protocol.started)(&message) == Some(pid) => {
                    Ok(Reopened { stream, gap })
                }
                _ => Err((protocol.bad_restart)(feature)),
            }
        })
    }
}

/// Reads a handle's stream to its end, stopping at the first error.
pub(crate) async fn drain<S, T>(stream: &mut S) -> Result<(), SandboxError>
where
    S: Stream<Item = Result<T, SandboxError>> + Unpin,
{
    use futures_util::StreamExt as _;
    while let Some(item) = stream.next().await {
        item?;
    }
    Ok(())
}

/// A kill's outcome: `false` when the process had already ended (the agent
/// no longer knows it).
pub(crate) fn killed(outcome: Result<(), SandboxError>) -> Result<bool, SandboxError> {
    match outcome {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}
