//! Pure functions that turn what a boundary saw (an AWS failure, a gRPC
//! status, an agent stream error or end event) into a [`SandboxError`].
//!
//! No I/O happens here. The SDK's control and transport layers call these at
//! the one place where a failure enters the SDK. The module is private: the
//! rows are not API. Users who need the exact errors in their own tests use
//! the `test-util` feature ([`crate::test_util`]), which calls these.
//!
//! Exact strings are the agent's contract: markers are compared exactly,
//! never searched for, and text a guest controls may appear in metadata but
//! never chooses a variant except through an exact marker. A marker can only
//! ever make an error *less* retryable.
//!
//! [`SandboxError`]: crate::SandboxError

pub(crate) mod agent;
pub(crate) mod aws;
pub(crate) mod configure;
pub(crate) mod grpc;
pub(crate) mod index;
pub(crate) mod persistence;
pub(crate) mod redact;
#[cfg(feature = "s3")]
pub(crate) mod s3;
pub(crate) mod secrets;
pub(crate) mod transfer;

/// What the mapping tests compare an error by: `timeout:<scope>`,
/// `authentication:<proxy_rejected>`, else the kind's name (each test
/// names its own variants first).
#[cfg(test)]
fn test_shape(e: &crate::SandboxError) -> String {
    use crate::SandboxError;
    match e {
        SandboxError::Timeout { scope, .. } => format!("timeout:{scope}"),
        SandboxError::Authentication { proxy_rejected, .. } => {
            format!("authentication:{proxy_rejected}")
        }
        other => other.kind().as_str().to_owned(),
    }
}
