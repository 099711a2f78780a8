//! Automatic S3 staging of large reads and writes (spec C3, "read ≥
//! threshold" and "write ≥ threshold or unseekable stream"): the bytes go
//! through an object in the sandbox's staging bucket instead of gRPC. The
//! SDK moves them with its own S3 client (the caller's credentials) and
//! the agent with presigned URLs; both sides hash, the SDK checks, and the
//! staging object is deleted whatever happens.
//!
//! An agent without transfers (the capability probe, `GetTransfer("")`
//! answered UNIMPLEMENTED) keeps everything on gRPC.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt as _};
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::sign::{Request, Signer};
use super::staging::S3Staging;
use super::{EXPORT_URL_BASE, TransferPhase, phase, state_error, unix_ms, watch_to_end};
use crate::aws::s3::objects::{ObjectBody, Objects};
use crate::error::map::s3::s3_failure;
use crate::error::{GrpcCode, SandboxError, TransferCode, TransferReason};
use crate::files::staging::{ChunkFeed, Chunks, Feed, FileStaging, StagedFile, StagingHook};
use crate::files::{EntryInfo, entry_info};
use crate::pb;
use crate::sandbox::Sandbox;
use crate::sandbox::parts::{Parts as HandleParts, S3Prefixes};
use crate::sandbox::steps::{Stage, Step, StepFuture};

const MIB: u64 = 1 << 20;
/// The SDK's upload parts.
pub(crate) const UPLOAD_PART: u64 = 8 * MIB;
/// Parts uploaded at once, at most (and parts held in memory, about).
/// The reference uploads 8 at once; 8 x 8 MiB held made a staged 1 GiB
/// `write_stream` grow the process by 84 MiB, over the 64 MiB
/// bound, and 4 fill a loopback or an S3 connection pool as well
/// (docs/performance.md, "Staged transfers").
const PARALLEL_PARTS: usize = 4;
/// S3's most parts of one multipart upload.
const MAX_UPLOAD_PARTS: u64 = 10_000;
/// Most presigned part URLs of a multipart export.
const MAX_EXPORT_PARTS: u64 = 1_000;
/// Feature name of the probe.
const PROBE: &str = "files.transfer_probe";
/// The chunk URLs of a chunked staged write (agents whose Health
/// announces `features.chunked_import`; issue 44, item 4), presigned
/// before the first byte: chunks of [`S3Staging::chunk_bytes`] (16 MiB by
/// default, 5 GiB in all: S3's largest single object), one PutObject
/// each, one uploading while the next fills, so about two held
/// (docs/performance.md, "Staged transfers"). The second-last is the
/// overflow: what comes after the first 318 chunks, as one multipart
/// object (the agent reads it once it is complete); the last is empty.
const CHUNK_URLS: usize = 320;
/// The refusal of a write through one object past S3's 10,000 parts.
const TOO_LARGE: &str = "the data is larger than 10,000 parts of 8 MiB; write it in several files";
/// The refusal of a chunked write past its chunks and its overflow's parts.
const TOO_LARGE_CHUNKED: &str =
    "the data is larger than 318 chunks and 10,000 parts of 8 MiB; write it in several files";
/// The user metadata of the last chunk, the file's sha256 (the agent reads
/// it as `x-amz-meta-rayito-sha256`).
const LAST_CHUNK_METADATA: &str = "rayito-sha256";
/// How long the Health probe of `chunked_import` may take, at most.
const HEALTH_PROBE: Duration = Duration::from_secs(5);

/// A sandbox's staging and what its agent serves, shared by the handle's
/// clones.
#[derive(Debug, Default)]
pub(crate) struct SandboxStaging {
    pub(crate) staging: Option<S3Staging>,
    /// Whether the agent serves transfers, once probed.
    supported: OnceCell<bool>,
    /// Whether its StartImport takes chunks, once Health said.
    chunked: OnceCell<bool>,
}

impl SandboxStaging {
    pub(crate) fn new(staging: Option<S3Staging>) -> Self {
        Self {
            staging,
            supported: OnceCell::new(),
            chunked: OnceCell::new(),
        }
    }
}

/// Whether the agent takes chunked imports: Health's
/// `features.chunked_import`, asked once per sandbox (an agent without
/// features, the reference's included, does not). A failure is returned
/// and not cached.
async fn chunked_import(sandbox: &Sandbox) -> Result<bool, SandboxError> {
    sandbox
        .staged()
        .chunked
        .get_or_try_init(|| async {
            let health = sandbox
                .conn()
                .health(
                    HEALTH_PROBE.min(sandbox.request_timeout()),
                    crate::transport::ConnectRetry::Ladder,
                )
                .await?;
            Ok(health.features.is_some_and(|f| f.chunked_import))
        })
        .await
        .copied()
}

/// The capability probe, once per sandbox: `GetTransfer("")` answers
/// NOT_FOUND on an agent that serves transfers and UNIMPLEMENTED on one
/// built before them. Another failure is returned and not cached.
async fn supported(sandbox: &Sandbox) -> Result<bool, SandboxError> {
    sandbox
        .staged()
        .supported
        .get_or_try_init(|| async {
            let answer = sandbox
                .conn()
                .get_transfer("", PROBE, sandbox.request_timeout())
                .await;
            match answer {
                Ok(_) => Ok(true),
                Err(e) => match e.meta().grpc_code() {
                    Some(GrpcCode::NotFound) => Ok(true),
                    Some(GrpcCode::Unimplemented) => Ok(false),
                    _ => Err(e),
                },
            }
        })
        .await
        .copied()
}

