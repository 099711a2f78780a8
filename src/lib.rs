//! `rayito`: an async SDK for code sandboxes on AWS Lambda MicroVMs, with an
//! embedded local backend that runs the same agent on this machine.
//!
//! A [`Sandbox`] is a MicroVM running the rayito agent. Create one, run code
//! and commands in it, move files in and out, then kill it. Every fallible
//! call returns a [`SandboxError`]: one flat enum whose variants say what
//! went wrong and what remains possible.
//!
//! # Create a sandbox
//!
//! [`Sandbox::create`] takes its backend from `RAYITO_BACKEND` (AWS when
//! unset) and its image from `RAYITO_TEMPLATE`; [`Sandbox::builder`] sets
//! everything in code. Dropping the handle does not stop the MicroVM: call
//! [`Sandbox::kill`].
//!
//! ```no_run
//! use std::time::Duration;
//! use rayito::Sandbox;
//!
//! # async fn tour() -> Result<(), rayito::SandboxError> {
//! let sandbox = Sandbox::builder()
//!     .template("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
//!     .timeout(Duration::from_secs(600))
//!     .env("GREETING", "hello")
//!     .create()
//!     .await?;
//! println!("sandbox {} is ready", sandbox.id());
//! // Keep the id and the access token to reconnect later.
//! let again = Sandbox::connect(sandbox.id(), sandbox.access_token().clone()).await?;
//! again.kill().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Run code
//!
//! [`Sandbox::run_code`] runs a cell in a Python kernel whose state lives
//! on between cells. An exception raised by the code is data
//! ([`Execution::error`]), not an `Err`.
//!
//! ```no_run
//! # async fn tour(sandbox: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! sandbox.run_code("x = 21").await?;
//! let execution = sandbox.run_code("print('doubling'); x * 2").await?;
//! assert_eq!(execution.text(), Some("42"));
//! print!("{}", execution.logs.stdout.concat());
//! if let Some(error) = &execution.error {
//!     eprintln!("the cell raised {}: {}", error.name, error.value);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Run commands
//!
//! [`Commands::run`] waits for the command and returns its output; a
//! non-zero exit is [`SandboxError::CommandExit`], which carries the output.
//!
//! ```no_run
//! use std::time::Duration;
//! use rayito::CommandOptions;
//!
//! # async fn tour(sandbox: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! let listing = sandbox.commands().run("ls -la /home/user").await?;
//! println!("{}", listing.stdout);
//!
//! let options = CommandOptions::new()
//!     .cwd("/tmp")
//!     .timeout(Duration::from_secs(30))
//!     .on_stdout(|chunk| print!("{chunk}"));
//! sandbox.commands().run_with("make test", options).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Files
//!
//! [`Files`] reads and writes the sandbox's filesystem; a missing path is
//! [`SandboxError::FileNotFound`].
//!
//! ```no_run
//! # async fn tour(sandbox: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! let files = sandbox.files();
//! files.write("/home/user/data.csv", "a,b\n1,2\n").await?;
//! let text = files.read_to_string("/home/user/data.csv").await?;
//! for entry in files.list("/home/user").await? {
//!     println!("{} ({} bytes)", entry.path, entry.size);
//! }
//! # let _ = text;
//! # Ok(())
//! # }
//! ```
//!
//! # Background commands, watches, terminals and ports
//!
//! [`Commands::spawn`] returns a [`CommandHandle`]: a stream of numbered
//! output that survives a disconnect ([`Commands::connect_from`] reads on
//! from a sequence number). [`Files::watch_dir`] streams a directory's
//! changes; [`Sandbox::pty`] opens a terminal; [`Sandbox::get_host`] says
//! how to reach a server inside the sandbox from outside.
//!
//! ```no_run
//! use futures_util::StreamExt as _;
//! use rayito::{CommandEvent, CommandOptions, PtyOptions, PtySize};
//!
//! # async fn tour(sandbox: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! let mut server = sandbox
//!     .commands()
//!     .spawn("python3 -u -m http.server 8000", CommandOptions::new().no_timeout())
//!     .await?;
//! if let Some(CommandEvent::Stdout { data, seq }) = server.next().await.transpose()? {
//!     println!("#{seq}: {}", String::from_utf8_lossy(&data));
//! }
//! let host = sandbox.get_host(8000).await?;
//! println!("GET {}/ with headers {} and {}", host.url(), "x-aws-proxy-port", "x-aws-proxy-auth");
//!
//! let mut changes = sandbox.files().watch_dir("/home/user", true).await?;
//! let terminal = sandbox.pty().create(PtySize::new(80, 24), PtyOptions::new()).await?;
//! terminal.send_input("touch /home/user/new.txt\n").await?;
//! if let Some(change) = changes.next().await.transpose()? {
//!     println!("{:?} {}", change.kind, change.name);
//! }
//! server.kill().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Match errors
//!
//! Match on the variant to decide what to do; [`SandboxError::is_retryable`]
//! and [`SandboxError::classify`] say the same as data, and
//! [`SandboxError::meta`] holds what the server said (redacted) and how
//! many attempts the SDK made. The full table is in `docs/errors.md`.
//!
//! ```no_run
//! use rayito::SandboxError;
//! use rayito::error::TimeoutScope;
//!
//! # async fn tour(sandbox: rayito::Sandbox) -> Result<(), SandboxError> {
//! match sandbox.commands().run("python3 train.py").await {
//!     Ok(result) => println!("{}", result.stdout),
//!     Err(SandboxError::CommandExit { exit_code, stderr, .. }) => {
//!         eprintln!("exited with {exit_code}: {}", &*stderr);
//!     }
//!     Err(SandboxError::Timeout { scope: TimeoutScope::Command, .. }) => {
//!         eprintln!("raise the command timeout");
//!     }
//!     Err(err) if err.is_retryable() => {
//!         eprintln!("try again later ({} attempts so far): {err}", err.meta().attempts());
//!     }
//!     Err(err) => return Err(err),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # One client per service
//!
//! A [`Client`] owns the AWS side (configuration, credentials, region, the
//! retry policy and pacing of control-plane calls); every sandbox made from
//! it shares its control-plane client. The `Sandbox::create()` /
//! `Sandbox::builder()` shortcuts use an implicit client per tokio runtime.
//!
//! ```no_run
//! use rayito::{AwsOptions, Client};
//!
//! # async fn tour() -> Result<(), rayito::SandboxError> {
//! let client = Client::builder()
//!     .aws(AwsOptions::new().region("us-east-1"))
//!     .build()
//!     .await?;
//! let sandbox = client
//!     .sandbox()
//!     .template("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
//!     .create()
//!     .await?;
//! let execution = sandbox.code().run("1 + 1").await?;
//! assert_eq!(execution.text(), Some("2"));
//! client.kill_by_id(sandbox.id()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Choose a backend
//!
//! AWS is the default: credentials and region come from the usual chain
//! (environment, profiles, SSO, instance roles) unless [`AwsOptions`] sets
//! them. The local backend runs the agent on this machine with best-effort
//! isolation (no AWS account needed; a warning is logged when it starts):
//! choose it with [`SandboxBuilder::local`] or `RAYITO_BACKEND=local`.
//!
//! ```no_run
//! use rayito::{AwsOptions, Sandbox};
//!
//! # async fn tour() -> Result<(), rayito::SandboxError> {
//! let on_aws = Sandbox::builder()
//!     .aws(AwsOptions::new().region("us-east-1").profile("sandboxes"))
//!     .template("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
//!     .create()
//!     .await?;
//! let on_this_machine = Sandbox::builder().local().create().await?;
//! # let _ = (on_aws, on_this_machine);
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! Only `local` is on by default; each other feature compiles one AWS client
//! (or one integration) and the SDK surface that needs it, nothing else.
//!
//! - `local` (default): the embedded local backend
//!   ([`SandboxBuilder::local`], `RAYITO_BACKEND=local`): the rayito agent
//!   and an emulator of the Lambda MicroVMs API on 127.0.0.1. Sandbox code
//!   runs on this host. `default-features = false` compiles no agent,
//!   emulator or server stack.
//! - `test-util`: `rayito::test_util` builds the exact errors the SDK returns for
//!   each kind of failure, for your own tests.
//! - `templates`: `rayito::template` describes a sandbox image in Rust and
//!   compiles it to a Dockerfile layer, the agent's JSON files and a
//!   deterministic build artifact; building one talks to S3, CloudWatch
//!   Logs and STS (their clients, a zip writer).
//! - `setup`: `rayito::setup`, the artifact bucket and the IAM roles and
//!   policies of a new account as two CloudFormation stacks, and
//!   `rayito::stacks`, the optional stacks (`s3-mounts`: the execution
//!   role's policy for S3 mounts) (adds `templates` and the
//!   CloudFormation client).
//! - `dynamodb`: the metadata index of sandboxes (`SandboxIndex`,
//!   `SandboxBuilder::index`, `ClientBuilder::index`) and the pool store
//!   shared by many hosts (the DynamoDB client).
//! - `s3`: S3 with the caller's credentials: `rayito::persistence::{list,
//!   delete}` of checkpoints and `rayito::transfer` (upload and download
//!   URLs, large reads and writes staged through S3; the S3 client and the
//!   SigV4 signer). Checkpoint and restore themselves need no feature.
//! - `logs`: `rayito::logs`, a sandbox's CloudWatch Logs stream (the
//!   CloudWatch Logs client).
//! - `secrets`: `rayito::secrets`, the AWS Secrets Manager store and the
//!   cache that injects secret values into sandboxes' environments (the
//!   Secrets Manager client).
//! - `quotas`: `rayito::quotas` (`Client::quotas`), the applied Lambda
//!   MicroVMs quotas, the memory in use against the region's quota and the
//!   warnings near it (Service Quotas, one signed call of our own).
//! - `cost`: `rayito::cost` (`Client::cost`), Cost Explorer's bill of
//!   MicroVMs and the running sandboxes' estimate (adds `quotas`).
//! - `permissions`: `rayito::permissions` (`Client::permissions`), IAM's
//!   simulation of the SDK's actions for the caller (STS, then IAM's
//!   SimulatePrincipalPolicy, signed calls of our own; adds `setup`), what
//!   `rayito doctor` reports (docs/doctor.md).
//! - `otel`: OpenTelemetry (`SandboxBuilder::tracer_provider`,
//!   `ClientBuilder::tracer_provider`): each public operation is also a
//!   CLIENT span, and every gRPC call under an active span carries its W3C
//!   `traceparent` (the `opentelemetry` API only).
//! - `fleet`: `rayito::fleet` (`Client::fleet`), every sandbox of the
//!   account with its image and size, the images with their versions, and
//!   bulk kill, pause, resume and set-timeout planned as a dry run and run
//!   with the plan's confirmation (nothing new compiles: the MicroVMs client).
#![deny(missing_docs)]

