//! `WatchDir`: inotify on a directory (and, when recursive, on every
//! directory below it, including ones created later), as a stream of
//! `started`, then `FilesystemEvent`s named relative to the watched
//! directory, with a KeepAlive on a stream silent for 50 s. The stream ends
//! when the watched directory goes away, and follows the phase like Read.
//!
//! inotify to event type, as fsnotify does: CREATE and MOVED_TO -> create,
//! MODIFY -> write, DELETE -> remove, MOVED_FROM -> rename, ATTRIB -> chmod.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::Status;

use super::info::{entry_info, io_status};
use super::path::Resolved;
use crate::pb;
use crate::phase::{Phase, PhaseCell};
use crate::sandbox::SandboxEnv;

/// A silent watch stream gets a KeepAlive after this long.
const KEEPALIVE_AFTER: Duration = Duration::from_secs(50);
/// Most directories one recursive watch follows.
const MAX_WATCHED_DIRS: usize = 4096;
/// Events buffered between the watch task and its gRPC stream.
const STREAM_BUFFER: usize = 256;

type Sender = mpsc::Sender<Result<pb::WatchDirResponse, Status>>;

fn flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::MODIFY
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

fn errno_status(e: Errno) -> Status {
    io_status(&std::io::Error::from(e))
}

/// The watches of one stream: watch descriptor -> directory relative to the
/// watched root ("" for the root itself).
struct Watches {
    fd: AsyncFd<OwnedFd>,
    dirs: HashMap<i32, String>,
    root: Resolved,
    recursive: bool,
    include_entry: bool,
}

impl Watches {
    /// Watches `rel` (relative to the root) and, when recursive, every
    /// directory below it.
    fn add_tree(&mut self, env: &SandboxEnv, rel: &str) -> Result<(), Status> {
        let host = self.host(rel);
        if self.dirs.len() >= MAX_WATCHED_DIRS {
            return Err(Status::resource_exhausted("too many directories to watch"));
        }
        let wd = env
            .as_user(|| inotify::add_watch(self.fd.get_ref(), &host, flags()))
            .map_err(errno_status)?;
        self.dirs.insert(wd, rel.to_owned());
        if !self.recursive {
            return Ok(());
        }
        let children: Vec<String> = env
            .as_user(|| std::fs::read_dir(&host))
            .map_err(|e| io_status(&e))?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for name in children {
            // A directory that vanished meanwhile is simply not watched.
            match self.add_tree(env, &join(rel, &name)) {
                Ok(()) => {}
                Err(status) if status.code() == tonic::Code::NotFound => {}
                Err(status) => return Err(status),
            }
        }
        Ok(())
    }

    fn host(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.host.clone()
        } else {
            self.root.host.join(rel)
        }
    }

    fn guest(&self, rel: &str) -> String {
        join(self.root.guest.trim_end_matches('/'), rel)
    }
}

fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{dir}/{name}"),
    }
}

/// Opens the watch (errors are the call's status) and starts its task.
#[allow(clippy::result_large_err)]
pub(crate) fn start(
    env: SandboxEnv,
    phase: PhaseCell,
    root: Resolved,
    recursive: bool,
    include_entry: bool,
) -> Result<mpsc::Receiver<Result<pb::WatchDirResponse, Status>>, Status> {
    let md = env
        .as_user(|| std::fs::symlink_metadata(&root.host))
        .map_err(|e| io_status(&e))?;
    if !md.is_dir() {
        return Err(Status::invalid_argument("not a directory"));
    }
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).map_err(errno_status)?;
    // SAFETY: an OwnedFd stays open until dropped and always names the
    // same descriptor; the AsyncFd owns it for its whole life.
    let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| io_status(&std::io::Error::from(e)))?;
    let mut watches = Watches {
        fd,
        dirs: HashMap::new(),
        root,
        recursive,
        include_entry,
    };
    watches.add_tree(&env, "")?;
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    tokio::spawn(run(watches, env, phase, tx));
    Ok(rx)
}

fn started() -> pb::WatchDirResponse {
    pb::WatchDirResponse {
        event: Some(pb::watch_dir_response::Event::Started(pb::WatchStarted {})),
    }
}