/// The staging to use for `size` bytes (or an unknown size): `None` keeps
/// the call on gRPC.
async fn staging_for(
    sandbox: &Sandbox,
    size: Option<u64>,
) -> Result<Option<&S3Staging>, SandboxError> {
    let Some(staging) = sandbox.staging() else {
        return Ok(None);
    };
    if size.is_some_and(|n| n < staging.threshold_bytes) {
        return Ok(None);
    }
    if supported(sandbox).await? {
        Ok(Some(staging))
    } else {
        Ok(None)
    }
}

/// The deadline of a staged read or write: the request timeout plus one
/// second per MB (spec C3, "Deadline").
fn deadline(sandbox: &Sandbox, size: u64) -> Duration {
    sandbox
        .request_timeout()
        .saturating_add(Duration::from_secs(size / 1_000_000))
}

fn at(d: Duration) -> Instant {
    Instant::now()
        .checked_add(d)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
}

fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn checksum_mismatch() -> SandboxError {
    SandboxError::transfer(
        TransferCode::FailedPrecondition,
        TransferReason::ChecksumMismatch,
    )
}

fn s3_unavailable() -> SandboxError {
    SandboxError::transfer(TransferCode::Unavailable, TransferReason::S3Unavailable)
}

/// The staging object (and an unfinished multipart upload) to remove:
/// at once on every end the SDK sees, and in the background when the
/// caller drops a read midway.
struct Cleanup {
    s3: Option<(Objects, String, String)>,
    /// An unfinished multipart upload: its key and upload id.
    upload: Option<(String, String)>,
    /// The chunks of a chunked write the SDK uploaded (or began to).
    chunks: Vec<String>,
}

impl Cleanup {
    fn new(signer: &Signer, key: &str) -> Self {
        Self {
            s3: Some((
                signer.client().clone(),
                signer.bucket.clone(),
                key.to_owned(),
            )),
            upload: None,
            chunks: Vec::new(),
        }
    }

    /// Deletes now; a failure is logged without AWS's text (the bucket
    /// expires staging objects after a day).
    async fn now(&mut self) {
        if let Some((client, bucket, key)) = self.s3.take() {
            let chunks = std::mem::take(&mut self.chunks);
            remove(client, bucket, key, self.upload.take(), chunks).await;
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some((client, bucket, key)) = self.s3.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let upload = self.upload.take();
            let chunks = std::mem::take(&mut self.chunks);
            rt.spawn(remove(client, bucket, key, upload, chunks));
        }
    }
}

async fn remove(
    client: Objects,
    bucket: String,
    key: String,
    upload: Option<(String, String)>,
    chunks: Vec<String>,
) {
    for chunk in chunks {
        if let Err(failure) = client.delete_object(&bucket, &chunk).await {
            let e = s3_failure(failure);
            tracing::warn!(target: "rayito::transfer", kind = %e.kind(), "a staging chunk could not be deleted; the bucket's lifecycle rule expires it");
        }
    }
    if let Some((upload_key, id)) = upload {
        let aborted = client
            .abort_multipart_upload(&bucket, &upload_key, &id)
            .await;
        if let Err(failure) = aborted {
            let e = s3_failure(failure);
            tracing::warn!(target: "rayito::transfer", kind = %e.kind(), "a staging multipart upload could not be aborted; the bucket's lifecycle rule aborts it");
        }
    }
    if let Err(failure) = client.delete_object(&bucket, &key).await {
        let e = s3_failure(failure);
        tracing::warn!(target: "rayito::transfer", kind = %e.kind(), "a staging object could not be deleted; the bucket's lifecycle rule expires it");
    }
}

/// The part size of a multipart export of `size` bytes: max(8 MiB,
/// size / 1,000 rounded up to a MiB), so at most 1,000 parts.
pub(crate) fn export_part_size(size: u64) -> u64 {
    let per = size
        .div_ceil(MAX_EXPORT_PARTS)
        .div_ceil(MIB)
        .saturating_mul(MIB);
    per.max(UPLOAD_PART)
}

/// A staged read: the object's bytes as they arrive, hashed and checked
/// against the agent's sha256 at the end.
pub(crate) struct StagedRead {
    body: ObjectBody,
    hash: Sha256,
    sha256: String,
    size: u64,
    got: u64,
    deadline: Instant,
    after: Duration,
    feature: &'static str,
    cleanup: Cleanup,
    ended: bool,
}

impl StagedRead {
    /// The next chunk; `None` after the last one (checked).
    pub(crate) async fn next(&mut self) -> Option<Result<Bytes, SandboxError>> {
        if self.ended {
            return None;
        }
        let item = tokio::time::timeout_at(self.deadline, self.body.next()).await;
        let failure = match item {
            Ok(Some(Ok(chunk))) => {
                self.got = self.got.saturating_add(chunk.len() as u64);
                if self.got <= self.size {
                    self.hash.update(&chunk);
                    return Some(Ok(chunk));
                }
                checksum_mismatch()
            }
            Ok(Some(Err(_))) => s3_unavailable(),
            Ok(None) => {
                let sha = hex(&std::mem::take(&mut self.hash).finalize());
                if self.got == self.size && sha == self.sha256 {
                    self.ended = true;
                    self.cleanup.now().await;
                    return None;
                }
                checksum_mismatch()
            }
            Err(_) => SandboxError::timeout(
                crate::error::TimeoutScope::Request,
                self.feature,
                Some(self.after),
            ),
        };
        self.ended = true;
        self.cleanup.now().await;
        Some(Err(failure))
    }
}

