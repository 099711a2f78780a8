//! S3-staged transfers (feature `s3`): upload and download URLs a browser
//! or `curl` uses directly, signed with the caller's credentials, while the
//! agent moves the bytes between the object and the sandbox's file
//! (docs/transfers.md).
//!
//! ```no_run
//! # async fn demo(sbx: &rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! use rayito::transfer::{S3Staging, UploadUrlOptions};
//! let staging = S3Staging::new("my-staging-bucket");
//! let ticket = sbx
//!     .files()
//!     .upload_url("data/in.csv", UploadUrlOptions::new(staging))
//!     .await?;
//! // hand ticket.url() to the uploader (a PUT), then:
//! let entry = ticket.wait(std::time::Duration::from_secs(600)).await?;
//! # let _ = entry; Ok(()) }
//! ```
//!
//! No error, `Debug` output or log line holds a URL, bucket, key, form
//! field or path.

pub(crate) mod auto;
mod sign;
mod staging;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use self::sign::{Request, Signer};
pub use self::staging::{DEFAULT_PREFIX, S3Staging};
use crate::error::SandboxError;
use crate::files::{EntryInfo, FileType, Files, entry_info};
use crate::pb;
use crate::sandbox::Sandbox;

/// Default lifetime of an upload URL.
const DEFAULT_UPLOAD_EXPIRES_IN: Duration = Duration::from_secs(3600);
/// The DELETE the agent uses outlives the upload URL by this much.
const DELETE_GRACE: Duration = Duration::from_secs(3600);
/// The largest object one PUT or POST may carry.
const MAX_SINGLE_BYTES: u64 = 5 << 30;
/// An export's URL lives 900 s plus 1 s per MB.
const EXPORT_URL_BASE: Duration = Duration::from_secs(900);
/// A wait that ended without a terminal phase is reopened this often.
const WATCH_REOPENS: u32 = 3;

/// How an upload URL is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UploadMethod {
    /// `PUT <url>` with the body and [`UploadTicket::headers`].
    Put,
    /// `POST <url>` as `multipart/form-data`: [`UploadTicket::fields`]
    /// first, the file last as field `file` (a browser form).
    Post,
}

/// Options of [`Files::upload_url`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UploadUrlOptions {
    /// Where the object is staged.
    pub staging: S3Staging,
    /// How long the URL may be used (default 1 h; capped by
    /// [`S3Staging::max_expires_in`]).
    pub expires_in: Duration,
    /// The largest upload accepted (default and cap 5 GiB); a POST form
    /// enforces it at S3, the agent for both.
    pub max_bytes: Option<u64>,
    /// A POST form instead of a PUT URL.
    pub form: bool,
    /// The file's mode (default 0644).
    pub mode: Option<u32>,
}

impl UploadUrlOptions {
    /// A PUT URL into `staging`, valid for an hour.
    pub fn new(staging: S3Staging) -> Self {
        Self {
            staging,
            expires_in: DEFAULT_UPLOAD_EXPIRES_IN,
            max_bytes: None,
            form: false,
            mode: None,
        }
    }

    crate::setters::setters! {
        /// The URL's lifetime.
        expires_in: Duration;
        /// The largest upload accepted.
        max_bytes: Some u64;
        /// A POST form (`true`) or a PUT URL.
        form: bool;
        /// The file's mode.
        mode: Some u32;
    }
}

/// Options of [`Files::download_url`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DownloadUrlOptions {
    /// Where the object is staged.
    pub staging: S3Staging,
    /// How long the link may be used (default 1 h; capped by
    /// [`S3Staging::max_expires_in`]).
    pub expires_in: Duration,
    /// The name a browser saves it as (`Content-Disposition: attachment`);
    /// default: the file's name.
    pub filename: Option<String>,
}

impl DownloadUrlOptions {
    /// A link into `staging`, valid for an hour.
    pub fn new(staging: S3Staging) -> Self {
        Self {
            staging,
            expires_in: DEFAULT_UPLOAD_EXPIRES_IN,
            filename: None,
        }
    }

    crate::setters::setters! {
        /// The link's lifetime.
        expires_in: Duration;
        /// The attachment's file name.
        filename: Some impl String;
    }
}

/// Where a transfer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransferPhase {
    /// Waiting for the object (an upload not made yet) or for its turn.
    Waiting,
    /// Moving bytes.
    Running,
    /// Finished.
    Done,
    /// Failed (see [`UploadTicket::wait`]'s error).
    Failed,
    /// Cancelled.
    Cancelled,
}