async fn run(mut watches: Watches, env: SandboxEnv, phase: PhaseCell, tx: Sender) {
    if tx.send(Ok(started())).await.is_err() {
        return;
    }
    let mut phase_rx = phase.subscribe();
    let mut last_sent = Instant::now();
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    loop {
        let mut guard = tokio::select! {
            ready = watches.fd.readable() => match ready {
                Ok(guard) => guard,
                Err(e) => {
                    let _ = tx.send(Err(io_status(&e))).await;
                    return;
                }
            },
            changed = phase_rx.changed() => {
                if changed.is_err() {
                    return;
                }
                let gate = *phase_rx.borrow_and_update();
                if matches!(gate, Phase::Suspending | Phase::Expired) {
                    let _ = tx.send(Err(gate.gate_status().expect("gated"))).await;
                    return;
                }
                continue;
            }
            _ = tokio::time::sleep_until(last_sent + KEEPALIVE_AFTER) => {
                let keepalive = pb::WatchDirResponse {
                    event: Some(pb::watch_dir_response::Event::Keepalive(pb::KeepAlive {})),
                };
                if tx.send(Ok(keepalive)).await.is_err() {
                    return;
                }
                last_sent = Instant::now();
                continue;
            }
            _ = tx.closed() => return,
        };
        // Drain every event the kernel has; collect first (the reader
        // borrows the descriptor), then act.
        let mut raw = Vec::new();
        {
            let mut reader = inotify::Reader::new(watches.fd.get_ref(), &mut buf);
            loop {
                match reader.next() {
                    Ok(event) => raw.push((
                        event.wd(),
                        event.events(),
                        event
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    )),
                    Err(Errno::WOULDBLOCK) => break,
                    Err(Errno::INTR) => continue,
                    Err(e) => {
                        let _ = tx.send(Err(errno_status(e))).await;
                        return;
                    }
                }
            }
        }
        guard.clear_ready();
        for (wd, mask, name) in raw {
            match handle(&mut watches, &env, wd, mask, &name) {
                Step::Send(event) => {
                    let message = pb::WatchDirResponse {
                        event: Some(pb::watch_dir_response::Event::Filesystem(*event)),
                    };
                    if tx.send(Ok(message)).await.is_err() {
                        return;
                    }
                    last_sent = Instant::now();
                }
                Step::Skip => {}
                Step::RootGone => {
                    let _ = tx
                        .send(Err(Status::not_found("watched directory was removed")))
                        .await;
                    return;
                }
            }
        }
    }
}

enum Step {
    Send(Box<pb::FilesystemEvent>),
    Skip,
    RootGone,
}

fn handle(watches: &mut Watches, env: &SandboxEnv, wd: i32, mask: ReadFlags, name: &str) -> Step {
    if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
        return Step::Skip;
    }
    let Some(dir) = watches.dirs.get(&wd).cloned() else {
        return Step::Skip;
    };
    if mask.contains(ReadFlags::IGNORED) {
        watches.dirs.remove(&wd);
        return if dir.is_empty() {
            Step::RootGone
        } else {
            Step::Skip
        };
    }
    // The directory itself going away is reported by its parent's watch.
    if mask.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
        return if dir.is_empty() {
            Step::RootGone
        } else {
            Step::Skip
        };
    }
    let rel = join(&dir, name);
    let kind = if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
        pb::FilesystemEventType::Create
    } else if mask.contains(ReadFlags::MODIFY) {
        pb::FilesystemEventType::Write
    } else if mask.contains(ReadFlags::DELETE) {
        pb::FilesystemEventType::Remove
    } else if mask.contains(ReadFlags::MOVED_FROM) {
        pb::FilesystemEventType::Rename
    } else if mask.contains(ReadFlags::ATTRIB) {
        pb::FilesystemEventType::Chmod
    } else {
        return Step::Skip;
    };
    if watches.recursive
        && kind == pb::FilesystemEventType::Create
        && mask.contains(ReadFlags::ISDIR)
    {
        // Best effort: a directory removed right away is not watched.
        let _ = watches.add_tree(env, &rel);
    }
    let entry = if watches.include_entry && kind != pb::FilesystemEventType::Remove {
        let guest = watches.guest(&rel);
        let host = watches.host(&rel);
        env.as_user(|| entry_info(&guest, Path::new(&host))).ok()
    } else {
        None
    };
    Step::Send(Box::new(pb::FilesystemEvent {
        name: rel,
        r#type: kind as i32,
        entry,
    }))
}