/// Opens a staged read of the file at `path` (`size` bytes when stat'ed)
/// when the sandbox stages reads that large; `None` reads over gRPC.
pub(crate) async fn open_read(
    sandbox: &Sandbox,
    path: &str,
    size: u64,
    feature: &'static str,
) -> Result<Option<StagedRead>, SandboxError> {
    let Some(staging) = staging_for(sandbox, Some(size)).await? else {
        return Ok(None);
    };
    let signer = Signer::new(sandbox, staging, feature)?;
    let key = staging.key(sandbox.id(), "down");
    let after = deadline(sandbox, size);
    let until = at(after);
    let mut cleanup = Cleanup::new(&signer, &key);
    let exported = export(
        sandbox,
        staging,
        &signer,
        &key,
        path,
        size,
        feature,
        until,
        &mut cleanup,
    )
    .await;
    let (sha256, size) = match exported {
        Ok(done) => done,
        Err(e) => {
            cleanup.now().await;
            return Err(e);
        }
    };
    let got =
        tokio::time::timeout_at(until, signer.client().get_object(&signer.bucket, &key)).await;
    let body = match got {
        Ok(Ok(body)) => body,
        Ok(Err(failure)) => {
            cleanup.now().await;
            return Err(s3_failure(failure));
        }
        Err(_) => {
            cleanup.now().await;
            return Err(SandboxError::timeout(
                crate::error::TimeoutScope::Request,
                feature,
                Some(after),
            ));
        }
    };
    Ok(Some(StagedRead {
        body,
        hash: Sha256::new(),
        sha256,
        size,
        got: 0,
        deadline: until,
        after,
        feature,
        cleanup,
        ended: false,
    }))
}

/// The export of the file to the staging object: a presigned PUT, or a
/// multipart upload the SDK creates, presigns and completes. Returns the
/// agent's sha256 and size.
#[allow(clippy::too_many_arguments)]
async fn export(
    sandbox: &Sandbox,
    staging: &S3Staging,
    signer: &Signer,
    key: &str,
    path: &str,
    size: u64,
    feature: &'static str,
    until: Instant,
    cleanup: &mut Cleanup,
) -> Result<(String, u64), SandboxError> {
    let url_life = EXPORT_URL_BASE + Duration::from_secs(size / 1_000_000);
    let client = signer.client();
    let mut multipart = None;
    let target = if size >= staging.multipart_threshold_bytes {
        let upload_id = create_upload(client, &signer.bucket, key, feature).await?;
        cleanup.upload = Some((key.to_owned(), upload_id.clone()));
        let part_size = export_part_size(size);
        let count = size.div_ceil(part_size).max(1);
        let mut parts = Vec::new();
        for number in 1..=count {
            let number = i32::try_from(number).unwrap_or(i32::MAX);
            parts.push(
                signer
                    .sign(
                        key,
                        Request::UploadPart {
                            upload_id: &upload_id,
                            number,
                        },
                        url_life,
                        feature,
                    )
                    .await?,
            );
        }
        multipart = Some(upload_id);
        pb::start_export_request::Target::Multipart(pb::PresignedMultipart { part_size, parts })
    } else {
        pb::start_export_request::Target::Put(
            signer.sign(key, Request::Put, url_life, feature).await?,
        )
    };
    let request = pb::StartExportRequest {
        path: path.to_owned(),
        user: None,
        object: Some(signer.object(key)),
        target: Some(target),
        expires_at_unix_ms: unix_ms(std::time::SystemTime::now() + url_life),
    };
    let started = sandbox
        .conn()
        .start_export(request, feature, sandbox.request_timeout())
        .await?;
    let left = until.saturating_duration_since(Instant::now());
    let state = match watch_to_end(sandbox, &started.transfer_id, feature, left).await {
        Ok(state) => state,
        Err(e) => {
            cancel(sandbox, &started.transfer_id, feature).await;
            return Err(e);
        }
    };
    if phase(state.phase) != TransferPhase::Done {
        return Err(state_error(&state));
    }
    if let Some(upload_id) = multipart {
        let parts = (1..).zip(state.part_etags.iter().cloned().map(Some));
        complete_upload(client, &signer.bucket, key, &upload_id, parts).await?;
        cleanup.upload = None;
    }
    Ok((state.sha256, state.bytes_total))
}

/// Best effort: a transfer the SDK gave up on stops moving bytes.
async fn cancel(sandbox: &Sandbox, id: &str, feature: &'static str) {
    let _ = sandbox
        .conn()
        .cancel_transfer(id, feature, sandbox.request_timeout())
        .await;
}

/// Whether a write of `len` bytes (or a stream: `None`) is staged.
pub(crate) async fn stages_write(
    sandbox: &Sandbox,
    len: Option<u64>,
) -> Result<bool, SandboxError> {
    Ok(staging_for(sandbox, len).await?.is_some())
}

