//! An import: S3 object → file. With `wait_for_object` (an upload ticket)
//! the presigned GET is polled every second for 600 s, then every 5 s,
//! until the object appears or the URLs expire; otherwise (a staged write)
//! the object must be there. The bytes go to a `.rayito-tmp-*` sibling,
//! counted against `max_bytes` and hashed on the way, and become the file
//! (mode, sandbox user) by a rename only when the whole object arrived with
//! the expected sha256; then the staging object is deleted. The target's
//! directory is held open from the check on ([`TargetDir`]): the temporary
//! file is created and renamed by descriptor in it, so sandbox code
//! swapping a directory on the way for a symlink meanwhile cannot move the
//! write out of the sandbox's view.

use std::ffi::OsString;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tonic::Status;

use super::Context;
use super::failure::Reason;
use super::url::{self, Checked};
use super::web::{self, CallError, HttpClient};
use super::{Entry, deadline};
use crate::filesystem::{Resolved, TargetDir, file_entry_info, resolve};
use crate::pb;
use crate::sandbox::SandboxEnv;

/// Polling cadence: every second for the first ten minutes, then every 5 s.
const FAST_POLL: Duration = Duration::from_secs(1);
const FAST_POLL_FOR: Duration = Duration::from_secs(600);
const SLOW_POLL: Duration = Duration::from_secs(5);
/// Attempts of a GET that found S3 unavailable, when not waiting.
const ATTEMPTS: u32 = 3;
/// Chunks received but not yet written, at most.
const QUEUED_CHUNKS: usize = 8;
/// State updates while bytes move, at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A checked StartImport.
#[derive(Debug)]
pub(crate) struct ImportJob {
    target: Resolved,
    /// The target's directory, held since the check.
    dir: TargetDir,
    mode: u32,
    get: Checked,
    delete: Option<Checked>,
    wait: bool,
    deadline: Option<Instant>,
    max_bytes: u64,
    expected_sha256: String,
}

/// Everything StartImport refuses, before any I/O on S3.
#[allow(clippy::result_large_err)]
pub(crate) fn accept(ctx: &Context, req: pb::StartImportRequest) -> Result<ImportJob, Status> {
    let target = resolve(&ctx.env, &req.path)?;
    if target.is_view_root() {
        return Err(Status::invalid_argument("is a directory"));
    }
    let mode = crate::filesystem::owner_and_mode(
        req.user.as_ref().map(|u| u.username.as_str()),
        req.mode,
    )?;
    if !req.metadata.is_empty() {
        return Err(Status::failed_precondition(
            "file metadata is not supported by the local agent",
        ));
    }
    let expected_sha256 = req.expected_sha256;
    if !expected_sha256.is_empty()
        && (expected_sha256.len() != 64
            || !expected_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(Status::invalid_argument("invalid expected_sha256"));
    }
    let deadline = deadline(req.expires_at_unix_ms);
    if req.wait_for_object && deadline.is_none() {
        return Err(Status::invalid_argument(
            "expires_at is required to wait for the object",
        ));
    }
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return Err(Status::invalid_argument("expires_at has passed"));
    }
    let object = url::check_object(req.object.as_ref())?;
    let endpoint = ctx.transfers.endpoint();
    let get = url::check(req.get.as_ref(), object, endpoint)?;
    let delete = match &req.delete {
        Some(d) => Some(url::check(Some(d), object, endpoint)?),
        None => None,
    };
    // The directory must be able to hold the file; it is made now, as
    // the sandbox user, and held until the file is in it.
    let dir = ctx.env.as_user(|| {
        let dir = TargetDir::open(&ctx.env, &target)?;
        if dir.holds_dir() {
            return Err(Status::invalid_argument("is a directory"));
        }
        Ok(dir)
    })?;
    Ok(ImportJob {
        target,
        dir,
        mode,
        get,
        delete,
        wait: req.wait_for_object,
        deadline,
        max_bytes: req.max_bytes,
        expected_sha256,
    })
}

fn request(checked: &Checked, method: http::Method) -> http::Request<web::Body> {
    let mut req = http::Request::new(web::empty());
    *req.method_mut() = method;
    *req.uri_mut() = checked.uri.clone();
    *req.headers_mut() = checked.headers.clone();
    req
}

/// Runs the import to a terminal state.
pub(crate) async fn run(ctx: &Context, client: &HttpClient, entry: &Arc<Entry>, job: ImportJob) {
    let deadline = job.deadline;
    entry
        .drive("an import", deadline, import(ctx, client, entry, &job))
        .await;
}

