//! The error contract: one flat [`SandboxError`], a kind graph
//! ([`ErrorKind`]), a classification ([`ErrorInfo`]), closed code lists, a
//! wire form, and the retry policy as data. The functions that map AWS,
//! gRPC and agent failures to variants are private; the `test-util`
//! feature reaches them through `rayito::test_util`.
//!
//! Match on variants to decide what to do:
//!
//! ```
//! use rayito::error::{SandboxError, TimeoutScope};
//! fn advice(err: &SandboxError) -> &'static str {
//!     match err {
//!         SandboxError::CommandExit { exit_code, .. } if *exit_code == 2 => "usage error",
//!         SandboxError::Timeout { scope: TimeoutScope::Command, .. } => "raise the command timeout",
//!         e if e.is_retryable() => "retry",
//!         _ => "give up",
//!     }
//! }
//! # let _ = advice;
//! ```

mod agent;
mod codes;
mod constructors;
#[cfg(test)]
mod coverage_check;
#[cfg(test)]
mod docs_check;
mod kind;
pub(crate) mod map;
pub(crate) mod messages;
mod meta;
mod retry;
mod wire;

use std::borrow::Cow;
use std::time::Duration;

pub use agent::{
    AgentFailure, AgentFailureReason, MAX_DETAIL_CODE_CHARS, TokenUsage, failure_message,
    safe_detail_code,
};
pub(crate) use codes::clean_token;
pub use codes::{
    BuildReason, CapacityCode, CapturedText, CommandExitStatus, GrpcCode, MountCode,
    PersistenceCode, PersistenceOp, SandboxCode, StackCode, TimeoutScope, TransferCode,
    TransferDirection, TransferReason, UnknownValue, VolumeMountCode,
};
pub use kind::{ErrorInfo, ErrorKind};
pub(crate) use messages::group;
pub use meta::ErrorMeta;
pub use retry::{Backoff, RetryPolicy};
pub use wire::WireError;