/// A staged write of `chunks` to `path`: the SDK uploads them (8 MiB
/// parts, up to 4 at once, hashed in order), then the agent imports the
/// object, checks its sha256 and size, and deletes it. The caller checked
/// [`stages_write`].
pub(crate) async fn write<S>(
    sandbox: &Sandbox,
    path: &str,
    chunks: S,
    feature: &'static str,
) -> Result<EntryInfo, SandboxError>
where
    S: Stream<Item = Bytes> + Send,
{
    let Some(staging) = sandbox.staging() else {
        return Err(SandboxError::internal(
            feature,
            "no staging to write through",
        ));
    };
    let signer = Signer::new(sandbox, staging, feature)?;
    let key = staging.key(sandbox.id(), "up");
    let mut cleanup = Cleanup::new(&signer, &key);
    let outcome = if chunked_import(sandbox).await? {
        // The first chunk decides: a write shorter than one keeps the
        // single object (one PutObject, no chunk URLs to presign).
        let mut chunks = Box::pin(chunks);
        let mut cut = Parts {
            pending: BytesMut::new(),
            rest: Bytes::new(),
            size: usize::try_from(staging.chunk_bytes).unwrap_or(usize::MAX),
        };
        let first = loop {
            if let Some(first) = cut.take() {
                break Some(first);
            }
            match chunks.next().await {
                Some(bytes) => cut.rest = bytes,
                None => break None,
            }
        };
        match first {
            Some(first) => {
                let source = Source {
                    first,
                    cut,
                    rest: chunks,
                };
                let chunk_bytes = staging.chunk_bytes;
                let chunked = Chunked {
                    sandbox,
                    signer: &signer,
                    key: &key,
                    chunk_bytes,
                    feature,
                };
                chunked.write(path, source, &mut cleanup).await
            }
            None => {
                let short = futures_util::stream::iter([cut.pending.split().freeze()]);
                write_through(sandbox, &signer, &key, path, short, feature, &mut cleanup).await
            }
        }
    } else {
        write_through(sandbox, &signer, &key, path, chunks, feature, &mut cleanup).await
    };
    match outcome {
        // The agent deleted the object (or every chunk).
        Ok(entry) => {
            cleanup.s3 = None;
            Ok(entry)
        }
        Err(e) => {
            cleanup.now().await;
            Err(e)
        }
    }
}

async fn write_through<S>(
    sandbox: &Sandbox,
    signer: &Signer,
    key: &str,
    path: &str,
    chunks: S,
    feature: &'static str,
    cleanup: &mut Cleanup,
) -> Result<EntryInfo, SandboxError>
where
    S: Stream<Item = Bytes> + Send,
{
    let (size, sha256) = upload(
        signer,
        key,
        chunks,
        Sha256::new(),
        TOO_LARGE,
        feature,
        cleanup,
    )
    .await?;
    let after = deadline(sandbox, size);
    let life = after.saturating_add(EXPORT_URL_BASE);
    let request = pb::StartImportRequest {
        path: path.to_owned(),
        user: None,
        mode: None,
        object: Some(signer.object(key)),
        get: Some(
            signer
                .sign(key, Request::Get { attachment: None }, life, feature)
                .await?,
        ),
        delete: Some(signer.sign(key, Request::Delete, life, feature).await?),
        wait_for_object: false,
        expires_at_unix_ms: unix_ms(std::time::SystemTime::now() + life),
        max_bytes: size,
        expected_sha256: sha256,
        metadata: Default::default(),
        chunk_gets: Vec::new(),
        chunk_deletes: Vec::new(),
    };
    let started = sandbox
        .conn()
        .start_import(request, feature, sandbox.request_timeout())
        .await?;
    let state = match watch_to_end(sandbox, &started.transfer_id, feature, after).await {
        Ok(state) => state,
        Err(e) => {
            cancel(sandbox, &started.transfer_id, feature).await;
            return Err(e);
        }
    };
    match phase(state.phase) {
        TransferPhase::Done => state.entry.map(entry_info).ok_or_else(|| {
            SandboxError::protocol_violation(feature, "a done import named no file")
        }),
        _ => Err(state_error(&state)),
    }
}

/// The key of chunk `index` of a chunked write to `key` (the agent checks
/// every chunk URL names exactly this).
fn chunk_key(key: &str, index: usize) -> String {
    format!("{key}.{index}")
}

/// A chunked staged write: the import starts first, with every chunk's GET
/// and DELETE presigned, and the agent downloads chunk `i` while the SDK
/// uploads chunk `i + 1`; the last chunk carries the file's sha256, which
/// the agent checks before the rename. An import that fails meanwhile
/// stops the upload.
struct Chunked<'a> {
    sandbox: &'a Sandbox,
    signer: &'a Signer,
    key: &'a str,
    chunk_bytes: u64,
    feature: &'static str,
}

/// The most a chunked write carries with chunks of `chunk_bytes`: its
/// chunks before the overflow, and the overflow's 10,000 parts.
fn max_chunked_bytes(chunk_bytes: u64) -> u64 {
    let chunks = u64::try_from(CHUNK_URLS - 2).unwrap_or(u64::MAX);
    chunks
        .saturating_mul(chunk_bytes)
        .saturating_add(MAX_UPLOAD_PARTS.saturating_mul(UPLOAD_PART))
}

