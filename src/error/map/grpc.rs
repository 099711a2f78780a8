//! Agent gRPC statuses (errors.md 3.2, wire-contract 1.8, 2.7, 5.5).
//!
//! Rows are checked in the order of the errors.md table; the first match
//! wins. The exact markers (`suspending`, `terminating`, `sandbox_timeout`,
//! `disk_reserve`, `disk_full`, the `kernel not ready` prefix) are compared
//! exactly. Transport markers (stream resets, connection not established)
//! are only read when `has_grpc_status` is false, that is when the text
//! comes from our own HTTP/2 stack and not from the agent, so a guest can
//! never make a failure look retryable.

use crate::error::codes::{GrpcCode, SandboxCode, TimeoutScope};
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
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
    pub const fn cancelled_by_caller(mut self) -> Self {
        self.caller_cancelled = true;
        self
    }
}

/// A failed gRPC call, as plain data. Its `Debug` shows the message
/// redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct GrpcFailure {
    /// The status code.
    pub code: GrpcCode,
    /// The status message. For a transport failure, the SDK appends the
    /// `Display` of each source in the chain (`: `-separated), so that
    /// transport markers can be read.
    pub message: String,
    /// The status came from a `grpc-status` the server sent. False for a
    /// status our client made up: transport errors, and HTTP answers without
    /// `grpc-status` (e.g. the AWS proxy's 403).
    pub has_grpc_status: bool,
    /// The call it happened in.
    pub call: CallContext,
}

impl GrpcFailure {
    /// A failure of `call` with `code` and `message`.
    pub fn new(
        code: GrpcCode,
        message: impl Into<String>,
        has_grpc_status: bool,
        call: CallContext,
    ) -> Self {
        Self {
            code,
            message: message.into(),
            has_grpc_status,
            call,
        }
    }
}

impl std::fmt::Debug for GrpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcFailure")
            .field("code", &self.code)
            .field("message", &sanitize_remote_text(&self.message, 512))
            .field("has_grpc_status", &self.has_grpc_status)
            .field("call", &self.call)
            .finish()
    }
}

/// Phase gate markers (exact).
const SUSPENDING: &str = "suspending";
const TERMINATING: &str = "terminating";
/// Kernel gate prefix.
const KERNEL_NOT_READY: &str = "kernel not ready";
/// Logical deadline gate (exact).
const SANDBOX_TIMEOUT: &str = "sandbox_timeout";
/// Disk markers (exact).
const DISK_RESERVE: &str = "disk_reserve";
const DISK_FULL: &str = "disk_full";

/// Texts of a stream reset (grpcio's, as in the reference, then h2/hyper's).
const RESET_MARKERS: &[&str] = &[
    "RST_STREAM",
    "GOAWAY",
    "Received RST",
    "Socket closed",
    "Connection reset",
    "Stream removed",
    "stream error received",
    "connection error received",
    "connection reset",
    "broken pipe",
    "connection closed",
];

/// Texts of a connection that was never established (nothing was sent).
const NOT_ESTABLISHED_MARKERS: &[&str] = &[
    "before receiving SETTINGS frame",
    "failed to connect to all addresses",
    "tcp connect error",
    "error trying to connect",
    "Connection refused",
    "dns error",
];

/// How tonic words an HTTP answer without `grpc-status`.
const TONIC_HTTP_PREFIX: &str = "grpc-status header missing, mapped from HTTP status code ";

fn is_phase_gate(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::Unavailable && (f.message == SUSPENDING || f.message == TERMINATING)
}

fn is_kernel_gate(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::Unavailable && f.message.starts_with(KERNEL_NOT_READY)
}

fn has_transport_marker(f: &GrpcFailure, markers: &[&str]) -> bool {
    !f.has_grpc_status && markers.iter().any(|mk| f.message.contains(mk))
}

