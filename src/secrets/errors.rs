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

/// A Secrets Manager failure of `failure.operation` (the error module's
/// table; AWS's message is dropped there).
pub(crate) fn from_secrets_manager(failure: AwsFailure, variable: Option<&str>) -> SandboxError {
    crate::error::map::secrets::from_secrets_manager(failure, variable)
}

/// The secret holds binary data.
pub(crate) fn not_string(variable: Option<&str>) -> SandboxError {
    SandboxError::secret_not_string(variable)
}

/// CreateSecret: the deletion of a secret of that name did not end within
/// the retries (`waited` in all).
pub(crate) fn deletion_pending(waited: std::time::Duration) -> SandboxError {
    SandboxError::secret_deletion_pending(waited)
}

/// Whether `err` is `SecretNotFound`.
pub(crate) fn is_secret_not_found(err: &SandboxError) -> bool {
    err.kind() == crate::ErrorKind::SecretNotFound
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
    SandboxError::secret_not_found(operation, None)
}
