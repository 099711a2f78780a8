//! Agent gRPC statuses (docs/errors.md, "Agent gRPC status, first match wins").
//!
//! Rows are checked in the order of the errors.md table; the first match
//! wins. The exact markers (`suspending`, `terminating`, `sandbox_timeout`,
//! `disk_reserve`, `disk_full`, the `kernel not ready` prefix) are compared
//! exactly. Transport failures (stream resets, a connection never
//! established, an HTTP answer without `grpc-status`) are classified by the
//! transport from the *type* of the error ([`Origin`]), never from text, so
//! a guest can never make a failure look like a lost connection.

use crate::error::codes::{GrpcCode, SandboxCode, TimeoutScope};
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::meta::RedactedCause;
use crate::error::{ErrorMeta, SandboxError};

use super::redact::sanitize_remote_text;

/// The call a failure happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallContext {
    /// The call works on the filesystem (NOT_FOUND means a missing path).
    pub filesystem: bool,
    /// The SDK's name for the call, e.g. `commands.run`, `files.read`.
    pub feature: &'static str,
    /// The caller cancelled the call (a CANCELLED status is then ours).
    pub caller_cancelled: bool,
}

impl CallContext {
    /// A non-filesystem call named `feature`.
    pub const fn new(feature: &'static str) -> Self {
        Self {
            filesystem: false,
            feature,
            caller_cancelled: false,
        }
    }

    /// A filesystem call named `feature`.
    pub const fn filesystem(feature: &'static str) -> Self {
        Self {
            filesystem: true,
            feature,
            caller_cancelled: false,
        }
    }

    /// The same call, marked as cancelled by the caller.
    #[must_use]
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    pub const fn cancelled_by_caller(mut self) -> Self {
        self.caller_cancelled = true;
        self
    }
}

/// Where a failed call's status came from, as the transport classified it
/// by the *type* of the failure (never by its text): a message the guest
/// sends can never choose one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The server sent a `grpc-status`: the agent answered.
    Agent,
    /// An HTTP answer without `grpc-status`: something in front of the
    /// agent (the AWS proxy) answered with this HTTP status.
    HttpWithoutGrpcStatus(u16),
    /// The connection was never established (tonic's `ConnectError`):
    /// nothing was sent, so any call may be retried.
    NotEstablished,
    /// Our HTTP/2 stack saw the stream or connection reset or closed (an
    /// h2 reset or GOAWAY, a closed hyper connection, a reset socket).
    Reset,
    /// The SDK's own deadline passed.
    Deadline,
    /// Any other failure our client made up (e.g. a decode error).
    Client,
}

/// A failed gRPC call, as plain data. Its `Debug` shows the message
/// redacted.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct GrpcFailure {
    /// The status code.
    pub code: GrpcCode,
    /// The status message (the agent's text, or our client's).
    pub message: String,
    /// Where the status came from.
    pub origin: Origin,
    /// The call it happened in.
    pub call: CallContext,
    /// The redacted text of the transport error behind the status, when
    /// there was one; it becomes the error's cause.
    pub cause: Option<RedactedCause>,
}

impl GrpcFailure {
    /// A failure of `call` with `code` and `message` from `origin`.
    pub fn new(
        code: GrpcCode,
        message: impl Into<String>,
        origin: Origin,
        call: CallContext,
    ) -> Self {
        Self {
            code,
            message: message.into(),
            origin,
            call,
            cause: None,
        }
    }

    /// The status the agent sent (with `grpc-status`).
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    pub fn agent(code: GrpcCode, message: impl Into<String>, call: CallContext) -> Self {
        Self::new(code, message, Origin::Agent, call)
    }

    /// An HTTP answer without `grpc-status`, with the gRPC code the gRPC
    /// spec derives from the HTTP status (as tonic does).
    pub fn http_without_grpc_status(http_status: u16, call: CallContext) -> Self {
        Self::new(
            grpc_code_for_http(http_status),
            format!("grpc-status header missing, mapped from HTTP status code {http_status}"),
            Origin::HttpWithoutGrpcStatus(http_status),
            call,
        )
    }

    /// The same failure with a (redacted) cause.
    #[must_use]
    pub fn with_cause(mut self, cause: Option<&str>) -> Self {
        self.cause = cause.and_then(RedactedCause::new);
        self
    }
}