impl Chunked<'_> {
    async fn write<S>(
        &self,
        path: &str,
        source: Source<S>,
        cleanup: &mut Cleanup,
    ) -> Result<EntryInfo, SandboxError>
    where
        S: Stream<Item = Bytes> + Send + Unpin,
    {
        let (sandbox, signer, feature) = (self.sandbox, self.signer, self.feature);
        let max_bytes = max_chunked_bytes(self.chunk_bytes);
        // The chunks' URLs live as long as all chunks may take; the
        // overflow's two and the import as long as the most may take.
        let all_chunks = u64::try_from(CHUNK_URLS)
            .unwrap_or(u64::MAX)
            .saturating_mul(self.chunk_bytes);
        let chunk_life = deadline(sandbox, all_chunks).saturating_add(EXPORT_URL_BASE);
        let life = deadline(sandbox, max_bytes).saturating_add(EXPORT_URL_BASE);
        let mut chunk_gets = Vec::with_capacity(CHUNK_URLS);
        let mut chunk_deletes = Vec::with_capacity(CHUNK_URLS);
        for index in 0..CHUNK_URLS {
            let chunk = chunk_key(self.key, index);
            let url_life = if index + 2 >= CHUNK_URLS {
                life
            } else {
                chunk_life
            };
            let get = Request::Get { attachment: None };
            chunk_gets.push(signer.sign(&chunk, get, url_life, feature).await?);
            chunk_deletes.push(
                signer
                    .sign(&chunk, Request::Delete, url_life, feature)
                    .await?,
            );
        }
        let request = pb::StartImportRequest {
            path: path.to_owned(),
            user: None,
            mode: None,
            object: Some(signer.object(self.key)),
            get: None,
            delete: None,
            wait_for_object: false,
            expires_at_unix_ms: unix_ms(std::time::SystemTime::now() + life),
            max_bytes,
            expected_sha256: String::new(),
            metadata: Default::default(),
            chunk_gets,
            chunk_deletes,
        };
        let started = sandbox
            .conn()
            .start_import(request, feature, sandbox.request_timeout())
            .await?;
        let id = started.transfer_id;
        let ended = {
            let upload = self.upload(source, cleanup);
            let watch = watch_to_end(sandbox, &id, feature, life);
            tokio::pin!(upload);
            tokio::pin!(watch);
            tokio::select! {
                uploaded = &mut upload => match uploaded {
                    Ok(size) => {
                        let after = deadline(sandbox, size);
                        match tokio::time::timeout(after, &mut watch).await {
                            Ok(watched) => watched,
                            Err(_) => Err(SandboxError::timeout(
                                crate::error::TimeoutScope::Request,
                                feature,
                                Some(after),
                            )),
                        }
                    }
                    Err(e) => Err(e),
                },
                // The import ended before the last chunk was up: its failure.
                watched = &mut watch => watched,
            }
        };
        let state = match ended {
            Ok(state) => state,
            Err(e) => {
                cancel(sandbox, &id, feature).await;
                return Err(e);
            }
        };
        match phase(state.phase) {
            TransferPhase::Done => {
                // The agent deleted every chunk it read.
                cleanup.chunks.clear();
                state.entry.map(entry_info).ok_or_else(|| {
                    SandboxError::protocol_violation(feature, "a done import named no file")
                })
            }
            _ => Err(state_error(&state)),
        }
    }
}

type ChunkTask = tokio::task::JoinHandle<Result<(), SandboxError>>;

/// A chunked write's bytes: the first chunk, already cut, the cutter with
/// what followed it, and the rest of the stream.
struct Source<S> {
    first: Bytes,
    cut: Parts,
    rest: S,
}

impl Chunked<'_> {
    /// Uploads the stream as chunks of `chunk_bytes` (the last one
    /// shorter, empty when the size is a multiple of it, and carrying the
    /// sha256), one PutObject at a time while the next chunk fills; past
    /// the chunks before the overflow, the rest as one object (multipart,
    /// hashed on the way) and an empty last chunk. Returns the size.
    async fn upload<S>(&self, source: Source<S>, cleanup: &mut Cleanup) -> Result<u64, SandboxError>
    where
        S: Stream<Item = Bytes> + Send + Unpin,
    {
        // Aborts the chunk upload still running when this returns early.
        struct AbortOnDrop(Option<ChunkTask>);
        impl Drop for AbortOnDrop {
            fn drop(&mut self) {
                if let Some(task) = &self.0 {
                    task.abort();
                }
            }
        }
        let (signer, key, feature) = (self.signer, self.key, self.feature);
        let client = signer.client();
        let Source {
            first,
            mut cut,
            rest: mut chunks,
        } = source;
        let mut next = Some(first);
        let mut hash = Sha256::new();
        let mut size: u64 = 0;
        let mut index = 0usize;
        let mut running = AbortOnDrop(None);
        let mut ended = false;
        loop {
            let chunk = match next.take().or_else(|| cut.take()) {
                Some(chunk) => chunk,
                None if ended => break,
                None => {
                    match chunks.next().await {
                        Some(bytes) => cut.rest = bytes,
                        None => ended = true,
                    }
                    continue;
                }
            };
            if let Some(task) = running.0.take() {
                chunk_done(task, feature).await?;
            }
            let chunk_key = chunk_key(key, index);
            cleanup.chunks.push(chunk_key.clone());
            if index + 2 == CHUNK_URLS {
                // The overflow: this chunk and all that follows (a full
                // chunk leaves nothing pending), one object the agent
                // reads once it is complete.
                let rest = std::mem::take(&mut cut.rest);
                let more = futures_util::stream::iter([chunk, rest]).chain(chunks);
                let (more, sha256) = upload(
                    signer,
                    &chunk_key,
                    more,
                    hash,
                    TOO_LARGE_CHUNKED,
                    feature,
                    cleanup,
                )
                .await?;
                size = size.saturating_add(more);
                self.put_last(index + 1, Bytes::new(), &sha256, cleanup)
                    .await?;
                return Ok(size);
            }
            hash.update(&chunk);
            size = size.saturating_add(chunk.len() as u64);
            let (client, bucket) = (client.clone(), signer.bucket.clone());
            running.0 = Some(tokio::spawn(async move {
                client
                    .put_object(&bucket, &chunk_key, chunk)
                    .await
                    .map_err(s3_failure)
            }));
            index += 1;
        }
        let last = cut.pending.split().freeze();
        hash.update(&last);
        size = size.saturating_add(last.len() as u64);
        let sha256 = hex(&hash.finalize());
        if let Some(task) = running.0.take() {
            chunk_done(task, feature).await?;
        }
        self.put_last(index, last, &sha256, cleanup).await?;
        Ok(size)
    }

    /// PUTs the last chunk, `index`, naming the file's sha256.
    async fn put_last(
        &self,
        index: usize,
        last: Bytes,
        sha256: &str,
        cleanup: &mut Cleanup,
    ) -> Result<(), SandboxError> {
        let chunk_key = chunk_key(self.key, index);
        cleanup.chunks.push(chunk_key.clone());
        self.signer
            .client()
            .put_object_with(
                &self.signer.bucket,
                &chunk_key,
                last,
                Some((LAST_CHUNK_METADATA, sha256)),
            )
            .await
            .map_err(s3_failure)
    }
}

