//! Realistic errors for your own tests (cargo feature `test-util`).
//!
//! Each entry point builds exactly the [`SandboxError`] the SDK returns when
//! the boundary it names fails that way: an AWS error code with its HTTP
//! status and message, a gRPC status from the agent, an HTTP answer from
//! the proxy without `grpc-status`, a failure of the transport itself, an
//! agent stream error code, or a process `EndEvent`. They run the SDK's own
//! mapping (the same redaction, messages and metadata, `attempts() == 1`);
//! errors the SDK detects itself have plain constructors on
//! [`SandboxError`] (`SandboxError::closed()`, `::timeout(..)`, ...).
//!
//! ```
//! use rayito::error::{ErrorKind, GrpcCode};
//! use rayito::test_util::{AwsError, Call, agent_status};
//!
//! let throttled = AwsError::new("RunMicrovm")
//!     .code("ThrottlingException")
//!     .http_status(429)
//!     .message("Rate exceeded")
//!     .build();
//! assert_eq!(throttled.kind(), ErrorKind::RateLimit);
//!
//! let missing = agent_status(GrpcCode::NotFound, "no such file", Call::filesystem("files.read"));
//! assert_eq!(missing.kind(), ErrorKind::FileNotFound);
//! ```
//!
//! Like every `test-util` API (tokio's, the AWS SDK's), this module is for
//! tests: the shapes here follow the SDK's mapping and may change in any
//! minor release, while the errors they build follow docs/errors.md.

use std::time::Duration;

use crate::error::map::agent::{self, CommandOutput as MapOutput, EndEventData};
use crate::error::map::aws::{AwsFailure, NoResponse};
use crate::error::map::grpc::{CallContext, GrpcFailure, Origin, from_grpc, proxy_rejected};
use crate::error::{GrpcCode, PersistenceOp, SandboxError, TransferDirection};

/// The SDK call a failure happened in: its name (`commands.run`,
/// `files.read`, ...) and whether it works on the filesystem (then
/// NOT_FOUND means a missing path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call(CallContext);

impl Call {
    /// A call named `feature` that does not work on the filesystem.
    pub const fn new(feature: &'static str) -> Self {
        Self(CallContext::new(feature))
    }

    /// A filesystem call named `feature`.
    pub const fn filesystem(feature: &'static str) -> Self {
        Self(CallContext::filesystem(feature))
    }

    /// The same call, cancelled by the caller (a CANCELLED status is then
    /// the caller's own).
    #[must_use]
    pub const fn cancelled_by_caller(self) -> Self {
        Self(self.0.cancelled_by_caller())
    }
}

/// An AWS control-plane failure, as the SDK's adapter sees it; [`build`]
/// makes the error the SDK returns for it.
///
/// [`build`]: AwsError::build
#[derive(Clone, Debug)]
#[must_use]
pub struct AwsError(AwsFailure);

impl AwsError {
    /// A failure of `operation` (`RunMicrovm`, `GetMicrovm`,
    /// `TerminateMicrovm`, `CreateMicrovmAuthToken`) with a response whose
    /// fields are set below.
    pub fn new(operation: &'static str) -> Self {
        Self(AwsFailure::new(operation))
    }

    /// No HTTP response arrived: the call's deadline passed.
    pub fn timed_out(operation: &'static str) -> Self {
        Self(AwsFailure {
            no_response: Some(NoResponse::Timeout),
            ..AwsFailure::new(operation)
        })
    }

    /// No HTTP response arrived: the connection could not be made.
    pub fn connect_failed(operation: &'static str) -> Self {
        Self(AwsFailure {
            no_response: Some(NoResponse::Connect),
            ..AwsFailure::new(operation)
        })
    }

    /// No HTTP response arrived for another reason.
    pub fn no_response(operation: &'static str) -> Self {
        Self(AwsFailure {
            no_response: Some(NoResponse::Other),
            ..AwsFailure::new(operation)
        })
    }

