//! `sandbox.persistence()`: checkpoint the home directory to S3 and restore
//! it, in this sandbox or another one (spec B).
//!
//! The agent does the S3 work with the sandbox's **execution role** (a
//! sandbox without one gets `Persistence { permission_denied }`); the SDK
//! only names the location, streams the agent's progress to the caller and
//! maps its failures (docs/errors.md, "Checkpoint and restore streams").
//! A stream is never reconnected: a cut is `Persistence { interrupted }`
//! (retryable: run it again). Bucket, key and URI are in the results, never
//! in an error or a log.
//!
//! ```no_run
//! # async fn f(sbx: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! use rayito::persistence::{CheckpointOptions, RestoreOptions, S3Prefix};
//! let at = S3Prefix::new("my-checkpoints").name("alice");
//! let done = sbx
//!     .persistence()
//!     .checkpoint(CheckpointOptions::new(at.clone()).exclude("data/scratch"))
//!     .await?;
//! println!("{} files, {} bytes archived", done.files, done.archive_bytes);
//! // Later, in another sandbox (with an execution role that may read it):
//! # let other = sbx.clone();
//! other.persistence().restore(RestoreOptions::new(at)).await?;
//! # Ok(()) }
//! ```

mod binding;
mod location;
#[cfg(feature = "s3")]
mod store;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use self::binding::{Binding, Steps};
pub use self::location::{ARCHIVE_OBJECT, DEFAULT_PREFIX, MANIFEST_OBJECT, S3Prefix};
#[cfg(feature = "s3")]
pub use self::store::{CheckpointEntry, delete, list};
use crate::error::map::persistence as map;
use crate::error::{PersistenceOp, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;
use crate::transport::{RawFailure, RawStream};

/// The default deadline of a checkpoint or restore (the whole stream).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The most `exclude` entries a checkpoint takes.
pub const MAX_EXCLUDES: usize = 64;
/// The longest `exclude` entry, in bytes.
const MAX_EXCLUDE_BYTES: usize = 4_096;

/// Progress of a checkpoint or restore, as the agent reports it (at most
/// once per second).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Files archived or extracted so far.
    pub files_done: u64,
    /// Files in all (from the `started` event; 0 when the agent could not
    /// count them).
    pub files_total: u64,
    /// Checkpoint: bytes of the home directory read so far.
    pub bytes_read: u64,
    /// Checkpoint: archive bytes uploaded so far.
    pub bytes_uploaded: u64,
    /// Restore: archive bytes downloaded so far.
    pub bytes_downloaded: u64,
}

/// A progress callback: called from the task that drives the operation,
/// so keep it short.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a checkpoint or restore did (the agent's `done` event) and where.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PersistenceOutcome {
    /// Files archived (checkpoint) or written (restore).
    pub files: u64,
    /// Checkpoint: bytes of the home directory read.
    pub bytes_read: u64,
    /// Restore: bytes written into the home directory.
    pub bytes_written: u64,
    /// Size of the archive in S3.
    pub archive_bytes: u64,
    /// sha256 of the archive, hex.
    pub sha256: String,
    /// Entries skipped (sockets, files that vanished, ...).
    pub skipped: u64,
    /// How long the agent worked.
    pub duration: Duration,
    /// The bucket.
    pub bucket: String,
    /// The key prefix (`prefix/name`) holding `home.tar.gz` and
    /// `manifest.json`.
    pub key_prefix: String,
    /// `s3://bucket/key_prefix/`.
    pub uri: String,
}

// The location is the caller's data, but Debug output ends up in logs:
// sizes and counts only.
crate::secret::redacted_debug! {
    non_exhaustive PersistenceOutcome |o| files, bytes_read, bytes_written, archive_bytes, sha256,
    skipped, duration
}

