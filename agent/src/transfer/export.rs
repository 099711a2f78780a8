//! An export: file → S3 object. The file is opened (as the sandbox user,
//! never through a final symlink) and measured when StartExport accepts
//! it; exactly that many bytes are sent, with one presigned PUT or one
//! PUT per presigned part (the SDK completes the multipart upload with the
//! ETags reported in `part_etags`). A file that ends sooner is
//! `file_shrank`. One blocking thread reads and hashes the file, in chunks
//! that never straddle a part, a few chunks ahead of the network.

use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tonic::Status;

use super::Context;
use super::failure::Reason;
use super::url::{self, Checked};
use super::web::{self, BodyFailed, CallError, HttpClient};
use super::{Entry, deadline};
use crate::filesystem::{open_regular, resolve};
use crate::pb;

/// Largest chunk read from the file.
const CHUNK: u64 = 1 << 20;
/// Chunks read ahead of the network, at most.
const QUEUED_CHUNKS: usize = 4;
/// Most presigned parts one export takes (S3 allows 10,000).
const MAX_PARTS: usize = 10_000;
/// State updates while bytes move, at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How long a PUT may take without a deadline of the request's own.
const NO_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Where the bytes go.
#[derive(Debug)]
enum Target {
    Put(Checked),
    Parts { part_size: u64, parts: Vec<Checked> },
}

/// A checked, measured StartExport.
#[derive(Debug)]
pub(crate) struct ExportJob {
    file: std::fs::File,
    size: u64,
    target: Target,
    deadline: Option<Instant>,
}

impl ExportJob {
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

/// Everything StartExport refuses, before any I/O on S3.
pub(crate) async fn accept(
    ctx: &Context,
    req: pb::StartExportRequest,
) -> Result<ExportJob, Status> {
    let target = resolve(&ctx.env, &req.path)?;
    crate::filesystem::known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
    let object = url::check_object(req.object.as_ref())?;
    let endpoint = ctx.transfers.endpoint();
    let deadline = deadline(req.expires_at_unix_ms);
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return Err(Status::invalid_argument("expires_at has passed"));
    }
    let presigned = match req.target {
        Some(pb::start_export_request::Target::Put(put)) => {
            Target::Put(url::check(Some(&put), object, endpoint)?)
        }
        Some(pb::start_export_request::Target::Multipart(m)) => {
            if m.part_size == 0 || m.parts.is_empty() || m.parts.len() > MAX_PARTS {
                return Err(Status::invalid_argument("invalid multipart parts"));
            }
            let parts = m
                .parts
                .iter()
                .map(|p| url::check(Some(p), object, endpoint))
                .collect::<Result<Vec<_>, _>>()?;
            Target::Parts {
                part_size: m.part_size,
                parts,
            }
        }
        None => return Err(Status::invalid_argument("a presigned target is required")),
    };
    let file = open_regular(&ctx.env, &target.host).await?;
    let size = file
        .metadata()
        .await
        .map_err(|e| crate::filesystem::io_status(&e))?
        .len();
    if let Target::Parts { part_size, parts } = &presigned {
        // Exactly the parts the size needs (an empty file: one empty part).
        let needed = size.div_ceil(*part_size).max(1);
        if parts.len() as u64 != needed {
            return Err(Status::invalid_argument(
                "the presigned parts do not match the file's size",
            ));
        }
    }
    Ok(ExportJob {
        file: file.into_std().await,
        size,
        target: presigned,
        deadline,
    })
}

/// Runs the export to a terminal state.
pub(crate) async fn run(ctx: &Context, client: &HttpClient, entry: &Arc<Entry>, job: ExportJob) {
    let deadline = job.deadline;
    entry
        .drive("an export", deadline, export(ctx, client, entry, job))
        .await;
}

/// What the reading thread sends.
enum Piece {
    Data(Bytes),
    /// The whole size was read: its sha256.
    Done(String),
    /// The file ended before its size at accept.
    Shrank,
    /// A read failed.
    Failed,
}