/// Runs `body` (a block returning `$output`) as a boxed future: a public
/// future then holds its arguments and one pointer, while its state lives
/// on the heap. Futures are stored inline in their callers' futures, so an
/// unboxed SDK call of 16 KiB grew every caller by as much (a debug build
/// awaiting many calls in `main` overflowed its stack); `tests/sdk/future_sizes.rs`
/// pins the budget. The type also checks that the future is `Send`.
macro_rules! boxed {
    ($output:ty, $body:block) => {{
        let future: std::pin::Pin<
            Box<dyn std::future::Future<Output = $output> + Send + '_>,
        > = Box::pin(async move $body);
        future.await
    }};
}

/// `impl Stream` for a public stream type that hands on what its pinned,
/// boxed `inner` stream yields (`Type => Item`): the type names the stream
/// and hides how it is made; the items are the inner stream's.
macro_rules! inner_stream {
    ($ty:ident => $item:ty) => {
        impl ::futures_util::Stream for $ty {
            type Item = $item;

            fn poll_next(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<Option<Self::Item>> {
                ::futures_util::Stream::poll_next(self.inner.as_mut(), cx)
            }
        }
    };
}

pub mod error;
#[cfg(feature = "setup")]
pub mod setup;
#[cfg(feature = "setup")]
pub mod stacks;
#[cfg(feature = "templates")]
pub mod template;
#[cfg(feature = "test-util")]
pub mod test_util;

#[cfg(feature = "agent")]
pub mod agent;
mod aws;
mod backoff;
mod checks;
mod code;
mod commands;
mod configure;
mod control;
#[cfg(feature = "events")]
pub mod events;
mod files;
#[cfg(feature = "fleet")]
pub mod fleet;
#[cfg(feature = "secrets")]
pub mod gateway;
pub mod git;
#[cfg(feature = "dynamodb")]
mod index;
#[cfg(feature = "local")]
mod local;
#[cfg(not(feature = "local"))]
#[path = "local/disabled.rs"]
mod local;
#[cfg(feature = "logs")]
pub mod logs;
// The shared rules of S3 mount and EFS volume paths.
#[cfg(feature = "cost")]
pub mod cost;
mod mount_path;
pub mod mounts;
mod otel;
#[cfg(feature = "permissions")]
pub mod permissions;
pub mod persistence;
mod pool;
mod pty;
mod quiet;
#[cfg(feature = "quotas")]
pub mod quotas;
mod sandbox;
#[cfg(test)]
mod seam_tests;
mod secret;
#[cfg(feature = "secrets")]
pub mod secrets;
mod setters;
pub mod size;
mod state;
pub mod telemetry;
#[cfg(feature = "s3")]
pub mod transfer;
mod transport;
#[cfg(feature = "efs")]
pub mod volumes;

/// The features' steps in the sandbox core's `create`, `connect` and
/// `kill`, in the order they run (the gateways', then persistence's
/// come first, the index's write last). The crate root is the one place that wires the
/// features to the core: the core calls these without naming them.
pub(crate) fn feature_steps() -> Vec<&'static dyn sandbox::steps::Step> {
    // The sections of the one Configure are collected in this order and
    // sent before any `after_create`, so before persistence's automatic
    // restore (the reference's order).
    vec![
        #[cfg(feature = "secrets")]
        &gateway::Steps,
        &mounts::Steps,
        #[cfg(feature = "efs")]
        &volumes::Steps,
        #[cfg(feature = "events")]
        &events::Steps,
        &telemetry::Steps,
        &persistence::Steps,
        #[cfg(feature = "s3")]
        &transfer::auto::Steps,
        #[cfg(feature = "secrets")]
        &secrets::inject::Steps,
        #[cfg(feature = "dynamodb")]
        &index::Steps,
    ]
}