/// Options of a checkpoint.
#[derive(Clone, Default)]
#[must_use]
#[non_exhaustive]
pub struct CheckpointOptions {
    /// Where to write; `None` for the prefix the sandbox was created or
    /// connected with. A location without a name takes the sandbox id.
    pub target: Option<S3Prefix>,
    /// HOME-relative directories to leave out (at most 64, no globs; each
    /// non-empty, at most 4,096 bytes, no NUL, no leading `/`, no `..`).
    /// `.cache`, `__pycache__`, `.ipynb_checkpoints` and the Jupyter
    /// runtime are always left out.
    pub exclude: Vec<String>,
    /// Deadline of the whole operation (default 600 s).
    pub timeout: Option<Duration>,
    /// Whose home to archive (default: the sandbox's user).
    pub user: Option<String>,
    /// Called on each progress event.
    pub on_progress: Option<ProgressFn>,
}

crate::secret::redacted_debug! {
    CheckpointOptions |o| target, excludes = o.exclude.len(), timeout, user = o.user.is_some(),
    on_progress = o.on_progress.is_some()
}

impl CheckpointOptions {
    /// A checkpoint to `target`.
    pub fn new(target: S3Prefix) -> Self {
        Self {
            target: Some(target),
            ..Self::default()
        }
    }

    /// Leaves out a HOME-relative directory.
    pub fn exclude(mut self, dir: impl Into<String>) -> Self {
        self.exclude.push(dir.into());
        self
    }

    crate::setters::setters! {
        unmarked;
        /// The deadline of the whole operation.
        timeout: Some Duration;
        /// Whose home to archive.
        user: Some impl String;
        /// A progress callback.
        on_progress: shared callback(Progress);
    }
}

/// Options of a restore.
#[derive(Clone, Default)]
#[must_use]
#[non_exhaustive]
pub struct RestoreOptions {
    /// Where to read from; `None` for the prefix the sandbox was created
    /// or connected with.
    pub source: Option<S3Prefix>,
    /// Deadline of the whole operation (default 600 s).
    pub timeout: Option<Duration>,
    /// Whose home to restore into (default: the sandbox's user).
    pub user: Option<String>,
    /// Called on each progress event.
    pub on_progress: Option<ProgressFn>,
}

crate::secret::redacted_debug! {
    RestoreOptions |o| source, timeout, user = o.user.is_some(),
    on_progress = o.on_progress.is_some()
}

impl RestoreOptions {
    /// A restore from `source`.
    pub fn new(source: S3Prefix) -> Self {
        Self {
            source: Some(source),
            ..Self::default()
        }
    }

    crate::setters::setters! {
        unmarked;
        /// The deadline of the whole operation.
        timeout: Some Duration;
        /// Whose home to restore into.
        user: Some impl String;
        /// A progress callback.
        on_progress: shared callback(Progress);
    }
}

/// Checks the excludes (spec B3) before any I/O.
fn check_excludes(exclude: &[String]) -> Result<(), SandboxError> {
    let refuse = |why: &'static str| Err(SandboxError::invalid_argument("exclude", why));
    if exclude.len() > MAX_EXCLUDES {
        return refuse("at most 64 directories");
    }
    for dir in exclude {
        if dir.is_empty() {
            return refuse("an entry is empty");
        }
        if dir.len() > MAX_EXCLUDE_BYTES {
            return refuse("an entry is longer than 4,096 bytes");
        }
        if dir.contains('\0') {
            return refuse("an entry contains NUL");
        }
        if dir.starts_with('/') {
            return refuse("entries are relative to HOME; none may start with `/`");
        }
        if dir.split('/').any(|s| s == "..") {
            return refuse("an entry has a `..` segment");
        }
        if dir.contains(['*', '?', '[']) {
            return refuse("entries are directories, not globs");
        }
    }
    Ok(())
}

fn check_timeout(timeout: Option<Duration>) -> Result<Duration, SandboxError> {
    match timeout {
        Some(t) if t.is_zero() => Err(SandboxError::invalid_argument(
            "timeout",
            "it must be greater than zero",
        )),
        Some(t) => Ok(t),
        None => Ok(DEFAULT_TIMEOUT),
    }
}

fn check_user(user: Option<&String>) -> Result<(), SandboxError> {
    match user {
        Some(u)
            if u.is_empty()
                || u.len() > 32
                || !u
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) =>
        {
            Err(SandboxError::invalid_argument(
                "user",
                "a user name is 1 to 32 of A-Z, a-z, 0-9, `_`, `-` and `.`",
            ))
        }
        _ => Ok(()),
    }
}