/// A transfer's state, as [`UploadTicket::status`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransferStatus {
    /// The phase.
    pub phase: TransferPhase,
    /// Bytes moved so far.
    pub bytes_done: u64,
    /// The object's size (0 until the object was seen).
    pub bytes_total: u64,
    /// How often the agent looked for the object.
    pub probes: u32,
    /// The bytes' sha256 (hex) once done.
    pub sha256: Option<String>,
}

fn phase(p: i32) -> TransferPhase {
    match pb::TransferPhase::try_from(p) {
        Ok(pb::TransferPhase::Running) => TransferPhase::Running,
        Ok(pb::TransferPhase::Done) => TransferPhase::Done,
        Ok(pb::TransferPhase::Failed) => TransferPhase::Failed,
        Ok(pb::TransferPhase::Cancelled) => TransferPhase::Cancelled,
        _ => TransferPhase::Waiting,
    }
}

fn status(s: &pb::TransferState) -> TransferStatus {
    TransferStatus {
        phase: phase(s.phase),
        bytes_done: s.bytes_done,
        bytes_total: s.bytes_total,
        probes: s.probes,
        sha256: (!s.sha256.is_empty()).then(|| s.sha256.clone()),
    }
}

/// The error of a FAILED or CANCELLED state (spec C4): `FileUpload` for an
/// import, `Transfer` for an export, unless a more specific kind applies.
fn state_error(s: &pb::TransferState) -> SandboxError {
    let direction = if s.direction == pb::TransferDirection::Export as i32 {
        crate::error::TransferDirection::Export
    } else {
        crate::error::TransferDirection::Import
    };
    let (code, message) = match &s.error {
        Some(e) => (e.code.as_str(), e.message.as_str()),
        None => ("cancelled", ""),
    };
    crate::error::map::transfer::from_transfer_error(direction, code, message)
}

/// An upload URL or form, armed in the sandbox: once the object is there,
/// the agent moves it to the file and deletes it. The first upload becomes
/// the file; the URL itself stays valid until it expires (S3 takes it
/// again; the agent deletes such an object after the expiry, see
/// docs/transfers.md).
///
/// `Debug` shows neither the URL nor the form fields.
#[derive(Clone)]
pub struct UploadTicket {
    sandbox: Sandbox,
    url: String,
    method: UploadMethod,
    headers: BTreeMap<String, String>,
    fields: BTreeMap<String, String>,
    expires_at: SystemTime,
    transfer_id: String,
}

crate::secret::redacted_debug! {
    non_exhaustive UploadTicket |o| method, expires_at, transfer_id
}

impl UploadTicket {
    /// The URL to PUT or POST to (a secret until it expires).
    pub fn url(&self) -> &str {
        &self.url
    }
    /// PUT or POST.
    pub fn method(&self) -> UploadMethod {
        self.method
    }
    /// Headers a PUT must carry.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }
    /// The form fields of a POST (before the file).
    pub fn fields(&self) -> &BTreeMap<String, String> {
        &self.fields
    }
    /// When the URL stops working.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }
    /// The agent's transfer id.
    pub fn transfer_id(&self) -> &str {
        &self.transfer_id
    }

    /// Waits until the upload arrived and became the file, at most
    /// `timeout` (a timeout leaves the ticket armed: wait again).
    ///
    /// # Errors
    /// `Timeout` after `timeout`; the transfer's failure (spec C4:
    /// `Timeout` once the URL expired, `DiskFull`, a file-upload error
    /// with its reason); transport failures.
    pub async fn wait(&self, timeout: Duration) -> Result<EntryInfo, SandboxError> {
        let state = watch_to_end(
            &self.sandbox,
            &self.transfer_id,
            "files.upload_url.wait",
            timeout,
        )
        .await?;
        match phase(state.phase) {
            TransferPhase::Done => state.entry.map(entry_info).ok_or_else(|| {
                SandboxError::protocol_violation(
                    "files.upload_url.wait",
                    "a done import named no file",
                )
            }),
            _ => Err(state_error(&state)),
        }
    }

    /// The transfer's state now.
    ///
    /// # Errors
    /// `NotFound` once the agent forgot it (30 minutes after it ended);
    /// transport failures.
    pub async fn status(&self) -> Result<TransferStatus, SandboxError> {
        let s = self
            .sandbox
            .conn()
            .get_transfer(
                &self.transfer_id,
                "files.upload_url.status",
                self.sandbox.request_timeout(),
            )
            .await?;
        Ok(status(&s))
    }

    /// Disarms the ticket (idempotent; a finished transfer stays as it
    /// ended).
    ///
    /// # Errors
    /// `NotFound` once the agent forgot it; transport failures.
    pub async fn cancel(&self) -> Result<(), SandboxError> {
        self.sandbox
            .conn()
            .cancel_transfer(
                &self.transfer_id,
                "files.upload_url.cancel",
                self.sandbox.request_timeout(),
            )
            .await
    }
}