async fn chunk_done(task: ChunkTask, feature: &'static str) -> Result<(), SandboxError> {
    task.await
        .map_err(|_| SandboxError::internal(feature, "a chunk upload stopped"))?
}

/// Cuts a stream into parts of exactly `size` bytes (the last one
/// shorter): views of the caller's buffers where a whole part lies in one,
/// copies otherwise.
struct Parts {
    pending: BytesMut,
    /// The rest of the current input chunk.
    rest: Bytes,
    /// The part size ([`UPLOAD_PART`], or [`S3Staging::chunk_bytes`]).
    size: usize,
}

impl Parts {
    /// The next full part from `rest` and `pending`, if one is complete.
    fn take(&mut self) -> Option<Bytes> {
        let part = self.size;
        loop {
            if self.rest.is_empty() {
                return None;
            }
            if self.pending.is_empty() && self.rest.len() >= part {
                return Some(self.rest.split_to(part));
            }
            let n = (part - self.pending.len()).min(self.rest.len());
            self.pending.extend_from_slice(&self.rest.split_to(n));
            if self.pending.len() == part {
                return Some(self.pending.split().freeze());
            }
        }
    }
}

type PartTask = tokio::task::JoinHandle<Result<(i32, Option<String>), SandboxError>>;

/// Uploads the stream: one PutObject when it is shorter than a part, else
/// a multipart upload. Returns its size and the sha256 (hex) of `hash`
/// (the bytes before it, if any) and the stream; past 10,000 parts it
/// refuses with `too_large`.
async fn upload<S>(
    signer: &Signer,
    key: &str,
    chunks: S,
    mut hash: Sha256,
    too_large: &'static str,
    feature: &'static str,
    cleanup: &mut Cleanup,
) -> Result<(u64, String), SandboxError>
where
    S: Stream<Item = Bytes> + Send,
{
    let client = signer.client();
    let mut chunks = std::pin::pin!(chunks);
    let mut parts = Parts {
        pending: BytesMut::new(),
        rest: Bytes::new(),
        size: UPLOAD_PART as usize,
    };
    let mut size: u64 = 0;
    let mut upload_id: Option<String> = None;
    let mut running: std::collections::VecDeque<PartTask> = std::collections::VecDeque::new();
    let mut etags: BTreeMap<i32, Option<String>> = BTreeMap::new();
    let mut number: i32 = 0;
    // Aborts the part uploads still running when this returns early.
    struct AbortOnDrop<'a>(&'a mut std::collections::VecDeque<PartTask>);
    impl Drop for AbortOnDrop<'_> {
        fn drop(&mut self) {
            for task in self.0.iter() {
                task.abort();
            }
        }
    }
    let guard = AbortOnDrop(&mut running);
    let mut ended = false;
    loop {
        let part = match parts.take() {
            Some(part) => Some(part),
            None if ended => None,
            None => match chunks.next().await {
                Some(chunk) => {
                    parts.rest = chunk;
                    continue;
                }
                None => {
                    ended = true;
                    continue;
                }
            },
        };
        let Some(part) = part else { break };
        hash.update(&part);
        size = size.saturating_add(part.len() as u64);
        if upload_id.is_none() {
            upload_id = Some(create_upload(client, &signer.bucket, key, feature).await?);
            cleanup.upload = upload_id.clone().map(|id| (key.to_owned(), id));
        }
        number = number.saturating_add(1);
        if u64::try_from(number).unwrap_or(u64::MAX) > MAX_UPLOAD_PARTS {
            return Err(SandboxError::invalid_argument("chunks", too_large));
        }
        // At most PARALLEL_PARTS parts uploading (and held) at once.
        while guard.0.len() >= PARALLEL_PARTS {
            let (n, etag) = joined(guard.0.pop_front(), feature).await?;
            etags.insert(n, etag);
        }
        let (client, bucket, key) = (client.clone(), signer.bucket.clone(), key.to_owned());
        let id = upload_id.clone().unwrap_or_default();
        let n = number;
        guard.0.push_back(tokio::spawn(async move {
            let etag = client
                .upload_part(&bucket, &key, &id, n, part)
                .await
                .map_err(s3_failure)?;
            Ok((n, etag))
        }));
    }
    // The rest, shorter than a part.
    let last = parts.pending.split().freeze();
    let sha_of = |hash: Sha256| hex(&hash.finalize());
    let Some(upload_id) = upload_id else {
        hash.update(&last);
        size = size.saturating_add(last.len() as u64);
        drop(guard);
        client
            .put_object(&signer.bucket, key, last)
            .await
            .map_err(s3_failure)?;
        return Ok((size, sha_of(hash)));
    };
    if !last.is_empty() {
        hash.update(&last);
        size = size.saturating_add(last.len() as u64);
        number = number.saturating_add(1);
        let etag = client
            .upload_part(&signer.bucket, key, &upload_id, number, last)
            .await
            .map_err(s3_failure)?;
        etags.insert(number, etag);
    }
    while let Some(task) = guard.0.pop_front() {
        let (n, etag) = joined(Some(task), feature).await?;
        etags.insert(n, etag);
    }
    drop(guard);
    complete_upload(client, &signer.bucket, key, &upload_id, etags).await?;
    cleanup.upload = None;
    Ok((size, sha_of(hash)))
}

