//! A file's `Read` stream across cuts (wire contract 2.7). `Read` takes no
//! offset, so after a cut, once the sandbox is back, the file is read again
//! from its start and the bytes already delivered are skipped: the caller
//! gets every byte exactly once, in order. A file that changed in between
//! (its size or modification time differ from the first `Stat`) is never
//! spliced from two versions: the read ends with the cut's error.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{EntryInfo, Files};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;
use crate::transport::{
    AgentStream, Mark, Reopen, Reopened, Reopening, ResumableStream, Resume, Start, Step, Waiter,
};

/// A file read as a resumable stream: chunks without numbers, read again
/// from the start after a cut (only while the file is unchanged).
struct ReadResume {
    sandbox: Sandbox,
    path: String,
    feature: &'static str,
    /// The user the read names.
    user: Option<pb::User>,
    /// The file as the first `Stat` saw it.
    entry: EntryInfo,
}

impl Resume for ReadResume {
    type Message = pb::ReadResponse;

    fn mark(&self, _message: &pb::ReadResponse) -> Mark {
        Mark::Progress
    }

    fn bare_end(&self) -> Option<SandboxError> {
        None
    }

    fn suspending(&self) -> SandboxError {
        SandboxError::sandbox_state("suspending", "read the file again after the resume")
    }

    /// `Stat`, then `Read` again; the cut's error when the file changed.
    fn reopen<'a>(&'a mut self, at: Reopen<'a>) -> Reopening<'a, pb::ReadResponse> {
        Box::pin(async move {
            let files = Files::new(&self.sandbox);
            let files = match &self.user {
                Some(user) => files.as_user(&user.username),
                None => files,
            };
            let now = files.stat(&self.path, self.feature).await?;
            if now.size != self.entry.size || now.modified_time != self.entry.modified_time {
                tracing::warn!(target: "rayito::reconnect", feature = self.feature, "the file changed during a reconnect; not reading it on");
                return Err(at.cut_error.clone());
            }
            let request = pb::ReadRequest {
                path: self.path.clone(),
                user: self.user.clone(),
            };
            let stream = at.conn.read_file(request, at.total).await?;
            Ok(Reopened { stream, gap: false })
        })
    }
}

pub(super) struct ReadFeed {
    stream: ResumableStream<ReadResume>,
    /// Bytes handed to the caller.
    delivered: u64,
    /// Bytes of the current stream still to skip (delivered before a cut).
    skip: u64,
    /// The error of the last cut, for a re-read shorter than what was
    /// delivered (not the same file).
    last_cut: Option<SandboxError>,
}

impl ReadFeed {
    pub(super) fn new(
        sandbox: &Sandbox,
        (path, feature, user): (&str, &'static str, Option<pb::User>),
        entry: EntryInfo,
        (stream, epoch, opened_at): (AgentStream<pb::ReadResponse>, Option<u64>, Instant),
        total: Option<Duration>,
    ) -> Self {
        let resume = ReadResume {
            sandbox: sandbox.clone(),
            path: path.to_owned(),
            feature,
            user,
            entry,
        };
        let start = Start {
            epoch,
            next_seq: 0,
            waiter: Waiter::Foreground,
            total,
            feature,
        };
        Self {
            stream: ResumableStream::new(sandbox.conn().clone(), resume, stream, start, opened_at),
            delivered: 0,
            skip: 0,
            last_cut: None,
        }
    }

    /// The next chunk; `None` at the end of the file.
    pub(super) async fn next(&mut self) -> Option<Result<Bytes, SandboxError>> {
        loop {
            match self.stream.next().await {
                Some(Ok(Step::Message(message))) => {
                    let mut chunk = message.chunk;
                    if self.skip > 0 {
                        let seen = usize::try_from(self.skip)
                            .unwrap_or(usize::MAX)
                            .min(chunk.len());
                        chunk = chunk.slice(seen..);
                        self.skip -= seen as u64;
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                    self.delivered = self.delivered.saturating_add(chunk.len() as u64);
                    return Some(Ok(chunk));
                }
                Some(Ok(Step::Resumed { cause, .. })) => {
                    self.skip = self.delivered;
                    self.last_cut = Some(cause);
                }
                Some(Err(err)) => return Some(Err(err)),
                // Shorter than what was delivered: not the same file.
                None if self.skip > 0 => return self.last_cut.take().map(Err),
                None => return None,
            }
        }
    }
}
