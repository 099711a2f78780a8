//! `Write`: a client stream of one or more files. Each file is written to a
//! `.rayito-tmp-*` sibling, fsynced, chmodded and renamed over the target,
//! so a failed or interrupted write leaves the target intact. All of it
//! happens by descriptor in the target's directory, held open from the
//! start ([`TargetDir`]): no path is resolved again after the check.
//!
//! The bytes go to disk on one blocking thread per file, fed the received
//! chunks as they are (`Bytes` views, no copy) through a short queue, so the
//! disk writes overlap with receiving the next chunks; the queue bounds what
//! is held in memory to [`QUEUED_CHUNKS`] chunks.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::time::Duration;

use std::io::Write as _;

use bytes::Bytes;
use rayito_proto::tokens::detail;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::FilesystemServiceImpl;
use super::info::{file_entry_info, io_status};
use super::path::{Resolved, resolve};
use super::target::TargetDir;
use super::xattrs;
use crate::pb;
use crate::phase::Phase;
use crate::sandbox::SandboxEnv;

/// Largest chunk in one message.
const MAX_CHUNK: usize = 1 << 20;
/// Refuses a user the local agent does not have: it has one account,
/// `user` (empty or absent: the same). Every filesystem call that names a
/// user checks it, so none runs as another account than it asked for.
#[allow(clippy::result_large_err)]
pub(crate) fn known_user(username: Option<&str>) -> Result<(), Status> {
    if matches!(username, None | Some("" | "user")) {
        Ok(())
    } else {
        Err(Status::invalid_argument("unknown user"))
    }
}

/// Mode of a new file when the first message gives none.
const DEFAULT_MODE: u32 = 0o644;

/// The mode of a file a call writes (a write, an import), after its
/// owner's check: the local agent has one account, `user` (any other is
/// refused); the mode is the default when unset, at most 0o7777.
#[allow(clippy::result_large_err)]
pub(crate) fn owner_and_mode(username: Option<&str>, mode: Option<u32>) -> Result<u32, Status> {
    known_user(username)?;
    let mode = mode.unwrap_or(DEFAULT_MODE);
    if mode > 0o7777 {
        return Err(Status::invalid_argument("invalid mode"));
    }
    Ok(mode)
}
/// How long the rest of an aborted stream is drained.
const ABORT_DRAIN: Duration = Duration::from_millis(200);
/// Chunks received but not yet written, at most (each at most 1 MiB).
const QUEUED_CHUNKS: usize = 4;

/// What the writer thread of a file is told.
enum Piece {
    Data(Bytes),
    /// Everything was sent: fsync and finish.
    Commit,
}

/// The thread writing one file: it ends with the first write error, after
/// `Commit` (with the fsync's result), or when its queue closes without one
/// (an abort: nothing to sync).
struct Writer {
    queue: mpsc::Sender<Piece>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts the disk's writeback of what was written so far every
/// [`WRITEBACK_EVERY`] bytes, without waiting for it, so that the closing
/// fsync finds most of the file already on its way to the disk instead of
/// starting all of it at the end (for a 64 MiB file that was a third of the
/// Write's time on the project machine: `docs/performance.md`).
#[derive(Default)]
struct Writeback {
    /// Bytes written to the file.
    written: u64,
    /// Bytes whose writeback was started.
    started: u64,
}

/// Bytes between two writeback starts.
const WRITEBACK_EVERY: u64 = 4 << 20;

impl Writeback {
    fn wrote(&mut self, file: &std::fs::File, len: usize) {
        use std::os::fd::AsRawFd as _;
        self.written += len as u64;
        let pending = self.written - self.started;
        if pending < WRITEBACK_EVERY {
            return;
        }
        // SAFETY: sync_file_range only reads its integer arguments; the fd
        // is open for as long as `file` is borrowed. SYNC_FILE_RANGE_WRITE
        // starts the writeback of dirty pages in the range and returns; a
        // failure is only lost advice (the closing fsync still reports
        // every write error), hence ignored.
        let _ = unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                self.started as libc::off64_t,
                pending as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        self.started = self.written;
    }
}

impl Writer {
    fn start(mut file: std::fs::File) -> Self {
        let (queue, mut pieces) = mpsc::channel(QUEUED_CHUNKS);
        let done = tokio::task::spawn_blocking(move || {
            let mut flushed = Writeback::default();
            while let Some(piece) = pieces.blocking_recv() {
                match piece {
                    Piece::Data(chunk) => {
                        file.write_all(&chunk)?;
                        flushed.wrote(&file, chunk.len());
                    }
                    Piece::Commit => return file.sync_all(),
                }
            }
            Ok(())
        });
        Self { queue, done }
    }

