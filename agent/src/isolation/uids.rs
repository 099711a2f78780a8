//! Handing out sandbox uids so that no two sandboxes share one, in this
//! process or in any other agent or emulator on the host.
//!
//! A uid is only handed out when, at that moment:
//! - this process does not hold it (an in-process set);
//! - no other process on the host holds its lock: each lease keeps an
//!   exclusive `flock` on `/run/rayito-agent/uids/<uid>` (a root-only
//!   directory) for as long as the sandbox lives, and the kernel drops the
//!   lock when its holder ends, however it ends, so a crashed agent frees
//!   its uids;
//! - no process runs under it (the owners of `/proc/<pid>`): a leftover of a
//!   process whose cleanup was killed is never joined by a new sandbox.
//!
//! A lease removes its lock file while still holding the lock; a taker
//! checks after locking that the path still names the file it locked, so a
//! file removed in between is never mistaken for a free uid.
//!
//! Where `/run` is missing or the lock directory is not root's own, only the
//! in-process set and the `/proc` check are used (one warning).

use std::collections::HashSet;
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{FlockOperation, Mode, OFlags};

use super::user::{HOST_ID_BASE, HOST_ID_SPAN, HostIds};

/// Where the lock files of the leased uids live.
const LOCK_DIR: &str = "/run/rayito-agent/uids";

/// How many candidates one allocation tries before it gives up (the full
/// range is 2^24 uids; this many taken in a row means the host is full).
const MAX_TRIES: u32 = 4096;

/// The uids this process has leased.
fn leased() -> &'static Mutex<HashSet<u32>> {
    static LEASED: OnceLock<Mutex<HashSet<u32>>> = OnceLock::new();
    LEASED.get_or_init(|| Mutex::new(HashSet::new()))
}

/// The lock directory, created (root-only) on first use, or `None` where
/// it cannot be trusted (logged once).
fn lock_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| match prepare_lock_dir(Path::new(LOCK_DIR)) {
        Ok(()) => Some(PathBuf::from(LOCK_DIR)),
        Err(err) => {
            tracing::warn!(
                error = %err,
                "no lock directory for sandbox uids ({LOCK_DIR}): uids are kept apart within \
                 this process and from running processes, not from another agent starting \
                 a sandbox at the same moment"
            );
            None
        }
    })
    .as_deref()
}

/// Creates `dir` (and its parent) mode 0700 and checks that both are real
/// directories owned by this process's user and writable by nobody else.
fn prepare_lock_dir(dir: &Path) -> std::io::Result<()> {
    let euid = rustix::process::geteuid().as_raw();
    for path in [dir.parent().unwrap_or(dir), dir] {
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
        let md = std::fs::symlink_metadata(path)?;
        if !md.is_dir() || md.uid() != euid || md.mode() & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not a directory of this user that only it may write",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The owners of every process's `/proc/<pid>` that fall in `range`.
fn uids_running_in(range: &Range<u32>) -> HashSet<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashSet::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| e.metadata().ok().map(|m| m.uid()))
        .filter(|uid| range.contains(uid))
        .collect()
}

/// A sandbox's uid and gid, reserved for it while this value lives.
#[derive(Debug)]
pub(crate) struct UidLease {
    ids: HostIds,
    /// The locked file and its path, when the host has the lock directory.
    lock: Option<(OwnedFd, PathBuf)>,
}

impl UidLease {
    /// Leases a free uid of the sandbox range.
    ///
    /// # Errors
    /// Every uid tried is taken, or a lock file cannot be created.
    pub(crate) fn allocate() -> std::io::Result<Self> {
        Self::allocate_in(HOST_ID_BASE..HOST_ID_BASE + HOST_ID_SPAN, lock_dir())
    }

    /// Leases a free uid of `range`, locking it in `lock_dir` when given.
    pub(crate) fn allocate_in(range: Range<u32>, lock_dir: Option<&Path>) -> std::io::Result<Self> {
        let span = range.end.saturating_sub(range.start);
        if span == 0 {
            return Err(no_free_uid());
        }
        let running = uids_running_in(&range);
        let start = rand::random::<u32>() % span;
        for step in 0..span.min(MAX_TRIES) {
            let uid = range.start + (start + step) % span;
            if running.contains(&uid) {
                continue;
            }
            if !leased().lock().expect("uid set lock").insert(uid) {
                continue;
            }
            let lock = match lock_dir {
                Some(dir) => match try_lock(dir, uid) {
                    Ok(Some(lock)) => Some(lock),
                    Ok(None) => {
                        leased().lock().expect("uid set lock").remove(&uid);
                        continue;
                    }
                    Err(err) => {
                        leased().lock().expect("uid set lock").remove(&uid);
                        return Err(err);
                    }
                },
                None => None,
            };
            return Ok(Self {
                ids: HostIds { uid, gid: uid },
                lock,
            });
        }
        Err(no_free_uid())
    }

    /// The leased uid and gid (the same number).
    pub(crate) fn ids(&self) -> HostIds {
        self.ids
    }
}

fn no_free_uid() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ResourceBusy,
        "no free sandbox uid: every uid tried belongs to another sandbox on this host; \
         end some sandboxes and retry",
    )
}

/// Locks `<dir>/<uid>`: `None` when another holder has it.
fn try_lock(dir: &Path, uid: u32) -> std::io::Result<Option<(OwnedFd, PathBuf)>> {
    let path = dir.join(uid.to_string());
    loop {
        let fd = rustix::fs::open(
            &path,
            OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
            Err(err) => return Err(err.into()),
        }
        // The holder before us may have removed the file between our open
        // and our lock: then what we locked is no longer the uid's lock.
        let locked = rustix::fs::fstat(&fd)?;
        match rustix::fs::lstat(&path) {
            Ok(now) if now.st_ino == locked.st_ino && now.st_dev == locked.st_dev => {
                return Ok(Some((fd, path)));
            }
            Ok(_) => continue,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

impl Drop for UidLease {
    fn drop(&mut self) {
        if let Some((fd, path)) = self.lock.take() {
            // Removed while still locked (see the module's comment).
            let _ = std::fs::remove_file(&path);
            drop(fd);
        }
        leased()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.ids.uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range of uids nothing else in the tests uses.
    fn test_range(offset: u32) -> Range<u32> {
        let start = HOST_ID_BASE + HOST_ID_SPAN - 1000 + offset;
        start..start + 4
    }

    #[test]
    fn a_process_never_gets_a_uid_it_holds() {
        let range = test_range(0);
        let leases: Vec<_> = (0..4)
            .map(|_| UidLease::allocate_in(range.clone(), None).unwrap())
            .collect();
        let mut uids: Vec<_> = leases.iter().map(|l| l.ids().uid).collect();
        uids.sort_unstable();
        uids.dedup();
        assert_eq!(uids.len(), 4, "{uids:?}");
        let err = UidLease::allocate_in(range.clone(), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no free sandbox uid: every uid tried belongs to another sandbox on this host; \
             end some sandboxes and retry"
        );
        drop(leases);
        UidLease::allocate_in(range, None).unwrap();
    }
}