/// Reads `size` bytes in chunks that end at every part boundary.
fn read_file(mut file: std::fs::File, size: u64, part_size: u64, out: mpsc::Sender<Piece>) {
    let mut hash = Sha256::new();
    let mut offset: u64 = 0;
    let mut buf = BytesMut::new();
    while offset < size {
        let to_boundary = part_size - offset % part_size;
        let want = CHUNK.min(to_boundary).min(size - offset);
        // `want` is at most CHUNK (1 MiB): no allocation from the file's size.
        buf.resize(want as usize, 0);
        let mut filled = 0usize;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => {
                    let _ = out.blocking_send(Piece::Shrank);
                    return;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    let _ = out.blocking_send(Piece::Failed);
                    return;
                }
            }
        }
        hash.update(&buf);
        offset += want;
        if out
            .blocking_send(Piece::Data(buf.split().freeze()))
            .is_err()
        {
            return;
        }
    }
    let sha: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let _ = out.blocking_send(Piece::Done(sha));
}

/// Sends every part; the error is the reason.
async fn export(
    ctx: &Context,
    client: &HttpClient,
    entry: &Arc<Entry>,
    job: ExportJob,
) -> Result<(), Reason> {
    let _permit = ctx.transfers.moving_slot().await?;
    entry.update(|s| s.phase = pb::TransferPhase::Running as i32);
    let size = job.size;
    let multipart = matches!(job.target, Target::Parts { .. });
    let (part_size, requests) = match job.target {
        Target::Put(put) => (size.max(1), vec![put]),
        Target::Parts { part_size, parts } => (part_size, parts),
    };
    let (tx, mut pieces) = mpsc::channel(QUEUED_CHUNKS);
    let file = job.file;
    let reader = tokio::task::spawn_blocking(move || read_file(file, size, part_size, tx));
    let head_timeout = job
        .deadline
        .map_or(NO_DEADLINE, |d| d.saturating_duration_since(Instant::now()));
    let mut etags = Vec::new();
    let mut sent: u64 = 0;
    let mut reported = Instant::now();
    let last = requests.len().saturating_sub(1);
    for (i, presigned) in requests.iter().enumerate() {
        let len = if i == last {
            size - part_size.saturating_mul(i as u64).min(size)
        } else {
            part_size
        };
        let (body_tx, body_rx) =
            mpsc::channel::<Result<hyper::body::Frame<Bytes>, std::io::Error>>(2);
        let body: web::Body =
            http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(body_rx))
                .boxed();
        let mut req = http::Request::new(body);
        *req.method_mut() = http::Method::PUT;
        *req.uri_mut() = presigned.uri.clone();
        *req.headers_mut() = presigned.headers.clone();
        req.headers_mut()
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
        let forward = async {
            let mut left = len;
            while left > 0 {
                match pieces.recv().await {
                    Some(Piece::Data(chunk)) => {
                        left = left.saturating_sub(chunk.len() as u64);
                        sent += chunk.len() as u64;
                        if body_tx
                            .send(Ok(hyper::body::Frame::data(chunk)))
                            .await
                            .is_err()
                        {
                            return Ok(());
                        }
                        if reported.elapsed() >= PROGRESS_EVERY {
                            reported = Instant::now();
                            entry.update(|s| s.bytes_done = sent);
                        }
                    }
                    Some(Piece::Shrank) => {
                        let _ = body_tx.send(Err(std::io::Error::other(BodyFailed))).await;
                        return Err(Reason::FileShrank);
                    }
                    Some(Piece::Failed) | Some(Piece::Done(_)) | None => {
                        let _ = body_tx.send(Err(std::io::Error::other(BodyFailed))).await;
                        return Err(Reason::S3Unavailable);
                    }
                }
            }
            drop(body_tx);
            Ok(())
        };
        let (answer, forwarded) = tokio::join!(client.send(req, head_timeout), forward);
        forwarded?;
        let resp = match answer {
            Ok(resp) => resp,
            Err(CallError::Body) => return Err(Reason::S3Unavailable),
            Err(CallError::Unavailable) => return Err(Reason::S3Unavailable),
        };
        let status = resp.status();
        let etag = resp
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        web::drain(resp.into_body()).await;
        match status.as_u16() {
            200..=299 => {}
            403 => return Err(Reason::S3Denied),
            _ => return Err(Reason::S3Unavailable),
        }
        etags.push(etag.unwrap_or_default());
    }
    let sha256 = match pieces.recv().await {
        Some(Piece::Done(sha)) => sha,
        Some(Piece::Shrank) => return Err(Reason::FileShrank),
        _ => return Err(Reason::S3Unavailable),
    };
    let _ = reader.await;
    entry.done(|s| {
        s.bytes_done = size;
        s.bytes_total = size;
        s.sha256 = sha256;
        if multipart {
            s.part_etags = etags;
        }
    });
    Ok(())
}
