//! The pool file shared by the processes of one host: every operation
//! reads, changes and rewrites the whole file under an exclusive `flock`
//! on `<file>.lock`, so two processes never hand out one slot and never
//! lose each other's changes.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::slot::{decode, encode};
use super::store::{Op, OpResult, SlotStore};
use crate::error::SandboxError;

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The pool file and its lock file.
pub(crate) struct FileStore {
    path: PathBuf,
    lock: PathBuf,
}

impl FileStore {
    pub(crate) fn new(path: PathBuf) -> Self {
        let mut lock = path.clone().into_os_string();
        lock.push(".lock");
        Self {
            path,
            lock: lock.into(),
        }
    }
}

impl SlotStore for FileStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn apply(&self, op: Op) -> BoxFuture<'_, Result<OpResult, SandboxError>> {
        let (path, lock) = (self.path.clone(), self.lock.clone());
        Box::pin(async move {
            // The lock may be held by another process: wait for it off the
            // runtime's threads.
            tokio::task::spawn_blocking(move || transact(&path, &lock, op))
                .await
                .map_err(|_| SandboxError::internal("pool store", "the file operation panicked"))?
        })
    }
}

/// A file problem, named by what failed and the I/O error's kind (never the
/// path, which may name a user's directories).
fn file_error(what: &str, err: &std::io::Error) -> SandboxError {
    if err.raw_os_error() == Some(libc::ELOOP) {
        return SandboxError::invalid_argument(
            "store",
            "the pool file or its lock is a symbolic link; point the pool at a regular file",
        );
    }
    SandboxError::invalid_argument(
        "store",
        format!(
            "cannot {what} the pool file ({}); check the file, its directory and their permissions",
            err.kind()
        ),
    )
}

/// Opens for reading and writing, creating with mode 0600; never through a
/// symbolic link.
fn open_private(path: &Path, create_new: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true);
    }
    options.open(path)
}

/// Which file a check is about, as an error names it (never the path).
#[derive(Clone, Copy)]
enum Role {
    Pool,
    Lock,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Pool => "the pool file",
            Role::Lock => "the pool file's lock",
        }
    }

    /// Why other users may not open it.
    fn why_private(self) -> &'static str {
        match self {
            Role::Pool => "it holds access tokens",
            Role::Lock => "whoever can open it can hold it",
        }
    }
}

/// Refuses a file this process's user does not own, or that any other user
/// may read or write: the pool file holds access tokens, and whoever can
/// open the lock can hold it forever or (owning it) swap the file. Checked
/// on the open descriptor, so the file checked is the file used.
fn check_private(file: &File, role: Role) -> Result<(), SandboxError> {
    let meta = file.metadata().map_err(|e| file_error("check", &e))?;
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(SandboxError::invalid_argument(
            "store",
            format!(
                "{} belongs to another user; the pool file and its lock must belong to the user running the pool",
                role.name()
            ),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SandboxError::invalid_argument(
            "store",
            format!(
                "{} may be read or written by other users (mode {mode:04o}); {}: make it mode 0600",
                role.name(),
                role.why_private()
            ),
        ));
    }
    Ok(())
}

fn transact(path: &Path, lock_path: &Path, op: Op) -> Result<OpResult, SandboxError> {
    let lock = open_private(lock_path, false).map_err(|e| file_error("lock", &e))?;
    check_private(&lock, Role::Lock)?;
    // Released when `lock` is closed, also if this thread unwinds.
    lock.lock().map_err(|e| file_error("lock", &e))?;
    let mut bytes = Vec::new();
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(mut file) => {
            check_private(&file, Role::Pool)?;
            file.read_to_end(&mut bytes)
                .map_err(|e| file_error("read", &e))?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(file_error("read", &e)),
    }
    let mut slots = decode(&bytes)?;
    let (result, changed) = op.apply(&mut slots);
    if changed {
        write_whole(path, &encode(&slots)).map_err(|e| file_error("write", &e))?;
    }
    drop(lock);
    Ok(result)
}

