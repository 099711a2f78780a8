//! The wire form: a JSON text that rebuilds the same error in another
//! process (a job queue, an RPC).
//!
//! ```json
//! {"kind": "rate_limit", "message": "...", "retry_after": {"secs": 2, "nanos": 0},
//!  "meta": {"server_message": "...", "grpc_code": null, "http_status": 429,
//!           "aws_code": "ThrottlingException", "request_id": "...",
//!           "reason": null, "attempts": 5}}
//! ```
//!
//! `meta.elapsed` (`{secs, nanos}`) is present only when the SDK measured
//! how long it kept trying (a reconnect that gave up), `meta.cause` only
//! when a lower-level failure caused the error (its redacted text),
//! `meta.kept_sandbox_id` only when a failed `create` kept its MicroVM.
//!
//! Variant fields sit next to `kind`; `meta` holds the shared metadata. An
//! unknown kind (from a newer SDK) comes back as `Sandbox` with an unknown
//! code that keeps the kind string, and with the message and metadata.
//! Anything else malformed is a [`WireError`], never a panic.
//!
//! The form is written and read through private serde mirrors of the
//! error (`WireOut`, `Head`, the per-kind field structs and
//! `WireMeta`), so the JSON escaping and the field types are serde's,
//! never hand-written.
//!
//! The wire form may come from anywhere (a queue another process writes),
//! so every text is bounded and cleaned as the mappers' own output is
//! (redacted, one line where the mapper makes one line), and nothing in it
//! can make the error more retryable than its kind: an unknown kind is
//! `Sandbox { code: Unknown }`, never a known code. Captured command output
//! (`stdout`, `stderr`) is data and kept as sent. Every error the SDK
//! builds is already in that clean form, so `from_wire(&e.to_wire())` is
//! `e` again.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::codes::{
    BuildReason, CapacityCode, CapturedText, CommandExitStatus, GrpcCode, MAX_TOKEN_CHARS,
    MountCode, PersistenceCode, SandboxCode, StackCode, TimeoutScope, TransferCode, TransferReason,
    VolumeMountCode,
};
use super::map::redact::{MAX_KEPT_CHARS, redact_aws_text, sanitize_remote_text};
use super::meta::RedactedCause;
use super::{AgentFailure, AgentFailureReason, ErrorKind, ErrorMeta, SandboxError, TokenUsage};

/// Bounds of the texts read from a wire form, the mappers' own: our
/// message, the control plane's state reason and quota code, the fields of
/// `Unimplemented`.
pub(crate) const MAX_MESSAGE_CHARS: usize = MAX_KEPT_CHARS;
pub(crate) const MAX_STATE_REASON_CHARS: usize = 256;
pub(crate) const MAX_QUOTA_CODE_CHARS: usize = 128;
/// The bound of an AWS error code kept as a variant field.
pub(crate) const MAX_AWS_CODE_CHARS: usize = 128;
pub(crate) const MAX_FEATURE_CHARS: usize = 128;
pub(crate) const MAX_REASON_CHARS: usize = 512;
/// The bound of an agent run's session id read from the wire.
pub(crate) const MAX_SESSION_ID_CHARS: usize = 128;

/// A one-line text from the wire, cleaned like a mapper's output; `None`
/// when nothing is left.
pub(crate) fn line(text: Option<&str>, max_chars: usize) -> Option<String> {
    text.map(|t| sanitize_remote_text(t, max_chars))
        .filter(|t| !t.is_empty())
}

/// The `feature` of `Unimplemented` / `LifecycleUnsupported` as the wire
/// form keeps it.
pub(crate) fn clean_feature(text: &str) -> Box<str> {
    sanitize_remote_text(text, MAX_FEATURE_CHARS).into()
}

/// The `reason` of `Unimplemented` / `LifecycleUnsupported` as the wire
/// form keeps it.
pub(crate) fn clean_reason(text: &str) -> Box<str> {
    sanitize_remote_text(text, MAX_REASON_CHARS).into()
}

/// A value that is not a `SandboxError` in wire form. It says what was
/// wrong, never what the input contained.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a rayito error in wire form: {reason}")]
pub struct WireError {
    reason: &'static str,
}

impl WireError {
    fn new(reason: &'static str) -> Self {
        Self { reason }
    }
}

/// Maps a serde failure to a [`WireError`] that quotes nothing: serde's
/// own message may repeat the value it refused.
fn refused(reason: &'static str) -> impl FnOnce(serde_json::Error) -> WireError {
    move |_| WireError::new(reason)
}

/// A `Duration` as `{secs, nanos}` (serde's own shape for it, with
/// `nanos` checked below one second on the way in).
#[derive(Serialize, Deserialize)]
struct WireDuration {
    secs: u64,
    nanos: u32,
}

impl From<Duration> for WireDuration {
    fn from(d: Duration) -> Self {
        Self {
            secs: d.as_secs(),
            nanos: d.subsec_nanos(),
        }
    }
}

impl WireDuration {
    fn read(this: Option<Self>) -> Result<Option<Duration>, WireError> {
        match this {
            None => Ok(None),
            Some(Self { secs, nanos }) if nanos < 1_000_000_000 => {
                Ok(Some(Duration::new(secs, nanos)))
            }
            Some(_) => Err(WireError::new("a duration is not {secs, nanos}")),
        }
    }
}