    crate::setters::setters! {
        unmarked;
        in 0;
        /// The AWS error code (`x-amzn-errortype`, `__type`), raw: a namespace
        /// prefix and a `:` suffix are stripped as the SDK does.
        code: Some impl String;
        /// The AWS error message (redacted by the mapping).
        message: Some impl String;
        /// The HTTP status.
        http_status: Some u16;
        /// `Retry-After` / `retryAfterSeconds`.
        retry_after: Some Duration;
        /// The `quotaCode` member.
        quota_code: Some impl String;
        /// `x-amzn-requestid`.
        request_id: Some impl String;
        /// The text of the error behind a failure without response (the
        /// error's redacted cause).
        cause: Some impl String;
    }

    /// The error the SDK returns for this failure (once its retries, if
    /// any, are spent).
    pub fn build(self) -> SandboxError {
        crate::error::map::aws::from_aws(self.0)
    }
}

/// The error the SDK returns when AWS has no credentials or region;
/// `detail` is the credential chain's text (redacted).
pub fn aws_no_credentials(detail: &str) -> SandboxError {
    crate::error::map::aws::no_credentials(detail)
}

/// The error the SDK returns when the agent ended `call` with a gRPC status
/// (`grpc-status` sent): `code` and `message` as the agent sent them.
pub fn agent_status(code: GrpcCode, message: &str, call: Call) -> SandboxError {
    from_grpc(GrpcFailure::agent(code, message, call.0))
}

/// The error the SDK returns when something in front of the agent (the AWS
/// proxy) answered `call` with HTTP `http_status` and no `grpc-status`,
/// once the SDK's retries are spent (for 401 and 403: after re-minting the
/// proxy token and retrying).
pub fn proxy_answer(http_status: u16, call: Call) -> SandboxError {
    let failure = GrpcFailure::http_without_grpc_status(http_status, call.0);
    if matches!(http_status, 401 | 403) {
        proxy_rejected(failure)
    } else {
        from_grpc(failure)
    }
}

/// A failure of the transport itself, as the SDK classifies it by type.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// The connection was never established (nothing was sent).
    NotEstablished,
    /// The HTTP/2 stream or connection was reset or closed; `code` is the
    /// status our client made of it (UNAVAILABLE, INTERNAL, CANCELLED ...).
    Reset {
        /// The status code.
        code: GrpcCode,
    },
    /// The SDK's own per-call deadline passed.
    Deadline,
}

/// The error the SDK returns when the transport failed `call` that way
/// (once its retries are spent); `detail` is the transport's text.
pub fn transport_failure(failure: TransportFailure, detail: &str, call: Call) -> SandboxError {
    let (code, origin) = match failure {
        TransportFailure::NotEstablished => (GrpcCode::Unavailable, Origin::NotEstablished),
        TransportFailure::Reset { code } => (code, Origin::Reset),
        TransportFailure::Deadline => (GrpcCode::DeadlineExceeded, Origin::Deadline),
    };
    from_grpc(GrpcFailure::new(code, detail, origin, call.0).with_cause(Some(detail)))
}

/// The error the SDK returns for an in-stream `StreamError{code, message}`
/// of `call`.
pub fn stream_error(code: &str, message: &str, call: Call) -> SandboxError {
    agent::from_stream_error(code, message, call.0)
}

/// When a status ended a checkpoint or restore stream.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistenceWhen {
    /// Before its first message (the `started` event).
    BeforeFirstMessage,
    /// After `started`, before `done`.
    MidStream,
}

/// The error the SDK returns when the agent ended a checkpoint or restore
/// with the gRPC status `code` (`grpc-status` sent) at `when`.
pub fn persistence_status(
    op: PersistenceOp,
    code: GrpcCode,
    message: &str,
    when: PersistenceWhen,
) -> SandboxError {
    let failure = GrpcFailure::agent(code, message, CallContext::new(op.feature()));
    match when {
        PersistenceWhen::BeforeFirstMessage => {
            crate::error::map::persistence::before_first_message(op, &failure, None)
        }
        PersistenceWhen::MidStream => {
            crate::error::map::persistence::mid_stream(op, &failure, None)
        }
    }
}

