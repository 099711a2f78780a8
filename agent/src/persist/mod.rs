//! Checkpoint and Restore (`rayito.v1.FilesystemService`): the sandbox's
//! home directory archived to S3 as tar + gzip, and extracted back into
//! the home of this or another sandbox.
//!
//! Layout under the request's `key_prefix`: `home.tar.gz` (uploaded as a
//! multipart upload of [`PART_BYTES`] parts, at most [`PARTS_IN_FLIGHT`]
//! in flight, its sha256 computed on the fly) and then, last,
//! `manifest.json` ([`manifest::Manifest`], schema `rayito.checkpoint/1`):
//! a manifest means a complete archive, and Restore reads it first.
//!
//! Credentials and endpoint: see [`creds`] (the execution role's on AWS,
//! the emulator's key on the local backend, [`PersistenceAccess`]).
//!
//! One persistence operation runs per sandbox at a time; a suspend ends a
//! running one with the StreamError `suspending`. Failures before the
//! first event are statuses, later ones a StreamError{code, message}; no
//! message or log line holds a bucket, key, URL, path or credential.

/// `impl Debug` that shows only the type's name (`Type { .. }`): the
/// locations, buckets and credentials these types hold are never printed.
macro_rules! opaque_debug {
    ($ty:ident) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty)).finish_non_exhaustive()
            }
        }
    };
}

mod archive;
pub(crate) mod creds;
mod manifest;
mod restore;
pub(crate) mod s3;
mod sparse;
mod tar_read;
mod time;
mod validate;

pub(crate) use restore::restore;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use rayito_proto::tokens::stream_code;
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use self::archive::Counters;
use self::s3::{Bucket, Endpoint, S3Failure};
use self::validate::Location;
use crate::pb;
use crate::phase::{Phase, PhaseCell};
use crate::sandbox::{GUEST_HOME, SandboxEnv};

/// Bytes per multipart part (the last may be smaller).
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts uploading at once (besides one being filled and one queued).
pub const PARTS_IN_FLIGHT: usize = 2;
/// S3's most parts per upload.
const MAX_PARTS: u32 = 10_000;
/// Largest manifest read.
const MAX_MANIFEST_BYTES: usize = 64 * 1024;
/// At most one progress event per this long.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How long aborting a failed upload may take.
const ABORT_TIMEOUT: Duration = Duration::from_secs(30);
/// A keepalive after this long without an event.
const KEEPALIVE_AFTER: Duration = Duration::from_secs(15);

/// Status and StreamError messages (contract: pinned by tests).
pub mod messages {
    /// FAILED_PRECONDITION: another Checkpoint or Restore is running.
    pub const BUSY: &str = "a checkpoint or restore is already running in this sandbox";
    /// FAILED_PRECONDITION: on AWS, no region in the request or the agent's environment.
    pub const NO_REGION: &str = "the S3 location has no region and the agent knows none";
    /// PERMISSION_DENIED: no credentials at all.
    pub const NO_CREDENTIALS: &str =
        "the sandbox has no credentials for S3: launch it with an execution role";
    /// PERMISSION_DENIED / `permission_denied`: S3 refused the credentials.
    pub const DENIED: &str = "S3 refused the request with the execution role's credentials";
    /// NOT_FOUND: Restore found no manifest.
    pub const NO_CHECKPOINT: &str = "no checkpoint at this location";
    /// `not_found`: the bucket does not exist.
    pub const NO_BUCKET: &str = "the S3 bucket does not exist";
    /// `not_found`: a manifest without its archive.
    pub const NO_ARCHIVE: &str = "the checkpoint's archive is missing";
    /// INTERNAL: a manifest that is not `rayito.checkpoint/1`.
    pub const BAD_MANIFEST: &str = "the checkpoint's manifest is not valid";
    /// `internal`: an S3 request failed (5xx, network, an answer not understood).
    pub const S3_FAILED: &str = "an S3 request failed";
    /// `internal`: reading the home directory or compressing failed.
    pub const ARCHIVE_FAILED: &str = "the home directory could not be archived";
    /// `internal`: the archive is too large for one upload; RESOURCE_EXHAUSTED
    /// before a restore's first event: its manifest claims a larger archive
    /// than a checkpoint can write.
    pub const TOO_LARGE: &str = "the archive is too large for one S3 upload";
    /// `internal`: the archive could not be read or written into HOME.
    pub const EXTRACT_FAILED: &str = "the archive could not be extracted";
    /// `internal`: an entry's GNU long name, long link or pax header is
    /// over 64 KiB (`tar_read::MAX_EXT_BYTES`).
    pub const HEADER_TOO_LONG: &str =
        "an entry of the archive has a name, link or pax header over 64 KiB";
    /// `resource_exhausted`: more than 500,000 header blocks
    /// (`tar_read::MAX_ENTRIES`).
    pub const TOO_MANY_ENTRIES: &str = "the archive holds more than 500000 entries";
    /// `resource_exhausted`: the archive's entries add up to more bytes than
    /// the disk holds beyond the agent's reserve.
    pub const NO_ROOM: &str = "the archive's files would not fit on the sandbox's disk";
    /// `internal`: the downloaded archive does not match its manifest.
    pub const CHECKSUM: &str = "the archive does not match the sha256 in its manifest";
    /// `internal`: the disk filled up while restoring.
    pub const DISK_FULL: &str = "the sandbox's disk is full";
    /// `suspending`: a suspend ended the operation.
    pub const SUSPENDING: &str = "the sandbox is suspending";
}

