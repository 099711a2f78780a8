//! `rayito-e2b`: E2B's SDK shape over the `rayito` SDK.
//!
//! A program written in the shape of E2B's code-interpreter SDK moves to
//! sandboxes on AWS Lambda MicroVMs by changing its imports:
//!
//! ```no_run
//! use rayito_e2b::{RunCodeOpts, Sandbox, SandboxOpts};
//! use rayito_e2b::exceptions::{E2bClass, is_instance};
//!
//! # async fn demo() -> Result<(), rayito_e2b::SandboxError> {
//! let sbx = Sandbox::create(SandboxOpts::default()).await?;
//! let execution = sbx.run_code("1 + 1", RunCodeOpts::new()).await?;
//! assert_eq!(execution.text(), Some("2"));
//! match sbx.files().read("/home/user/missing").await {
//!     Err(e) if is_instance(&e, E2bClass::NotFoundException) => {}
//!     other => { other?; }
//! }
//! sbx.kill(Default::default()).await?;
//! # Ok(()) }
//! ```
//!
//! What differs, option by option and feature by feature, is in
//! `docs/e2b-compat.md`: every E2B option that means nothing on AWS is a
//! [`CompatWarning`] (and a deprecation where it is a field); every E2B
//! feature the platform cannot provide is `SandboxError::Unimplemented`
//! with a stable feature key ([`Missing`]), before any call to AWS.
#![deny(missing_docs)]

pub mod exceptions;
mod options;
mod sandbox;
mod unimplemented;
mod warnings;

#[cfg(test)]
mod docs_check;

pub use options::{
    ApiParams, Backend, DEFAULT_COMMAND_TIMEOUT, DEFAULT_RUN_CODE_TIMEOUT, DEFAULT_SANDBOX_TIMEOUT,
    Lifecycle, Network, OnTimeout, SandboxOpts,
};
pub use rayito::{
    CodeContext as Context, CommandResult, EntryInfo, ErrorKind, Execution, ExecutionError,
    ExecutionResult as Result, Logs, OutputMessage, SandboxError, SandboxInfo, Secret,
};
pub use sandbox::{CommandOpts, Commands, RunCodeOpts, Sandbox};
pub use unimplemented::{DOC, Missing};
pub use warnings::CompatWarning;