/// The location an operation uses: the given one, else the bound one,
/// named with the sandbox id when it has no name.
fn resolve(
    given: Option<S3Prefix>,
    bound: Option<&S3Prefix>,
    argument: &'static str,
    sandbox_id: &str,
) -> Result<S3Prefix, SandboxError> {
    let at = given.or_else(|| bound.cloned()).ok_or_else(|| {
        SandboxError::invalid_argument(
            argument,
            "no location given and none bound to the sandbox; pass an S3Prefix or create the sandbox with one",
        )
    })?;
    let at = at.or_name(sandbox_id);
    at.validate()?;
    Ok(at)
}

fn location_pb(at: &S3Prefix) -> pb::S3Location {
    pb::S3Location {
        bucket: at.bucket.clone(),
        key_prefix: at.key_prefix().unwrap_or_default(),
        region: at.region.clone(),
    }
}

/// The persistence operations of one sandbox (see the module docs).
#[derive(Clone, Debug)]
pub struct Persistence<'a> {
    sandbox: &'a Sandbox,
}

impl<'a> Persistence<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self { sandbox }
    }

    /// Archives the home directory to S3 (`home.tar.gz`, then
    /// `manifest.json`).
    ///
    /// # Errors
    /// `InvalidArgument` naming `target`, `bucket`, `prefix`, `name`,
    /// `region`, `exclude`, `timeout` or `user` before any I/O;
    /// `Persistence { code }` (`permission_denied` without an execution
    /// role, `failed_precondition` while another operation runs,
    /// `interrupted` when the stream was cut: run it again, ...);
    /// `Timeout { request }` past `timeout`; the rest of docs/errors.md,
    /// "Checkpoint and restore streams".
    pub async fn checkpoint(
        &self,
        options: CheckpointOptions,
    ) -> Result<PersistenceOutcome, SandboxError> {
        let op = PersistenceOp::Checkpoint;
        let at = resolve(
            options.target,
            self.sandbox.persist_prefix(),
            "target",
            self.sandbox.id(),
        )?;
        check_excludes(&options.exclude)?;
        let timeout = check_timeout(options.timeout)?;
        check_user(options.user.as_ref())?;
        let request = pb::CheckpointRequest {
            target: Some(location_pb(&at)),
            user: options.user.map(|username| pb::User { username }),
            exclude: options.exclude,
        };
        let conn = self.sandbox.conn();
        let open = || conn.checkpoint(request);
        let done = run(
            op,
            timeout,
            open,
            options.on_progress,
            |event| match event.event {
                Some(pb::checkpoint_event::Event::Started(s)) => Event::Started { files: s.files },
                Some(pb::checkpoint_event::Event::Progress(p)) => Event::Progress(Progress {
                    files_done: p.files_done,
                    bytes_read: p.bytes_read,
                    bytes_uploaded: p.bytes_uploaded,
                    ..Progress::default()
                }),
                Some(pb::checkpoint_event::Event::Done(d)) => Event::Done(Done {
                    files: d.files,
                    bytes_read: d.bytes_read,
                    bytes_written: 0,
                    archive_bytes: d.archive_bytes,
                    sha256: d.sha256,
                    skipped: d.skipped,
                    duration_ms: d.duration_ms,
                }),
                Some(pb::checkpoint_event::Event::Error(e)) => Event::Error(e.code),
                Some(pb::checkpoint_event::Event::Keepalive(_)) | None => Event::Keepalive,
            },
        );
        Ok(outcome(done.await?, &at))
    }

    /// Extracts a checkpoint into the home directory (overwriting files,
    /// merging directories, never outside HOME; a failure midway leaves a
    /// partial restore).
    ///
    /// # Errors
    /// `NotFound` when there is no checkpoint at the location (a first
    /// life); otherwise as [`Persistence::checkpoint`].
    pub async fn restore(
        &self,
        options: RestoreOptions,
    ) -> Result<PersistenceOutcome, SandboxError> {
        let op = PersistenceOp::Restore;
        let at = resolve(
            options.source,
            self.sandbox.persist_prefix(),
            "source",
            self.sandbox.id(),
        )?;
        let timeout = check_timeout(options.timeout)?;
        check_user(options.user.as_ref())?;
        let request = pb::RestoreRequest {
            source: Some(location_pb(&at)),
            user: options.user.map(|username| pb::User { username }),
        };
        let conn = self.sandbox.conn();
        let open = || conn.restore(request);
        let done = run(
            op,
            timeout,
            open,
            options.on_progress,
            |event| match event.event {
                Some(pb::restore_event::Event::Started(s)) => Event::Started { files: s.files },
                Some(pb::restore_event::Event::Progress(p)) => Event::Progress(Progress {
                    files_done: p.files_done,
                    bytes_downloaded: p.bytes_downloaded,
                    ..Progress::default()
                }),
                Some(pb::restore_event::Event::Done(d)) => Event::Done(Done {
                    files: d.files,
                    bytes_read: 0,
                    bytes_written: d.bytes_written,
                    archive_bytes: d.archive_bytes,
                    sha256: d.sha256,
                    skipped: d.skipped,
                    duration_ms: d.duration_ms,
                }),
                Some(pb::restore_event::Event::Error(e)) => Event::Error(e.code),
                Some(pb::restore_event::Event::Keepalive(_)) | None => Event::Keepalive,
            },
        );
        Ok(outcome(done.await?, &at))
    }
}

