//! The one place the secrets module turns a Secrets Manager failure into a
//! `SandboxError` (through the error module's mapping: AWS's message is
//! dropped there, it can name the secret).
//!
//! A fetch shared by many readers keeps the failure's facts, not an error:
//! each reader maps them with its own environment variable.

use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;

/// Why a read or a write failed, before it is named for a caller.
#[derive(Clone)]
pub(crate) enum Failure {
    /// AWS answered with an error, or no answer came.
    Aws(AwsFailure),
    /// The secret holds binary data (`SecretBinary`), not a string.
    NotString,
}

/// The operation and the code, never AWS's message (it can name the
/// secret).
impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Aws(failure) => f
                .debug_struct("Failure::Aws")
                .field("operation", &failure.operation)
                .field("code", &failure.code)
                .finish_non_exhaustive(),
            Self::NotString => f.write_str("Failure::NotString"),
        }
    }
}

impl Failure {
    /// The error, naming `variable` when the read was for a sandbox's
    /// environment variable.
    pub(crate) fn into_error(self, variable: Option<&str>) -> SandboxError {
        match self {
            Self::Aws(failure) => from_secrets_manager(failure, variable),
            Self::NotString => not_string(variable),
        }
    }
}

// TEMPORARY until main has the secret kinds: the four functions below
// delegate to the error module's secret rows after `git merge main`.

/// A Secrets Manager failure of `failure.operation`.
pub(crate) fn from_secrets_manager(failure: AwsFailure, variable: Option<&str>) -> SandboxError {
    let _ = variable;
    crate::error::map::aws::from_aws(failure)
}

/// The secret holds binary data.
pub(crate) fn not_string(variable: Option<&str>) -> SandboxError {
    let _ = variable;
    SandboxError::internal("secrets", "a secret that is not a string")
}

/// CreateSecret: the deletion of a secret of that name did not end in 60 s.
pub(crate) fn deletion_pending() -> SandboxError {
    SandboxError::internal("secrets", "deletion pending")
}

/// Whether `err` is `SecretNotFound`.
pub(crate) fn is_secret_not_found(err: &SandboxError) -> bool {
    err.kind() == crate::ErrorKind::SandboxNotFound
}

/// Whether `failure` is CreateSecret's "a secret of this name is still
/// being deleted" (InvalidRequestException whose message mentions the
/// deletion; the message is only looked at here and then dropped).
pub(crate) fn is_deletion_pending(failure: &AwsFailure) -> bool {
    let code = failure.code.as_deref().unwrap_or_default();
    let code = code.strip_suffix("Exception").unwrap_or(code);
    code == "InvalidRequest"
        && failure
            .message
            .as_deref()
            .is_some_and(|message| message.to_ascii_lowercase().contains("delet"))
}

/// Whether `failure` is ResourceNotFoundException.
pub(crate) fn is_not_found(failure: &AwsFailure) -> bool {
    let code = failure.code.as_deref().unwrap_or_default();
    code.strip_suffix("Exception").unwrap_or(code) == "ResourceNotFound"
}

/// `SecretNotFound` for `operation` without an AWS error (DescribeSecret
/// answered with a deletion date: the secret is scheduled for deletion).
pub(crate) fn not_found(operation: &'static str) -> SandboxError {
    let mut failure = AwsFailure::new(operation);
    failure.code = Some("ResourceNotFoundException".to_owned());
    from_secrets_manager(failure, None)
}
