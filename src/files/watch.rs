//! `files().watch_dir()`: a directory's changes as a stream of typed
//! events, stopped by dropping the stream or through a [`WatchStopper`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Files;
use crate::error::SandboxError;
use crate::pb;
use crate::pb::watch_dir_response::Event;
use crate::transport::{
    AgentConn, AgentStream, Mark, Reopen, Reopened, Reopening, ResumableStream, Resume, Start, Step,
};

/// What happened to an entry of a watched directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FilesystemEventKind {
    /// It was created (or moved in).
    Create,
    /// Its contents were written.
    Write,
    /// It was removed.
    Remove,
    /// It was renamed or moved away (its new name, if still inside the
    /// watched directory, comes as a `Create`).
    Rename,
    /// Its permissions, owner or times changed.
    Chmod,
}

/// One change in a watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilesystemEvent {
    /// The entry's path relative to the watched directory (`a.txt`, or
    /// `sub/a.txt` in a recursive watch).
    pub name: String,
    /// What happened.
    pub kind: FilesystemEventKind,
}

/// Stops a watch from anywhere (cheap to clone): its stream then ends.
#[derive(Debug, Clone)]
pub struct WatchStopper {
    stop: Arc<watch::Sender<bool>>,
}

impl WatchStopper {
    /// Stops the watch: its stream ends (the agent's watch is closed).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// A directory watch (from [`Files::watch_dir`]): a [`Stream`] of
/// [`FilesystemEvent`]s in the order they happened. It ends when stopped
/// ([`WatchHandle::stop`], a [`WatchStopper`]) or dropped; a failure (the
/// watched directory removed: `FileNotFound`) is its last item.
pub struct WatchHandle {
    inner: Pin<Box<dyn Stream<Item = Result<FilesystemEvent, SandboxError>> + Send>>,
    stop: Arc<watch::Sender<bool>>,
}

crate::secret::redacted_debug! {
    non_exhaustive WatchHandle |o| stopped = *o.stop.borrow()
}

impl WatchHandle {
    /// Stops the watch; the stream ends.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// A handle that stops this watch from elsewhere (another task).
    pub fn stopper(&self) -> WatchStopper {
        WatchStopper {
            stop: self.stop.clone(),
        }
    }
}

impl Stream for WatchHandle {
    type Item = Result<FilesystemEvent, SandboxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

fn event_from(event: pb::FilesystemEvent) -> Option<FilesystemEvent> {
    let kind = match pb::FilesystemEventType::try_from(event.r#type) {
        Ok(pb::FilesystemEventType::Create) => FilesystemEventKind::Create,
        Ok(pb::FilesystemEventType::Write) => FilesystemEventKind::Write,
        Ok(pb::FilesystemEventType::Remove) => FilesystemEventKind::Remove,
        Ok(pb::FilesystemEventType::Rename) => FilesystemEventKind::Rename,
        Ok(pb::FilesystemEventType::Chmod) => FilesystemEventKind::Chmod,
        // A kind this SDK does not know yet is skipped.
        _ => return None,
    };
    Some(FilesystemEvent {
        name: event.name,
        kind,
    })
}

/// A watch as a resumable stream: no numbers and no history, so after a
/// cut it is issued again and changes made meanwhile are lost.
struct WatchResume {
    request: pb::WatchDirRequest,
}

impl Resume for WatchResume {
    type Message = pb::WatchDirResponse;

    fn mark(&self, message: &pb::WatchDirResponse) -> Mark {
        match message.event {
            Some(Event::Filesystem(_)) => Mark::Progress,
            _ => Mark::Other,
        }
    }

    fn bare_end(&self) -> Option<SandboxError> {
        None
    }

    fn suspending(&self) -> SandboxError {
        SandboxError::sandbox_state("suspending", "watch the directory again after the resume")
    }