/// The one error type of the SDK.
///
/// Flat: one variant per kind of [`ErrorKind`], each with its own typed
/// fields plus the shared [`ErrorMeta`] (`meta`). The kind graph, the
/// predicates and [`classify`](SandboxError::classify) say how variants
/// relate. `Display` is our message (what failed; what remains possible);
/// it never contains a token, a signature, a presigned URL, a run payload,
/// an environment value or file contents. `source()` is the metadata, whose
/// `Display` is a sanitized summary (AWS code, gRPC code, HTTP status,
/// request id, agent reason, attempts), never a raw response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// `sandbox`: something about a sandbox failed; `code` says what, when known.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Sandbox {
        /// Why, when known.
        code: Option<SandboxCode>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `timeout`: a deadline passed; `scope` says which.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Timeout {
        /// Which deadline.
        scope: TimeoutScope,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `invalid_argument`: a value was refused, by the SDK before any call, by
    /// the agent or by AWS.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    InvalidArgument {
        /// The SDK's name for the argument (e.g. `timeout`), when known.
        argument: Option<Cow<'static, str>>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `not_found`: a process, context, execution or checkpoint does not exist.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    NotFound {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `file_not_found`: a path does not exist.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    FileNotFound {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `sandbox_not_found`: the sandbox does not exist or has terminated.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SandboxNotFound {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `sandbox_not_ready`: the agent did not become ready in `ready_timeout`.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SandboxNotReady {
        /// The MicroVM state last seen (e.g. `Pending`), when known.
        state: Option<crate::state::SandboxState>,
        /// The reason the control plane gave for that state, when known.
        state_reason: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `sandbox_state`: the sandbox is suspending, resuming or terminating.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SandboxState {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `sandbox_lifetime`: a timeout or max_lifetime above the platform cap.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SandboxLifetime {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `command_exit`: a command exited non-zero.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    CommandExit {
        /// The exit code (128 + signal when killed by a signal).
        exit_code: i32,
        /// What the command wrote to stdout (the kept tail).
        stdout: CapturedText,
        /// What the command wrote to stderr (the kept tail).
        stderr: CapturedText,
        /// How the command ended.
        status: CommandExitStatus,
        /// Output was cut to the kept budget.
        truncated: bool,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `disk_full`: the write needs more free disk than the sandbox has
    /// (E2B: `NotEnoughSpaceException`).
    #[error("{}", meta.message)]
    #[non_exhaustive]
    DiskFull {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `rate_limit`: AWS throttling or the agent's concurrency limits.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    RateLimit {
        /// How long the server asked to wait, when it said.
        retry_after: Option<Duration>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `authentication` (not a sandbox error): credentials or a token were refused.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Authentication {
        /// The AWS proxy refused the sandbox's token (HTTP 403), even after
        /// the SDK minted a fresh one and retried once.
        proxy_rejected: bool,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `quota_exceeded` (not a sandbox error): an account quota is spent.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    QuotaExceeded {
        /// The AWS quota code (e.g. `L-1234ABCD`), when given.
        quota_code: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `capacity` (not a sandbox error): no capacity right now (E2B:
    /// `ServiceBusyException`).
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Capacity {
        /// Which capacity; `None` for AWS `InsufficientCapacityException`.
        code: Option<CapacityCode>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `unimplemented` (not a sandbox error): this sandbox or image cannot do it.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Unimplemented {
        /// The feature asked for.
        feature: Box<str>,
        /// Why it is not available.
        reason: Box<str>,
        /// Where it is documented, when there is a page.
        doc: Option<Box<str>>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `lifecycle_unsupported` (an `unimplemented`): a lifecycle operation
    /// (pause, resume, set_timeout ...) this sandbox cannot do.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    LifecycleUnsupported {
        /// The operation asked for.
        feature: Box<str>,
        /// Why it is not available.
        reason: Box<str>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `build`: a template or image build failed. With a failed step:
    /// which one, its command, its exit code and the end of its log.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Build {
        /// Why, when the failure is not a failed step (or also is one).
        reason: Option<BuildReason>,
        /// The failed step, counted from 1 (BuildKit's `[k/n]`), when known.
        step: Option<u32>,
        /// The failed step's instruction (e.g. `RUN make`), when known.
        /// Captured text: its `Debug` prints only the length.
        command: Option<CapturedText>,
        /// The failed step's exit code, when the log says it.
        exit_code: Option<i32>,
        /// The last lines of the build log (at most 20); empty when there
        /// was no log.
        log_tail: CapturedText,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `template`: an invalid template name or tag, or an image too old
    /// for templates.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Template {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `pool_closed`: taking from, or filling, a pool that is closed or
    /// not started.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    PoolClosed {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `stack`: deploying or reading a CloudFormation stack (`rayito
    /// setup`) failed. The message names the stack and, for a failed
    /// resource, its logical id and status; never CloudFormation's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Stack {
        /// Why: `blocked`, `not_found`, `in_progress` or `failed`.
        code: StackCode,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `sandbox_index`: the optional DynamoDB metadata index failed (the
    /// table is missing, IAM refused, keys stayed unprocessed after
    /// retries). An indexed list never returns a silently incomplete list.
    /// The message never repeats AWS's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SandboxIndex {
        /// The AWS error code (e.g. `ResourceNotFoundException`), or
        /// `UnprocessedKeys` when DynamoDB left keys unprocessed after the
        /// SDK's retries; `None` when no answer came.
        aws_code: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `index_write` (a `sandbox_index`): create with an index could not
    /// write the new sandbox's row. By default the MicroVM it had just
    /// created was terminated (the message says whether it was, or was
    /// kept on failure).
    #[error("{}", meta.message)]
    #[non_exhaustive]
    IndexWrite {
        /// The AWS error code of the failed write; `None` when no answer came.
        aws_code: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `persistence`: a checkpoint or restore of the home directory
    /// failed. Retryable only when `code` is `interrupted` (the stream was
    /// cut; it is never resumed, so running it again is the retry). The
    /// message never holds a bucket, a key or a URI, nor the agent's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Persistence {
        /// Why: `permission_denied`, `internal`, `failed_precondition`,
        /// `unimplemented`, `interrupted`, `resource_exhausted`, or a newer
        /// code of the agent.
        code: PersistenceCode,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `transfer`: an S3-staged transfer (a download link, a large read)
    /// ended failed or cancelled with no more specific kind. The message
    /// starts with `<reason>: ` and never holds a URL, bucket, key or path.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Transfer {
        /// The agent's error code.
        code: TransferCode,
        /// Why, from the closed reason set (`unknown` when the agent gave
        /// no reason this SDK can show).
        reason: TransferReason,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `file_upload` (a `transfer`): the import of an upload ticket or of
    /// a staged large write failed. Same fields and message rules as
    /// `transfer`.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    FileUpload {
        /// The agent's error code.
        code: TransferCode,
        /// Why, from the closed reason set.
        reason: TransferReason,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `secret`: a Secrets Manager call of the secret store, the secret
    /// cache or a `secrets` injection failed. The message never holds the
    /// value nor the secret's name (names are confidential selectors); for
    /// an injection it names the environment variable. AWS's text is never
    /// kept.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Secret {
        /// The AWS error code (e.g. `AccessDeniedException`); `None` when
        /// the failure is the SDK's own (a binary secret, a deletion that
        /// did not finish in time).
        aws_code: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `secret_not_found` (a `secret` and a `not_found`): the secret does
    /// not exist or is scheduled for deletion. Never cached.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    SecretNotFound {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `mount`: an S3 mount of the sandbox failed or did not settle. The
    /// message names the mount path and the code, never the bucket or the
    /// agent's text; a `create` that failed so already terminated the
    /// sandbox (unless kept on failure).
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Mount {
        /// Why: `network`, `iam_denied`, `not_found`, `not_allowed`,
        /// `invalid_path`, `helper_missing`, `timeout`, or a newer class
        /// of the agent.
        code: MountCode,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `volume`: an EFS volume store operation failed, or a volume's state
    /// after the sandbox started. The message never repeats AWS's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Volume {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `volume_mount` (a `volume`): an EFS volume did not mount; a `create`
    /// that failed so already terminated the sandbox (unless kept on
    /// failure). The message names the mount path and the code, never the
    /// helper's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    VolumeMount {
        /// Why: `network`, `iam_denied`, `not_found`, `tls`,
        /// `helper_missing`, `timeout`, `invalid_path`, or a newer class of
        /// the agent.
        code: VolumeMountCode,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `volume_not_found` (a `volume`): no such volume (no access point of
    /// that name, or the access point or the file system is gone).
    #[error("{}", meta.message)]
    #[non_exhaustive]
    VolumeNotFound {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `git_auth` (an `authentication`, not a sandbox error): a git command
    /// of the git helpers needs credentials, the remote refused them, or
    /// the SDK would not send them to a rewritten URL. The message names
    /// the git action, never the URL or the credentials.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    GitAuth {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `git_upstream`: a push or pull found no upstream branch. The message
    /// says how to set one.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    GitUpstream {
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `webhook`: [`LifecycleEvents`](crate::events::LifecycleEvents)
    /// could not read or write its stack (webhooks, events, the stack key),
    /// or `create` with events found the stack not deployed. The message
    /// never repeats a URL, a secret or AWS's text.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Webhook {
        /// The AWS error code (e.g. `AccessDeniedException`); `None` for
        /// the SDK's own failures (the stack not deployed, the local
        /// backend's answers).
        aws_code: Option<String>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
    /// `agent`: an AI agent run (`sandbox.agent()`) failed. The message is
    /// the reason's fixed sentence (docs/errors.md, `agent.*`), with a
    /// short `detail_code` in parentheses at most: never the provider's
    /// text, the prompt or sandbox content.
    #[error("{}", meta.message)]
    #[non_exhaustive]
    Agent {
        /// Why, the session, the exit code, the detail code and the tokens
        /// spent.
        failure: Box<AgentFailure>,
        /// Shared metadata; also the error's `source()`, a sanitized summary.
        #[source]
        meta: Box<ErrorMeta>,
    },
}

impl SandboxError {
    /// Records how many attempts the SDK made before giving up.
    #[must_use]
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.meta_mut().attempts = attempts;
        self
    }

    /// Whether the error is of `kind` or of a kind below it.
    pub fn is(&self, kind: ErrorKind) -> bool {
        self.kind().is_a(kind)
    }

    /// Whether the error is under the `sandbox` root (authentication, quota,
    /// capacity and unimplemented are not).
    pub fn is_sandbox_error(&self) -> bool {
        self.is(ErrorKind::Sandbox)
    }

    /// Whether something asked for does not exist (`not_found`,
    /// `file_not_found`, `sandbox_not_found`).
    pub fn is_not_found(&self) -> bool {
        self.is(ErrorKind::NotFound)
    }

    /// Whether a deadline passed.
    pub fn is_timeout(&self) -> bool {
        self.is(ErrorKind::Timeout)
    }

    /// Whether the same work could plausibly succeed later or on a fresh
    /// sandbox (see [`classify`](Self::classify)).
    pub fn is_retryable(&self) -> bool {
        self.classify().retryable
    }

    /// How long the server asked to wait before a retry, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimit { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The sandbox code of a bare `sandbox` error.
    pub fn sandbox_code(&self) -> Option<&SandboxCode> {
        match self {
            Self::Sandbox { code, .. } => code.as_ref(),
            _ => None,
        }
    }

    /// The code of a `persistence` error.
    pub fn persistence_code(&self) -> Option<&PersistenceCode> {
        match self {
            Self::Persistence { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The reason of a `transfer` or `file_upload` error.
    pub fn transfer_reason(&self) -> Option<&TransferReason> {
        match self {
            Self::Transfer { reason, .. } | Self::FileUpload { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// The code of a `mount` error.
    pub fn mount_code(&self) -> Option<&MountCode> {
        match self {
            Self::Mount { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The code of a `volume_mount` error.
    pub fn volume_mount_code(&self) -> Option<&VolumeMountCode> {
        match self {
            Self::VolumeMount { code, .. } => Some(code),
            _ => None,
        }
    }

    /// What an `agent` error carries (its reason, session, exit code,
    /// detail code and usage).
    pub fn agent_failure(&self) -> Option<&AgentFailure> {
        match self {
            Self::Agent { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// What a caller can do about this error, as data. Never panics.
    ///
    /// For a bare `sandbox` error with a known code, the row of the code is
    /// used (`connection_lost` is retryable, `closed` is not); a
    /// `persistence` error with the code `interrupted` and a `transfer` /
    /// `file_upload` error with the code `unavailable` have their own rows
    /// (retryable); otherwise the row of the kind.
    pub fn classify(&self) -> ErrorInfo {
        match self {
            Self::Sandbox {
                code: Some(code), ..
            } => {
                if let Some(info) = ErrorInfo::for_sandbox_code(code) {
                    return info;
                }
            }
            Self::Persistence { code, .. } => {
                if let Some(info) = ErrorInfo::for_kind_code(self.kind(), code.as_str())
                    && code.is_known()
                {
                    return info;
                }
            }
            Self::Transfer { code, .. } | Self::FileUpload { code, .. } => {
                if let Some(info) = ErrorInfo::for_kind_code(self.kind(), code.as_str())
                    && code.is_known()
                {
                    return info;
                }
            }
            _ => {}
        }
        self.kind().info()
    }
}
