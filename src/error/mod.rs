//! The error contract (placeholder until the error module lands).

/// The one error type of the SDK.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Something about a sandbox failed.
    #[error("sandbox error")]
    Sandbox,
}

/// Every kind of error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The root.
    Sandbox,
}
