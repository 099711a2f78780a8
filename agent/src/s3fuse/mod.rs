//! The local backend's S3 mount helper: a FUSE file system over one bucket
//! prefix, served in the agent's own process on a `/dev/fuse` descriptor the
//! S3 mounts section (`crate::s3_mounts`) has already mounted inside the
//! sandbox's mount namespace. On a MicroVM the same section runs `mount-s3`
//! instead; this is what the local backend has in its place (never a copy:
//! every read and write goes to the bucket).
//!
//! The semantics are mount-s3's documented ones:
//!
//! - keys split on `/`: common prefixes are directories (a directory
//!   shadows an object of its name; keys ending in `/`, or naming `.`,
//!   `..` or an empty component, are not shown); every file is 0644 and
//!   every directory 0755, owned by the spec's uid and gid; `chmod`,
//!   `chown` and times are EPERM (times are accepted on a file being
//!   written); links EPERM; extended attributes unsupported;
//! - reads: any object, sequential ones from one streaming GET kept open
//!   (read ahead, bounded), random ones by ranged GETs; an object changed
//!   under an open file is EIO (GETs are conditional on its ETag);
//! - writes: new files only, or an existing one opened with `O_TRUNC`
//!   where `allow_overwrite`; sequential from offset 0 (anything else
//!   EINVAL); one writer per file; the object appears when the file is
//!   closed by the process that opened it, or on `fsync` (see
//!   [`writer`]); a file being written is not readable (EPERM);
//! - `unlink` is EPERM unless `allow_delete` (then a DeleteObject, at
//!   once); `mkdir` is local until a file is written in it; `rmdir` removes
//!   only such an empty local directory (ENOTEMPTY for one S3 holds keys
//!   under); `rename` is ENOSYS ("function not implemented", mount-s3's
//!   answer);
//! - `read_only`: every write operation is EROFS;
//! - nothing is cached but what the kernel keeps for one second (entries
//!   and attributes, mount-s3's default TTL; listings never), so two
//!   mounts of one prefix see the same objects.
//!
//! Layout: [`client`] (the S3 requests), [`inodes`] (names the kernel
//! holds), [`listing`] (directories from listings), [`reader`] and
//! [`writer`] (an open file's bytes), [`fs`] (the FUSE operations), this
//! module (the first check, the session's thread and its end).

mod client;
mod fs;
pub(crate) mod hook;
mod inodes;
mod listing;
mod reader;
mod writer;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::persist::LocalS3;

/// What one mount serves: a bucket prefix and what it lets the sandbox do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FuseMountSpec {
    /// The bucket (never logged).
    pub bucket: String,
    /// The key prefix, relative to the bucket, without a leading `/`
    /// (empty: the whole bucket; never logged).
    pub prefix: String,
    /// Every write refused with EROFS.
    pub read_only: bool,
    /// Opening an existing object for writing (truncating it) allowed.
    pub allow_overwrite: bool,
    /// unlink (DeleteObject) allowed; refused with EPERM otherwise.
    pub allow_delete: bool,
    /// The owner every file and directory is shown with (the sandbox's
    /// host uid and gid, seen as 1000 inside it).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
}

/// Why a mount could not be served: one of the section's closed classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MountFailure {
    /// S3 could not be reached.
    Network,
    /// S3 refused the credentials (403).
    IamDenied,
    /// No such bucket.
    NotFound,
    /// The first answer did not come within the bound.
    Timeout,
    /// The helper could not start.
    HelperMissing,
    /// Anything else.
    Unknown,
}

impl MountFailure {
    /// The section's error class.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::IamDenied => "iam_denied",
            Self::NotFound => "not_found",
            Self::Timeout => "timeout",
            Self::HelperMissing => "helper_missing",
            Self::Unknown => "unknown",
        }
    }
}

/// How long the first request may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`FuseDaemon::stop`] waits for the session's thread.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// A served mount. Dropping it stops serving (the caller detaches the
/// mount first).
#[derive(Debug)]
pub(crate) struct FuseDaemon {
    shared: Arc<fs::Shared>,
    /// False once the session's thread has ended.
    alive: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Marks the session ended when its thread ends, however it ends.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl FuseDaemon {
    /// Whether the session still serves requests (false once the kernel
    /// ended it or its thread died): the section's `/resume` check.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && !self.shared.stopped()
    }

    /// Stops serving and waits (bounded) for the session's thread.
    ///
    /// Every later request is answered EIO and open files' uploads are
    /// dropped. The thread ends when the kernel ends the connection: once
    /// the mount is detached and its last open file closed (a detached
    /// mount with a file still open keeps it, answering EIO, past this
    /// call's bound).
    pub(crate) fn stop(mut self) {
        self.shared.stop();
        let started = Instant::now();
        while self.alive.load(Ordering::SeqCst) && started.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !self.alive.load(Ordering::SeqCst)
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for FuseDaemon {
    fn drop(&mut self) {
        self.shared.stop();
    }
}

/// Checks that `spec.bucket` answers with `s3`'s key (one bounded
/// request), then serves the FUSE session on `fuse` on a thread of its own
/// and returns at once.
///
/// Must be called on the agent's runtime: every S3 request runs there.
///
/// # Errors
/// The class of the check's failure.
pub(crate) async fn serve(
    fuse: OwnedFd,
    spec: FuseMountSpec,
    s3: LocalS3,
) -> Result<FuseDaemon, MountFailure> {
    let client =
        client::Client::new(&spec.bucket, &spec.prefix, &s3).map_err(|_| MountFailure::Unknown)?;
    check(&client).await?;
    let shared = Arc::new(fs::Shared::new(
        client,
        spec,
        tokio::runtime::Handle::current(),
    ));
    let alive = Arc::new(AtomicBool::new(true));
    let guard = AliveGuard(alive.clone());
    let fs = fs::S3Fs::new(shared.clone());
    let thread = std::thread::Builder::new()
        .name("s3fuse".into())
        .spawn(move || {
            let _guard = guard;
            let mut config = fuser::Config::default();
            config.acl = fuser::SessionACL::All;
            // The handshake (INIT) and the request loop: sandbox processes
            // are another uid than the agent's (SessionACL::All).
            if let Ok(session) = fuser::Session::from_fd(fs, fuse, fuser::SessionACL::All, config) {
                let _ = session.run();
            }
        })
        .map_err(|_| MountFailure::HelperMissing)?;
    Ok(FuseDaemon {
        shared,
        alive,
        thread: Some(thread),
    })
}

/// ListObjectsV2 (max-keys 1) on the mount's prefix: whether the key may
/// list the bucket at all.
async fn check(client: &client::Client) -> Result<(), MountFailure> {
    use client::Fail;
    match client.list("", false, None, 1, Some(CHECK_TIMEOUT)).await {
        Ok(_) => Ok(()),
        Err(Fail::Denied) => Err(MountFailure::IamDenied),
        Err(Fail::NoSuchBucket) => Err(MountFailure::NotFound),
        Err(Fail::Network) => Err(MountFailure::Network),
        Err(Fail::Timeout) => Err(MountFailure::Timeout),
        Err(Fail::NoSuchKey | Fail::Changed | Fail::Other) => Err(MountFailure::Unknown),
    }
}