/// One event of either stream, as the driver reads it.
enum Event {
    Started { files: u64 },
    Progress(Progress),
    Done(Done),
    Error(String),
    Keepalive,
}

/// The `done` fields of either stream.
struct Done {
    files: u64,
    bytes_read: u64,
    bytes_written: u64,
    archive_bytes: u64,
    sha256: String,
    skipped: u64,
    duration_ms: u32,
}

/// The longest sha256 text kept (hex of 32 bytes).
const SHA256_HEX: usize = 64;

fn outcome(done: Done, at: &S3Prefix) -> PersistenceOutcome {
    // Peer data: only a 64-character hex digest is kept.
    let sha256 =
        if done.sha256.len() == SHA256_HEX && done.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            done.sha256.to_ascii_lowercase()
        } else {
            String::new()
        };
    PersistenceOutcome {
        files: done.files,
        bytes_read: done.bytes_read,
        bytes_written: done.bytes_written,
        archive_bytes: done.archive_bytes,
        sha256,
        skipped: done.skipped,
        duration: Duration::from_millis(u64::from(done.duration_ms)),
        bucket: at.bucket.clone(),
        key_prefix: at.key_prefix().unwrap_or_default(),
        uri: at.uri().unwrap_or_default(),
    }
}

/// Opens the stream with `open` and [`drive`]s it, the whole operation
/// bounded by `timeout`. Boxed: the tonic stream state would make the
/// public futures large.
fn run<'a, T, O>(
    op: PersistenceOp,
    timeout: Duration,
    open: impl FnOnce() -> O + Send + 'a,
    on_progress: Option<ProgressFn>,
    read: impl Fn(T) -> Event + Send + 'a,
) -> Pin<Box<dyn Future<Output = Result<Done, SandboxError>> + Send + 'a>>
where
    T: Send + 'a,
    O: Future<Output = Result<(Option<T>, RawStream<T>), RawFailure>> + Send + 'a,
{
    Box::pin(within(op, timeout, async move {
        drive(op, open().await, timeout, read, on_progress.as_deref()).await
    }))
}

/// Bounds the whole operation by `timeout`.
async fn within<T>(
    op: PersistenceOp,
    timeout: Duration,
    run: impl Future<Output = Result<T, SandboxError>>,
) -> Result<T, SandboxError> {
    match tokio::time::timeout(timeout, run).await {
        Ok(result) => result,
        Err(_) => Err(map::timeout(op, Some(timeout))),
    }
}