/// The gRPC code for an HTTP status without `grpc-status`
/// (grpc/doc/http-grpc-status-mapping.md, as tonic applies it).
pub(crate) fn grpc_code_for_http(status: u16) -> GrpcCode {
    match status {
        400 => GrpcCode::Internal,
        401 => GrpcCode::Unauthenticated,
        403 => GrpcCode::PermissionDenied,
        404 => GrpcCode::Unimplemented,
        429 | 502..=504 => GrpcCode::Unavailable,
        _ => GrpcCode::Unknown,
    }
}

crate::secret::redacted_debug! {
    non_exhaustive GrpcFailure |o| code, message = sanitize_remote_text(&o.message, 512), origin,
    call
}

// The agent's exact status details (the phase gate, the kernel gate's
// prefix, the logical deadline, the disk markers): the contract's tokens.
use rayito_proto::tokens::detail::{
    DISK_FULL, DISK_RESERVE, KERNEL_NOT_READY_PREFIX as KERNEL_NOT_READY, SANDBOX_TIMEOUT,
};
use rayito_proto::tokens::phase::{SUSPENDING, TERMINATING};

fn is_phase_gate(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::Unavailable && (f.message == SUSPENDING || f.message == TERMINATING)
}

fn is_kernel_gate(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::Unavailable && f.message.starts_with(KERNEL_NOT_READY)
}

/// The HTTP status of an answer that carried no `grpc-status`.
pub fn http_status_of(f: &GrpcFailure) -> Option<u16> {
    match f.origin {
        Origin::HttpWithoutGrpcStatus(status) => Some(status),
        _ => None,
    }
}

/// The AWS proxy refused the sandbox's proxy token: an HTTP 403 (or 401)
/// without `grpc-status`. The SDK re-mints the sandbox's proxy tokens and
/// retries once.
pub fn is_proxy_rejection(f: &GrpcFailure) -> bool {
    is_proxy_rejection_status(f.origin)
}

/// Whether an origin is the proxy's refusal of the token (HTTP 401 or 403
/// without `grpc-status`).
pub(crate) fn is_proxy_rejection_status(origin: Origin) -> bool {
    matches!(origin, Origin::HttpWithoutGrpcStatus(401 | 403))
}

/// Whether the failure means the connection to the agent was lost: the
/// phase gate, or a stream reset (UNAVAILABLE that is not the kernel gate;
/// INTERNAL, UNKNOWN or CANCELLED that our own stack classified as a reset:
/// tonic reports a body cut by a broken pipe as UNKNOWN). Never
/// DEADLINE_EXCEEDED, never the kernel gate, never a proxy 403, never a
/// cancellation by the caller.
pub fn is_reconnectable(f: &GrpcFailure) -> bool {
    if is_phase_gate(f) {
        return true;
    }
    if is_kernel_gate(f) || is_proxy_rejection(f) {
        return false;
    }
    match f.code {
        GrpcCode::Unavailable => true,
        GrpcCode::Cancelled if f.call.caller_cancelled => false,
        GrpcCode::Internal | GrpcCode::Unknown | GrpcCode::Cancelled => f.origin == Origin::Reset,
        _ => false,
    }
}

fn kept_meta(mut meta: Box<ErrorMeta>, f: &GrpcFailure, http: Option<u16>) -> Box<ErrorMeta> {
    meta.attempts = 1;
    meta.grpc_code = Some(f.code);
    meta.http_status = http;
    if !f.message.is_empty() {
        *meta = std::mem::take(&mut *meta).with_server_message(&f.message);
    }
    meta.cause = f.cause.clone();
    meta
}

/// `Authentication{proxy_rejected: true}`: the proxy refused the token
/// again after the SDK re-minted it and retried once.
pub fn proxy_rejected(f: GrpcFailure) -> SandboxError {
    let http = http_status_of(&f).or(Some(403));
    SandboxError::Authentication {
        proxy_rejected: true,
        meta: kept_meta(
            meta(m::GRPC_PROXY_REJECTED, &[("feature", f.call.feature)]),
            &f,
            http,
        ),
    }
}

