//! Pure functions that turn what a boundary saw (an AWS failure, a gRPC
//! status, an agent stream error or end event) into a [`SandboxError`].
//!
//! No I/O happens here. The SDK's control and transport layers call these at
//! the one place where a failure enters the SDK; they are public so that the
//! tables can be tested and read, and so that users can build realistic
//! errors in their own tests.
//!
//! Exact strings are the agent's contract: markers are compared exactly,
//! never searched for, and text a guest controls may appear in metadata but
//! never chooses a variant except through an exact marker. A marker can only
//! ever make an error *less* retryable.
//!
//! [`SandboxError`]: crate::SandboxError

pub mod agent;
pub mod aws;
pub mod grpc;
pub mod redact;
