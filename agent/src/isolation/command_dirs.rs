//! The directories of a sandbox's command cgroups, made ahead and removed
//! behind: the `mkdir` of the next command's cgroup and the `rmdir` of the
//! ended ones run in the window after a launch, while its child runs,
//! instead of between a Start request and its `clone3` and between a
//! command's end and its end event (about 30 µs each on the path of every
//! command; docs/performance.md, "Session 26: the proxy's hop and the
//! command cgroup's directory (issue 44, item 3)"). With no launch to
//! follow, an ended command's directory goes [`REMOVE_ENDED_AFTER`] after
//! its end.
//!
//! A directory is never used twice: each made ahead is new (random name),
//! so a late `cgroup.kill` of an ended command's handle cannot reach
//! another command's processes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after a command's end its directory is removed when no launch
/// came first: long past the end event's way out, short enough that an
/// idle sandbox keeps no ended command's cgroup.
pub(crate) const REMOVE_ENDED_AFTER: Duration = Duration::from_millis(20);

/// The most ended directories kept for removal; past it one is removed at
/// once (a burst of ends with no launch between them stays bounded).
const MAX_ENDED: usize = 64;

/// The command cgroup directories of one sandbox cgroup.
#[derive(Debug, Default)]
pub(crate) struct CommandDirs {
    /// One directory made ahead for the next command, if any.
    spare: Mutex<Option<PathBuf>>,
    /// Directories of ended commands, left to remove (empty ones go; a
    /// directory with a process left in the background stays, as before,
    /// until that process ends and the handle is dropped, or the sandbox's
    /// removal).
    ended: Mutex<Vec<PathBuf>>,
    /// Whether a removal of the ended is already scheduled.
    removal_scheduled: AtomicBool,
}

impl CommandDirs {
    /// A new directory under `parent` for one command: the one made ahead,
    /// else one made now.
    ///
    /// # Errors
    /// The `mkdir`'s.
    pub(crate) fn take(&self, parent: &Path) -> std::io::Result<PathBuf> {
        if let Some(dir) = self.spare.lock().expect("command dirs lock").take() {
            return Ok(dir);
        }
        make(parent)
    }

    /// Queues the directory of an ended command for removal; `true` when
    /// the caller should schedule [`CommandDirs::remove_ended`] (none is
    /// scheduled yet).
    pub(crate) fn ended(&self, dir: PathBuf) -> bool {
        let mut ended = self.ended.lock().expect("command dirs lock");
        if ended.len() >= MAX_ENDED {
            let _ = std::fs::remove_dir(&dir);
        } else {
            ended.push(dir);
        }
        !self.removal_scheduled.swap(true, Ordering::AcqRel)
    }

    /// Removes the ended commands' directories (those still holding a
    /// process are refused, EBUSY: their handle's drop or the sandbox's
    /// removal takes them then).
    pub(crate) fn remove_ended(&self) {
        self.removal_scheduled.store(false, Ordering::Release);
        let ended = std::mem::take(&mut *self.ended.lock().expect("command dirs lock"));
        for dir in ended {
            let _ = std::fs::remove_dir(&dir);
        }
    }

    /// The work after a launch: removes the ended commands' directories
    /// and makes the next command's.
    pub(crate) fn tidy(&self, parent: &Path) {
        self.remove_ended();
        let mut spare = self.spare.lock().expect("command dirs lock");
        if spare.is_none() {
            match make(parent) {
                Ok(dir) => *spare = Some(dir),
                Err(err) => tracing::warn!(error = %err, "cannot make a command cgroup ahead"),
            }
        }
    }
}

/// Makes a new command directory under `parent`.
fn make(parent: &Path) -> std::io::Result<PathBuf> {
    let dir = parent.join(format!("command-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::CommandDirs;

    /// A directory is handed out once: the one made ahead, then a new one;
    /// an ended one is removed by the next tidy, never handed out again.
    #[test]
    fn directories_are_made_ahead_removed_behind_and_never_reused() {
        let parent = tempfile::tempdir().unwrap();
        let dirs = CommandDirs::default();
        let first = dirs.take(parent.path()).unwrap();
        assert!(first.is_dir());
        dirs.tidy(parent.path());
        let spare = dirs
            .spare
            .lock()
            .unwrap()
            .clone()
            .expect("a spare made ahead");
        assert!(spare.is_dir());
        let second = dirs.take(parent.path()).unwrap();
        assert_eq!(second, spare, "the spare is taken first");
        assert!(
            dirs.ended(first.clone()),
            "the first end schedules a removal"
        );
        assert!(first.is_dir(), "removal waits for the next tidy");
        dirs.tidy(parent.path());
        assert!(!first.exists(), "an ended directory goes at the next tidy");
        let third = dirs.take(parent.path()).unwrap();
        assert!(third != first && third != second);
        assert!(dirs.ended(second.clone()), "a removal is scheduled again");
        assert!(
            !dirs.ended(third.clone()),
            "one scheduled removal at a time"
        );
        dirs.remove_ended();
        assert!(!second.exists() && !third.exists());
        // Nothing is left: the last tidy's spare became the third.
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    /// An ended directory still holding something stays (the kernel refuses
    /// an rmdir of a cgroup with a process; here a file stands for it).
    #[test]
    fn a_busy_ended_directory_is_left_alone() {
        let parent = tempfile::tempdir().unwrap();
        let dirs = CommandDirs::default();
        let busy = dirs.take(parent.path()).unwrap();
        std::fs::write(busy.join("member"), b"").unwrap();
        dirs.ended(busy.clone());
        dirs.tidy(parent.path());
        assert!(busy.join("member").exists());
    }
}
