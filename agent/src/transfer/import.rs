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
//!
//! A chunked import (`chunk_gets`, announced by Health's
//! `features.chunked_import`; issue 44, item 4) takes the file as objects
//! `<key>.0`, `<key>.1`, ... in order, each waited for with a fast poll
//! ([`CHUNK_POLL_FIRST`] doubling to [`CHUNK_POLL_MAX`]) while the SDK
//! uploads the next: one temporary file, one sha256 and one `max_bytes`
//! over all of them. The chunk whose GET carries [`LAST_CHUNK_HEADER`]
//! (the whole file's sha256) is the last; each chunk is deleted once read.

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
/// A chunk not there yet is asked for again after this, doubling...
const CHUNK_POLL_FIRST: Duration = Duration::from_millis(10);
/// ... up to this (the SDK is uploading it: a pipeline, not a ticket).
const CHUNK_POLL_MAX: Duration = Duration::from_millis(250);
/// Most chunks of one import (the SDK's 5 GiB in 16 MiB chunks is 320).
pub(crate) const MAX_CHUNKS: usize = 1024;
/// The response header of a chunk that is the last: the file's sha256.
pub(crate) const LAST_CHUNK_HEADER: &str = "x-amz-meta-rayito-sha256";

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
    /// A chunked import's GET and DELETE of each chunk, in order (empty:
    /// the one object of `get`).
    chunks: Vec<(Checked, Option<Checked>)>,
}

/// The object of chunk `index` of `object`: `<key>.<index>`.
fn chunk_object(object: &pb::S3Object, index: usize) -> pb::S3Object {
    pb::S3Object {
        key: format!("{}.{index}", object.key),
        ..object.clone()
    }
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
    let expected_sha256 = req.expected_sha256.clone();
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
    let chunks = check_chunks(&req, object, endpoint)?;
    // A chunked import ignores `get` and `delete` (the chunks' own are
    // used), as the extension fields say.
    let (get, delete) = if chunks.is_empty() {
        let get = url::check(req.get.as_ref(), object, endpoint)?;
        let delete = match &req.delete {
            Some(d) => Some(url::check(Some(d), object, endpoint)?),
            None => None,
        };
        (get, delete)
    } else {
        chunks[0].clone()
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
        chunks,
    })
}