/// The error the SDK returns for a `StreamError { code }` inside a
/// checkpoint or restore stream (its message is never read).
pub fn persistence_stream_error(op: PersistenceOp, code: &str) -> SandboxError {
    crate::error::map::persistence::stream_error(op, code)
}

/// The error the SDK returns when a checkpoint or restore stream ended
/// without `done`.
pub fn persistence_ended_without_done(op: PersistenceOp) -> SandboxError {
    crate::error::map::persistence::ended_without_done(op)
}

/// The error the SDK returns for an S3-staged transfer that ended failed
/// or cancelled with the agent's `error { code, message }`.
pub fn transfer_failure(direction: TransferDirection, code: &str, message: &str) -> SandboxError {
    crate::error::map::transfer::from_transfer_error(direction, code, message)
}

/// A process `EndEvent`, as the agent sends it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct EndEvent(EndEventData);

impl EndEvent {
    /// An end with `status` (`exited`, `signaled`, `timeout`, `suspending`,
    /// `output_truncated`, `sandbox_timeout`, or newer) and `exit_code`.
    pub fn new(status: impl Into<String>, exit_code: i32) -> Self {
        Self(EndEventData {
            status: status.into(),
            exit_code,
            ..EndEventData::default()
        })
    }

    /// `EndEvent.signal`.
    pub fn signal(mut self, signal: i32) -> Self {
        self.0.signal = Some(signal);
        self
    }

    /// `EndEvent.error` as `(code, message)`.
    pub fn error(mut self, code: impl Into<String>, message: impl Into<String>) -> Self {
        self.0.error = Some((code.into(), message.into()));
        self
    }
}

/// What the command wrote, as the SDK kept it.
#[derive(Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct CommandOutput(MapOutput);

impl CommandOutput {
    /// `stdout` and `stderr` (the kept tails), and whether they were cut.
    pub fn new(stdout: impl Into<String>, stderr: impl Into<String>, truncated: bool) -> Self {
        Self(MapOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated,
        })
    }
}

// Output may hold anything the command printed: lengths only.
impl std::fmt::Debug for CommandOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How a command's `EndEvent` ends a `commands.run` that did not fail.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndOutcome {
    /// Exit code 0.
    Exited,
    /// The sandbox is suspending; the process lives on.
    Suspended,
}

/// What the SDK makes of a command's `EndEvent` with `output`: `Ok` for a
/// success or a suspension, else the error `commands.run` returns.
/// `command` only lends its program name to the message.
///
/// # Errors
///
/// Every end that is not a success or a suspension (`CommandExit`,
/// `Timeout`, `Sandbox{output_truncated}`, the stream error table).
pub fn end_event(
    end: EndEvent,
    output: CommandOutput,
    command: &str,
) -> Result<EndOutcome, SandboxError> {
    match agent::from_end_event(end.0, output.0, command)? {
        agent::EndOutcome::Exited { .. } => Ok(EndOutcome::Exited),
        agent::EndOutcome::Suspended { .. } => Ok(EndOutcome::Suspended),
    }
}

/// The redaction the SDK applies to server text before keeping it (AWS
/// signing material, tokens, key ids; cut at 2,048 characters).
pub fn redact(text: &str) -> String {
    crate::error::map::redact::redact_aws_text(text)
}

/// The run payload (`runHookPayload`) that [`SandboxBuilder::create`]
/// would send for `builder`, after the same checks and without any I/O:
/// for the SDK's own test that parses it with the agent's parser. It holds
/// the builder's env values; keep it out of logs.
///
/// # Errors
///
/// What `create` returns before any I/O (`SandboxLifetime`,
/// `InvalidArgument` naming the argument).
///
/// [`SandboxBuilder::create`]: crate::SandboxBuilder::create
#[doc(hidden)]
pub fn run_hook_payload(builder: &crate::SandboxBuilder) -> Result<String, SandboxError> {
    builder.launch().map(|(_, _, payload)| payload)
}