/// Polls, downloads, commits and deletes; the error is the reason.
async fn import(
    ctx: &Context,
    client: &HttpClient,
    entry: &Arc<Entry>,
    job: &ImportJob,
) -> Result<(), Reason> {
    let started = Instant::now();
    let mut failures = 0u32;
    let (response, _permit) = loop {
        let permit = ctx.transfers.moving_slot().await?;
        let answer = client
            .send(request(&job.get, http::Method::GET), web::IDLE_TIMEOUT)
            .await;
        let absent = match answer {
            Ok(resp) if resp.status().is_success() => break (resp, permit),
            Ok(resp) => {
                let status = resp.status();
                web::drain(resp.into_body()).await;
                match status.as_u16() {
                    // Without ListBucket, S3 answers a missing key with 403.
                    403 | 404 if job.wait => true,
                    403 => return Err(Reason::S3Denied),
                    _ => false,
                }
            }
            Err(_) => false,
        };
        drop(permit);
        if !absent {
            failures += 1;
            if !job.wait && failures >= ATTEMPTS {
                return Err(Reason::S3Unavailable);
            }
        }
        entry.update(|s| s.probes = s.probes.saturating_add(1));
        let pause = if !job.wait {
            Duration::from_secs(1 << failures.min(3))
        } else if started.elapsed() < FAST_POLL_FOR {
            FAST_POLL
        } else {
            SLOW_POLL
        };
        tokio::time::sleep(pause).await;
    };
    let length = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let result = receive(ctx, entry, job, response, length).await;
    // The staging object goes once it was read (a bad object is no use
    // either); a failed delete leaves it to the bucket's lifecycle rule.
    if let Some(delete) = &job.delete {
        match client
            .send(request(delete, http::Method::DELETE), web::IDLE_TIMEOUT)
            .await
        {
            Ok(resp) => {
                if !resp.status().is_success() {
                    tracing::info!(
                        status = resp.status().as_u16(),
                        "transfer: the staging object was not deleted"
                    );
                }
                web::drain(resp.into_body()).await;
            }
            Err(_) => tracing::info!("transfer: the staging object was not deleted"),
        }
    }
    let (info, sha256, bytes) = result?;
    entry.done(|s| {
        s.entry = Some(info);
        s.sha256 = sha256;
        s.bytes_done = bytes;
        s.bytes_total = bytes;
    });
    Ok(())
}

/// Streams the body to a temporary file and renames it over the target.
async fn receive(
    ctx: &Context,
    entry: &Arc<Entry>,
    job: &ImportJob,
    response: http::Response<hyper::body::Incoming>,
    length: Option<u64>,
) -> Result<(pb::EntryInfo, String, u64), Reason> {
    if let Some(len) = length
        && job.max_bytes > 0
        && len > job.max_bytes
    {
        return Err(Reason::TooLarge);
    }
    entry.update(|s| {
        s.phase = pb::TransferPhase::Running as i32;
        s.bytes_total = length.unwrap_or(0);
    });
    let reserve = ctx.disk_reserve.load(Ordering::Relaxed);
    let mut temp = Temp::create(&ctx.env, &job.dir, reserve, length.unwrap_or(0))?;
    let file = temp.file.take().ok_or(Reason::DiskFull)?;
    let (queue, chunks) = mpsc::channel::<Bytes>(QUEUED_CHUNKS);
    let writer = tokio::task::spawn_blocking(move || write_all(file, chunks));
    let mut body = response.into_body();
    let mut received: u64 = 0;
    let mut reported = Instant::now();
    let streamed: Result<(), Reason> = async {
        while let Some(chunk) = web::next_chunk(&mut body)
            .await
            .map_err(|_: CallError| Reason::S3Unavailable)?
        {
            received = received.saturating_add(chunk.len() as u64);
            if job.max_bytes > 0 && received > job.max_bytes {
                return Err(Reason::TooLarge);
            }
            if length.is_some_and(|len| received > len) {
                return Err(Reason::S3Unavailable);
            }
            if queue.send(chunk).await.is_err() {
                // The writer stopped: its error says why.
                return Ok(());
            }
            if reported.elapsed() >= PROGRESS_EVERY {
                reported = Instant::now();
                entry.update(|s| s.bytes_done = received);
            }
        }
        Ok(())
    }
    .await;
    drop(queue);
    let written = writer.await.map_err(|_| Reason::DiskFull)?;
    streamed?;
    let (file, sha256) = written.map_err(|_| Reason::DiskFull)?;
    if length.is_some_and(|len| received != len) {
        return Err(Reason::S3Unavailable);
    }
    if !job.expected_sha256.is_empty() && job.expected_sha256 != sha256 {
        return Err(Reason::ChecksumMismatch);
    }
    let info = temp.commit(file, job.mode, &job.target)?;
    Ok((info, sha256, received))
}

/// Writes every chunk, then fsyncs; the file and the hex sha256.
fn write_all(
    mut file: std::fs::File,
    mut chunks: mpsc::Receiver<Bytes>,
) -> std::io::Result<(std::fs::File, String)> {
    let mut hash = Sha256::new();
    while let Some(chunk) = chunks.blocking_recv() {
        hash.update(&chunk);
        file.write_all(&chunk)?;
    }
    file.sync_all()?;
    let sha: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((file, sha))
}

/// The temporary sibling of the target; removed unless committed.
struct Temp<'a> {
    env: SandboxEnv,
    dir: &'a TargetDir,
    name: OsString,
    file: Option<std::fs::File>,
    renamed: bool,
}

impl<'a> Temp<'a> {
    fn create(
        env: &SandboxEnv,
        dir: &'a TargetDir,
        reserve: u64,
        length: u64,
    ) -> Result<Temp<'a>, Reason> {
        let (file, name) = env.as_user(|| {
            let free = dir.available_bytes().map_err(|_| Reason::DiskFull)?;
            if free < reserve.saturating_add(length) {
                return Err(Reason::DiskReserve);
            }
            dir.create_temp().map_err(|_| Reason::DiskFull)
        })?;
        Ok(Temp {
            env: env.clone(),
            dir,
            name,
            file: Some(file),
            renamed: false,
        })
    }

    fn commit(
        &mut self,
        file: std::fs::File,
        mode: u32,
        target: &Resolved,
    ) -> Result<pb::EntryInfo, Reason> {
        self.env
            .as_user(|| self.dir.commit(&self.name, &file, mode))
            .map_err(|_| Reason::DiskFull)?;
        self.renamed = true;
        file_entry_info(&target.guest, &file).map_err(|_| Reason::DiskFull)
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.renamed {
            self.env.as_user(|| self.dir.remove(&self.name));
        }
    }
}
