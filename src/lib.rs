//! `rayito`: an async SDK for code sandboxes on AWS Lambda MicroVMs.
#![deny(missing_docs)]

pub mod error;

mod checks;
mod code;
mod commands;
mod control;
mod files;
#[cfg(feature = "local")]
mod local;
#[cfg(not(feature = "local"))]
#[path = "local/disabled.rs"]
mod local;
mod sandbox;
mod secret;
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

/// The generated `rayito.v1` clients and messages (crate `rayito-proto`);
/// private to the SDK: no generated type appears in its public API.
pub(crate) use rayito_proto::v1 as pb;