/// The mirror of [`ErrorMeta`]. Every key is written (as `null` when
/// empty) except `elapsed` and `cause`, which older readers never saw.
#[derive(Serialize, Deserialize, Default)]
struct WireMeta<'a> {
    #[serde(borrow)]
    server_message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    grpc_code: Option<Cow<'a, str>>,
    http_status: Option<u16>,
    #[serde(borrow)]
    aws_code: Option<Cow<'a, str>>,
    #[serde(borrow)]
    request_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed: Option<WireDuration>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    cause: Option<Cow<'a, str>>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    kept_sandbox_id: Option<Cow<'a, str>>,
}

impl<'a> WireMeta<'a> {
    fn of(m: &'a ErrorMeta) -> Self {
        Self {
            server_message: m.server_message().map(Cow::Borrowed),
            grpc_code: m.grpc_code().map(|c| Cow::Borrowed(c.as_str())),
            http_status: m.http_status(),
            aws_code: m.aws_code().map(Cow::Borrowed),
            request_id: m.request_id().map(Cow::Borrowed),
            reason: m.reason().map(Cow::Borrowed),
            attempts: Some(m.attempts()),
            elapsed: m.elapsed().map(WireDuration::from),
            cause: m.cause.as_ref().map(|c| Cow::Borrowed(c.as_str())),
            kept_sandbox_id: m.kept_sandbox_id().map(Cow::Borrowed),
        }
    }

    /// The metadata, each text cleaned as the mappers clean it: the sender
    /// may not be this SDK.
    fn read(self, message: &str) -> Result<ErrorMeta, WireError> {
        let mut meta = ErrorMeta::new(message);
        meta.server_message = self
            .server_message
            .map(|t| redact_aws_text(&t))
            .filter(|t| !t.is_empty());
        if let Some(code) = self.aws_code {
            meta = meta.with_aws_code(code);
        }
        if let Some(id) = self.request_id {
            meta = meta.with_request_id(id);
        }
        if let Some(reason) = self.reason {
            meta = meta.with_reason(reason);
        }
        meta.grpc_code = match self.grpc_code {
            None => None,
            Some(name) => Some(
                GrpcCode::from_name(&name)
                    .ok_or(WireError::new("`meta.grpc_code` is not a gRPC code"))?,
            ),
        };
        meta.http_status = self.http_status;
        meta.attempts = self.attempts.unwrap_or(0);
        meta.elapsed = WireDuration::read(self.elapsed)?;
        meta.cause = self.cause.and_then(|c| RedactedCause::new(&c));
        meta.kept_sandbox_id = self
            .kept_sandbox_id
            .map(|id| sanitize_remote_text(&id, 256))
            .filter(|id| !id.is_empty());
        Ok(meta)
    }
}

/// `kind` and `message`, read first: the kind decides which fields follow.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    message: Cow<'a, str>,
}

/// `meta`, read on its own so that its failure says so.
#[derive(Deserialize)]
struct MetaField<'a> {
    #[serde(borrow)]
    meta: Option<WireMeta<'a>>,
}

/// `code` of `sandbox` and `capacity`.
#[derive(Serialize, Deserialize)]
struct CodeFields<'a> {
    #[serde(borrow)]
    code: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct TimeoutFields<'a> {
    #[serde(borrow)]
    scope: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct InvalidArgumentFields<'a> {
    #[serde(borrow)]
    argument: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct NotReadyFields<'a> {
    #[serde(borrow)]
    state: Option<Cow<'a, str>>,
    #[serde(borrow)]
    state_reason: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct CommandExitFields<'a> {
    exit_code: i32,
    #[serde(borrow)]
    stdout: Option<Cow<'a, str>>,
    #[serde(borrow)]
    stderr: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    truncated: Option<bool>,
}

#[derive(Serialize, Deserialize)]
struct RateLimitFields {
    retry_after: Option<WireDuration>,
}

#[derive(Serialize, Deserialize)]
struct AuthenticationFields {
    proxy_rejected: Option<bool>,
}

#[derive(Serialize, Deserialize)]
struct QuotaFields<'a> {
    #[serde(borrow)]
    quota_code: Option<Cow<'a, str>>,
}

/// The `aws_code` of `sandbox_index` and `index_write`.
#[derive(Serialize, Deserialize)]
struct IndexFields<'a> {
    #[serde(borrow)]
    aws_code: Option<Cow<'a, str>>,
}

/// `code` and `reason` of `transfer` and `file_upload`.
#[derive(Serialize, Deserialize)]
struct TransferFields<'a> {
    #[serde(borrow)]
    code: Cow<'a, str>,
    #[serde(borrow)]
    reason: Cow<'a, str>,
}

/// `feature`, `reason` and (for `unimplemented`) `doc`.
#[derive(Serialize, Deserialize)]
struct FeatureFields<'a> {
    #[serde(borrow)]
    feature: Cow<'a, str>,
    #[serde(borrow)]
    reason: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    doc: Option<Option<Cow<'a, str>>>,
}

/// The fields of `build`. `command` and `log_tail` are captured text,
/// kept as sent like a command's output.
#[derive(Serialize, Deserialize)]
struct BuildFields<'a> {
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    step: Option<u32>,
    #[serde(borrow)]
    command: Option<Cow<'a, str>>,
    exit_code: Option<i32>,
    #[serde(borrow)]
    log_tail: Option<Cow<'a, str>>,
}