    fn reopen<'a>(&'a mut self, at: Reopen<'a>) -> Reopening<'a, pb::WatchDirResponse> {
        Box::pin(async move {
            let stream = reissue(at.conn, &self.request).await?;
            Ok(Reopened { stream, gap: false })
        })
    }
}

/// The watch's events until it is stopped.
struct Reader {
    stream: ResumableStream<WatchResume>,
    stop: watch::Receiver<bool>,
}

impl Reader {
    /// The next event; `None` when stopped or when the agent ended the
    /// stream. After a cut (or a suspension) the watch is reissued once the
    /// sandbox is back.
    async fn next(&mut self) -> Option<Result<FilesystemEvent, SandboxError>> {
        loop {
            if *self.stop.borrow_and_update() {
                return None;
            }
            let step = tokio::select! {
                step = self.stream.next() => step?,
                // Stopped (or every sender gone): loop to see which.
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    continue;
                }
            };
            match step {
                Ok(Step::Message(pb::WatchDirResponse {
                    event: Some(Event::Filesystem(event)),
                })) => {
                    if let Some(event) = event_from(event) {
                        return Some(Ok(event));
                    }
                }
                Ok(Step::Message(pb::WatchDirResponse {
                    event: Some(Event::Started(_)),
                })) => {
                    return Some(Err(SandboxError::protocol_violation(
                        "files.watch_dir",
                        "the watch stream sent a second started event",
                    )));
                }
                Ok(Step::Message(_) | Step::Resumed { .. }) => {}
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

/// Opens the watch and checks its `started` event.
async fn reissue(
    conn: &AgentConn,
    request: &pb::WatchDirRequest,
) -> Result<AgentStream<pb::WatchDirResponse>, SandboxError> {
    let mut stream = conn.watch_dir(request.clone()).await?;
    match stream.message().await? {
        Some(pb::WatchDirResponse {
            event: Some(Event::Started(_)),
        }) => Ok(stream),
        _ => Err(SandboxError::protocol_violation(
            "files.watch_dir",
            "the watch stream did not start with a started event",
        )),
    }
}

impl Files<'_> {
    /// Watches a directory (and, when `recursive`, every directory below it,
    /// including ones created later) until the returned stream is stopped
    /// or dropped. Events are named relative to `path`.
    ///
    /// The watch survives cuts and suspensions (wire contract 2.7): it
    /// waits until the sandbox is back (asleep while it is suspended, never
    /// waking it) and is then issued again. Changes made while it was cut
    /// are lost: the agent keeps no history of a watch, so nothing that
    /// happened between the cut and the reissued watch is reported. A
    /// sandbox that ended makes the stream's last item `SandboxNotFound`.
    ///
    /// # Errors
    /// `FileNotFound` for a missing path; `InvalidArgument` when it is not
    /// a directory (or, before any I/O, an empty path or one with a NUL);
    /// `Sandbox { code: PermissionDenied }` for a path the sandbox user may
    /// not use; `RateLimit` above
    /// the agent's 4,096 watched directories; transport failures.
    pub async fn watch_dir(
        &self,
        path: &str,
        recursive: bool,
    ) -> Result<WatchHandle, SandboxError> {
        boxed!(Result<WatchHandle, SandboxError>, {
            crate::checks::path(path)?;
            let request = pb::WatchDirRequest {
                path: path.to_owned(),
                recursive,
                user: None,
                include_entry: false,
            };
            let conn = self.sandbox.conn();
            let opened_at = Instant::now();
            let epoch = conn.reconnect_epoch();
            let stream = reissue(conn, &request).await?;
            let (stop, stop_rx) = watch::channel(false);
            let start = Start::background(epoch, 0, "files.watch_dir");
            let reader = Reader {
                stream: ResumableStream::new(
                    conn.clone(),
                    WatchResume { request },
                    stream,
                    start,
                    opened_at,
                ),
                stop: stop_rx,
            };
            let events = futures_util::stream::unfold(Some(reader), |state| async move {
                let mut reader = state?;
                match reader.next().await {
                    Some(Ok(event)) => Some((Ok(event), Some(reader))),
                    // An error ends the stream.
                    Some(Err(err)) => Some((Err(err), None)),
                    None => None,
                }
            });
            Ok(WatchHandle {
                inner: Box::pin(events),
                stop: Arc::new(stop),
            })
        })
    }
}