/// Where a sandbox's checkpoints go and with which credentials.
#[derive(Clone, Debug, Default)]
pub enum PersistenceAccess {
    /// A MicroVM on AWS (the default): the execution role's credentials
    /// from the environment or IMDSv2, AWS's regional endpoints.
    #[default]
    Aws,
    /// The local backend: the emulator's S3 endpoint and one of its keys
    /// for a sandbox launched with an execution role; `None` for one
    /// without (every operation is then PERMISSION_DENIED).
    Local(Option<LocalS3>),
}

/// The emulator's S3 endpoint and the key a role-bearing sandbox signs
/// with. Debug shows neither key nor secret.
#[derive(Clone)]
pub struct LocalS3 {
    /// `http://127.0.0.1:PORT` (path-style).
    pub endpoint_url: String,
    /// The region requests are signed for when the location names none.
    pub region: String,
    /// The access key id.
    pub access_key_id: String,
    /// Its secret.
    pub secret_access_key: String,
    /// Its session token, if any.
    pub session_token: Option<String>,
}

opaque_debug!(LocalS3);

/// What Checkpoint and Restore use of the agent: the guard and access, the
/// sandbox, its phase (a gate ends the stream) and the disk reserve.
#[derive(Debug)]
pub(crate) struct Scope<'a> {
    pub persist: &'a Persist,
    pub env: &'a SandboxEnv,
    pub phase: &'a PhaseCell,
    pub disk_reserve: &'a AtomicU64,
}

/// One agent's persistence state: the operation guard and the access.
#[derive(Debug, Default)]
pub(crate) struct Persist {
    busy: Arc<AtomicBool>,
    access: Mutex<PersistenceAccess>,
    imds: creds::Imds,
    client: OnceLock<s3::HttpsClientCell>,
}