/// The fields of `agent`.
#[derive(Serialize, Deserialize)]
struct AgentFields<'a> {
    #[serde(borrow)]
    reason: Cow<'a, str>,
    #[serde(borrow)]
    session_id: Option<Cow<'a, str>>,
    exit_code: Option<i32>,
    #[serde(borrow)]
    detail_code: Option<Cow<'a, str>>,
    usage: Option<TokenUsage>,
}

/// The fields of one variant, written next to `kind`.
#[derive(Serialize)]
#[serde(untagged)]
enum VariantFields<'a> {
    None,
    Code(CodeFields<'a>),
    Timeout(TimeoutFields<'a>),
    InvalidArgument(InvalidArgumentFields<'a>),
    NotReady(NotReadyFields<'a>),
    CommandExit(CommandExitFields<'a>),
    RateLimit(RateLimitFields),
    Authentication(AuthenticationFields),
    Quota(QuotaFields<'a>),
    Index(IndexFields<'a>),
    Transfer(TransferFields<'a>),
    Feature(FeatureFields<'a>),
    Build(BuildFields<'a>),
    Agent(AgentFields<'a>),
}

/// The mirror of a whole error, as it is written.
#[derive(Serialize)]
struct WireOut<'a> {
    kind: &'static str,
    message: &'a str,
    #[serde(flatten)]
    fields: VariantFields<'a>,
    meta: WireMeta<'a>,
}

fn borrowed(text: Option<&str>) -> Option<Cow<'_, str>> {
    text.map(Cow::Borrowed)
}

impl<'a> WireOut<'a> {
    fn of(e: &'a SandboxError) -> Self {
        use VariantFields as F;
        let fields = match e {
            SandboxError::Sandbox { code, .. } => F::Code(CodeFields {
                code: borrowed(code.as_ref().map(SandboxCode::as_str)),
            }),
            SandboxError::Timeout { scope, .. } => F::Timeout(TimeoutFields {
                scope: Cow::Borrowed(scope.as_str()),
            }),
            SandboxError::InvalidArgument { argument, .. } => {
                F::InvalidArgument(InvalidArgumentFields {
                    argument: borrowed(argument.as_deref()),
                })
            }
            SandboxError::SandboxNotReady {
                state,
                state_reason,
                ..
            } => F::NotReady(NotReadyFields {
                state: borrowed(state.as_ref().map(crate::state::SandboxState::as_str)),
                state_reason: borrowed(state_reason.as_deref()),
            }),
            SandboxError::CommandExit {
                exit_code,
                stdout,
                stderr,
                status,
                truncated,
                ..
            } => F::CommandExit(CommandExitFields {
                exit_code: *exit_code,
                stdout: Some(Cow::Borrowed(stdout.as_str())),
                stderr: Some(Cow::Borrowed(stderr.as_str())),
                status: Cow::Borrowed(status.as_str()),
                truncated: Some(*truncated),
            }),
            SandboxError::RateLimit { retry_after, .. } => F::RateLimit(RateLimitFields {
                retry_after: retry_after.map(WireDuration::from),
            }),
            SandboxError::Authentication { proxy_rejected, .. } => {
                F::Authentication(AuthenticationFields {
                    proxy_rejected: Some(*proxy_rejected),
                })
            }
            SandboxError::QuotaExceeded { quota_code, .. } => F::Quota(QuotaFields {
                quota_code: borrowed(quota_code.as_deref()),
            }),
            SandboxError::SandboxIndex { aws_code, .. }
            | SandboxError::IndexWrite { aws_code, .. }
            | SandboxError::Secret { aws_code, .. }
            | SandboxError::Webhook { aws_code, .. } => F::Index(IndexFields {
                aws_code: borrowed(aws_code.as_deref()),
            }),
            SandboxError::Agent { failure, .. } => F::Agent(AgentFields {
                reason: Cow::Borrowed(failure.reason.as_str()),
                session_id: borrowed(failure.session_id.as_deref()),
                exit_code: failure.exit_code,
                detail_code: borrowed(failure.detail_code.as_deref()),
                usage: failure.usage,
            }),
            SandboxError::Capacity { code, .. } => F::Code(CodeFields {
                code: borrowed(code.as_ref().map(CapacityCode::as_str)),
            }),
            SandboxError::Unimplemented {
                feature,
                reason,
                doc,
                ..
            } => F::Feature(FeatureFields {
                feature: Cow::Borrowed(feature),
                reason: Cow::Borrowed(reason),
                doc: Some(borrowed(doc.as_deref())),
            }),
            SandboxError::LifecycleUnsupported {
                feature, reason, ..
            } => F::Feature(FeatureFields {
                feature: Cow::Borrowed(feature),
                reason: Cow::Borrowed(reason),
                doc: None,
            }),
            SandboxError::Build {
                reason,
                step,
                command,
                exit_code,
                log_tail,
                ..
            } => F::Build(BuildFields {
                reason: borrowed(reason.as_ref().map(BuildReason::as_str)),
                step: *step,
                command: borrowed(command.as_deref()),
                exit_code: *exit_code,
                log_tail: Some(Cow::Borrowed(log_tail.as_str())),
            }),
            SandboxError::NotFound { .. }
            | SandboxError::FileNotFound { .. }
            | SandboxError::SandboxNotFound { .. }
            | SandboxError::SandboxState { .. }
            | SandboxError::SandboxLifetime { .. }
            | SandboxError::DiskFull { .. }
            | SandboxError::Template { .. }
            | SandboxError::PoolClosed { .. }
            | SandboxError::SecretNotFound { .. }
            | SandboxError::Volume { .. }
            | SandboxError::VolumeNotFound { .. }
            | SandboxError::GitAuth { .. }
            | SandboxError::GitUpstream { .. } => F::None,

            SandboxError::Stack { code, .. } => F::Code(CodeFields {
                code: Some(Cow::Borrowed(code.as_str())),
            }),
            SandboxError::Persistence { code, .. } => F::Code(CodeFields {
                code: Some(Cow::Borrowed(code.as_str())),
            }),
            SandboxError::Mount { code, .. } => F::Code(CodeFields {
                code: Some(Cow::Borrowed(code.as_str())),
            }),
            SandboxError::VolumeMount { code, .. } => F::Code(CodeFields {
                code: Some(Cow::Borrowed(code.as_str())),
            }),
            SandboxError::Transfer { code, reason, .. }
            | SandboxError::FileUpload { code, reason, .. } => F::Transfer(TransferFields {
                code: Cow::Borrowed(code.as_str()),
                reason: Cow::Borrowed(reason.as_str()),
            }),
        };
        Self {
            kind: e.kind().as_str(),
            message: e.meta().message(),
            fields,
            meta: WireMeta::of(e.meta()),
        }
    }
}

/// The fields of `kind`, read from the whole object (other keys ignored).
fn fields<'a, T: Deserialize<'a>>(value: &'a Value) -> Result<T, WireError> {
    T::deserialize(value).map_err(refused(
        "a field of the kind is missing or has the wrong type",
    ))
}

/// Rebuilds an error from a parsed wire form.
fn read(value: &Value) -> Result<SandboxError, WireError> {
    if !value.is_object() {
        return Err(WireError::new("not a JSON object"));
    }
    let head = Head::deserialize(value)
        .map_err(refused("`kind` or `message` is missing or not a string"))?;
    let message = sanitize_remote_text(&head.message, MAX_MESSAGE_CHARS);
    let meta = MetaField::deserialize(value)
        .map_err(refused("`meta` is not an object of the documented fields"))?
        .meta
        .unwrap_or_default()
        .read(&message)?;
    let meta = Box::new(meta);
    let Some(kind) = ErrorKind::from_name(&head.kind) else {
        return Ok(SandboxError::Sandbox {
            code: Some(SandboxCode::of_unknown_kind(&head.kind)),
            meta,
        });
    };
    Ok(match kind {
        ErrorKind::Sandbox => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::Sandbox {
                code: f.code.map(|c| SandboxCode::from(&*c)),
                meta,
            }
        }
        ErrorKind::Timeout => {
            let f: TimeoutFields<'_> = fields(value)?;
            SandboxError::Timeout {
                scope: TimeoutScope::from(&*f.scope),
                meta,
            }
        }
        ErrorKind::InvalidArgument => {
            let f: InvalidArgumentFields<'_> = fields(value)?;
            SandboxError::InvalidArgument {
                argument: line(f.argument.as_deref(), MAX_TOKEN_CHARS).map(Cow::Owned),
                meta,
            }
        }
        ErrorKind::NotFound => SandboxError::NotFound { meta },
        ErrorKind::FileNotFound => SandboxError::FileNotFound { meta },
        ErrorKind::SandboxNotFound => SandboxError::SandboxNotFound { meta },
        ErrorKind::SandboxNotReady => {
            let f: NotReadyFields<'_> = fields(value)?;
            SandboxError::SandboxNotReady {
                state: f
                    .state
                    .map(|s| crate::state::SandboxState::from(&*s))
                    .filter(|s| !s.as_str().is_empty()),
                state_reason: line(f.state_reason.as_deref(), MAX_STATE_REASON_CHARS),
                meta,
            }
        }
        ErrorKind::SandboxState => SandboxError::SandboxState { meta },
        ErrorKind::SandboxLifetime => SandboxError::SandboxLifetime { meta },
        ErrorKind::CommandExit => {
            let f: CommandExitFields<'_> = fields(value)?;
            SandboxError::CommandExit {
                exit_code: f.exit_code,
                stdout: CapturedText::new(f.stdout.unwrap_or_default()),
                stderr: CapturedText::new(f.stderr.unwrap_or_default()),
                status: CommandExitStatus::from(&*f.status),
                truncated: f.truncated.unwrap_or(false),
                meta,
            }
        }
        ErrorKind::DiskFull => SandboxError::DiskFull { meta },
        ErrorKind::RateLimit => {
            let f: RateLimitFields = fields(value)?;
            SandboxError::RateLimit {
                retry_after: WireDuration::read(f.retry_after)?,
                meta,
            }
        }
        ErrorKind::Authentication => {
            let f: AuthenticationFields = fields(value)?;
            SandboxError::Authentication {
                proxy_rejected: f.proxy_rejected.unwrap_or(false),
                meta,
            }
        }
        ErrorKind::QuotaExceeded => {
            let f: QuotaFields<'_> = fields(value)?;
            SandboxError::QuotaExceeded {
                quota_code: line(f.quota_code.as_deref(), MAX_QUOTA_CODE_CHARS),
                meta,
            }
        }
        ErrorKind::Capacity => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::Capacity {
                code: f.code.map(|c| CapacityCode::from(&*c)),
                meta,
            }
        }
        ErrorKind::Unimplemented => {
            let f: FeatureFields<'_> = fields(value)?;
            SandboxError::Unimplemented {
                feature: clean_feature(&f.feature),
                reason: clean_reason(&f.reason),
                doc: line(f.doc.flatten().as_deref(), MAX_REASON_CHARS).map(Into::into),
                meta,
            }
        }
        ErrorKind::LifecycleUnsupported => {
            let f: FeatureFields<'_> = fields(value)?;
            SandboxError::LifecycleUnsupported {
                feature: clean_feature(&f.feature),
                reason: clean_reason(&f.reason),
                meta,
            }
        }
        ErrorKind::Build => {
            let f: BuildFields<'_> = fields(value)?;
            SandboxError::Build {
                reason: f.reason.map(|r| BuildReason::from(&*r)),
                step: f.step,
                command: f.command.map(|c| CapturedText::new(c.into_owned())),
                exit_code: f.exit_code,
                log_tail: CapturedText::new(f.log_tail.unwrap_or_default()),
                meta,
            }
        }
        ErrorKind::Template => SandboxError::Template { meta },
        ErrorKind::PoolClosed => SandboxError::PoolClosed { meta },
        ErrorKind::Stack => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::Stack {
                code: StackCode::from(f.code.as_deref().unwrap_or_default()),
                meta,
            }
        }
        ErrorKind::SandboxIndex => {
            let f: IndexFields<'_> = fields(value)?;
            SandboxError::SandboxIndex {
                aws_code: line(f.aws_code.as_deref(), MAX_AWS_CODE_CHARS),
                meta,
            }
        }
        ErrorKind::IndexWrite => {
            let f: IndexFields<'_> = fields(value)?;
            SandboxError::IndexWrite {
                aws_code: line(f.aws_code.as_deref(), MAX_AWS_CODE_CHARS),
                meta,
            }
        }
        ErrorKind::Persistence => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::Persistence {
                code: PersistenceCode::from(f.code.as_deref().unwrap_or_default()),
                meta,
            }
        }
        ErrorKind::Transfer => {
            let f: TransferFields<'_> = fields(value)?;
            SandboxError::Transfer {
                code: TransferCode::from(&*f.code),
                reason: TransferReason::from(&*f.reason),
                meta,
            }
        }
        ErrorKind::FileUpload => {
            let f: TransferFields<'_> = fields(value)?;
            SandboxError::FileUpload {
                code: TransferCode::from(&*f.code),
                reason: TransferReason::from(&*f.reason),
                meta,
            }
        }
        ErrorKind::Secret => {
            let f: IndexFields<'_> = fields(value)?;
            SandboxError::Secret {
                aws_code: line(f.aws_code.as_deref(), MAX_AWS_CODE_CHARS),
                meta,
            }
        }
        ErrorKind::SecretNotFound => SandboxError::SecretNotFound { meta },
        ErrorKind::Mount => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::Mount {
                code: MountCode::from(f.code.as_deref().unwrap_or_default()),
                meta,
            }
        }
        ErrorKind::Volume => SandboxError::Volume { meta },
        ErrorKind::VolumeMount => {
            let f: CodeFields<'_> = fields(value)?;
            SandboxError::VolumeMount {
                code: VolumeMountCode::from(f.code.as_deref().unwrap_or_default()),
                meta,
            }
        }
        ErrorKind::VolumeNotFound => SandboxError::VolumeNotFound { meta },
        ErrorKind::GitAuth => SandboxError::GitAuth { meta },
        ErrorKind::GitUpstream => SandboxError::GitUpstream { meta },
        ErrorKind::Webhook => {
            let f: IndexFields<'_> = fields(value)?;
            SandboxError::Webhook {
                aws_code: line(f.aws_code.as_deref(), MAX_AWS_CODE_CHARS),
                meta,
            }
        }
        ErrorKind::Agent => {
            let f: AgentFields<'_> = fields(value)?;
            let reason = AgentFailureReason::from_name(&f.reason)
                .ok_or(WireError::new("`reason` is not an agent failure reason"))?;
            SandboxError::Agent {
                failure: Box::new(AgentFailure {
                    reason,
                    session_id: line(f.session_id.as_deref(), MAX_SESSION_ID_CHARS),
                    exit_code: f.exit_code,
                    detail_code: f
                        .detail_code
                        .as_deref()
                        .and_then(super::safe_detail_code)
                        .map(str::to_owned),
                    usage: f.usage,
                }),
                meta,
            }
        }
    })
}

impl SandboxError {
    /// The wire form of this error: a JSON object, as text.
    pub fn to_wire(&self) -> String {
        // Only strings, numbers and booleans: writing to a string cannot fail.
        serde_json::to_string(&WireOut::of(self)).unwrap_or_default()
    }

    /// Rebuilds an error from its wire form.
    ///
    /// # Errors
    ///
    /// [`WireError`] when the text is not JSON, not an object, lacks
    /// `kind` or `message`, or a field has the wrong type. An unknown kind
    /// is not an error: it becomes `Sandbox` with an unknown code.
    pub fn from_wire(text: &str) -> Result<Self, WireError> {
        let value: Value = serde_json::from_str(text).map_err(refused("not valid JSON"))?;
        read(&value)
    }
}

impl Serialize for SandboxError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireOut::of(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for SandboxError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        read(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), ".{0,40}", "[a-z_]{1,12}"]
    }

    fn opt_text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(text())
    }

    /// A one-line text as a mapper keeps it (the SDK's own errors hold
    /// only such texts, and `from_wire` cleans them the same way).
    fn clean(max: usize) -> impl Strategy<Value = String> {
        text().prop_map(move |t| sanitize_remote_text(&t, max))
    }

    fn opt_clean(max: usize) -> impl Strategy<Value = Option<String>> {
        proptest::option::of(clean(max)).prop_map(|t| t.filter(|t| !t.is_empty()))
    }

    /// Server text as a server sends it: several lines, control
    /// characters, quotes and backslashes included.
    fn server_text() -> impl Strategy<Value = String> {
        prop_oneof![
            text(),
            "(?s).{0,60}",
            "[a-z \\x00-\\x1f\"\\\\\u{7f}\u{2028}]{0,40}",
            Just("line one\nline two\r\n\ttabbed \u{1b}[31m".to_owned()),
        ]
    }

    fn meta() -> impl Strategy<Value = Box<ErrorMeta>> {
        (
            (
                clean(MAX_MESSAGE_CHARS),
                proptest::option::of(server_text())
                    .prop_map(|t| t.and_then(|t| RedactedCause::new(&t))),
            ),
            proptest::option::of(server_text())
                .prop_map(|t| t.map(|t| redact_aws_text(&t)).filter(|t| !t.is_empty())),
            proptest::option::of(proptest::sample::select(GrpcCode::ALL)),
            proptest::option::of(any::<u16>()),
            (opt_clean(256), opt_clean(256), opt_clean(256)),
            (
                any::<u32>(),
                proptest::option::of(duration()),
                opt_clean(256),
            ),
        )
            .prop_map(
                |(
                    (message, cause),
                    server,
                    grpc,
                    http,
                    (aws, req, reason),
                    (attempts, elapsed, kept_sandbox_id),
                )| {
                    Box::new(ErrorMeta {
                        message,
                        server_message: server,
                        grpc_code: grpc,
                        http_status: http,
                        aws_code: aws,
                        request_id: req,
                        reason,
                        attempts,
                        elapsed,
                        cause,
                        kept_sandbox_id,
                    })
                },
            )
    }

    fn duration() -> impl Strategy<Value = Duration> {
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n))
    }

    /// Every variant, with arbitrary fields.
    fn any_error() -> impl Strategy<Value = SandboxError> {
        let code = |t: String| SandboxCode::from(t.as_str());
        prop_oneof![
            (proptest::option::of(text().prop_map(code)), meta())
                .prop_map(|(code, meta)| SandboxError::Sandbox { code, meta }),
            (text(), meta()).prop_map(|(s, meta)| SandboxError::Timeout {
                scope: TimeoutScope::from(s.as_str()),
                meta
            }),
            (opt_clean(MAX_TOKEN_CHARS), meta()).prop_map(|(a, meta)| {
                SandboxError::InvalidArgument {
                    argument: a.map(Cow::Owned),
                    meta,
                }
            }),
            meta().prop_map(|meta| SandboxError::NotFound { meta }),
            meta().prop_map(|meta| SandboxError::FileNotFound { meta }),
            meta().prop_map(|meta| SandboxError::SandboxNotFound { meta }),
            (opt_text(), opt_clean(MAX_STATE_REASON_CHARS), meta()).prop_map(
                |(state, state_reason, meta)| {
                    SandboxError::SandboxNotReady {
                        state: state
                            .map(|s| crate::state::SandboxState::from(s.as_str()))
                            .filter(|s| !s.as_str().is_empty()),
                        state_reason,
                        meta,
                    }
                }
            ),
            meta().prop_map(|meta| SandboxError::SandboxState { meta }),
            meta().prop_map(|meta| SandboxError::SandboxLifetime { meta }),
            (any::<i32>(), text(), text(), text(), any::<bool>(), meta()).prop_map(
                |(exit_code, o, e, s, truncated, meta)| SandboxError::CommandExit {
                    exit_code,
                    stdout: CapturedText::new(o),
                    stderr: CapturedText::new(e),
                    status: CommandExitStatus::from(s.as_str()),
                    truncated,
                    meta,
                }
            ),
            meta().prop_map(|meta| SandboxError::DiskFull { meta }),
            (proptest::option::of(duration()), meta())
                .prop_map(|(retry_after, meta)| SandboxError::RateLimit { retry_after, meta }),
            (any::<bool>(), meta()).prop_map(|(proxy_rejected, meta)| {
                SandboxError::Authentication {
                    proxy_rejected,
                    meta,
                }
            }),
            (opt_clean(MAX_QUOTA_CODE_CHARS), meta())
                .prop_map(|(quota_code, meta)| SandboxError::QuotaExceeded { quota_code, meta }),
            (opt_text(), meta()).prop_map(|(c, meta)| SandboxError::Capacity {
                code: c.map(|c| CapacityCode::from(c.as_str())),
                meta
            }),
            (
                clean(MAX_FEATURE_CHARS),
                clean(MAX_REASON_CHARS),
                opt_clean(MAX_REASON_CHARS),
                meta()
            )
                .prop_map(|(f, r, d, meta)| {
                    SandboxError::Unimplemented {
                        feature: f.into(),
                        reason: r.into(),
                        doc: d.map(Into::into),
                        meta,
                    }
                }),
            (clean(MAX_FEATURE_CHARS), clean(MAX_REASON_CHARS), meta()).prop_map(|(f, r, meta)| {
                SandboxError::LifecycleUnsupported {
                    feature: f.into(),
                    reason: r.into(),
                    meta,
                }
            }),
            (
                opt_text(),
                proptest::option::of(any::<u32>()),
                opt_text(),
                proptest::option::of(any::<i32>()),
                text(),
                meta()
            )
                .prop_map(|(r, step, command, exit_code, tail, meta)| {
                    SandboxError::Build {
                        reason: r.map(|r| BuildReason::from(r.as_str())),
                        step,
                        command: command.map(CapturedText::new),
                        exit_code,
                        log_tail: CapturedText::new(tail),
                        meta,
                    }
                }),
            meta().prop_map(|meta| SandboxError::Template { meta }),
            meta().prop_map(|meta| SandboxError::PoolClosed { meta }),
            (text(), meta()).prop_map(|(code, meta)| SandboxError::Stack {
                code: StackCode::from(code.as_str()),
                meta,
            }),
            (opt_clean(MAX_AWS_CODE_CHARS), meta())
                .prop_map(|(aws_code, meta)| SandboxError::SandboxIndex { aws_code, meta }),
            (opt_clean(MAX_AWS_CODE_CHARS), meta())
                .prop_map(|(aws_code, meta)| SandboxError::IndexWrite { aws_code, meta }),
            (text(), meta()).prop_map(|(code, meta)| SandboxError::Persistence {
                code: PersistenceCode::from(code.as_str()),
                meta,
            }),
            (text(), text(), meta()).prop_map(|(code, reason, meta)| SandboxError::Transfer {
                code: TransferCode::from(code.as_str()),
                reason: TransferReason::from(reason.as_str()),
                meta,
            }),
            (text(), text(), meta()).prop_map(|(code, reason, meta)| {
                SandboxError::FileUpload {
                    code: TransferCode::from(code.as_str()),
                    reason: TransferReason::from(reason.as_str()),
                    meta,
                }
            }),
            (opt_clean(MAX_AWS_CODE_CHARS), meta())
                .prop_map(|(aws_code, meta)| SandboxError::Secret { aws_code, meta }),
            meta().prop_map(|meta| SandboxError::SecretNotFound { meta }),
            (text(), meta()).prop_map(|(code, meta)| SandboxError::Mount {
                code: MountCode::from(code.as_str()),
                meta,
            }),
            meta().prop_map(|meta| SandboxError::Volume { meta }),
            (text(), meta()).prop_map(|(code, meta)| SandboxError::VolumeMount {
                code: VolumeMountCode::from(code.as_str()),
                meta,
            }),
            meta().prop_map(|meta| SandboxError::VolumeNotFound { meta }),
            meta().prop_map(|meta| SandboxError::GitAuth { meta }),
            meta().prop_map(|meta| SandboxError::GitUpstream { meta }),
            (opt_clean(MAX_AWS_CODE_CHARS), meta())
                .prop_map(|(aws_code, meta)| SandboxError::Webhook { aws_code, meta }),
            (
                0..AgentFailureReason::ALL.len(),
                proptest::option::of(any::<i32>()),
                proptest::option::of("rda_[0-9a-f]{32}"),
                proptest::option::of("[A-Za-z0-9_.-]{1,64}"),
                proptest::option::of((any::<u32>(), any::<u32>())),
                meta()
            )
                .prop_map(
                    |(reason, exit_code, session_id, detail_code, usage, meta)| {
                        SandboxError::Agent {
                            failure: Box::new(AgentFailure {
                                reason: AgentFailureReason::ALL[reason],
                                session_id,
                                exit_code,
                                detail_code,
                                usage: usage
                                    .map(|(i, o)| TokenUsage::new(u64::from(i), u64::from(o))),
                            }),
                            meta,
                        }
                    }
                ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn wire_round_trips_every_variant(e in any_error()) {
            let back = SandboxError::from_wire(&e.to_wire()).expect("own wire form parses");
            prop_assert_eq!(&back, &e);
            let via_serde: SandboxError =
                serde_json::from_str(&serde_json::to_string(&e).expect("serializes")).expect("deserializes");
            prop_assert_eq!(via_serde, e);
        }
    }

    #[test]
    fn every_kind_is_covered_by_the_strategy() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_000 {
            let e = any_error().new_tree(&mut runner).expect("tree").current();
            seen.insert(e.kind());
        }
        assert_eq!(seen.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn wire_shape_is_stable() {
        let e = SandboxError::RateLimit {
            retry_after: Some(Duration::from_millis(2_500)),
            meta: Box::new(ErrorMeta {
                message: "m".into(),
                http_status: Some(429),
                aws_code: Some("ThrottlingException".into()),
                attempts: 5,
                ..ErrorMeta::default()
            }),
        };
        assert_eq!(
            e.to_wire(),
            r#"{"kind":"rate_limit","message":"m","retry_after":{"secs":2,"nanos":500000000},"meta":{"server_message":null,"grpc_code":null,"http_status":429,"aws_code":"ThrottlingException","request_id":null,"reason":null,"attempts":5}}"#
        );
    }

    #[test]
    fn a_multi_line_server_message_and_a_cause_survive_the_wire() {
        let mut meta = ErrorMeta::new("m")
            .with_server_message("line one\nline \"two\" \\ back\r\n\ttab \u{1}\u{2028}");
        meta.cause = RedactedCause::new("dns error: failed to lookup\naddress");
        let e = SandboxError::sandbox_with(SandboxCode::ConnectionLost, Box::new(meta));
        let wire = e.to_wire();
        assert!(
            wire.contains(r#""cause":"dns error: failed to lookup address"}"#),
            "{wire}"
        );
        assert!(
            wire.contains("\"server_message\":\"line one\\nline \\\"two\\\" \\\\ back\\r\\n\\ttab \\u0001\u{2028}\""),
            "{wire}"
        );
        assert_eq!(SandboxError::from_wire(&wire), Ok(e));
    }

    #[test]
    fn unknown_kinds_come_back_as_sandbox_with_the_kind_kept() {
        let v = json!({"kind": "kind_of_a_later_version", "message": "the pool is closed", "meta": {"attempts": 2}});
        let e = SandboxError::from_wire(&v.to_string()).expect("unknown kinds are accepted");
        assert!(matches!(
            &e,
            SandboxError::Sandbox { code: Some(c), .. } if c.as_str() == "kind_of_a_later_version" && !c.is_known()
        ));
        assert_eq!(e.to_string(), "the pool is closed");
        assert_eq!(e.meta().attempts(), 2);
    }

    #[test]
    fn a_kind_that_spells_a_code_never_chooses_it() {
        for code in SandboxCode::VALUES {
            let v = json!({"kind": code, "message": "m"});
            let e = SandboxError::from_wire(&v.to_string()).expect("unknown kinds are accepted");
            let Some(c) = e.sandbox_code() else {
                panic!("{e:?}")
            };
            assert!(!c.is_known(), "{code}: {e:?}");
            assert_eq!(c.as_str(), format!("kind:{code}"));
            assert!(!e.is_retryable(), "{code}");
            // And it stays so across another hop.
            assert_eq!(SandboxError::from_wire(&e.to_wire()).as_ref(), Ok(&e));
        }
    }

    #[test]
    fn wire_texts_are_bounded_and_cleaned_like_a_mappers() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let long = format!("x-amz-{}", "y".repeat(5_000));
        let v = json!({
            "kind": "invalid_argument",
            "message": format!("bad\nvalue {key} {long}"),
            "argument": format!("arg\u{7}{key}{long}"),
            "meta": {
                "server_message": format!("line one\nAuthorization: {key}\n{long}"),
                "aws_code": format!("Code {key}"),
                "request_id": long.clone(),
                "reason": format!("\tsome_token {key}"),
            },
        });
        let e = SandboxError::from_wire(&v.to_string()).expect("accepted");
        let wire = e.to_wire();
        assert!(!wire.contains(key), "{wire}");
        assert!(!format!("{e:?} {e}").contains(key));
        let m = e.meta();
        assert!(!m.message().contains('\n'));
        assert!(m.message().chars().count() <= MAX_MESSAGE_CHARS);
        assert_eq!(
            m.server_message(),
            Some("line one\nAuthorization: [redacted]\n")
        );
        assert_eq!(m.aws_code(), Some("Code [redacted]"));
        assert_eq!(m.reason(), Some("some_token [redacted]"));
        assert!(m.request_id().is_none_or(|r| r.chars().count() <= 256));
        let SandboxError::InvalidArgument {
            argument: Some(a), ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(a.chars().count() <= MAX_TOKEN_CHARS && !a.contains('\u{7}'));
    }

    #[test]
    fn garbage_is_an_error_that_quotes_nothing() {
        let cases = [
            json!(null),
            json!("timeout"),
            json!([1, 2]),
            json!({"message": "m"}),
            json!({"kind": 3, "message": "m"}),
            json!({"kind": "timeout"}),
            json!({"kind": "timeout", "message": "m"}),
            json!({"kind": "command_exit", "message": "m", "status": "exited"}),
            json!({"kind": "command_exit", "message": "m", "exit_code": 1u64 << 40, "status": "exited"}),
            json!({"kind": "rate_limit", "message": "m", "retry_after": 3}),
            json!({"kind": "rate_limit", "message": "m", "retry_after": {"secs": 1, "nanos": 2_000_000_000u64}}),
            json!({"kind": "sandbox", "message": "m", "meta": {"grpc_code": "NOPE"}}),
            json!({"kind": "sandbox", "message": "m", "meta": {"http_status": 70000}}),
            json!({"kind": "sandbox", "message": "m", "meta": "x"}),
            json!({"kind": "authentication", "message": "m", "proxy_rejected": "yes"}),
            json!({"kind": "unimplemented", "message": "m", "feature": "f"}),
        ];
        for v in cases {
            let err = SandboxError::from_wire(&v.to_string()).expect_err(&v.to_string());
            assert!(
                err.to_string()
                    .starts_with("not a rayito error in wire form: ")
            );
            assert!(!err.to_string().contains("NOPE"));
        }
        assert_eq!(
            SandboxError::from_wire("{not json")
                .unwrap_err()
                .to_string(),
            "not a rayito error in wire form: not valid JSON"
        );
    }
}