/// Typed charts of `run_code` results ([`ExecutionResult::parsed_chart`]).
pub use code::chart as charts;
pub use code::{
    Code, CodeContext, CodeContextOptions, Execution, ExecutionError, ExecutionEvent,
    ExecutionEvents, ExecutionResult, Logs, OutputMessage, RunCodeOptions,
};
pub use commands::{
    CommandEvent, CommandHandle, CommandOptions, CommandResult, Commands, OutputCallback,
    ProcessInfo, ProcessKind,
};
#[cfg(feature = "cost")]
pub use cost::{CostQuery, CostReport, UsageCost};
pub use error::{ErrorKind, SandboxError};
#[cfg(feature = "local")]
pub use local::{LocalFaults, LocalGatewayUpstreams};
#[cfg(feature = "quotas")]
pub use quotas::{QuotaReport, Quotas};
pub use sandbox::client::{Client, ClientBuilder};

/// The result of every fallible SDK call.
pub type Result<T> = std::result::Result<T, SandboxError>;
pub use files::{
    EntryInfo, ExitCallback, FileChunks, FileType, Files, FilesystemEvent, FilesystemEventKind,
    WatchHandle, WatchOptions, WatchStopper, WriteEntry, WriteOptions,
};
pub use git::{
    AddOptions as GitAddOptions, AuthenticateOptions as GitAuthenticateOptions,
    CloneOptions as GitCloneOptions, CommitOptions as GitCommitOptions,
    ConfigScope as GitConfigScope, Git, GitBranches, GitFileState, GitFileStatus, GitOptions,
    GitStatus, InitOptions as GitInitOptions, PullOptions as GitPullOptions,
    PushOptions as GitPushOptions, RemoteAddOptions as GitRemoteAddOptions,
    ResetOptions as GitResetOptions, RestoreOptions as GitRestoreOptions,
};
#[cfg(feature = "dynamodb")]
pub use index::SandboxIndex;
/// The bucket the local backend's S3 endpoint has from the start: checkpoints
/// (`S3Prefix::new(LOCAL_BUCKET)`) and staged transfers
/// (`S3Staging::new(LOCAL_BUCKET)`) work on `Sandbox::builder().local()` with
/// no setup, and on the `rayito` CLI's local daemon. It lives, with every
/// object in it, as long as the local backend's process
/// (docs/persistence.md, "The local backend"). Defined without the `local`
/// feature too: a program reaching a local backend that another process
/// runs names it.
///
/// The name is a valid checkpoint bucket and a valid staging bucket (a DNS
/// name without dots).
pub const LOCAL_BUCKET: &str = "rayito-local";

