//! Who owns an emulator's root, and pruning the roots of emulators whose
//! process is gone.
//!
//! A root the emulator creates holds `.owner.lock` (`<pid> <start time>`),
//! under an exclusive `flock` for as long as the emulator lives. The kernel
//! drops the lock when the process ends however it ends (SIGKILL and
//! `std::process::exit` included), so a held lock is the liveness test: no
//! pid, which the system may reuse, is trusted. At start, every
//! `rayito-emulator-*` directory in the temporary directory that belongs
//! to this user and whose lock is free is removed. A root without a lock
//! file (one being made, or made by an older version) or with a held lock,
//! or another user's, is never touched.
//!
//! The lock file is made under a temporary name, locked, then renamed into
//! place, so that a pruner never finds a root's lock before it is held.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

/// The lock file in a root.
pub(crate) const LOCK_NAME: &str = ".owner.lock";
/// The names of emulator roots in the temporary directory.
pub(crate) const ROOT_PREFIX: &str = "rayito-emulator-";

/// This process's start time in clock ticks since boot (`/proc/self/stat`
/// field 22), to tell a reused pid apart when a person reads the file.
fn start_time() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count after its `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .unwrap_or("0")
        .to_owned()
}

/// Writes and locks `<root>/.owner.lock`; the lock lasts as long as the
/// returned file is open.
///
/// # Errors
/// The file cannot be made, locked or renamed into place.
pub(crate) fn take(root: &Path) -> std::io::Result<File> {
    let temp = root.join(format!(
        "{LOCK_NAME}.{}.{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)?;
    let locked = (|| {
        rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
        writeln!(file, "{} {}", std::process::id(), start_time())?;
        std::fs::rename(&temp, root.join(LOCK_NAME))
    })();
    if let Err(err) = locked {
        let _ = std::fs::remove_file(&temp);
        return Err(err);
    }
    Ok(file)
}

/// Removes the roots under `temp` left by emulators whose process is gone
/// (see the module's doc); returns them.
pub(crate) fn prune_stale_roots(temp: &Path) -> Vec<PathBuf> {
    let euid = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut pruned = Vec::new();
    for entry in entries.flatten() {
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(ROOT_PREFIX));
        // Not followed: a link named like a root is not a root.
        let ours = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == euid);
        if !(named && ours) {
            continue;
        }
        let root = entry.path();
        let Ok(lock) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(root.join(LOCK_NAME))
        else {
            continue;
        };
        let lock_ours = lock
            .metadata()
            .is_ok_and(|m| m.is_file() && m.uid() == euid);
        // Free: its owner is gone. Held across the removal, so that a
        // second pruner skips it.
        if lock_ours && rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_dir_all(&root);
            pruned.push(root);
        }
    }
    pruned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_roots_of_gone_owners_are_pruned() {
        let temp = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let root = temp.path().join(name);
            std::fs::create_dir_all(root.join("s3/rayito-local")).unwrap();
            root
        };
        // Held: its emulator lives (a lock on another open file of this
        // process conflicts as another process's would).
        let live = make("rayito-emulator-live");
        let held = take(&live).unwrap();
        // Its lock taken, then closed: its process ended.
        let dead = make("rayito-emulator-dead");
        drop(take(&dead).unwrap());
        let lockless = make("rayito-emulator-lockless");
        let other_name = make("rayito-agent-x");
        drop(take(&other_name).unwrap());
        let pruned = prune_stale_roots(temp.path());
        assert_eq!(pruned, std::slice::from_ref(&dead));
        assert!(!dead.exists());
        assert!(live.exists() && lockless.exists() && other_name.exists());
        let owner = std::fs::read_to_string(live.join(LOCK_NAME)).unwrap();
        assert!(
            owner.starts_with(&format!("{} ", std::process::id())),
            "{owner}"
        );
        // No temporary lock name is left.
        assert_eq!(std::fs::read_dir(&live).unwrap().count(), 2);
        drop(held);
        assert_eq!(prune_stale_roots(temp.path()), std::slice::from_ref(&live));
        if !rustix::process::geteuid().is_root() {
            println!(
                "SKIPPED: only_roots_of_gone_owners_are_pruned (owner part): not root, cannot chown"
            );
            return;
        }
        // Another user's root, its lock free: never touched.
        let foreign = make("rayito-emulator-foreign");
        drop(take(&foreign).unwrap());
        std::os::unix::fs::chown(&foreign, Some(65_534), Some(65_534)).unwrap();
        assert!(prune_stale_roots(temp.path()).is_empty());
        assert!(foreign.exists());
        // Our root with another user's lock file: not touched either.
        std::os::unix::fs::chown(&foreign, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(foreign.join(LOCK_NAME), Some(65_534), Some(65_534)).unwrap();
        assert!(prune_stale_roots(temp.path()).is_empty());
    }
}