/// `Authentication{proxy_rejected: true}` for a proxy 403 that was not
/// retried with a fresh token (a call that cannot be replayed, or a retry
/// policy without re-mints): the message does not claim a re-mint.
pub fn proxy_rejected_without_remint(f: GrpcFailure) -> SandboxError {
    let feature = f.call.feature;
    let mut err = proxy_rejected(f);
    err.meta_mut()
        .set_message(&m::GRPC_PROXY_REJECTED_ONCE.render(&[("feature", feature)]));
    err
}

/// What the sandbox's user was refused on a call that takes a path, a cwd
/// or a user: the role of that argument, `None` for other calls.
fn denied_role(call: CallContext) -> Option<&'static str> {
    match call.feature {
        "files.rename" => Some("source or destination path"),
        _ if call.filesystem => Some("path"),
        "commands.run" | "pty.create" => Some("cwd or user"),
        "code.create_context" => Some("cwd"),
        _ => None,
    }
}

/// Maps an HTTP status the proxy answered without `grpc-status` (401, 403,
/// 429, 502, 503, 504 ...) once the SDK's retries for it are spent.
pub fn from_proxy_status(status: u16, call: CallContext) -> SandboxError {
    let feature = call.feature;
    let status_text = status.to_string();
    let mut err = match status {
        401 | 403 => SandboxError::Authentication {
            proxy_rejected: true,
            meta: meta(m::GRPC_PROXY_REJECTED, &[("feature", feature)]),
        },
        429 => SandboxError::sandbox_with(
            SandboxCode::ConnectionLost,
            meta(m::PROXY_RATE_LIMIT, &[("feature", feature)]),
        ),
        502..=504 => SandboxError::sandbox_with(
            SandboxCode::ConnectionLost,
            meta(
                m::PROXY_UNREACHABLE,
                &[("feature", feature), ("http_status", &status_text)],
            ),
        ),
        _ => SandboxError::Sandbox {
            code: None,
            meta: meta(
                m::PROXY_OTHER,
                &[("feature", feature), ("http_status", &status_text)],
            ),
        },
    };
    let kept = err.meta_mut();
    kept.http_status = Some(status);
    kept.attempts = 1;
    err
}

/// The agent's own reason when an UNIMPLEMENTED names a language it cannot
/// run (`language javascript needs node, which is not installed on this
/// host`, `language ruby is not installed in this image; ...`): a fixed text
/// around a validated language name, more useful than the generic reason.
/// Anything else (long, multi-line, not about a language) is not echoed.
pub(crate) fn language_reason(msg: &str) -> Option<&str> {
    let plain = msg.len() <= 200 && msg.chars().all(|c| c.is_ascii() && !c.is_ascii_control());
    let secret_free = super::redact::secret_free_prefix(msg) == Some(msg);
    (plain && msg.starts_with("language ") && secret_free).then_some(msg)
}

