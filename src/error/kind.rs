//! The kind graph and the classification table.
//!
//! Both are data: every predicate (`is_sandbox_error`, `is_not_found`, ...)
//! and every `classify()` answer is read from the tables below, so the
//! hierarchy can only change in one place, and a golden test pins it.

use super::codes::SandboxCode;
use super::{ErrorMeta, SandboxError};

/// `ErrorKind`, `ErrorKind::ALL` and the `kind()`, `meta()` and
/// `meta_mut()` of [`SandboxError`] from one list: every variant of
/// `SandboxError` is named as its kind and holds a `meta`. The matches are
/// exhaustive without a `_` arm, so a variant fails to compile until it is
/// listed here.
macro_rules! kinds {
    ($($(#[$doc:meta])* $kind:ident,)*) => {
        /// Every kind of [`SandboxError`](crate::SandboxError), fieldless.
        ///
        /// Kinds form a graph (a kind may have several parents). The stable string
        /// of a kind ([`ErrorKind::as_str`]) is a public contract: kinds are only
        /// ever added, never renamed.
        #[non_exhaustive]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorKind {
            $($(#[$doc])* $kind,)*
        }

        impl ErrorKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [ErrorKind] = &[$(Self::$kind),*];
        }

        impl SandboxError {
            /// The kind of this error.
            pub fn kind(&self) -> ErrorKind {
                match self {
                    $(Self::$kind { .. } => ErrorKind::$kind,)*
                }
            }

            /// The shared metadata.
            pub fn meta(&self) -> &ErrorMeta {
                match self {
                    $(Self::$kind { meta, .. })|* => meta,
                }
            }

            /// The shared metadata, mutable (the retry layer records attempts).
            pub(crate) fn meta_mut(&mut self) -> &mut ErrorMeta {
                match self {
                    $(Self::$kind { meta, .. })|* => meta,
                }
            }
        }
    };
}

kinds! {
    /// `sandbox`: the root of every sandbox failure.
    Sandbox,
    /// `timeout`: a deadline passed.
    Timeout,
    /// `invalid_argument`: a value was refused.
    InvalidArgument,
    /// `not_found`: a process, context, execution or checkpoint does not exist.
    NotFound,
    /// `file_not_found`: a path does not exist.
    FileNotFound,
    /// `sandbox_not_found`: the sandbox does not exist or has terminated.
    SandboxNotFound,
    /// `sandbox_not_ready`: the agent did not become ready in time.
    SandboxNotReady,
    /// `sandbox_state`: the sandbox is suspending, resuming or terminating.
    SandboxState,
    /// `sandbox_lifetime`: a timeout or lifetime above the platform cap.
    SandboxLifetime,
    /// `command_exit`: a command exited non-zero.
    CommandExit,
    /// `disk_full`: not enough free disk.
    DiskFull,
    /// `rate_limit`: throttled; honour `retry_after`.
    RateLimit,
    /// `authentication`: credentials or a token were refused (not a sandbox error).
    Authentication,
    /// `quota_exceeded`: an account quota is spent (not a sandbox error).
    QuotaExceeded,
    /// `capacity`: AWS has no capacity right now (not a sandbox error).
    Capacity,
    /// `unimplemented`: this sandbox or image cannot do it (not a sandbox error).
    Unimplemented,
    /// `lifecycle_unsupported`: a lifecycle operation this sandbox cannot do.
    LifecycleUnsupported,
    /// `build`: a template or image build failed.
    Build,
    /// `template`: an invalid template name or tag, or an image too old
    /// for templates.
    Template,
    /// `pool_closed`: taking from, or filling, a pool that is closed or
    /// not started.
    PoolClosed,
    /// `stack`: deploying or reading a CloudFormation stack failed.
    Stack,
    /// `sandbox_index`: the optional DynamoDB metadata index failed (the
    /// table is missing, IAM refused, keys stayed unprocessed).
    SandboxIndex,
    /// `index_write`: create could not write the new sandbox's row to the
    /// index.
    IndexWrite,
    /// `persistence`: a checkpoint or restore of the home directory failed.
    Persistence,
    /// `transfer`: an S3-staged transfer failed or was cancelled.
    Transfer,
    /// `file_upload` (a `transfer`): the import of an upload ticket or of a
    /// staged large write failed.
    FileUpload,
    /// `secret`: a Secrets Manager call of the secret store, the secret
    /// cache or a `secrets` injection failed.
    Secret,
    /// `secret_not_found` (a `secret` and a `not_found`): the secret does
    /// not exist or is scheduled for deletion.
    SecretNotFound,
    /// `mount`: an S3 mount of the sandbox failed or did not settle.
    Mount,
    /// `volume`: an EFS volume store operation failed, or a volume's
    /// state after the sandbox started.
    Volume,
    /// `volume_mount` (a `volume`): an EFS volume did not mount.
    VolumeMount,
    /// `volume_not_found` (a `volume`): no such volume.
    VolumeNotFound,
    /// `git_auth` (an `authentication`, not a sandbox error): a git command
    /// of the git helpers failed on credentials.
    GitAuth,
    /// `git_upstream`: a push or pull found no upstream branch.
    GitUpstream,
    /// `webhook`: lifecycle events could not read or write their stack
    /// (webhooks, events, the stack key), or the stack is not deployed.
    Webhook,
    /// `agent`: an AI agent run failed (its `reason` says why).
    Agent,
}

impl ErrorKind {
    /// The stable string of the kind, e.g. `file_not_found`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Timeout => "timeout",
            Self::InvalidArgument => "invalid_argument",
            Self::NotFound => "not_found",
            Self::FileNotFound => "file_not_found",
            Self::SandboxNotFound => "sandbox_not_found",
            Self::SandboxNotReady => "sandbox_not_ready",
            Self::SandboxState => "sandbox_state",
            Self::SandboxLifetime => "sandbox_lifetime",
            Self::CommandExit => "command_exit",
            Self::DiskFull => "disk_full",
            Self::RateLimit => "rate_limit",
            Self::Authentication => "authentication",
            Self::QuotaExceeded => "quota_exceeded",
            Self::Capacity => "capacity",
            Self::Unimplemented => "unimplemented",
            Self::LifecycleUnsupported => "lifecycle_unsupported",
            Self::Build => "build",
            Self::Template => "template",
            Self::PoolClosed => "pool_closed",
            Self::Stack => "stack",
            Self::SandboxIndex => "sandbox_index",
            Self::IndexWrite => "index_write",
            Self::Persistence => "persistence",
            Self::Transfer => "transfer",
            Self::FileUpload => "file_upload",
            Self::Secret => "secret",
            Self::SecretNotFound => "secret_not_found",
            Self::Mount => "mount",
            Self::Volume => "volume",
            Self::VolumeMount => "volume_mount",
            Self::VolumeNotFound => "volume_not_found",
            Self::GitAuth => "git_auth",
            Self::GitUpstream => "git_upstream",
            Self::Webhook => "webhook",
            Self::Agent => "agent",
        }
    }

    /// The kind for a stable string, if it is one this version knows.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    /// The direct parents of this kind (empty for a root).
    pub const fn parents(self) -> &'static [ErrorKind] {
        match self {
            Self::Sandbox
            | Self::Authentication
            | Self::QuotaExceeded
            | Self::Capacity
            | Self::Unimplemented => &[],
            Self::Timeout
            | Self::InvalidArgument
            | Self::NotFound
            | Self::SandboxNotReady
            | Self::SandboxState
            | Self::SandboxLifetime
            | Self::CommandExit
            | Self::DiskFull
            | Self::RateLimit
            | Self::Build
            | Self::Template
            | Self::PoolClosed
            | Self::Stack
            | Self::SandboxIndex
            | Self::Persistence
            | Self::Transfer
            | Self::Secret
            | Self::Mount
            | Self::Volume
            | Self::GitUpstream
            | Self::Webhook
            | Self::Agent => &[Self::Sandbox],
            Self::VolumeMount | Self::VolumeNotFound => &[Self::Volume],
            Self::SecretNotFound => &[Self::Secret, Self::NotFound],
            Self::GitAuth => &[Self::Authentication],
            Self::IndexWrite => &[Self::SandboxIndex],
            Self::FileUpload => &[Self::Transfer],
            Self::FileNotFound | Self::SandboxNotFound => &[Self::NotFound],
            Self::LifecycleUnsupported => &[Self::Unimplemented],
        }
    }

    /// Whether this kind is `ancestor` or descends from it.
    pub fn is_a(self, ancestor: ErrorKind) -> bool {
        self == ancestor || self.parents().iter().any(|p| p.is_a(ancestor))
    }

    /// Whether this kind lies outside the `sandbox` root, so that "any
    /// sandbox error" never swallows it (authentication, quota, capacity,
    /// a missing feature).
    pub fn outside_sandbox_root(self) -> bool {
        !self.is_a(Self::Sandbox)
    }

    /// The classification of this kind ([`ErrorInfo`] for the kind itself;
    /// a bare `sandbox` kind with a code is classified by the code instead,
    /// see [`SandboxError::classify`](crate::SandboxError::classify)).
    pub const fn info(self) -> ErrorInfo {
        let (retryable, larger, summary) = match self {
            Self::Sandbox => (
                false,
                false,
                "something about a sandbox failed; read the message",
            ),
            Self::Timeout => (false, true, "a deadline passed (the scope says which)"),
            Self::InvalidArgument => (
                false,
                false,
                "a value was refused, by the SDK before any call, by the agent or by AWS",
            ),
            Self::NotFound | Self::FileNotFound => {
                (false, false, "the thing asked for does not exist")
            }
            Self::SandboxNotFound => (
                false,
                false,
                "the sandbox does not exist or has terminated; create a new one",
            ),
            Self::SandboxNotReady => (
                true,
                true,
                "the agent did not become ready in `ready_timeout`",
            ),
            Self::SandboxState => (
                true,
                false,
                "the sandbox is suspending, resuming or terminating",
            ),
            Self::SandboxLifetime => (
                false,
                false,
                "timeout or max_lifetime above the platform cap of 28,800 s",
            ),
            Self::CommandExit => (false, false, "a command exited non-zero"),
            Self::DiskFull => (
                false,
                true,
                "the write needs more free disk than the sandbox has",
            ),
            Self::RateLimit => (
                true,
                false,
                "AWS throttling or the agent's concurrency limits; honour `retry_after`",
            ),
            Self::Authentication => (false, false, "credentials or a token were refused"),
            Self::QuotaExceeded => (false, true, "an account quota is spent"),
            Self::Capacity => (
                true,
                false,
                "AWS has no capacity right now (after the SDK's own backoff)",
            ),
            Self::Unimplemented | Self::LifecycleUnsupported => {
                (false, false, "this sandbox or image cannot do it")
            }
            Self::Build => (
                false,
                false,
                "a template or image build failed; `reason` or the failed step says why",
            ),
            Self::Template => (
                false,
                false,
                "an invalid template name or tag, or an image too old for templates",
            ),
            Self::PoolClosed => (
                false,
                false,
                "the pool is closed or not started; start it, or create without the pool",
            ),
            Self::Stack => (
                false,
                false,
                "deploying or reading a CloudFormation stack failed; `code` says why",
            ),
            Self::SandboxIndex => (
                false,
                false,
                "the DynamoDB metadata index failed; `aws_code` says why, and an indexed list is never returned incomplete",
            ),
            Self::IndexWrite => (
                false,
                false,
                "create could not write the sandbox's index row; its MicroVM was terminated unless kept on failure",
            ),
            Self::Persistence => (
                false,
                false,
                "a checkpoint or restore of the home directory failed; `code` says why",
            ),
            Self::Transfer => (
                false,
                false,
                "an S3-staged transfer failed or was cancelled; `reason` says why",
            ),
            Self::FileUpload => (
                false,
                false,
                "the import of an upload ticket or of a staged write failed; `reason` says why",
            ),
            Self::Secret => (
                false,
                false,
                "a Secrets Manager call of the secret store, cache or injection failed; `aws_code` says why",
            ),
            Self::SecretNotFound => (
                false,
                false,
                "the secret does not exist or is scheduled for deletion",
            ),
            Self::Mount => (
                false,
                false,
                "an S3 mount failed or did not settle; `code` says why, and create terminated the sandbox unless kept on failure",
            ),
            Self::Volume => (
                false,
                false,
                "an EFS volume store operation failed, or a volume's state after start",
            ),
            Self::VolumeMount => (
                false,
                false,
                "an EFS volume did not mount; `code` says why, and create terminated the sandbox unless kept on failure",
            ),
            Self::VolumeNotFound => (
                false,
                false,
                "the volume does not exist (no access point of that name, or its file system is gone)",
            ),
            Self::GitAuth => (
                false,
                false,
                "git needs credentials, or the remote refused them",
            ),
            Self::GitUpstream => (
                false,
                false,
                "push or pull found no upstream branch; name one or set it",
            ),
            Self::Webhook => (
                false,
                false,
                "lifecycle events could not read or write their stack (webhooks, events, the stack key), or the stack is not deployed; `aws_code` says why",
            ),
            Self::Agent => (
                false,
                false,
                "an AI agent run failed; `reason` says why (a limit, an abort, the model, the runtime, another run in progress)",
            ),
        };
        ErrorInfo {
            kind: self.as_str(),
            retryable,
            retry_with_larger_limits: larger,
            summary,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a caller can do about a failure, as plain data (see
/// [`SandboxError::classify`](crate::SandboxError::classify)).
///
/// `kind` is the kind string, except for a bare `sandbox` error with a known
/// [`SandboxCode`]: then it is the code (`connection_lost`, `service_error`,
/// ...), because the code, not the kind, decides what to do. The two sets
/// of strings never overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ErrorInfo {
    /// The classification kind (an [`ErrorKind`] string or a [`SandboxCode`] string).
    pub kind: &'static str,
    /// The failure was environmental: the same work could plausibly succeed
    /// later or on a fresh sandbox.
    pub retryable: bool,
    /// A larger limit (timeout, ready_timeout, disk, quota) could let the
    /// work finish; granting it is the caller's decision.
    pub retry_with_larger_limits: bool,
    /// One line saying what the kind means.
    pub summary: &'static str,
}

impl ErrorInfo {
    /// The JSON object `{kind, retryable, retry_with_larger_limits, summary}`,
    /// as text (the same as serializing the struct with serde).
    pub fn to_json(&self) -> String {
        // Two strings and two booleans: writing them cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The classification of a known sandbox code, `None` for an unknown one.
    pub fn for_sandbox_code(code: &SandboxCode) -> Option<ErrorInfo> {
        let (retryable, larger, summary) = match code {
            SandboxCode::ConnectionLost => (
                true,
                false,
                "the agent or the control plane stopped answering (a reset, a connection never established once its retries are spent, proxy 429/502/503/504)",
            ),
            SandboxCode::ServiceError => (
                true,
                false,
                "AWS answered with a 5xx fault (InternalServer, Service)",
            ),
            SandboxCode::KernelNotReady => {
                (true, false, "the code kernel is starting or restarting")
            }
            SandboxCode::AgentVmLost => (false, false, "the MicroVM behind a session disappeared"),
            SandboxCode::Cancelled => (false, false, "the caller cancelled the call"),
            SandboxCode::Closed => (
                false,
                false,
                "the sandbox handle was already killed or closed",
            ),
            SandboxCode::ProtocolViolation => {
                (false, false, "the agent sent something the SDK refuses")
            }
            SandboxCode::OutputTruncated => (false, true, "output exceeded the kept budget"),
            SandboxCode::Internal => (false, false, "an invariant of the SDK or agent broke"),
            SandboxCode::PermissionDenied => (
                false,
                false,
                "the sandbox's user may not use a path, cwd or user the caller passed",
            ),
            SandboxCode::KernelFailed => (
                false,
                false,
                "the agent runs but its code kernel cannot start; waiting cannot help",
            ),
            SandboxCode::Unknown(_) => return None,
        };
        Some(ErrorInfo {
            kind: static_code_str(code)?,
            retryable,
            retry_with_larger_limits: larger,
            summary,
        })
    }

    /// The classification of a kind whose `code` field changes it: a
    /// `persistence` error with the code `interrupted` and a `transfer` or
    /// `file_upload` error with the code `unavailable` are retryable (the
    /// stream or S3 went away; the same work can succeed when run again).
    /// `None` for every other pair: the kind's own row applies.
    pub(crate) fn for_kind_code(kind: ErrorKind, code: &str) -> Option<ErrorInfo> {
        KIND_CODE_ROWS
            .iter()
            .find(|(k, c, _)| *k == kind && *c == code)
            .map(|(_, _, info)| *info)
    }

    /// Every classification row: each kind, then each known sandbox code.
    pub fn all() -> Vec<ErrorInfo> {
        let kinds = ErrorKind::ALL.iter().map(|k| k.info());
        let codes = SandboxCode::VALUES
            .iter()
            .filter_map(|t| Self::for_sandbox_code(&SandboxCode::from(*t)));
        kinds.chain(codes).collect()
    }
}

/// The rows of [`ErrorInfo::for_kind_code`], in documentation order
/// (docs/errors.md, "Codes that change `classify()`").
pub(crate) const KIND_CODE_ROWS: &[(ErrorKind, &str, ErrorInfo)] = &[
    (
        ErrorKind::Persistence,
        "interrupted",
        ErrorInfo {
            kind: "persistence",
            retryable: true,
            retry_with_larger_limits: false,
            summary: "the checkpoint or restore stream was cut before it finished (a suspend, the proxy, the connection); it was not resumed, run it again",
        },
    ),
    (
        ErrorKind::Transfer,
        "unavailable",
        ErrorInfo {
            kind: "transfer",
            retryable: true,
            retry_with_larger_limits: false,
            summary: "S3 did not answer the agent during the transfer; start it again later",
        },
    ),
    (
        ErrorKind::FileUpload,
        "unavailable",
        ErrorInfo {
            kind: "file_upload",
            retryable: true,
            retry_with_larger_limits: false,
            summary: "S3 did not answer the agent during the upload's import; upload again later",
        },
    ),
];

/// The `'static` token of a known code.
fn static_code_str(code: &SandboxCode) -> Option<&'static str> {
    SandboxCode::VALUES
        .iter()
        .copied()
        .find(|t| *t == code.as_str() && code.is_known())
}
