//! `files().watch_dir()`: a directory's changes as a stream of typed
//! events, stopped by dropping the stream or through a [`WatchStopper`].

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{EntryInfo, Files, entry_info};
use crate::error::{SandboxError, TimeoutScope};
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
    /// The entry as it was when the event was seen, for `Create`, `Write`
    /// and `Chmod` in a watch with [`WatchOptions::include_entry`] (`None`
    /// otherwise, or when the entry was gone by then).
    pub entry: Option<EntryInfo>,
}

/// What [`WatchOptions::on_exit`] is called with: the error that ended the
/// watch, or `None` for a clean end (stopped, dropped, or the agent closed
/// it).
pub type ExitCallback = Box<dyn FnOnce(Option<&SandboxError>) + Send>;

/// Options of [`Files::watch_dir_with`]; the default watches one level,
/// without entries, deadline or callback (as [`Files::watch_dir`] with
/// `recursive` false).
#[derive(Default)]
#[non_exhaustive]
pub struct WatchOptions {
    recursive: bool,
    include_entry: bool,
    user: Option<String>,
    timeout: Option<Duration>,
    on_exit: Option<ExitCallback>,
}

crate::secret::redacted_debug! {
    WatchOptions |o| recursive, include_entry, user, timeout, on_exit = o.on_exit.is_some()
}

impl WatchOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    crate::setters::setters! {
        /// Watches every directory below too, including ones created later.
        recursive: bool;
        /// Events `Create`, `Write` and `Chmod` carry the entry's
        /// [`EntryInfo`] in [`FilesystemEvent::entry`] (one stat by the agent
        /// per event).
        include_entry: bool;
        /// The user the agent watches as (whose permissions the path
        /// needs); empty means the sandbox's default user. The local
        /// backend has one account, `user`: any other is refused by its
        /// agent.
        user: Some impl String;
    }

    /// The watch's deadline from its start, reconnects included: when it
    /// passes, the stream's last item is `Timeout { scope: Request }` and
    /// the watch is closed. Zero means none (the default).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// Called once when the watch ends for good, with the error that ended
    /// it or `None` (stopped, dropped, or closed by the agent); never on a
    /// reconnect. It runs on the task that ends the watch: keep it short.
    /// A panic in it is the caller's (not caught).
    #[must_use]
    pub fn on_exit(mut self, on_exit: impl FnOnce(Option<&SandboxError>) + Send + 'static) -> Self {
        self.on_exit = Some(Box::new(on_exit));
        self
    }
}

/// The watch's `on_exit`, shared by its stream and handle: whoever sees
/// the end first calls it, once.
#[derive(Clone, Default)]
struct Exit(Arc<Mutex<Option<ExitCallback>>>);

impl Exit {
    fn fire(&self, error: Option<&SandboxError>) {
        // Taken out before the call: the callback may stop the watch.
        let callback = self.0.lock().map(|mut slot| slot.take()).unwrap_or(None);
        if let Some(callback) = callback {
            callback(error);
        }
    }
}

/// Stops a watch from anywhere (cheap to clone): its stream then ends.
#[derive(Clone)]
pub struct WatchStopper {
    stop: Arc<watch::Sender<bool>>,
    exit: Exit,
}

crate::secret::redacted_debug!(non_exhaustive WatchStopper);

impl WatchStopper {
    /// Stops the watch: its stream ends (the agent's watch is closed) and
    /// its `on_exit` is called with `None` if the watch had not ended.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.exit.fire(None);
    }
}

/// A directory watch (from [`Files::watch_dir`]): a [`Stream`] of
/// [`FilesystemEvent`]s in the order they happened. It ends when stopped
/// ([`WatchHandle::stop`], a [`WatchStopper`]) or dropped; a failure (the
/// watched directory removed: `FileNotFound`) is its last item.
pub struct WatchHandle {
    inner: Pin<Box<dyn Stream<Item = Result<FilesystemEvent, SandboxError>> + Send>>,
    stop: Arc<watch::Sender<bool>>,
    exit: Exit,
    reconnects: Arc<AtomicU32>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        // Dropped before its end: that is a clean end.
        self.exit.fire(None);
    }
}

crate::secret::redacted_debug! {
    non_exhaustive WatchHandle |o| stopped = *o.stop.borrow()
}