/// A download link to a file, staged in S3. The link is valid until it
/// expires, as often as it is used; its object stays until
/// [`DownloadLink::delete`] or the bucket's lifecycle rule removes it.
///
/// `Debug` does not show the URL. Two links are equal when their URL,
/// size, sha256 and expiry are.
#[derive(Clone)]
pub struct DownloadLink {
    url: String,
    size: u64,
    sha256: String,
    expires_at: SystemTime,
    staged: Staged,
}

/// Where a download link's object is, to delete it.
#[derive(Clone)]
struct Staged {
    client: crate::aws::s3::objects::Objects,
    bucket: String,
    key: String,
}

impl PartialEq for DownloadLink {
    fn eq(&self, other: &Self) -> bool {
        (&self.url, self.size, &self.sha256, self.expires_at)
            == (&other.url, other.size, &other.sha256, other.expires_at)
    }
}

impl Eq for DownloadLink {}

crate::secret::redacted_debug! {
    non_exhaustive DownloadLink |o| size, sha256, expires_at
}

impl DownloadLink {
    /// The GET URL (a secret until it expires).
    pub fn url(&self) -> &str {
        &self.url
    }
    /// The file's size when it was staged.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Its sha256 (hex).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
    /// When the link stops working.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// Deletes the staged object now (once the recipient has it): the link
    /// answers 404 from then on, and nothing is left in the staging
    /// prefix. Idempotent; with the caller's credentials
    /// (`s3:DeleteObject` on the staging prefix).
    ///
    /// # Errors
    /// The S3 mapping of `docs/errors.md` (`Authentication` for refused
    /// credentials, `InvalidArgument { bucket }` for a bucket that no
    /// longer exists, ...); never AWS's text.
    pub async fn delete(&self) -> Result<(), SandboxError> {
        let Staged {
            client,
            bucket,
            key,
        } = &self.staged;
        client
            .delete_object(bucket, key)
            .await
            .map_err(crate::error::map::s3::s3_failure)
    }
}

