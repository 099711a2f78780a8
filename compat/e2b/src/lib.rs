//! `rayito-e2b`: E2B's SDK shape over the `rayito` SDK.
//!
//! A program written in the shape of E2B's code-interpreter SDK moves to
//! sandboxes on AWS Lambda MicroVMs by changing its imports and choosing
//! where sandboxes run (`SandboxOpts::backend`; the default reads
//! `RAYITO_BACKEND`, else AWS, where `RAYITO_TEMPLATE` names the image):
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
//! Every public item of E2B's surface is listed in `e2b-surface.tsv`
//! with what it does here, and `docs/e2b-compat.md` renders that table.
//! Every E2B option that means nothing on AWS is a
//! [`CompatWarning`] (and a deprecation where it is a field); every E2B
//! feature the platform cannot provide is `SandboxError::Unimplemented`
//! with a stable feature key ([`Missing`]), before any call to AWS.
#![deny(missing_docs)]

mod code;
mod commands;
pub mod exceptions;
mod models;
mod options;
mod paginator;
mod pty;
mod sandbox;
mod secret;
mod template;
mod transfer;
mod unavailable;
mod unimplemented;
mod warnings;

#[cfg(test)]
mod docs_check;

pub use code::RunCodeOpts;
pub use commands::{CommandOpts, Commands};
pub use models::{GetNewEvents, ToJson, context_from_json};
pub use options::{
    ApiParams, Backend, DEFAULT_COMMAND_TIMEOUT, DEFAULT_RUN_CODE_TIMEOUT, DEFAULT_SANDBOX_TIMEOUT,
    Lifecycle, Network, SandboxOpts,
};
pub use paginator::{ListOpts, ListOrder, SandboxPaginator};
pub use pty::{Pty, PtyOpts};
/// E2B's `Result` of an execution. Not renamed to `Result`: that would
/// shadow `std::result::Result` under `use rayito_e2b::*`.
pub use rayito::ExecutionResult;
/// E2B's `charts` module: the typed chart of a result
/// (`ExecutionResult::parsed_chart`).
pub use rayito::charts;
pub use rayito::{
    CodeContext as Context, CodeContextOptions, CommandEvent, CommandHandle, CommandResult,
    EgressProxy, EntryInfo, ErrorKind, Execution, ExecutionError, FilesystemEvent,
    FilesystemEventKind, Logs, MetricsHistoryQuery, NetworkState, OnTimeout, OutputMessage,
    ProcessInfo, PtyHandle, PtySize, SandboxError, SandboxHost, SandboxInfo, SandboxMetrics,
    SandboxState, Secret as SecretValue, WatchHandle,
};
pub use rayito::{ListQuery as SandboxQuery, SandboxSummary};
pub use sandbox::{ConnectOpts, E2B_DEFAULT_TEMPLATE, OnResume, PauseMode, PauseOpts, Sandbox};
pub use secret::{Secret, SecretInfo, SecretOpts, SecretPaginator};
pub use template::{BuildInfo, Template, TemplateBuildStatus, TemplateBuilder, TemplateOpts};
pub use unavailable::Volume;
pub use unimplemented::{DOC, Missing};
pub use warnings::{CompatWarning, IGNORED};