impl WatchHandle {
    /// Stops the watch; the stream ends and `on_exit` (if any, and if the
    /// watch had not ended) is called with `None`. Idempotent.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.exit.fire(None);
    }

    /// A handle that stops this watch from elsewhere (another task).
    pub fn stopper(&self) -> WatchStopper {
        WatchStopper {
            stop: self.stop.clone(),
            exit: self.exit.clone(),
        }
    }

    /// How many times the watch was issued again after a cut or a
    /// suspension (changes made in between are lost).
    pub fn reconnects(&self) -> u32 {
        self.reconnects.load(Ordering::Relaxed)
    }
}

inner_stream!(WatchHandle => Result<FilesystemEvent, SandboxError>);

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
        entry: event.entry.map(entry_info),
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
    /// When the watch's `timeout` passes.
    deadline: Option<(Instant, Duration)>,
    reconnects: Arc<AtomicU32>,
}

/// Sleeps until `deadline`, forever without one.
async fn until(deadline: Option<(Instant, Duration)>) -> Duration {
    match deadline {
        Some((at, timeout)) => {
            tokio::time::sleep_until(at).await;
            timeout
        }
        None => std::future::pending().await,
    }
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
                timeout = until(self.deadline) => {
                    return Some(Err(SandboxError::timeout(
                        TimeoutScope::Request,
                        "files.watch_dir",
                        Some(timeout),
                    )));
                }
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
                Ok(Step::Resumed { .. }) => {
                    self.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Step::Message(_)) => {}
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
        self.watch_dir_with(path, WatchOptions::new().recursive(recursive))
            .await
    }

    /// Watches a directory as [`Files::watch_dir`] does, with `options`
    /// ([`WatchOptions`]: `recursive`, `include_entry`, `user`, a `timeout` for the
    /// whole watch, an `on_exit` callback). Returns once the agent's watch
    /// has started. A watch that fails to start calls no `on_exit`: the
    /// error is returned here.
    ///
    /// # Errors
    /// As [`Files::watch_dir`]; `InvalidArgument` naming `user` (a NUL)
    /// before any I/O.
    pub async fn watch_dir_with(
        &self,
        path: &str,
        options: WatchOptions,
    ) -> Result<WatchHandle, SandboxError> {
        boxed!(Result<WatchHandle, SandboxError>, {
            crate::checks::path(path)?;
            // An empty user of the options is the default: the view's.
            let own = options.user.as_deref().filter(|u| !u.is_empty());
            let user = crate::checks::user(own.or(self.user))?;
            let request = pb::WatchDirRequest {
                path: path.to_owned(),
                recursive: options.recursive,
                user: user.map(|username| pb::User { username }),
                include_entry: options.include_entry,
            };
            let conn = self.sandbox.conn();
            let opened_at = Instant::now();
            let deadline = options.timeout.map(|t| (opened_at + t, t));
            let epoch = conn.reconnect_epoch();
            let stream = match deadline {
                Some((at, timeout)) => tokio::time::timeout_at(at, reissue(conn, &request))
                    .await
                    .map_err(|_| {
                        SandboxError::timeout(
                            TimeoutScope::Request,
                            "files.watch_dir",
                            Some(timeout),
                        )
                    })??,
                None => reissue(conn, &request).await?,
            };
            let (stop, stop_rx) = watch::channel(false);
            let start = Start::background(epoch, 0, "files.watch_dir");
            let reconnects = Arc::new(AtomicU32::new(0));
            let exit = Exit(Arc::new(Mutex::new(options.on_exit)));
            let reader = Reader {
                stream: ResumableStream::new(
                    conn.clone(),
                    WatchResume { request },
                    stream,
                    start,
                    opened_at,
                ),
                stop: stop_rx,
                deadline,
                reconnects: reconnects.clone(),
            };
            let at_end = exit.clone();
            let events = futures_util::stream::unfold(Some(reader), move |state| {
                let at_end = at_end.clone();
                async move {
                    let mut reader = state?;
                    match reader.next().await {
                        Some(Ok(event)) => Some((Ok(event), Some(reader))),
                        // An error ends the stream.
                        Some(Err(err)) => {
                            // Closes the agent's watch before telling anyone.
                            drop(reader);
                            at_end.fire(Some(&err));
                            Some((Err(err), None))
                        }
                        None => {
                            drop(reader);
                            at_end.fire(None);
                            None
                        }
                    }
                }
            });
            Ok(WatchHandle {
                inner: Box::pin(events),
                stop: Arc::new(stop),
                exit,
                reconnects,
            })
        })
    }
}
