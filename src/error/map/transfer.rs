//! Failures of an S3-staged transfer (spec C4): the agent's `error.code`
//! chooses the variant, the reason (the text before the colon of its
//! message) chooses the sentence. The rest of the agent's message is never
//! kept: it can hold a URL, a bucket, a key or a path.
//!
//! The reason is kept only when it is a plain token (`[a-z0-9_]`, 1 to 32
//! characters); anything else becomes `unknown`. The text before a colon
//! of a message that has no reason (`open /home/user/x: no such file`)
//! would otherwise put a path into the error.

use crate::error::codes::{TimeoutScope, TransferCode, TransferDirection, TransferReason};
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::{ErrorMeta, SandboxError};

use rayito_proto::tokens::stream_code;

/// The longest reason token kept.
const MAX_REASON_TOKEN: usize = 32;

/// The token a `reason` falls back to when the agent gave none usable.
pub(crate) const UNKNOWN_REASON: &str = "unknown";

fn plain_token(text: &str) -> Option<&str> {
    let text = text.trim();
    (!text.is_empty()
        && text.len() <= MAX_REASON_TOKEN
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
    .then_some(text)
}

/// The reason of a failure message: the plain token before the first
/// colon, or the whole message when it is one plain token (a bare
/// `cancelled`); else the reason the code implies (`deadline_exceeded`
/// is `expired`, `permission_denied` `s3_denied`, `unavailable`
/// `s3_unavailable`, `cancelled` `cancelled`); else `None`.
pub(crate) fn reason_of(code: &str, message: &str) -> Option<TransferReason> {
    let before = message.split_once(':').map_or(message, |(head, _)| head);
    if let Some(token) = plain_token(before) {
        return Some(TransferReason::from(token));
    }
    match code {
        stream_code::DEADLINE_EXCEEDED => Some(TransferReason::Expired),
        stream_code::PERMISSION_DENIED => Some(TransferReason::S3Denied),
        stream_code::UNAVAILABLE => Some(TransferReason::S3Unavailable),
        stream_code::CANCELLED => Some(TransferReason::Cancelled),
        _ => None,
    }
}

/// The template of a known reason.
fn template_of(reason: &TransferReason) -> Option<Template> {
    Some(match reason {
        TransferReason::Expired => m::TRANSFER_EXPIRED,
        TransferReason::TooLarge => m::TRANSFER_TOO_LARGE,
        TransferReason::FileShrank => m::TRANSFER_FILE_SHRANK,
        TransferReason::ChecksumMismatch => m::TRANSFER_CHECKSUM_MISMATCH,
        TransferReason::S3Denied => m::TRANSFER_S3_DENIED,
        TransferReason::S3Unavailable => m::TRANSFER_S3_UNAVAILABLE,
        TransferReason::DiskReserve => m::TRANSFER_DISK_RESERVE,
        TransferReason::DiskFull => m::TRANSFER_DISK_FULL,
        TransferReason::Cancelled => m::TRANSFER_CANCELLED,
        TransferReason::Unknown(_) => return None,
    })
}

/// The message `<reason>: <sentence>` (`prefix` is the reason shown).
fn message(
    direction: TransferDirection,
    reason: Option<&TransferReason>,
    prefix: &str,
    code: &str,
) -> Box<ErrorMeta> {
    let shown_code = super::agent::token_for_message(code);
    let by_code = match code {
        stream_code::INVALID_ARGUMENT => m::TRANSFER_INVALID_ARGUMENT,
        stream_code::NOT_FOUND => m::TRANSFER_FILE_NOT_FOUND,
        _ => m::TRANSFER_OTHER,
    };
    let template = reason.and_then(template_of).unwrap_or(by_code);
    let mut out = meta(
        template,
        &[
            ("reason", prefix),
            ("transfer", direction.noun()),
            ("code", &shown_code),
        ],
    );
    out.attempts = 1;
    let code = crate::error::clean_token(code);
    if !code.is_empty() {
        out.reason = Some(code);
    }
    out
}

/// `Transfer { code, reason }` (export) or `FileUpload { code, reason }`
/// (import) with the message of `reason`.
pub(crate) fn staged(
    direction: TransferDirection,
    code: TransferCode,
    reason: TransferReason,
) -> SandboxError {
    let meta = message(direction, Some(&reason), reason.as_str(), code.as_str());
    match direction {
        TransferDirection::Import => SandboxError::FileUpload { code, reason, meta },
        TransferDirection::Export => SandboxError::Transfer { code, reason, meta },
    }
}

/// Maps a transfer that ended FAILED (or CANCELLED) with the agent's
/// `error { code, message }` (spec C4). A transfer cancelled without an
/// error passes `("cancelled", "")`.
// Called by the transfers (h-tr) and `test_util`.
#[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
pub(crate) fn from_transfer_error(
    direction: TransferDirection,
    code: &str,
    message_text: &str,
) -> SandboxError {
    let reason = reason_of(code, message_text);
    // What the message shows before the colon: the reason, else the code
    // (when it is a plain token), else `unknown`.
    let prefix = reason.as_ref().map_or_else(
        || plain_token(code).unwrap_or(UNKNOWN_REASON).to_owned(),
        |r| r.as_str().to_owned(),
    );
    let with = || message(direction, reason.as_ref(), &prefix, code);
    match code {
        stream_code::DEADLINE_EXCEEDED => SandboxError::Timeout {
            scope: TimeoutScope::Request,
            meta: with(),
        },
        stream_code::INVALID_ARGUMENT => SandboxError::InvalidArgument {
            argument: None,
            meta: with(),
        },
        stream_code::NOT_FOUND => SandboxError::FileNotFound { meta: with() },
        stream_code::RESOURCE_EXHAUSTED => SandboxError::DiskFull { meta: with() },
        stream_code::PERMISSION_DENIED => SandboxError::Authentication {
            proxy_rejected: false,
            meta: with(),
        },
        other => {
            let code = if other.is_empty() {
                TransferCode::Internal
            } else {
                TransferCode::from(other)
            };
            let reason = reason.unwrap_or_else(|| TransferReason::from(UNKNOWN_REASON));
            staged(direction, code, reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn shape(e: &SandboxError) -> String {
        match e {
            SandboxError::Transfer { code, reason, .. } => format!("transfer:{code}:{reason}"),
            SandboxError::FileUpload { code, reason, .. } => {
                format!("file_upload:{code}:{reason}")
            }
            other => super::super::test_shape(other),
        }
    }

    /// C4: error code x direction -> variant, fields and message. The
    /// agent's sentence after the colon (a path, a bucket, a URL) is never
    /// in the error.
    #[test]
    fn transfer_failures_are_pinned() {
        use TransferDirection::{Export, Import};
        let tail = ": s3://bkt-secret/rayito-transfer/sbx/up/abc /home/user/secret.bin https://bkt-secret.s3.amazonaws.com/k?X-Amz-Signature=ff";
        let cases: Vec<(TransferDirection, &str, String, &str, &str)> = vec![
            (
                Import,
                "deadline_exceeded",
                format!("expired{tail}"),
                "timeout:request",
                "expired: the upload did not finish before its deadline or its URLs expired; start it again, with a longer expiry if needed",
            ),
            (
                Export,
                "invalid_argument",
                format!("bad_url{tail}"),
                "invalid_argument",
                "bad_url: the agent refused an argument of the download; check the path, the size limit and the URLs' expiry",
            ),
            (
                Export,
                "not_found",
                "open /home/user/secret.bin: no such file".to_owned(),
                "file_not_found",
                "not_found: the file or object of the download does not exist; check the path, or upload the object before it expires",
            ),
            (
                Import,
                "resource_exhausted",
                format!("disk_reserve{tail}"),
                "disk_full",
                "disk_reserve: the upload would use the disk space the sandbox keeps in reserve; free disk space in the sandbox or send a smaller file",
            ),
            (
                Import,
                "resource_exhausted",
                format!("disk_full{tail}"),
                "disk_full",
                "disk_full: the sandbox's disk filled up during the upload; free disk space in the sandbox, then start it again",
            ),
            (
                Export,
                "permission_denied",
                format!("s3_denied{tail}"),
                "authentication:false",
                "s3_denied: S3 refused the sandbox's request for the download; check that the URLs are unexpired and signed by credentials that may use the bucket",
            ),
            (
                Import,
                "failed_precondition",
                format!("too_large{tail}"),
                "file_upload:failed_precondition:too_large",
                "too_large: the object is larger than the upload allows; send a smaller file or allow more bytes (max_bytes)",
            ),
            (
                Export,
                "failed_precondition",
                format!("too_large{tail}"),
                "transfer:failed_precondition:too_large",
                "too_large: the object is larger than the download allows; send a smaller file or allow more bytes (max_bytes)",
            ),
            (
                Export,
                "failed_precondition",
                format!("file_shrank{tail}"),
                "transfer:failed_precondition:file_shrank",
                "file_shrank: the file got smaller while the download read it; stop writing to it, then start the download again",
            ),
            (
                Import,
                "failed_precondition",
                format!("checksum_mismatch{tail}"),
                "file_upload:failed_precondition:checksum_mismatch",
                "checksum_mismatch: the bytes of the upload do not match their sha256; start the upload again",
            ),
            (
                Export,
                "unavailable",
                format!("s3_unavailable{tail}"),
                "transfer:unavailable:s3_unavailable",
                "s3_unavailable: S3 did not answer during the download; start it again later",
            ),
            (
                Import,
                "unavailable",
                "connection refused".to_owned(),
                "file_upload:unavailable:s3_unavailable",
                "s3_unavailable: S3 did not answer during the upload; start it again later",
            ),
            (
                Import,
                "cancelled",
                String::new(),
                "file_upload:cancelled:cancelled",
                "cancelled: the upload was cancelled; start it again if still needed",
            ),
            (
                Export,
                "cancelled",
                "cancelled".to_owned(),
                "transfer:cancelled:cancelled",
                "cancelled: the download was cancelled; start it again if still needed",
            ),
            (
                Export,
                "internal",
                format!("tls_broken{tail}"),
                "transfer:internal:tls_broken",
                "tls_broken: the download failed (code internal) for a reason this SDK does not know; start it again, or report it with the image version",
            ),
            (
                Import,
                "internal",
                "open /home/user/secret.bin: permission denied".to_owned(),
                "file_upload:internal:unknown",
                "unknown: the upload failed (code internal) for a reason this SDK does not know; start it again, or report it with the image version",
            ),
            (
                Export,
                "unknown",
                String::new(),
                "transfer:unknown:unknown",
                "unknown: the download failed (code unknown) for a reason this SDK does not know; start it again, or report it with the image version",
            ),
            (
                Export,
                "",
                String::new(),
                "transfer:internal:unknown",
                "unknown: the download failed (code internal) for a reason this SDK does not know; start it again, or report it with the image version",
            ),
        ];
        for (direction, code, msg, want, text) in cases {
            let e = from_transfer_error(direction, code, &msg);
            assert_eq!(shape(&e), want, "{code} {msg}");
            assert_eq!(e.to_string(), text, "{code} {msg}");
            let all = format!("{e:?} {e} {}", e.to_wire());
            for secret in ["bkt-secret", "/home/user", "Signature", "https://", "s3://"] {
                assert!(!all.contains(secret), "{secret} in {all}");
            }
            assert_eq!(SandboxError::from_wire(&e.to_wire()).as_ref(), Ok(&e));
            if let Some(reason) = e.transfer_reason() {
                assert!(e.to_string().starts_with(&format!("{reason}: ")), "{e}");
            }
        }
    }

    #[test]
    fn the_kinds_and_their_retry_rows() {
        let e = from_transfer_error(
            TransferDirection::Import,
            "failed_precondition",
            "too_large: x",
        );
        assert!(e.is(ErrorKind::FileUpload) && e.is(ErrorKind::Transfer) && e.is_sandbox_error());
        assert!(!e.is_retryable());
        let e = from_transfer_error(TransferDirection::Export, "unavailable", "");
        assert!(e.is(ErrorKind::Transfer) && !e.is(ErrorKind::FileUpload));
        assert!(e.is_retryable());
        assert_eq!(e.classify().kind, "transfer");
        let e = from_transfer_error(TransferDirection::Import, "unavailable", "");
        assert!(e.is_retryable());
        assert_eq!(e.classify().kind, "file_upload");
        // A newer agent's reason token is kept and matchable.
        let e = from_transfer_error(TransferDirection::Export, "internal", "part_lost: x");
        let reason = e.transfer_reason().expect("a reason");
        assert!(!reason.is_known() && reason.as_str() == "part_lost");
    }

    #[test]
    fn reasons_are_plain_tokens_or_unknown() {
        assert_eq!(
            reason_of("internal", "checksum_mismatch: x"),
            Some(TransferReason::ChecksumMismatch)
        );
        assert_eq!(reason_of("cancelled", ""), Some(TransferReason::Cancelled));
        assert_eq!(reason_of("internal", "Checksum: x"), None);
        assert_eq!(reason_of("internal", "a b: x"), None);
        assert_eq!(reason_of("internal", &"a".repeat(33)), None);
        assert_eq!(
            reason_of("deadline_exceeded", "/p: x"),
            Some(TransferReason::Expired)
        );
    }
}
