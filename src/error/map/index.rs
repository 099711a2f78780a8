//! Failures of the DynamoDB metadata index (`sandbox_index`,
//! `index_write`): by AWS error code only. AWS's own message can name the
//! table, a key or an account, so it is never repeated: the message says
//! what the code means, and the code (a token of a checked shape) is kept in
//! the variant and the metadata.

#[cfg(feature = "dynamodb")]
use super::aws::AwsFailure;
use super::aws::{AUTH_CODES, SERVICE_FAULT_CODES, THROTTLING_CODES, sanitize_aws_code};
#[cfg(feature = "dynamodb")]
use crate::error::SandboxError;

/// What `aws_code` becomes in `UnprocessedKeys` errors (the reference's
/// token for keys BatchGetItem left unprocessed after the retries).
pub(crate) const UNPROCESSED_KEYS: &str = "UnprocessedKeys";

/// What happened to the MicroVM of a create whose index row could not be
/// written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// It was terminated (the default).
    Terminated,
    /// It was kept, as the index asked (keep on failure).
    Kept,
    /// Terminating it failed too: it may still be running.
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    TerminateFailed,
}

/// An AWS error code of a plain shape (1 to 64 ASCII letters and digits),
/// else `None`: only such a token is ever put into a message.
pub(crate) fn plain_code(raw: Option<&str>) -> Option<&str> {
    let code = sanitize_aws_code(raw?);
    (!code.is_empty() && code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(code)
}

/// `(cause, remedy)` of an index failure with this AWS error code.
pub(crate) fn cause(aws_code: Option<&str>) -> (String, &'static str) {
    let Some(code) = aws_code else {
        return (
            "no usable answer from DynamoDB".to_owned(),
            "check the network, the region and the endpoint, then retry",
        );
    };
    let Some(code) = plain_code(Some(code)) else {
        return (
            "an unrecognised AWS error".to_owned(),
            "check the table and the IAM policy of docs/sandbox-index.md",
        );
    };
    let base = code.strip_suffix("Exception").unwrap_or(code);
    if base == "ResourceNotFound" {
        (
            format!("the table does not exist in this region ({code})"),
            "create it (SandboxIndex::create_table) or name an existing table",
        )
    } else if base == "ConditionalCheckFailed" {
        (
            format!("a row for this sandbox already exists ({code})"),
            "an index row is never overwritten",
        )
    } else if AUTH_CODES.contains(&base) || base == "AccessDenied" {
        (
            format!("the AWS credentials may not use the table ({code})"),
            "grant the IAM actions of docs/sandbox-index.md on the table",
        )
    } else if THROTTLING_CODES.contains(&code) {
        (
            format!("DynamoDB throttled the call after the SDK's retries ({code})"),
            "retry later",
        )
    } else if SERVICE_FAULT_CODES.contains(&base) {
        (format!("a DynamoDB service fault ({code})"), "retry later")
    } else {
        (
            format!("AWS error {code}"),
            "check the table and the IAM policy of docs/sandbox-index.md",
        )
    }
}

#[cfg(feature = "dynamodb")]
/// Copies the facts of `failure` (code, HTTP status, request id) into the
/// error's metadata; the AWS message is dropped.
fn with_facts(mut err: SandboxError, failure: &AwsFailure) -> SandboxError {
    let meta = err.meta_mut();
    if let Some(code) = plain_code(failure.code.as_deref()) {
        meta.aws_code = Some(code.to_owned());
    }
    meta.http_status = failure.http_status;
    if let Some(id) = &failure.request_id {
        let id = super::redact::sanitize_remote_text(id, 256);
        meta.request_id = (!id.is_empty()).then_some(id);
    }
    err
}

#[cfg(feature = "dynamodb")]
/// `SandboxIndex`: an index call (`failure.operation`) failed.
pub(crate) fn from_failure(failure: &AwsFailure) -> SandboxError {
    let code = plain_code(failure.code.as_deref());
    with_facts(
        SandboxError::sandbox_index(failure.operation, code),
        failure,
    )
}

#[cfg(feature = "dynamodb")]
/// `IndexWrite`: the row of `sandbox_id` could not be written.
pub(crate) fn write_failed(
    failure: &AwsFailure,
    sandbox_id: &str,
    outcome: WriteOutcome,
) -> SandboxError {
    let code = plain_code(failure.code.as_deref());
    with_facts(
        SandboxError::index_write_with(sandbox_id, code, outcome),
        failure,
    )
}
