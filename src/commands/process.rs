//! What a background command's handle and a terminal's handle share: one
//! process's numbered output read across cuts ([`ResumableStream`]), the
//! last sequence number seen, the end (or the failure) that closed it, and
//! the pid to kill. [`super::CommandHandle`] and [`crate::PtyHandle`] wrap a
//! [`ProcessCore`] and add only what their protocol means by a chunk.

use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use futures_util::Stream;
use futures_util::stream::BoxStream;
use tokio::time::Instant;

use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::Sandbox;
use crate::transport::{AgentStream, ResumableStream, Resume, Start, Step};

/// What tells one kind of process stream from another: how its start
/// message names the pid, and the texts of its protocol violations.
pub(crate) struct Protocol<M> {
    /// The pid of a start message (`None` for any other message).
    pub(crate) started: fn(&M) -> Option<u32>,
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
    /// `expected` (any pid when `None`), else fails with `bad_start`; then reads the output from `start.next_seq` on across
    /// cuts, re-subscribing with the [`Resume`] that `resume` builds for
    /// the pid.
    pub(crate) async fn open<R>(
        sandbox: &Sandbox,
        mut stream: AgentStream<M>,
        (start, opened_at): (Start, Instant),
        expected: Option<u32>,
        bad_start: impl FnOnce() -> SandboxError,
        resume: impl FnOnce(u32) -> R,
        (feature, protocol): (&'static str, &'static Protocol<M>),
    ) -> Result<Self, SandboxError>
    where
        R: Resume<Message = M> + Send + 'static,
    {
        let first = stream.message().await?;
        let pid = match first.as_ref().and_then(protocol.started) {
            Some(pid) if expected.is_none_or(|want| want == pid) => pid,
            _ => return Err(bad_start()),
        };
        let messages = ResumableStream::new(
            sandbox.conn().clone(),
            resume(pid),
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

    /// True once the end message came.
    pub(crate) fn ended(&self) -> bool {
        self.end.is_some()
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