/// The chunks of a chunked import, each URL checked against its chunk's
/// object: at most [`MAX_CHUNKS`], a DELETE per GET or none, not waiting
/// for an upload ticket's object and with a deadline (the chunks are
/// waited for until the URLs expire).
#[allow(clippy::result_large_err)]
fn check_chunks(
    req: &pb::StartImportRequest,
    object: &pb::S3Object,
    endpoint: url::S3Endpoint,
) -> Result<Vec<(Checked, Option<Checked>)>, Status> {
    if req.chunk_gets.is_empty() && req.chunk_deletes.is_empty() {
        return Ok(Vec::new());
    }
    if req.chunk_gets.len() > MAX_CHUNKS {
        return Err(Status::invalid_argument("more than 1024 chunks"));
    }
    if !req.chunk_deletes.is_empty() && req.chunk_deletes.len() != req.chunk_gets.len() {
        return Err(Status::invalid_argument(
            "chunk_deletes must be empty or one per chunk",
        ));
    }
    if req.wait_for_object || req.expires_at_unix_ms <= 0 {
        return Err(Status::invalid_argument(
            "a chunked import needs expires_at and no wait_for_object",
        ));
    }
    req.chunk_gets
        .iter()
        .enumerate()
        .map(|(i, get)| {
            let chunk = chunk_object(object, i);
            let get = url::check(Some(get), &chunk, endpoint)?;
            let delete = match req.chunk_deletes.get(i) {
                Some(d) => Some(url::check(Some(d), &chunk, endpoint)?),
                None => None,
            };
            Ok((get, delete))
        })
        .collect()
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
    if !job.chunks.is_empty() {
        return chunked(ctx, client, entry, job).await;
    }
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
        delete_object(client, delete).await;
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

/// DELETE of a staging object; a failure is logged (without the URL) and
/// left to the bucket's lifecycle rule.
async fn delete_object(client: &HttpClient, delete: &Checked) {
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

/// Waits for one chunk: its GET is asked again while S3 answers 404 (or
/// 403, a missing key without ListBucket), after [`CHUNK_POLL_FIRST`]
/// doubling to [`CHUNK_POLL_MAX`]; the deadline of the whole import
/// bounds it. Other failures are retried [`ATTEMPTS`] times.
async fn wait_chunk(
    client: &HttpClient,
    entry: &Arc<Entry>,
    get: &Checked,
) -> Result<http::Response<hyper::body::Incoming>, Reason> {
    let mut pause = CHUNK_POLL_FIRST;
    let mut failures = 0u32;
    loop {
        let answer = client
            .send(request(get, http::Method::GET), web::IDLE_TIMEOUT)
            .await;
        match answer {
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status().as_u16();
                web::drain(resp.into_body()).await;
                if status != 403 && status != 404 {
                    failures += 1;
                }
            }
            Err(_) => failures += 1,
        }
        if failures >= ATTEMPTS {
            return Err(Reason::S3Unavailable);
        }
        entry.update(|s| s.probes = s.probes.saturating_add(1));
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(CHUNK_POLL_MAX);
    }
}

/// A chunked import: every chunk in order into one temporary file, each
/// deleted once read (in the background, all awaited before the end);
/// the file is renamed over the target only when the last chunk came and
/// the sha256 of all bytes is the one it names (and `expected_sha256`,
/// when set). Any failure deletes the chunk it stopped at.
async fn chunked(
    ctx: &Context,
    client: &HttpClient,
    entry: &Arc<Entry>,
    job: &ImportJob,
) -> Result<(), Reason> {
    // Spawned, not joined in a set: a deadline or a cancel that drops this
    // future must not abort the deletes under way.
    let mut deletes = Vec::new();
    let result = receive_chunks(ctx, client, entry, job, &mut deletes).await;
    for delete in deletes {
        let _ = delete.await;
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

async fn receive_chunks(
    ctx: &Context,
    client: &HttpClient,
    entry: &Arc<Entry>,
    job: &ImportJob,
    deletes: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Result<(pb::EntryInfo, String, u64), Reason> {
    let reserve = ctx.disk_reserve.load(Ordering::Relaxed);
    let mut temp = Temp::create(&ctx.env, &job.dir, reserve, 0)?;
    let file = temp.file.take().ok_or(Reason::DiskFull)?;
    let (queue, pieces) = mpsc::channel::<Bytes>(QUEUED_CHUNKS);
    let writer = tokio::task::spawn_blocking(move || write_all(file, pieces));
    let mut received: u64 = 0;
    let mut last: Option<String> = None;
    let mut permit = None;
    let streamed: Result<(), Reason> = async {
        for (get, delete) in &job.chunks {
            let response = wait_chunk(client, entry, get).await;
            // Whatever came of it, the chunk is no use any more.
            if let Some(delete) = delete.clone() {
                let client = client.clone();
                deletes.push(tokio::spawn(async move {
                    delete_object(&client, &delete).await;
                }));
            }
            let response = response?;
            if permit.is_none() {
                permit = Some(ctx.transfers.moving_slot().await?);
                entry.update(|s| s.phase = pb::TransferPhase::Running as i32);
            }
            let headers = response.headers();
            let length = headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let sha = headers
                .get(LAST_CHUNK_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut body = response.into_body();
            let got = match pump(
                &mut body,
                length,
                job.max_bytes,
                &mut received,
                &queue,
                entry,
            )
            .await?
            {
                Pumped::Whole(got) => got,
                // The writer stopped: its error says why.
                Pumped::WriterStopped => return Ok(()),
            };
            if length.is_some_and(|len| got != len) {
                return Err(Reason::S3Unavailable);
            }
            if sha.is_some() {
                last = sha;
                return Ok(());
            }
        }
        Ok(())
    }
    .await;
    drop(queue);
    let written = writer.await.map_err(|_| Reason::DiskFull)?;
    streamed?;
    let (file, sha256) = written.map_err(|_| Reason::DiskFull)?;
    // No chunk said it was the last (or it named another sha256): the
    // bytes are not the ones the SDK sent.
    if last.as_deref() != Some(sha256.as_str())
        || (!job.expected_sha256.is_empty() && job.expected_sha256 != sha256)
    {
        return Err(Reason::ChecksumMismatch);
    }
    let info = temp.commit(file, job.mode, &job.target)?;
    Ok((info, sha256, received))
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
    // A writer that stopped says why below.
    let streamed = pump(
        &mut body,
        length,
        job.max_bytes,
        &mut received,
        &queue,
        entry,
    )
    .await
    .map(drop);
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

/// How one body's bytes went to the writer.
enum Pumped {
    /// All of them: this many.
    Whole(u64),
    /// The writer stopped first (its own error says why).
    WriterStopped,
}

/// Sends one S3 body to the writer's queue, counting its bytes into
/// `received` (the import's total so far, bounded by `max_bytes` when not
/// 0) and against the body's announced `length`, and reporting progress
/// at most every [`PROGRESS_EVERY`].
async fn pump(
    body: &mut hyper::body::Incoming,
    length: Option<u64>,
    max_bytes: u64,
    received: &mut u64,
    queue: &mpsc::Sender<Bytes>,
    entry: &Entry,
) -> Result<Pumped, Reason> {
    let mut got: u64 = 0;
    let mut reported = Instant::now();
    while let Some(piece) = web::next_chunk(body)
        .await
        .map_err(|_: CallError| Reason::S3Unavailable)?
    {
        got = got.saturating_add(piece.len() as u64);
        *received = received.saturating_add(piece.len() as u64);
        if max_bytes > 0 && *received > max_bytes {
            return Err(Reason::TooLarge);
        }
        if length.is_some_and(|len| got > len) {
            return Err(Reason::S3Unavailable);
        }
        if queue.send(piece).await.is_err() {
            return Ok(Pumped::WriterStopped);
        }
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            let done = *received;
            entry.update(|s| s.bytes_done = done);
        }
    }
    Ok(Pumped::Whole(got))
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