/// The HTTP status of an answer that carried no `grpc-status`, read from
/// tonic's message (`... mapped from HTTP status code 403`).
pub fn http_status_of(f: &GrpcFailure) -> Option<u16> {
    if f.has_grpc_status {
        return None;
    }
    let at = f.message.find(TONIC_HTTP_PREFIX)? + TONIC_HTTP_PREFIX.len();
    let digits: String = f.message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .take(3)
        .collect();
    digits.parse().ok()
}

/// PERMISSION_DENIED without `grpc-status`: the AWS proxy's HTTP 403. The
/// SDK re-mints the sandbox's proxy tokens and retries once.
pub fn is_proxy_rejection(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::PermissionDenied && !f.has_grpc_status
}

/// Whether the failure triggers the reconnect contract (wire-contract 1.8):
/// the phase gate, or a stream reset (UNAVAILABLE that is not the kernel
/// gate; INTERNAL or CANCELLED with a reset text from our own stack). Never
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
        GrpcCode::Internal | GrpcCode::Cancelled => has_transport_marker(f, RESET_MARKERS),
        _ => false,
    }
}

/// Whether the connection was never established, so nothing was sent and
/// any call may be retried (wire-contract 2.7: after 0.25, 0.5, 1, 2, 4 s).
pub fn is_not_established(f: &GrpcFailure) -> bool {
    f.code == GrpcCode::Unavailable && has_transport_marker(f, NOT_ESTABLISHED_MARKERS)
}

/// Whether an HTTP status from the proxy (without `grpc-status`) triggers
/// the reconnect contract: 429, 502, 503, 504.
pub fn is_reconnectable_proxy_status(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

fn kept_meta(mut meta: Box<ErrorMeta>, f: &GrpcFailure, http: Option<u16>) -> Box<ErrorMeta> {
    meta.attempts = 1;
    meta.grpc_code = Some(f.code);
    meta.http_status = http;
    if !f.message.is_empty() {
        *meta = std::mem::take(&mut *meta).with_server_message(&f.message);
    }
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
    err.meta_mut().message = m::GRPC_PROXY_REJECTED_ONCE.render(&[("feature", feature)]);
    err
}

/// What the sandbox's user was refused on a call that takes a path, a cwd
/// or a user: the role of that argument, `None` for other calls.
fn denied_role(call: CallContext) -> Option<&'static str> {
    match call.feature {
        "files.rename" => Some("source or destination path"),
        _ if call.filesystem => Some("path"),
        "commands.run" => Some("cwd or user"),
        "code.create_context" => Some("cwd"),
        _ => None,
    }
}

/// Maps an HTTP status the proxy answered without `grpc-status` (403, 429,
/// 502, 503, 504 ...) once the SDK's retries for it are spent.
pub fn from_proxy_status(status: u16, call: CallContext) -> SandboxError {
    let feature = call.feature;
    let status_text = status.to_string();
    let mut err = match status {
        403 => SandboxError::Authentication {
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

/// Maps a gRPC status to its variant (errors.md 3.2). Reconnectable
/// failures map to `Sandbox{connection_lost}`: call this once the reconnect
/// contract gave up. A proxy rejection maps to
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
        GrpcCode::PermissionDenied if !f.has_grpc_status => proxy_rejected(f),
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
        GrpcCode::Unimplemented if f.has_grpc_status => {
            let reason = m::GRPC_UNIMPLEMENTED_REASON.text;
            let text = m::SDK_UNIMPLEMENTED.render(&[
                ("feature", feature),
                ("reason", reason),
                ("see", ""),
            ]);
            SandboxError::Unimplemented {
                feature: feature.into(),
                reason: reason.into(),
                doc: None,
                meta: kept_meta(Box::new(ErrorMeta::new(text)), &f, http),
            }
        }
        // An HTTP answer without grpc-status came from the proxy, not the
        // agent (tonic maps 429/502-504 to UNAVAILABLE, 404 to
        // UNIMPLEMENTED, the rest to UNKNOWN).
        _ if let Some(status) = http => {
            let mut err = from_proxy_status(status, f.call);
            let kept = err.meta_mut();
            let message = std::mem::take(&mut kept.message);
            *kept = *kept_meta(Box::new(ErrorMeta::new(message)), &f, http);
            err
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