/// Watches a transfer to its terminal state within `timeout`, reopening a
/// stream that ended without one (at most [`WATCH_REOPENS`] times).
async fn watch_to_end(
    sandbox: &Sandbox,
    id: &str,
    feature: &'static str,
    timeout: Duration,
) -> Result<pb::TransferState, SandboxError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out =
        || SandboxError::timeout(crate::error::TimeoutScope::Request, feature, Some(timeout));
    let mut reopened = 0;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        let run = async {
            let mut stream = sandbox.conn().watch_transfer(id, feature, None).await?;
            while let Some(event) = stream.message().await? {
                if let Some(pb::transfer_event::Event::State(s)) = event.event
                    && matches!(
                        phase(s.phase),
                        TransferPhase::Done | TransferPhase::Failed | TransferPhase::Cancelled
                    )
                {
                    return Ok(Some(s));
                }
            }
            Ok::<_, SandboxError>(None)
        };
        match tokio::time::timeout(left, run).await {
            Err(_) => return Err(timed_out()),
            Ok(Ok(Some(state))) => return Ok(state),
            Ok(Ok(None)) if reopened < WATCH_REOPENS => reopened += 1,
            Ok(Ok(None)) => {
                return Err(SandboxError::protocol_violation(
                    feature,
                    "the transfer's watch ended without a final state",
                ));
            }
            Ok(Err(e)) => return Err(e),
        }
    }
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Files<'_> {
    /// An upload URL (PUT) or form (POST) for the file at `path`: whoever
    /// holds it uploads before it expires, and the agent moves the first
    /// object to `path` (temp file + rename; parents created) and deletes
    /// it. The import is armed before this returns.
    ///
    /// # Errors
    /// `InvalidArgument` naming the bad argument (`path`, a staging field,
    /// `expires_in`, `max_bytes`) before any call; `Unimplemented` on an
    /// agent without transfers or without an AWS configuration; the
    /// agent's refusals (`RateLimit` with 16 transfers under way);
    /// transport failures.
    pub async fn upload_url(
        &self,
        path: &str,
        options: UploadUrlOptions,
    ) -> Result<UploadTicket, SandboxError> {
        const FEATURE: &str = "files.upload_url";
        crate::checks::file_path(path)?;
        let staging = &options.staging;
        staging.check(None)?;
        let lifetime = staging.lifetime(options.expires_in)?;
        let max_bytes = staging::check_max_bytes(options.max_bytes.unwrap_or(MAX_SINGLE_BYTES))?;
        let sandbox = self.sandbox();
        let signer = Signer::new(sandbox, staging, FEATURE)?;
        let key = staging.key(sandbox.id(), "up");
        let expires_at = SystemTime::now() + lifetime;
        let (method, url, headers, fields) = if options.form {
            let (url, fields) = signer.post(&key, lifetime, max_bytes, FEATURE).await?;
            (UploadMethod::Post, url, BTreeMap::new(), fields)
        } else {
            let put = signer.sign(&key, Request::Put, lifetime, FEATURE).await?;
            (
                UploadMethod::Put,
                put.url,
                put.headers.into_iter().collect(),
                BTreeMap::new(),
            )
        };
        let request = pb::StartImportRequest {
            path: path.to_owned(),
            user: self.user_checked()?,
            mode: options.mode,
            object: Some(signer.object(&key)),
            get: Some(
                signer
                    .sign(
                        &key,
                        Request::Get { attachment: None },
                        lifetime + DELETE_GRACE,
                        FEATURE,
                    )
                    .await?,
            ),
            delete: Some(
                signer
                    .sign(&key, Request::Delete, lifetime + DELETE_GRACE, FEATURE)
                    .await?,
            ),
            wait_for_object: true,
            expires_at_unix_ms: unix_ms(expires_at),
            max_bytes,
            expected_sha256: String::new(),
            metadata: Default::default(),
            chunk_gets: Vec::new(),
            chunk_deletes: Vec::new(),
        };
        let started = sandbox
            .conn()
            .start_import(request, FEATURE, sandbox.request_timeout())
            .await?;
        Ok(UploadTicket {
            sandbox: sandbox.clone(),
            url,
            method,
            headers,
            fields,
            expires_at,
            transfer_id: started.transfer_id,
        })
    }

    /// A download link to the file at `path`: the agent uploads it to the
    /// staging bucket now, and the link (a presigned GET that saves it as
    /// an attachment) carries its size and sha256. The object stays until
    /// [`DownloadLink::delete`] or the bucket's lifecycle rule.
    ///
    /// # Errors
    /// `FileNotFound`; `InvalidArgument` for a directory or symlink, or a
    /// bad argument (before any call); `Unimplemented` on an agent without
    /// transfers; the export's failure (spec C4); transport failures.
    pub async fn download_url(
        &self,
        path: &str,
        options: DownloadUrlOptions,
    ) -> Result<DownloadLink, SandboxError> {
        const FEATURE: &str = "files.download_url";
        crate::checks::path(path)?;
        let staging = &options.staging;
        staging.check(None)?;
        let lifetime = staging.lifetime(options.expires_in)?;
        if let Some(name) = &options.filename {
            staging::check_filename(name)?;
        }
        let entry = self.stat(path, FEATURE).await?;
        if entry.file_type != FileType::File {
            return Err(SandboxError::invalid_argument(
                "path",
                "the path is not a regular file; pass the path of a file",
            ));
        }
        let sandbox = self.sandbox();
        let signer = Signer::new(sandbox, staging, FEATURE)?;
        let key = staging.key(sandbox.id(), "down");
        let mb = entry.size / 1_000_000;
        let export_life = EXPORT_URL_BASE + Duration::from_secs(mb);
        let request = pb::StartExportRequest {
            path: path.to_owned(),
            user: self.user_checked()?,
            object: Some(signer.object(&key)),
            target: Some(pb::start_export_request::Target::Put(
                signer
                    .sign(&key, Request::Put, export_life, FEATURE)
                    .await?,
            )),
            expires_at_unix_ms: unix_ms(SystemTime::now() + export_life),
        };
        let started = sandbox
            .conn()
            .start_export(request, FEATURE, sandbox.request_timeout())
            .await?;
        let wait = Duration::from_secs(60) + Duration::from_secs(mb);
        let state = watch_to_end(sandbox, &started.transfer_id, FEATURE, wait).await?;
        if phase(state.phase) != TransferPhase::Done {
            return Err(state_error(&state));
        }
        let filename = options
            .filename
            .clone()
            .unwrap_or_else(|| entry.name.clone());
        let attachment = staging::check_filename(&filename)
            .is_ok()
            .then_some(filename);
        let attachment = attachment.as_deref();
        let get = signer
            .sign(&key, Request::Get { attachment }, lifetime, FEATURE)
            .await?;
        Ok(DownloadLink {
            url: get.url,
            size: state.bytes_total,
            sha256: state.sha256,
            expires_at: SystemTime::now() + lifetime,
            staged: Staged {
                client: signer.client().clone(),
                bucket: signer.bucket.clone(),
                key,
            },
        })
    }
}