/// Reads a persistence stream to its end (spec B1): the first message must
/// be `started`; progress goes to the callback; `done` ends it; an error
/// event or a status maps through the B4 table; an end without `done` is
/// `interrupted`.
async fn drive<T>(
    op: PersistenceOp,
    opened: Result<(Option<T>, RawStream<T>), RawFailure>,
    timeout: Duration,
    read: impl Fn(T) -> Event,
    on_progress: Option<&(dyn Fn(Progress) + Send + Sync)>,
) -> Result<Done, SandboxError> {
    let (first, mut stream) = match opened {
        Ok(opened) => opened,
        Err(RawFailure::Mapped(err)) => return Err(err),
        Err(RawFailure::Status(f)) => {
            return Err(map::before_first_message(op, &f, Some(timeout)));
        }
    };
    let files_total = match first.map(&read) {
        Some(Event::Started { files }) => files,
        Some(Event::Error(code)) => return Err(map::stream_error(op, &code)),
        None => return Err(map::ended_without_done(op)),
        Some(_) => return Err(map::not_started(op)),
    };
    loop {
        let message = match stream.message().await {
            Ok(message) => message,
            Err(f) => return Err(map::mid_stream(op, &f, Some(timeout))),
        };
        match message.map(&read) {
            None => return Err(map::ended_without_done(op)),
            Some(Event::Done(done)) => return Ok(done),
            Some(Event::Error(code)) => return Err(map::stream_error(op, &code)),
            Some(Event::Progress(mut p)) => {
                p.files_total = files_total;
                if let Some(f) = on_progress {
                    f(p);
                }
            }
            // A second `started` is not an error worth failing for.
            Some(Event::Started { .. } | Event::Keepalive) => {}
        }
    }
}