/// CreateMultipartUpload of `key`: its upload id.
async fn create_upload(
    client: &Objects,
    bucket: &str,
    key: &str,
    feature: &'static str,
) -> Result<String, SandboxError> {
    let created = client
        .create_multipart_upload(bucket, key)
        .await
        .map_err(s3_failure)?;
    created.ok_or_else(|| {
        SandboxError::protocol_violation(feature, "S3 created a multipart upload without an id")
    })
}

/// CompleteMultipartUpload with `parts` (number, ETag), in order.
async fn complete_upload(
    client: &Objects,
    bucket: &str,
    key: &str,
    upload_id: &str,
    parts: impl IntoIterator<Item = (i32, Option<String>)>,
) -> Result<(), SandboxError> {
    client
        .complete_multipart_upload(bucket, key, upload_id, parts)
        .await
        .map_err(s3_failure)
}

async fn joined(
    task: Option<PartTask>,
    feature: &'static str,
) -> Result<(i32, Option<String>), SandboxError> {
    match task {
        Some(task) => task
            .await
            .map_err(|_| SandboxError::internal(feature, "a part upload stopped"))?,
        None => Err(SandboxError::internal(
            feature,
            "a part upload went missing",
        )),
    }
}

/// The staging given to a sandbox builder (its part).
#[derive(Debug, Clone)]
struct Staging(S3Staging);

/// The staging setter of the sandbox builder.
impl crate::sandbox::SandboxBuilder {
    /// Stages large reads and writes through S3 (docs/transfers.md,
    /// "Automatic staging"): `files().read` and `read_stream` of a file of
    /// at least [`S3Staging::threshold_bytes`](S3Staging),
    /// `files().write` of that much data, and every `write_stream`, move
    /// their bytes through an object in the staging bucket instead of
    /// gRPC. Without it, `RAYITO_TRANSFER_BUCKET` (and
    /// `RAYITO_TRANSFER_PREFIX`, `RAYITO_TRANSFER_REGION`) turn it on when
    /// set. An agent without transfers keeps everything on gRPC.
    /// `create` and `connect` check every field before any call
    /// (`InvalidArgument` naming it).
    ///
    /// Only with the `s3` cargo feature.
    #[cfg(feature = "s3")]
    pub fn staging(mut self, staging: S3Staging) -> Self {
        self.parts_mut().set(Staging(staging));
        self
    }
}

/// The staging's part in `create` and `connect`: the builder's or the
/// environment's staging, every field checked (before any I/O), on the
/// handle.
pub(crate) struct Steps;

impl Step for Steps {
    fn prepare(
        &self,
        builder: &crate::sandbox::SandboxBuilder,
        _stage: Stage,
        handle: &mut HandleParts,
    ) -> Result<(), SandboxError> {
        let staging = match builder.parts().get::<Staging>() {
            Some(s) => Some(s.0.clone()),
            None => S3Staging::from_env()?,
        };
        if let Some(s) = &staging {
            // A prefix another feature binds in the same bucket (the
            // checkpoint prefix) must not overlap: the first is checked
            // with every field, in their order; any other after them.
            let mut bound = builder
                .parts()
                .get::<S3Prefixes>()
                .into_iter()
                .flat_map(|bound| bound.in_bucket(&s.bucket));
            s.check(bound.next())?;
            for prefix in bound {
                s.check(Some(prefix))?;
            }
        }
        handle.set(SandboxStaging::new(staging));
        handle.set(StagingHook(Box::new(FileStager)));
        Ok(())
    }
}

/// The file view's staging: this module's reads and writes.
struct FileStager;

impl FileStaging for FileStager {
    fn active(&self, sandbox: &Sandbox) -> bool {
        sandbox.staging().is_some()
    }

    fn open_read<'a>(&'a self, file: StagedFile<'a>, size: u64) -> StepFuture<'a, Option<Feed>> {
        Box::pin(async move {
            let staged = open_read(file.sandbox, file.path, size, file.feature).await?;
            Ok(staged.map(|s| Box::new(s) as Feed))
        })
    }

    fn stages_write<'a>(&'a self, sandbox: &'a Sandbox, len: Option<u64>) -> StepFuture<'a, bool> {
        Box::pin(stages_write(sandbox, len))
    }

    fn write<'a>(&'a self, file: StagedFile<'a>, chunks: Chunks) -> StepFuture<'a, EntryInfo> {
        Box::pin(write(file.sandbox, file.path, chunks, file.feature))
    }
}

impl ChunkFeed for StagedRead {
    fn next(&mut self) -> StepFuture<'_, Option<Bytes>> {
        Box::pin(async move { StagedRead::next(self).await.transpose() })
    }
}

/// The staging state on the sandbox core.
impl crate::sandbox::Sandbox {
    /// Where large reads and writes are staged ([`crate::SandboxBuilder::staging`],
    /// else `RAYITO_TRANSFER_BUCKET`); `None`: they all go over gRPC.
    pub fn staging(&self) -> Option<&crate::transfer::S3Staging> {
        self.staged().staging.as_ref()
    }