/// Holds the operation guard; released on drop.
#[derive(Debug)]
struct Busy(Arc<AtomicBool>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Persist {
    /// Sets where checkpoints go (the emulator, when a sandbox is launched).
    pub(crate) fn set_access(&self, access: PersistenceAccess) {
        *self.access.lock().unwrap_or_else(|p| p.into_inner()) = access;
    }

    /// Where S3 is and with which credentials, as set now (the S3 mounts
    /// section signs with the same key on the local backend).
    pub(crate) fn access(&self) -> PersistenceAccess {
        self.access
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The execution role's credentials as Checkpoint signs with them (the
    /// environment's or IMDSv2's on AWS, the emulator's key locally);
    /// `None` without any (telemetry export's SigV4 uses them too).
    pub(crate) async fn role_creds(&self) -> Option<creds::Creds> {
        match self.access() {
            PersistenceAccess::Local(None) => None,
            PersistenceAccess::Local(Some(local)) => Some(creds::Creds {
                id: local.access_key_id,
                secret: local.secret_access_key,
                token: local.session_token,
                expires: None,
            }),
            PersistenceAccess::Aws => match creds::from_env() {
                Some(c) => Some(c),
                None => self.imds.get().await,
            },
        }
    }

    #[allow(clippy::result_large_err)]
    fn acquire(&self) -> Result<Busy, Status> {
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(Status::failed_precondition(messages::BUSY));
        }
        Ok(Busy(self.busy.clone()))
    }

    /// The bucket of `loc`, with credentials: FAILED_PRECONDITION without
    /// a region on AWS, PERMISSION_DENIED without credentials.
    async fn bucket(&self, loc: &Location) -> Result<Bucket, Status> {
        let access = self
            .access
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let client = match self.client.get() {
            Some(c) => c.0.clone(),
            None => {
                let c = s3::http_client().map_err(|_| Status::internal(messages::S3_FAILED))?;
                let _ = self.client.set(s3::HttpsClientCell(c.clone()));
                c
            }
        };
        match access {
            PersistenceAccess::Local(None) => {
                Err(Status::permission_denied(messages::NO_CREDENTIALS))
            }
            PersistenceAccess::Local(Some(local)) => Ok(Bucket {
                client,
                endpoint: Endpoint::PathStyle(local.endpoint_url),
                region: loc.region.clone().unwrap_or(local.region),
                bucket: loc.bucket.clone(),
                creds: creds::Creds {
                    id: local.access_key_id,
                    secret: local.secret_access_key,
                    token: local.session_token,
                    expires: None,
                },
            }),
            PersistenceAccess::Aws => {
                let region = loc
                    .region
                    .clone()
                    .or_else(|| env_region("AWS_REGION"))
                    .or_else(|| env_region("AWS_DEFAULT_REGION"))
                    .ok_or_else(|| Status::failed_precondition(messages::NO_REGION))?;
                let creds = match creds::from_env() {
                    Some(c) => c,
                    None => self
                        .imds
                        .get()
                        .await
                        .ok_or_else(|| Status::permission_denied(messages::NO_CREDENTIALS))?,
                };
                Ok(Bucket {
                    client,
                    endpoint: Endpoint::Aws,
                    region,
                    bucket: loc.bucket.clone(),
                    creds,
                })
            }
        }
    }
}

/// The agent's AWS region: `AWS_REGION`, else `AWS_DEFAULT_REGION`.
pub(crate) fn aws_region() -> Option<String> {
    env_region("AWS_REGION").or_else(|| env_region("AWS_DEFAULT_REGION"))
}

fn env_region(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|r| validate::valid_region(r))
}

/// Why an operation ended without `done`.
#[derive(Debug)]
enum Failure {
    /// A StreamError of this code and message.
    Stream(&'static str, &'static str),
    /// A status (the phase's gate: terminating, expired).
    Status(Status),
    /// The caller went away: nothing to send.
    Gone,
}

fn s3_failure(f: S3Failure) -> Failure {
    match f {
        S3Failure::Denied => Failure::Stream(stream_code::PERMISSION_DENIED, messages::DENIED),
        S3Failure::NoSuchBucket => Failure::Stream(stream_code::NOT_FOUND, messages::NO_BUCKET),
        S3Failure::NoSuchKey => Failure::Stream(stream_code::NOT_FOUND, messages::NO_ARCHIVE),
        S3Failure::Failed => Failure::Stream(stream_code::INTERNAL, messages::S3_FAILED),
    }
}

fn internal(message: &'static str) -> Failure {
    Failure::Stream(stream_code::INTERNAL, message)
}