#[cfg(feature = "secrets")]
pub use gateway::{GatewayStatus, Gateways, SecretGateway};
#[cfg(feature = "s3")]
pub use persistence::CheckpointEntry;
pub use persistence::{
    CheckpointOptions, Persistence, PersistenceOutcome, RestoreOptions, S3Prefix,
};
pub use pool::{
    POOL_DEFAULT_TIMEOUT, Pool, PoolConfig, PoolStats, PoolStore, SlotState, SlotStats, WarmupStep,
};
pub use pty::{Pty, PtyExit, PtyHandle, PtyOptions, PtyOutput, PtySize};
pub use sandbox::{
    ALL_TRAFFIC, EgressEnforcement, EgressProxy, Network, NetworkConnector, NetworkPolicy,
    NetworkState,
};
pub use sandbox::{
    AwsOptions, BACKEND_ENV, IdlePolicy, ListOrder, ListQuery, Metrics, MetricsHistoryQuery,
    OnTimeout, Pacing, Sandbox, SandboxBuilder, SandboxHost, SandboxInfo, SandboxList,
    SandboxLogging, SandboxMetrics, SandboxState, SandboxSummary, TEMPLATE_ENV, TemplateInfo,
};
pub use sandbox::{LifecycleHealth, LifecyclePhase, SandboxHealth};
pub use secret::Secret;
pub use size::{Size, SizeRequest};

/// The generated `rayito.v1` clients and messages (crate `rayito-proto`);
/// private to the SDK: no generated type appears in its public API.
pub(crate) use rayito_proto::v1 as pb;