    /// The staging state shared by the handle's clones.
    pub(crate) fn staged(&self) -> &SandboxStaging {
        // Every handle gets one (the step above); none is no staging.
        static NONE: std::sync::LazyLock<SandboxStaging> =
            std::sync::LazyLock::new(SandboxStaging::default);
        self.parts().get::<SandboxStaging>().unwrap_or(&NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged(body: &'static [u8], sha256: String, size: u64) -> StagedRead {
        StagedRead {
            body: ObjectBody::from_bytes(Bytes::from_static(body)),
            hash: Sha256::new(),
            sha256,
            size,
            got: 0,
            deadline: Instant::now() + Duration::from_secs(30),
            after: Duration::from_secs(30),
            feature: "files.read",
            cleanup: Cleanup {
                s3: None,
                upload: None,
                chunks: Vec::new(),
            },
            ended: false,
        }
    }

    async fn drain(mut read: StagedRead) -> Result<Vec<u8>, SandboxError> {
        let mut out = Vec::new();
        while let Some(chunk) = read.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }

    /// A prefix another feature bound in the staging's bucket (the
    /// checkpoint prefix, which `persist` records) is refused before any
    /// I/O; the same prefix in another bucket is not.
    #[test]
    fn the_staging_keeps_clear_of_a_prefix_bound_in_its_bucket() {
        let with = |bucket: &str| {
            let mut builder =
                crate::Sandbox::builder().staging(S3Staging::new("abc").prefix("homes/x"));
            builder
                .parts_mut()
                .update::<S3Prefixes>(|bound| bound.record("persist", bucket, "homes"));
            builder
        };
        let mut handle = HandleParts::default();
        let e = Steps
            .prepare(&with("abc"), Stage::Create, &mut handle)
            .expect_err("overlap");
        assert_eq!(
            e.to_string(),
            "invalid prefix: the staging prefix overlaps rayito/ or the checkpoint prefix in the same bucket; pass a prefix of its own like rayito-transfer"
        );
        Steps
            .prepare(&with("other"), Stage::Create, &mut handle)
            .expect("another bucket");
    }

    /// The bytes S3 returned are checked against the agent's sha256 and
    /// size: a flipped byte, a longer or a shorter body is
    /// `Transfer { failed_precondition, checksum_mismatch }`.
    #[tokio::test]
    async fn a_body_that_does_not_match_is_a_checksum_mismatch() {
        let good = hex(&Sha256::digest(b"hello"));
        assert_eq!(
            drain(staged(b"hello", good.clone(), 5)).await.unwrap(),
            b"hello"
        );
        for (body, size) in [(&b"hellO"[..], 5), (b"hello!", 5), (b"hell", 5)] {
            let e = drain(staged(body, good.clone(), size))
                .await
                .expect_err("mismatch");
            match &e {
                SandboxError::Transfer { code, reason, .. } => {
                    assert_eq!(*code, TransferCode::FailedPrecondition);
                    assert_eq!(*reason, TransferReason::ChecksumMismatch);
                }
                other => panic!("{other:?}"),
            }
            let doc = include_str!("../../docs/transfers.md");
            assert!(doc.contains(&e.to_string()), "docs/transfers.md lacks {e}");
        }
        // After the end, nothing more.
        let mut read = staged(b"hello", good, 5);
        while read.next().await.is_some() {}
        assert!(read.next().await.is_none());
    }

    /// docs/transfers.md transcribes both refusals of a write too large,
    /// and the chunked one's figures are the constants'.
    #[test]
    fn the_docs_name_the_too_large_refusals() {
        let doc = include_str!("../../docs/transfers.md");
        for message in [super::TOO_LARGE, super::TOO_LARGE_CHUNKED] {
            assert!(doc.contains(&format!("`{message}`")), "{message}");
        }
        let before_overflow = super::CHUNK_URLS - 2;
        assert!(super::TOO_LARGE_CHUNKED.contains(&format!("{before_overflow} chunks")));
        assert_eq!(super::MAX_UPLOAD_PARTS, 10_000);
        assert_eq!(super::UPLOAD_PART, 8 << 20);
        assert_eq!(
            super::max_chunked_bytes(16 << 20),
            318 * (16 << 20) + 10_000 * (8 << 20)
        );
    }

    #[test]
    fn export_parts_are_at_least_8_mib_and_at_most_1000() {
        assert_eq!(export_part_size(40 * MIB), 8 * MIB);
        assert_eq!(export_part_size(8_000 * MIB), 8 * MIB);
        assert_eq!(export_part_size(8_001 * MIB), 9 * MIB);
        let five = 5u64 << 30;
        let part = export_part_size(five);
        assert!(five.div_ceil(part) <= 1_000, "{part}");
        assert_eq!(part % MIB, 0);
    }

    #[test]
    fn parts_are_exact_and_views_where_possible() {
        let mut p = Parts {
            pending: BytesMut::new(),
            rest: Bytes::from(vec![1u8; (2 * UPLOAD_PART + 5) as usize]),
            size: UPLOAD_PART as usize,
        };
        let base = p.rest.as_ptr() as usize;
        let a = p.take().unwrap();
        let b = p.take().unwrap();
        assert_eq!(a.len() as u64, UPLOAD_PART);
        assert_eq!(a.as_ptr() as usize, base);
        assert_eq!(b.as_ptr() as usize, base + UPLOAD_PART as usize);
        assert!(p.take().is_none());
        assert_eq!(p.pending.len(), 5);
        p.rest = Bytes::from(vec![2u8; UPLOAD_PART as usize]);
        let c = p.take().unwrap();
        assert_eq!(c.len() as u64, UPLOAD_PART);
        assert_eq!(&c[..5], &[1u8; 5]);
        assert_eq!(p.rest.len(), 5);
    }
}