/// Replaces `path` with `bytes`: a new 0600 file beside it, synced, renamed
/// over it, then the directory synced, so a crash leaves the old file or
/// the new one, never a mix.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut temp_name = path.file_name().unwrap_or_default().to_os_string();
    temp_name.push(format!(
        ".{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let temp = dir.join(temp_name);
    let result = (|| {
        let mut file = open_private(&temp, true)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::pool::slot::tests::record;
    use crate::pool::slot::{SlotState, StoredSlot};

    #[tokio::test]
    async fn the_file_store_keeps_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool.json");
        let store = FileStore::new(path.clone());
        crate::pool::store::contract::check(&store).await;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // No temporary file is left behind.
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["pool.json", "pool.json.lock"]);
    }

    #[tokio::test]
    async fn a_symbolic_link_is_refused_and_nothing_is_written_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let path = dir.path().join("pool.json");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let store = FileStore::new(path);
        let slot = StoredSlot {
            record: record("a", "img", SlotState::Ready, Duration::from_secs(60)),
            owner: None,
            lease_until: None,
        };
        let err = (&store as &dyn SlotStore)
            .record_warming(slot)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: the pool file or its lock is a symbolic link; point the pool at a regular file"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"");
    }

    #[tokio::test]
    async fn a_missing_directory_names_the_io_error_not_the_path() {
        let store = FileStore::new(PathBuf::from("/nonexistent-rayito-dir/pool.json"));
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: cannot lock the pool file (entity not found); check the file, its directory and their permissions"
        );
    }

    /// A store on a fresh directory where the pool file (`lock`: its lock)
    /// already exists, empty, with `mode`: the directory, the store and
    /// the planted file.
    fn planted(lock: bool, mode: u32) -> (tempfile::TempDir, FileStore, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool.json");
        let store = FileStore::new(path.clone());
        let target = if lock { store.lock.clone() } else { path };
        std::fs::write(&target, b"").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, store, target)
    }

    /// Issue 41: a pool file or lock of another mode or owner was used as
    /// is. A real file of each wrong mode is refused, and (as root, where
    /// the test can chown) one of another owner; nothing is read from or
    /// written to it.
    #[tokio::test]
    async fn a_pool_file_or_lock_others_may_use_is_refused() {
        let slot = || StoredSlot {
            record: record("a", "img", SlotState::Ready, Duration::from_secs(60)),
            owner: None,
            lease_until: None,
        };
        let cases = [
            (
                false,
                0o644,
                "the pool file may be read or written by other users (mode 0644); it holds access tokens: make it mode 0600",
            ),
            (
                false,
                0o620,
                "the pool file may be read or written by other users (mode 0620); it holds access tokens: make it mode 0600",
            ),
            (
                false,
                0o604,
                "the pool file may be read or written by other users (mode 0604); it holds access tokens: make it mode 0600",
            ),
            (
                true,
                0o666,
                "the pool file's lock may be read or written by other users (mode 0666); whoever can open it can hold it: make it mode 0600",
            ),
            (
                true,
                0o640,
                "the pool file's lock may be read or written by other users (mode 0640); whoever can open it can hold it: make it mode 0600",
            ),
        ];
        for (lock, mode, message) in cases {
            let (_dir, store, target) = planted(lock, mode);
            let err = (&store as &dyn SlotStore)
                .record_warming(slot())
                .await
                .unwrap_err();
            assert_eq!(err.to_string(), format!("invalid store: {message}"));
            assert_eq!(std::fs::read(&target).unwrap(), b"");
            let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
            assert_eq!(err.to_string(), format!("invalid store: {message}"));
        }
        if !rustix::process::geteuid().is_root() {
            println!(
                "SKIPPED: a_pool_file_or_lock_others_may_use_is_refused (owner part): not root, cannot chown"
            );
            return;
        }
        for lock in [false, true] {
            let (_dir, store, target) = planted(lock, 0o600);
            std::os::unix::fs::chown(&target, Some(65_534), Some(65_534)).unwrap();
            let err = (&store as &dyn SlotStore)
                .record_warming(slot())
                .await
                .unwrap_err();
            let role = if lock {
                "the pool file's lock"
            } else {
                "the pool file"
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid store: {role} belongs to another user; the pool file and its lock must belong to the user running the pool"
                )
            );
            assert_eq!(std::fs::read(&target).unwrap(), b"");
        }
    }

    /// docs/pool.md transcribes two of the refusals: kept in step.
    #[test]
    fn docs_pool_md_quotes_the_refusals_as_they_are() {
        let doc = include_str!("../../docs/pool.md")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let quoted = [
            format!(
                "invalid store: {} may be read or written by other users (mode 0644); {}: make it mode 0600",
                Role::Pool.name(),
                Role::Pool.why_private()
            ),
            format!(
                "invalid store: {} belongs to another user; the pool file and its lock must belong to the user running the pool",
                Role::Lock.name()
            ),
        ];
        for message in quoted {
            assert!(doc.contains(&message), "docs/pool.md lacks `{message}`");
        }
    }

    /// The env variable that turns `claimer` into a claiming child.
    const CLAIMER_ENV: &str = "RAYITO_POOL_RACE_FILE";

    /// In a child process (re-executed test binary): claims slots from the
    /// file until none is left, printing each id claimed.
    #[tokio::test]
    async fn claimer() {
        let Some(path) = std::env::var_os(CLAIMER_ENV) else {
            return;
        };
        let store = FileStore::new(PathBuf::from(path));
        let store: &dyn SlotStore = &store;
        let mut claimed = Vec::new();
        while let Some(slot) = store.claim("img", SystemTime::UNIX_EPOCH).await.unwrap() {
            claimed.push(slot.record.sandbox_id);
        }
        println!("CLAIMED {}", claimed.join(","));
    }

    /// N processes claim M slots of one file at once: each slot is claimed
    /// exactly once and none is lost (8 x 50, the figure; the
    /// throughput goes to docs/performance.md, "Pool").
    #[tokio::test]
    async fn processes_racing_on_one_file_claim_each_slot_exactly_once() {
        const PROCESSES: usize = 8;
        const SLOTS: usize = 400;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool.json");
        let slots: Vec<StoredSlot> = (0..SLOTS)
            .map(|i| StoredSlot {
                record: record(
                    &format!("microvm-{i:03}"),
                    "img",
                    SlotState::Ready,
                    Duration::from_secs(3_600 + i as u64),
                ),
                owner: None,
                lease_until: None,
            })
            .collect();
        write_whole(&path, &encode(&slots)).unwrap();
        let started = std::time::Instant::now();
        let all = crate::pool::slot::tests::race_claimers(
            "pool::file_store::tests::claimer",
            PROCESSES,
            CLAIMER_ENV,
            path.as_os_str(),
        );
        let elapsed = started.elapsed();
        println!(
            "{SLOTS} claims by {PROCESSES} processes in {:.2} s: {:.0} claims/s",
            elapsed.as_secs_f64(),
            SLOTS as f64 / elapsed.as_secs_f64()
        );
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "a slot was claimed twice");
        assert_eq!(sorted.len(), SLOTS, "a slot was lost");
        assert!(decode(&std::fs::read(&path).unwrap()).unwrap().is_empty());
    }
}