    /// Queues a chunk; a writer that stopped on an error gives it here.
    async fn write(&mut self, chunk: Bytes) -> std::io::Result<()> {
        if self.queue.send(Piece::Data(chunk)).await.is_err() {
            return Err(self
                .finish()
                .await
                .err()
                .unwrap_or_else(|| std::io::Error::other("the file writer stopped")));
        }
        Ok(())
    }

    /// Waits for the writer's end.
    async fn finish(&mut self) -> std::io::Result<()> {
        (&mut self.done)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    /// Writes what is queued, fsyncs, and returns the first error.
    async fn commit(mut self) -> std::io::Result<()> {
        // A writer that already stopped says why in `finish`.
        let _ = self.queue.send(Piece::Commit).await;
        self.finish().await
    }
}

/// The file being written. Dropped before [`Open::commit`] renamed it (an
/// error, an abort, or the whole handler dropped: hyper drops a pending
/// service future when the client resets its stream, so an explicit abort
/// path alone would leak the temporary file), it removes its temporary file.
struct Open {
    target: Resolved,
    /// The target's directory, held since the check.
    dir: TargetDir,
    /// The temporary file's name in `dir`, and the file (a second handle:
    /// the writer's goes with its thread), chmodded by descriptor.
    temp: OsString,
    file: std::fs::File,
    /// `None` once committed.
    writer: Option<Writer>,
    mode: u32,
    /// Its metadata, set on the temporary file before the rename.
    metadata: BTreeMap<String, String>,
    /// Whether `temp` became the target.
    renamed: bool,
    env: SandboxEnv,
}

impl Open {
    async fn commit(mut self) -> Result<pb::EntryInfo, Status> {
        let writer = self.writer.take().expect("a writer until the commit");
        let synced = writer.commit().await;
        let (dir, temp, file, mode) = (&self.dir, &self.temp, &self.file, self.mode);
        let metadata = &self.metadata;
        self.env.as_user(|| {
            synced.map_err(|e| io_status(&e))?;
            xattrs::set(file, metadata).map_err(|e| xattrs::set_status(&e))?;
            dir.commit(temp, file, mode).map_err(|e| io_status(&e))
        })?;
        self.renamed = true;
        file_entry_info(&self.target.guest, &self.file).map_err(|e| io_status(&e))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        // Closing the queue without a commit stops the writer unsynced.
        self.writer.take();
        if !self.renamed {
            self.env.as_user(|| self.dir.remove(&self.temp));
        }
    }
}

/// Runs one Write stream to its response.
pub(crate) async fn write(
    service: &FilesystemServiceImpl,
    mut stream: Streaming<pb::WriteRequest>,
) -> Result<pb::WriteResponse, Status> {
    let mut phase = service.phase.subscribe();
    let mut open: Option<Open> = None;
    let mut entries = Vec::new();
    let outcome: Result<(), Status> = loop {
        let msg = tokio::select! {
            m = stream.message() => m,
            _ = phase.changed() => {
                let now = *phase.borrow_and_update();
                match now {
                    Phase::Suspending | Phase::Expired => {
                        break Err(now.gate_status().expect("gated phase"));
                    }
                    Phase::Running | Phase::Terminating => continue,
                }
            }
        };
        let msg = match msg {
            Ok(Some(m)) => m,
            Ok(None) => break Ok(()),
            Err(status) => break Err(status),
        };
        if let Err(e) = handle(service, msg, &mut open, &mut entries).await {
            break Err(e);
        }
    };
    match outcome {
        Ok(()) => {
            if let Some(file) = open.take() {
                entries.push(file.commit().await?);
            }
            if entries.is_empty() {
                return Err(Status::invalid_argument("no files in the stream"));
            }
            Ok(pb::WriteResponse { entries })
        }
        Err(status) => {
            // Removes the temporary file now, before the drain.
            drop(open.take());
            // Drain a little so that the refusal reaches the client as a status.
            let _ = tokio::time::timeout(ABORT_DRAIN, async {
                while let Ok(Some(_)) = stream.message().await {}
            })
            .await;
            Err(status)
        }
    }
}

async fn handle(
    service: &FilesystemServiceImpl,
    msg: pb::WriteRequest,
    open: &mut Option<Open>,
    entries: &mut Vec<pb::EntryInfo>,
) -> Result<(), Status> {
    if msg.chunk.len() > MAX_CHUNK {
        return Err(Status::invalid_argument("chunk larger than 1 MiB"));
    }
    match msg.path {
        Some(path) => {
            if let Some(prev) = open.take() {
                entries.push(prev.commit().await?);
            }
            let metadata = xattrs::checked(msg.metadata)?;
            let mode = owner_and_mode(msg.user.as_ref().map(|u| u.username.as_str()), msg.mode)?;
            let target = resolve(&service.env, &path)?;
            *open = Some(begin(service, target, (mode, metadata)).await?);
        }
        None => {
            if msg.mode.is_some() || msg.user.is_some() || !msg.metadata.is_empty() {
                return Err(Status::invalid_argument(
                    "mode, user or metadata without a path",
                ));
            }
        }
    }
    let Some(file) = open.as_mut() else {
        return Err(Status::invalid_argument("first message has no path"));
    };
    if !msg.chunk.is_empty()
        && let Some(writer) = file.writer.as_mut()
    {
        writer.write(msg.chunk).await.map_err(|e| io_status(&e))?;
    }
    Ok(())
}

/// Creates parents, checks the reserve and opens the temp file.
async fn begin(
    service: &FilesystemServiceImpl,
    target: Resolved,
    (mode, metadata): (u32, BTreeMap<String, String>),
) -> Result<Open, Status> {
    if target.is_view_root() {
        return Err(Status::invalid_argument("is a directory"));
    }
    let reserve = service.disk_reserve.load(Ordering::Relaxed);
    // Every step as the sandbox user (see SandboxEnv::as_user).
    let (dir, temp, file, kept) = service.env.as_user(|| {
        let dir = TargetDir::open(&service.env, &target)?;
        if dir.holds_dir() {
            return Err(Status::invalid_argument("is a directory"));
        }
        let free = dir.available_bytes().map_err(|e| io_status(&e))?;
        if free < reserve {
            return Err(Status::resource_exhausted(detail::DISK_RESERVE));
        }
        let (file, temp) = dir.create_temp().map_err(|e| io_status(&e))?;
        match file.try_clone() {
            Ok(kept) => Ok((dir, temp, file, kept)),
            Err(e) => {
                dir.remove(&temp);
                Err(io_status(&e))
            }
        }
    })?;
    Ok(Open {
        target,
        dir,
        temp,
        file: kept,
        writer: Some(Writer::start(file)),
        mode,
        metadata,
        renamed: false,
        env: service.env.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writeback starts once per [`WRITEBACK_EVERY`] bytes, over
    /// everything written since the last start, and never past the end.
    #[test]
    fn writeback_starts_every_four_mib_of_what_was_written() {
        let file = tempfile::tempfile().expect("a temporary file");
        let mut writeback = Writeback::default();
        let mib = 1 << 20;
        let mut starts = Vec::new();
        for _ in 0..9 {
            (&file).write_all(&vec![1u8; mib]).expect("written");
            writeback.wrote(&file, mib);
            starts.push(writeback.started / mib as u64);
        }
        assert_eq!(starts, [0, 0, 0, 4, 4, 4, 4, 8, 8]);
        assert_eq!(writeback.written, 9 * mib as u64);
    }
}
