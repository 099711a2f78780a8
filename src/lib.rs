//! `rayito`: an async SDK for code sandboxes on AWS Lambda MicroVMs.
#![deny(missing_docs)]

pub mod error;
#[cfg(feature = "test-util")]
pub mod test_util;

mod backoff;
mod code;
mod commands;
mod control;
mod files;
mod local;
mod sandbox;
mod secret;
#[cfg(test)]
mod seam_tests;
mod transport;

pub use code::{
    CodeContext, Execution, ExecutionError, ExecutionEvent, ExecutionEvents, ExecutionResult, Logs,
    OutputMessage, RunCodeOptions,
};
pub use commands::{CommandOptions, CommandResult, Commands, OutputCallback};
pub use error::{ErrorKind, SandboxError};
pub use files::{EntryInfo, FileChunks, FileType, Files, WriteEntry};
pub use sandbox::{
    AwsOptions, BACKEND_ENV, IdlePolicy, OnTimeout, Sandbox, SandboxBuilder, SandboxInfo,
    SandboxState, TEMPLATE_ENV,
};
pub use secret::Secret;

/// Generated `rayito.v1` clients and messages; private to the SDK.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    dead_code,
    missing_debug_implementations
)]
pub(crate) mod pb {
    tonic::include_proto!("rayito.v1");
}