/// The persistence view and binding on the sandbox core.
impl crate::sandbox::Sandbox {
    /// Checkpoint and restore of the home directory to S3
    /// ([`crate::persistence`]).
    pub fn persistence(&self) -> Persistence<'_> {
        Persistence::new(self)
    }

    /// The persistence prefix the sandbox is bound to (by
    /// [`crate::SandboxBuilder::persist`]), with its name.
    pub fn persist_prefix(&self) -> Option<&S3Prefix> {
        self.parts().get::<Binding>().map(Binding::prefix)
    }

    /// Checkpoints this sandbox to its bound prefix, creates a new one with
    /// the same options (which restores it), and kills this one once the new
    /// one is up. If the create fails, this sandbox survives and the error
    /// is create's own; the checkpoint stays at [`Self::persist_prefix`]
    /// (the location is never put into an error's message).
    ///
    /// # Errors
    /// `InvalidArgument` (`persist`) when the sandbox was not created with
    /// [`crate::SandboxBuilder::persist`] and a name; the checkpoint's errors
    /// (nothing else happened); create's errors (this sandbox survives).
    pub async fn reincarnate(&self) -> Result<Sandbox, SandboxError> {
        let Some(binding) = self.parts().get::<Binding>() else {
            return Err(SandboxError::invalid_argument(
                "persist",
                "reincarnate needs a sandbox created with SandboxBuilder::persist",
            ));
        };
        binding.reincarnate(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_timeouts_and_users_are_checked_with_their_argument() {
        let cases: Vec<(Result<(), SandboxError>, &str)> = vec![
            (
                check_excludes(&vec!["a".to_owned(); 65]),
                "invalid exclude: at most 64 directories",
            ),
            (
                check_excludes(&[String::new()]),
                "invalid exclude: an entry is empty",
            ),
            (
                check_excludes(&["a".repeat(4_097)]),
                "invalid exclude: an entry is longer than 4,096 bytes",
            ),
            (
                check_excludes(&["a\0b".to_owned()]),
                "invalid exclude: an entry contains NUL",
            ),
            (
                check_excludes(&["/etc".to_owned()]),
                "invalid exclude: entries are relative to HOME; none may start with `/`",
            ),
            (
                check_excludes(&["a/../b".to_owned()]),
                "invalid exclude: an entry has a `..` segment",
            ),
            (
                check_excludes(&["*.log".to_owned()]),
                "invalid exclude: entries are directories, not globs",
            ),
            (
                check_timeout(Some(Duration::ZERO)).map(|_| ()),
                "invalid timeout: it must be greater than zero",
            ),
            (
                check_user(Some(&"a b".to_owned())),
                "invalid user: a user name is 1 to 32 of A-Z, a-z, 0-9, `_`, `-` and `.`",
            ),
            (
                resolve(None, None, "target", "sbx-1").map(|_| ()),
                "invalid target: no location given and none bound to the sandbox; pass an S3Prefix or create the sandbox with one",
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.expect_err(message).to_string(), message);
        }
        check_excludes(&vec!["data/scratch".to_owned(); 64]).unwrap();
        assert_eq!(check_timeout(None).unwrap(), DEFAULT_TIMEOUT);
        let at = resolve(Some(S3Prefix::new("bkt")), None, "target", "sbx-1").unwrap();
        assert_eq!(at.key_prefix().as_deref(), Some("rayito-home/sbx-1"));
        let bound = S3Prefix::new("bkt").name("alice");
        let at = resolve(None, Some(&bound), "target", "sbx-1").unwrap();
        assert_eq!(at.key_prefix().as_deref(), Some("rayito-home/alice"));
    }

    #[test]
    fn an_outcome_keeps_only_a_hex_digest_and_carries_the_location() {
        let at = S3Prefix::new("bkt").name("n");
        let done = |sha: &str| Done {
            files: 2,
            bytes_read: 10,
            bytes_written: 0,
            archive_bytes: 5,
            sha256: sha.to_owned(),
            skipped: 0,
            duration_ms: 1_500,
        };
        let o = outcome(done(&"AB".repeat(32)), &at);
        assert_eq!(o.sha256, "ab".repeat(32));
        assert_eq!(
            (o.bucket.as_str(), o.key_prefix.as_str(), o.uri.as_str()),
            ("bkt", "rayito-home/n", "s3://bkt/rayito-home/n/")
        );
        assert_eq!(o.duration, Duration::from_millis(1_500));
        assert_eq!(outcome(done("not hex"), &at).sha256, "");
        assert!(!format!("{o:?}").contains("bkt"));
    }

    /// `persist` on a builder: an execution role is required on create,
    /// before any I/O (a pool refusing it is in `seam_tests`, which may
    /// name both features).
    #[tokio::test]
    async fn create_with_persist_needs_a_role() {
        let builder = || crate::Sandbox::builder().persist(S3Prefix::new("bkt").name("a"));
        let err = builder().create().await.expect_err("no role");
        assert_eq!(
            err.to_string(),
            "invalid persist: persistence needs an execution role (the agent reaches S3 with it); set execution_role_arn"
        );
        let err = builder()
            .execution_role_arn("arn:aws:iam::1:role/r")
            .persist(S3Prefix::new("Bad"))
            .create()
            .await
            .expect_err("bad bucket");
        assert_eq!(
            err.to_string(),
            "invalid bucket: a bucket name has only a-z, 0-9, `.` and `-`"
        );
        let err = crate::Sandbox::builder()
            .persist(S3Prefix::new("bkt"))
            .connect("vm-1", "x")
            .await
            .expect_err("no name");
        assert_eq!(
            err.to_string(),
            "invalid persist: connect binds a named prefix; give the S3Prefix a name"
        );
    }

    /// `persist` records its prefix with the core (the transfer staging
    /// keeps clear of it without naming persistence); a second call
    /// replaces it.
    #[cfg(feature = "s3")]
    #[test]
    fn persist_records_its_prefix_with_the_core() {
        let builder = crate::Sandbox::builder()
            .persist(S3Prefix::new("bkt").prefix("old"))
            .persist(S3Prefix::new("bkt").prefix("homes").name("a"));
        let bound = builder
            .parts()
            .get::<crate::sandbox::parts::S3Prefixes>()
            .expect("recorded");
        assert_eq!(bound.in_bucket("bkt").collect::<Vec<_>>(), ["homes"]);
        assert_eq!(bound.in_bucket("other").count(), 0);
    }

    /// The option and result types cross threads (the futures' `Send` is
    /// checked in tests/sdk/send_bounds.rs).
    #[test]
    fn options_and_outcomes_are_send_and_sync() {
        fn sync<T: Send + Sync>() {}
        sync::<CheckpointOptions>();
        sync::<RestoreOptions>();
        sync::<PersistenceOutcome>();
        sync::<S3Prefix>();
    }
}