/// Maps a gRPC status to its variant (docs/errors.md, "Agent gRPC status,
/// first match wins").
/// A lost connection maps to `Sandbox{connection_lost}`: call this once
/// the transport's retries are spent. A proxy rejection maps to
/// `Authentication{proxy_rejected: true}`: call this once the re-mint and
/// retry are done.
pub fn from_grpc(f: GrpcFailure) -> SandboxError {
    let feature = f.call.feature;
    let http = http_status_of(&f);
    let server = sanitize_remote_text(&f.message, 512);
    let detail = m::detail(Some(&server));
    let with = |t: Template, extra: &[(&str, &str)]| -> Box<ErrorMeta> {
        let mut args: Vec<(&str, &str)> = vec![("feature", feature), ("detail", &detail)];
        args.extend_from_slice(extra);
        kept_meta(meta(t, &args), &f, http)
    };
    let msg = f.message.as_str();

    // An HTTP answer without grpc-status came from the proxy, not the agent,
    // whatever gRPC code tonic derived from it (401 UNAUTHENTICATED,
    // 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 429/502-504 UNAVAILABLE,
    // the rest UNKNOWN): the proxy route decides, never an agent row.
    if let Some(status) = http {
        let mut err = from_proxy_status(status, f.call);
        let kept = err.meta_mut();
        let message = std::mem::take(&mut kept.message);
        *kept = *kept_meta(Box::new(ErrorMeta::new(message)), &f, http);
        return err;
    }

    match f.code {
        GrpcCode::Unavailable if msg == SUSPENDING => SandboxError::SandboxState {
            meta: with(m::GRPC_SUSPENDING, &[]),
        },
        GrpcCode::Unavailable if msg == TERMINATING => SandboxError::SandboxState {
            meta: with(m::GRPC_TERMINATING, &[]),
        },
        GrpcCode::Unavailable if msg.starts_with(KERNEL_NOT_READY) => {
            let why = sanitize_remote_text(
                msg[KERNEL_NOT_READY.len()..].trim_start_matches([':', ' ']),
                256,
            );
            let meta = kept_meta(
                meta(
                    m::GRPC_KERNEL_NOT_READY,
                    &[("feature", feature), ("detail", &m::detail(Some(&why)))],
                ),
                &f,
                http,
            );
            SandboxError::sandbox_with(SandboxCode::KernelNotReady, meta)
        }
        GrpcCode::FailedPrecondition if msg == SANDBOX_TIMEOUT => SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            meta: with(m::GRPC_SANDBOX_TIMEOUT, &[]),
        },
        GrpcCode::InvalidArgument | GrpcCode::FailedPrecondition => SandboxError::InvalidArgument {
            argument: None,
            meta: with(m::GRPC_INVALID_ARGUMENT, &[]),
        },
        GrpcCode::Unauthenticated => SandboxError::Authentication {
            proxy_rejected: false,
            meta: with(m::GRPC_UNAUTHENTICATED, &[]),
        },
        GrpcCode::PermissionDenied if let Some(role) = denied_role(f.call) => {
            SandboxError::sandbox_with(
                SandboxCode::PermissionDenied,
                with(m::GRPC_PATH_DENIED, &[("role", role)]),
            )
        }
        GrpcCode::PermissionDenied => SandboxError::Authentication {
            proxy_rejected: false,
            meta: with(m::GRPC_PERMISSION_DENIED, &[]),
        },
        GrpcCode::NotFound if f.call.filesystem => SandboxError::FileNotFound {
            meta: with(m::GRPC_FILE_NOT_FOUND, &[]),
        },
        GrpcCode::NotFound => SandboxError::NotFound {
            meta: with(m::GRPC_NOT_FOUND, &[]),
        },
        GrpcCode::OutOfRange => SandboxError::NotFound {
            meta: with(m::GRPC_OUTPUT_GONE, &[]),
        },
        GrpcCode::ResourceExhausted if msg == DISK_RESERVE => SandboxError::DiskFull {
            meta: with(m::GRPC_DISK_RESERVE, &[]),
        },
        GrpcCode::ResourceExhausted if msg == DISK_FULL => SandboxError::DiskFull {
            meta: with(m::GRPC_DISK_FULL, &[]),
        },
        GrpcCode::ResourceExhausted => SandboxError::RateLimit {
            retry_after: None,
            meta: with(m::GRPC_RATE_LIMIT, &[]),
        },
        GrpcCode::DeadlineExceeded => SandboxError::Timeout {
            scope: TimeoutScope::Request,
            meta: with(m::TIMEOUT_REQUEST, &[("within", "")]),
        },
        GrpcCode::Cancelled if f.call.caller_cancelled => {
            SandboxError::sandbox_with(SandboxCode::Cancelled, with(m::SDK_CANCELLED, &[]))
        }
        GrpcCode::Unimplemented if f.origin == Origin::Agent => {
            let reason = language_reason(msg).unwrap_or(m::GRPC_UNIMPLEMENTED_REASON.text);
            let text = m::SDK_UNIMPLEMENTED.render(&[
                ("feature", feature),
                ("reason", reason),
                ("see", ""),
            ]);
            SandboxError::Unimplemented {
                feature: crate::error::wire::clean_feature(feature),
                reason: crate::error::wire::clean_reason(reason),
                doc: None,
                meta: kept_meta(Box::new(ErrorMeta::new(text)), &f, http),
            }
        }
        _ if is_reconnectable(&f) => SandboxError::sandbox_with(
            SandboxCode::ConnectionLost,
            with(m::GRPC_CONNECTION_LOST, &[]),
        ),
        code => SandboxError::Sandbox {
            code: None,
            meta: with(m::GRPC_OTHER, &[("grpc_code", code.as_str())]),
        },
    }
}