/// Resolves when the phase leaves Running: `suspending`, or the gate's status.
async fn phase_gate(mut rx: watch::Receiver<Phase>) -> Failure {
    loop {
        let phase = *rx.borrow_and_update();
        match phase {
            Phase::Running => {}
            Phase::Suspending => {
                return Failure::Stream(stream_code::SUSPENDING, messages::SUSPENDING);
            }
            other => {
                return Failure::Status(
                    other
                        .gate_status()
                        .unwrap_or_else(|| Status::unavailable(messages::SUSPENDING)),
                );
            }
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Sets a flag on drop: the blocking walkers stop when the operation ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The events of one RPC's stream.
trait Events: Sized + Send + 'static {
    fn progress(files_done: u64, bytes_a: u64, bytes_b: u64) -> Self;
    fn keepalive() -> Self;
    /// The event carrying `error`.
    fn stream_error(error: pb::StreamError) -> Self;
    fn error(code: &str, message: &str) -> Self {
        Self::stream_error(pb::StreamError {
            code: code.to_owned(),
            message: message.to_owned(),
        })
    }
}

impl Events for pb::CheckpointEvent {
    fn progress(files_done: u64, bytes_read: u64, bytes_uploaded: u64) -> Self {
        ev_c(pb::checkpoint_event::Event::Progress(
            pb::CheckpointProgress {
                files_done,
                bytes_read,
                bytes_uploaded,
            },
        ))
    }
    fn keepalive() -> Self {
        ev_c(pb::checkpoint_event::Event::Keepalive(pb::KeepAlive {}))
    }
    fn stream_error(error: pb::StreamError) -> Self {
        ev_c(pb::checkpoint_event::Event::Error(error))
    }
}

impl Events for pb::RestoreEvent {
    fn progress(files_done: u64, bytes_downloaded: u64, _: u64) -> Self {
        ev_r(pb::restore_event::Event::Progress(pb::RestoreProgress {
            files_done,
            bytes_downloaded,
        }))
    }
    fn keepalive() -> Self {
        ev_r(pb::restore_event::Event::Keepalive(pb::KeepAlive {}))
    }
    fn stream_error(error: pb::StreamError) -> Self {
        ev_r(pb::restore_event::Event::Error(error))
    }
}

fn ev_c(e: pb::checkpoint_event::Event) -> pb::CheckpointEvent {
    pb::CheckpointEvent { event: Some(e) }
}

fn ev_r(e: pb::restore_event::Event) -> pb::RestoreEvent {
    pb::RestoreEvent { event: Some(e) }
}

/// Sends events, progress at most once per [`PROGRESS_EVERY`] and only
/// when it moved, a keepalive after [`KEEPALIVE_AFTER`] of silence.
struct Emitter<T> {
    tx: mpsc::Sender<Result<T, Status>>,
    last_sent: Instant,
    last_progress: (u64, u64, u64),
    last_progress_at: Option<Instant>,
}

impl<T: Events> Emitter<T> {
    fn new(tx: mpsc::Sender<Result<T, Status>>) -> Self {
        Self {
            tx,
            last_sent: Instant::now(),
            last_progress: (0, 0, 0),
            last_progress_at: None,
        }
    }

    async fn send(&mut self, ev: T) -> Result<(), Failure> {
        self.tx.send(Ok(ev)).await.map_err(|_| Failure::Gone)?;
        self.last_sent = Instant::now();
        Ok(())
    }

    /// On each tick.
    async fn tick(&mut self, p: (u64, u64, u64)) -> Result<(), Failure> {
        let due = self
            .last_progress_at
            .is_none_or(|at| at.elapsed() >= PROGRESS_EVERY);
        if p != self.last_progress && due {
            self.last_progress = p;
            self.last_progress_at = Some(Instant::now());
            self.send(T::progress(p.0, p.1, p.2)).await
        } else if self.last_sent.elapsed() >= KEEPALIVE_AFTER {
            self.send(T::keepalive()).await
        } else {
            Ok(())
        }
    }

    async fn fail(&self, f: Failure, rpc: &'static str) {
        match f {
            Failure::Stream(code, message) => {
                tracing::warn!(rpc, code, "persistence operation failed");
                let _ = self.tx.send(Ok(T::error(code, message))).await;
            }
            Failure::Status(s) => {
                tracing::info!(rpc, "persistence operation ended by the sandbox's phase");
                let _ = self.tx.send(Err(s)).await;
            }
            Failure::Gone => {}
        }
    }
}

fn progress_interval() -> tokio::time::Interval {
    let mut tick = tokio::time::interval_at(Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

fn duration_ms(since: Instant) -> u32 {
    u32::try_from(since.elapsed().as_millis()).unwrap_or(u32::MAX)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

type EventStream<T> = ReceiverStream<Result<T, Status>>;

/// What an operation works with.
struct Job {
    env: SandboxEnv,
    phase: watch::Receiver<Phase>,
    bucket: Bucket,
    loc: Location,
    _busy: Busy,
}

/// Checkpoint: checks the request, takes the guard, finds credentials,
/// then streams the archive's upload.
///
/// # Errors
/// INVALID_ARGUMENT (a bad argument, named), FAILED_PRECONDITION (another
/// operation, no region), PERMISSION_DENIED (no credentials), INTERNAL.
pub(crate) async fn checkpoint(
    scope: &Scope<'_>,
    req: pb::CheckpointRequest,
) -> Result<EventStream<pb::CheckpointEvent>, Status> {
    let loc = validate::location("target", req.target.as_ref())?;
    validate::user(req.user.as_ref())?;
    let excludes = validate::excludes(&req.exclude)?;
    let busy = scope.persist.acquire()?;
    let bucket = scope.persist.bucket(&loc).await?;
    let job = Job {
        env: scope.env.clone(),
        phase: scope.phase.subscribe(),
        bucket,
        loc,
        _busy: busy,
    };
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let started = Instant::now();
        let mut out = Emitter::new(tx);
        match run_checkpoint(&job, excludes, &mut out).await {
            Ok(done) => {
                let done = pb::CheckpointDone {
                    duration_ms: duration_ms(started),
                    ..done
                };
                tracing::info!(
                    files = done.files,
                    archive_bytes = done.archive_bytes,
                    "checkpoint done"
                );
                let _ = out
                    .send(ev_c(pb::checkpoint_event::Event::Done(done)))
                    .await;
            }
            Err(f) => out.fail(f, "Checkpoint").await,
        }
        drop(job);
    });
    Ok(ReceiverStream::new(rx))
}

/// The sink of the gzip stream: cuts it into parts, hashes and counts it.
struct PartSink {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    hasher: Sha256,
    total: u64,
    sent_any: bool,
}

impl std::io::Write for PartSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(data);
        self.total += data.len() as u64;
        self.buf.extend_from_slice(data);
        while self.buf.len() >= PART_BYTES {
            let rest = self.buf.split_off(PART_BYTES);
            let part = std::mem::replace(&mut self.buf, rest);
            self.push(part)?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl PartSink {
    fn push(&mut self, part: Vec<u8>) -> std::io::Result<()> {
        self.sent_any = true;
        self.tx
            .blocking_send(Bytes::from(part))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }

    /// Sends the last part; the archive's sha256 and length.
    fn finish(mut self) -> std::io::Result<(String, u64)> {
        let last = std::mem::take(&mut self.buf);
        if !last.is_empty() || !self.sent_any {
            self.push(last)?;
        }
        Ok((hex(&self.hasher.finalize_reset()), self.total))
    }
}

async fn run_checkpoint(
    job: &Job,
    excludes: Vec<PathBuf>,
    out: &mut Emitter<pb::CheckpointEvent>,
) -> Result<pb::CheckpointDone, Failure> {
    let home = job.env.to_host(GUEST_HOME);
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    let gate = phase_gate(job.phase.clone());
    tokio::pin!(gate);

    let tally = {
        let (env, home, excludes, stop) = (
            job.env.clone(),
            home.clone(),
            excludes.clone(),
            stop.clone(),
        );
        let task = tokio::task::spawn_blocking(move || {
            env.as_user(|| archive::tally(&home, &excludes, &stop))
        });
        tokio::select! {
            f = &mut gate => return Err(f),
            r = task => r.ok().and_then(Result::ok).ok_or(internal(messages::ARCHIVE_FAILED))?,
        }
    };
    out.send(ev_c(pb::checkpoint_event::Event::Started(
        pb::CheckpointStarted {
            files: tally.files,
            bytes: tally.bytes,
        },
    )))
    .await?;

    let key = job.loc.archive_key();
    let upload_id = tokio::select! {
        f = &mut gate => return Err(f),
        () = out.tx.closed() => return Err(Failure::Gone),
        r = job.bucket.create_multipart(&key, "application/gzip") => r.map_err(s3_failure)?,
    };
    let counters = Arc::new(Counters::default());
    let uploaded = upload(
        job, &key, &upload_id, &home, &excludes, &counters, &stop, &mut gate, out,
    )
    .await;
    let (parts, sha256, archive_bytes) = match uploaded {
        Ok(r) => r,
        Err(f) => {
            abort_later(&job.bucket, key, upload_id);
            return Err(f);
        }
    };
    let completed = tokio::select! {
        f = &mut gate => Err(f),
        r = job.bucket.complete_multipart(&key, &upload_id, &parts) => r.map_err(s3_failure),
    };
    if let Err(f) = completed {
        abort_later(&job.bucket, key, upload_id);
        return Err(f);
    }
    let files = counters.files_done.load(Ordering::Relaxed);
    let bytes_read = counters.bytes_read.load(Ordering::Relaxed);
    let manifest = manifest::Manifest::new(
        sha256.clone(),
        archive_bytes,
        files,
        bytes_read,
        excludes
            .iter()
            .map(|e| e.to_string_lossy().into_owned())
            .collect(),
    );
    let manifest_key = job.loc.manifest_key();
    tokio::select! {
        f = &mut gate => return Err(f),
        r = job.bucket.put_object(&manifest_key, manifest.to_bytes(), "application/json") => r.map_err(s3_failure)?,
    }
    Ok(pb::CheckpointDone {
        files,
        bytes_read,
        archive_bytes,
        sha256,
        skipped: counters.skipped.load(Ordering::Relaxed),
        duration_ms: 0,
    })
}

/// Aborts a multipart upload in the background, bounded: the failure
/// reaches the caller at once, and a suspended network does not hold it.
fn abort_later(bucket: &Bucket, key: String, upload_id: String) {
    let bucket = bucket.clone();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(ABORT_TIMEOUT, bucket.abort_multipart(&key, &upload_id)).await;
    });
}

type Parts = Vec<(u32, String)>;

/// Archives HOME on a blocking thread and uploads its parts as they come.
#[allow(clippy::too_many_arguments)]
async fn upload(
    job: &Job,
    key: &str,
    upload_id: &str,
    home: &std::path::Path,
    excludes: &[PathBuf],
    counters: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
    gate: &mut std::pin::Pin<&mut impl std::future::Future<Output = Failure>>,
    out: &mut Emitter<pb::CheckpointEvent>,
) -> Result<(Parts, String, u64), Failure> {
    let (part_tx, mut part_rx) = mpsc::channel::<Bytes>(1);
    let writer = {
        let (env, home, excludes, counters, stop) = (
            job.env.clone(),
            home.to_path_buf(),
            excludes.to_vec(),
            counters.clone(),
            stop.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let sink = PartSink {
                tx: part_tx,
                buf: Vec::with_capacity(PART_BYTES),
                hasher: Sha256::new(),
                total: 0,
                sent_any: false,
            };
            env.as_user(|| archive::write(&home, &excludes, sink, &counters, &stop))
                .and_then(PartSink::finish)
        })
    };
    let uploaded = AtomicU64::new(0);
    let mut inflight = FuturesUnordered::new();
    let mut parts: Parts = Vec::new();
    let mut next: u32 = 1;
    let mut eof = false;
    let mut tick = progress_interval();
    loop {
        if eof && inflight.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            f = &mut *gate => return Err(f),
            () = out.tx.closed() => return Err(Failure::Gone),
            Some((n, len, r)) = inflight.next(), if !inflight.is_empty() => {
                let r: Result<String, S3Failure> = r;
                let etag = r.map_err(s3_failure)?;
                parts.push((n, etag));
                uploaded.fetch_add(len, Ordering::Relaxed);
            }
            part = part_rx.recv(), if !eof && inflight.len() < PARTS_IN_FLIGHT => match part {
                Some(body) => {
                    let n = next;
                    if n > MAX_PARTS {
                        return Err(internal(messages::TOO_LARGE));
                    }
                    next += 1;
                    let bucket = job.bucket.clone();
                    let (key, id) = (key.to_owned(), upload_id.to_owned());
                    inflight.push(async move {
                        let len = body.len() as u64;
                        (n, len, bucket.upload_part(&key, &id, n, body).await)
                    });
                }
                None => eof = true,
            },
            _ = tick.tick() => {
                out.tick((
                    counters.files_done.load(Ordering::Relaxed),
                    counters.bytes_read.load(Ordering::Relaxed),
                    uploaded.load(Ordering::Relaxed),
                ))
                .await?;
            }
        }
    }
    let (sha256, archive_bytes) = writer
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or(internal(messages::ARCHIVE_FAILED))?;
    parts.sort_by_key(|p| p.0);
    Ok((parts, sha256, archive_bytes))
}
