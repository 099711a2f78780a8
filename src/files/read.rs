//! A file's `Read` stream across cuts (wire contract 2.7). `Read` takes no
//! offset, so after a cut, once the sandbox is back, the file is read again
//! from its start and the bytes already delivered are skipped: the caller
//! gets every byte exactly once, in order. A file that changed in between
//! (its size or modification time differ from the first `Stat`) is never
//! spliced from two versions: the read ends with the cut's error.

use std::time::Duration;

use bytes::Bytes;

use super::{EntryInfo, Files};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;
use crate::transport::{AgentStream, Resubscription, Waiter};

pub(super) struct ReadFeed {
    sandbox: Sandbox,
    path: String,
    feature: &'static str,
    /// The file as the first `Stat` saw it.
    entry: EntryInfo,
    /// Bounds each `Read` stream.
    total: Option<Duration>,
    /// `None` once the read ended.
    stream: Option<AgentStream<pb::ReadResponse>>,
    /// Bytes handed to the caller.
    delivered: u64,
    /// Bytes of the current stream still to skip (delivered before a cut).
    skip: u64,
    resubscription: Resubscription,
    /// The error of the last cut, for a re-read that cannot be used.
    last_cut: Option<SandboxError>,
}

impl ReadFeed {
    pub(super) fn new(
        sandbox: &Sandbox,
        (path, feature): (&str, &'static str),
        entry: EntryInfo,
        (stream, epoch): (AgentStream<pb::ReadResponse>, Option<u64>),
        total: Option<Duration>,
    ) -> Self {
        Self {
            sandbox: sandbox.clone(),
            path: path.to_owned(),
            feature,
            entry,
            total,
            stream: Some(stream),
            delivered: 0,
            skip: 0,
            resubscription: Resubscription::new(epoch, Waiter::Foreground, feature),
            last_cut: None,
        }
    }

    /// The next chunk; `None` at the end of the file.
    pub(super) async fn next(&mut self) -> Option<Result<Bytes, SandboxError>> {
        loop {
            let stream = self.stream.as_mut()?;
            let (cut, err) = match stream.message().await {
                Ok(Some(message)) => {
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
                    self.delivered += chunk.len() as u64;
                    self.resubscription.progressed();
                    return Some(Ok(chunk));
                }
                Ok(None) => {
                    self.stream = None;
                    // Shorter than what was delivered: not the same file.
                    if self.skip > 0 {
                        return self.last_cut.take().map(Err);
                    }
                    return None;
                }
                Err(err) => match stream.cut() {
                    Some(cut) => (cut, err),
                    None => {
                        self.stream = None;
                        return Some(Err(err));
                    }
                },
            };
            self.stream = None;
            self.last_cut = Some(err.clone());
            let conn = self.sandbox.conn();
            if let Err(err) = self.resubscription.after_cut(conn, cut, err).await {
                return Some(Err(err));
            }
            match self.reopen().await {
                Ok(Some(stream)) => {
                    self.stream = Some(stream);
                    self.skip = self.delivered;
                }
                Ok(None) => return self.last_cut.take().map(Err),
                Err(err) => return Some(Err(err)),
            }
        }
    }

    /// `Stat`, then `Read` again: `None` when the file changed.
    async fn reopen(&self) -> Result<Option<AgentStream<pb::ReadResponse>>, SandboxError> {
        let now = Files::new(&self.sandbox)
            .stat(&self.path, self.feature)
            .await?;
        if now.size != self.entry.size || now.modified_time != self.entry.modified_time {
            tracing::warn!(target: "rayito::reconnect", feature = self.feature, "the file changed during a reconnect; not reading it on");
            return Ok(None);
        }
        let request = pb::ReadRequest {
            path: self.path.clone(),
            user: None,
        };
        self.sandbox
            .conn()
            .read_file(request, self.total)
            .await
            .map(Some)
    }
}
