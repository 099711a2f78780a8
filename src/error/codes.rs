//! Closed code lists carried by error variants.
//!
//! Each list is an enum of the tokens this SDK knows plus an `Unknown` arm
//! that keeps the original token, because the agent (or a newer SDK writing
//! the wire form) may send codes this version has never heard of. Parsing never
//! fails. Match a newer token with a guard:
//!
//! ```
//! use rayito::error::SandboxCode;
//! let code = SandboxCode::from("vm_frozen");
//! match code {
//!     SandboxCode::ConnectionLost => {}
//!     other if other.as_str() == "vm_frozen" => {}
//!     _ => {}
//! }
//! ```

use std::fmt;

use crate::state::SandboxState;
pub use crate::state::UnknownValue;

/// The most characters of a token an error keeps (an agent's code or
/// status, a state name).
pub(crate) const MAX_TOKEN_CHARS: usize = 64;

/// `token` as an error may keep it: redacted like server text, control
/// characters as spaces, trimmed, at most [`MAX_TOKEN_CHARS`] characters.
/// Cleaning a clean token changes nothing.
pub(crate) fn clean_token(token: &str) -> String {
    super::map::redact::sanitize_remote_text(token, MAX_TOKEN_CHARS)
}

/// Parsing a state keeps an unknown token cleaned as an error keeps it
/// (here, beside the cleaning, so that `state` needs nothing of `error`).
impl From<&str> for SandboxState {
    fn from(token: &str) -> Self {
        let token = clean_token(token);
        match token.as_str() {
            "PENDING" => Self::Pending,
            "RUNNING" => Self::Running,
            "SUSPENDING" => Self::Suspending,
            "SUSPENDED" => Self::Suspended,
            "TERMINATING" => Self::Terminating,
            "TERMINATED" => Self::Terminated,
            _ => Self::Unknown(UnknownValue::new(token)),
        }
    }
}

macro_rules! code_list {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $token:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[non_exhaustive]
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A token this version of the SDK does not know; the token is kept.
            Unknown(UnknownValue),
        }

        impl $name {
            /// Every token this version knows, in declaration order.
            pub const VALUES: &'static [&'static str] = &[$($token),+];

            /// The wire token.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $token, )+
                    Self::Unknown(value) => value.as_str(),
                }
            }

            /// Whether this is a token the SDK knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl From<&str> for $name {
            /// Parses a token; never fails. The token is cleaned first
            /// (redacted, one line, at most 64 characters), so a code an
            /// agent chooses can never carry a secret or a megabyte.
            fn from(token: &str) -> Self {
                let token = clean_token(token);
                match token.as_str() {
                    $( $token => Self::$variant, )+
                    _ => Self::Unknown(UnknownValue::new(token)),
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;
            fn from_str(token: &str) -> Result<Self, Self::Err> {
                Ok(Self::from(token))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let token = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Ok(Self::from(token.as_ref()))
            }
        }
    };
}

code_list! {
    /// Why a bare [`SandboxError::Sandbox`](crate::SandboxError::Sandbox) happened.
    SandboxCode {
        /// The MicroVM behind a session disappeared.
        AgentVmLost => "agent_vm_lost",
        /// The code kernel is starting or restarting.
        KernelNotReady => "kernel_not_ready",
        /// The agent or the control plane stopped answering.
        ConnectionLost => "connection_lost",
        /// AWS answered with a 5xx fault.
        ServiceError => "service_error",
        /// The caller cancelled the call.
        Cancelled => "cancelled",
        /// The sandbox handle was already killed or closed.
        Closed => "closed",
        /// The agent sent something the SDK refuses.
        ProtocolViolation => "protocol_violation",
        /// Output exceeded the kept budget.
        OutputTruncated => "output_truncated",
        /// An invariant of the SDK or agent broke.
        Internal => "internal",
        /// The sandbox's user may not use a path (or cwd, or run as a user)
        /// the caller passed; the caller's credentials are fine.
        PermissionDenied => "permission_denied",
        /// The agent runs but its code kernel cannot start (for example an
        /// `envs` PATH override hides the interpreter); waiting cannot help.
        KernelFailed => "kernel_failed",
    }
}

impl SandboxCode {
    /// The code of an error whose kind this SDK does not know (from a newer
    /// SDK's wire form): always `Unknown`, keeping the kind. A kind that
    /// spells a known code (`connection_lost`) is kept as `kind:<kind>`, so
    /// the kind string can never choose a code, and with it retryability.
    pub(crate) fn of_unknown_kind(kind: &str) -> Self {
        let token = clean_token(kind);
        if Self::VALUES.contains(&token.as_str()) {
            Self::Unknown(UnknownValue::new(format!("kind:{token}")))
        } else {
            Self::Unknown(UnknownValue::new(token))
        }
    }
}

code_list! {
    /// Which deadline a [`SandboxError::Timeout`](crate::SandboxError::Timeout) hit.
    TimeoutScope {
        /// An RPC or AWS call deadline.
        Request => "request",
        /// The agent ended a command at its timeout.
        Command => "command",
        /// A `run_code` cell hit its timeout.
        Execution => "execution",
        /// The sandbox's own lifetime was reached (`sandbox_timeout`).
        Sandbox => "sandbox",
        /// Pause or resume did not settle in time.
        StateWait => "state_wait",
    }
}

code_list! {
    /// Which capacity ran out, when the source says so (`None` for AWS
    /// `InsufficientCapacityException`).
    CapacityCode {
        /// Reserved: the agent itself is at capacity.
        AgentCapacity => "agent_capacity",
    }
}

code_list! {
    /// How a command ended, as the agent's `EndEvent.status` says.
    CommandExitStatus {
        /// The process exited on its own.
        Exited => "exited",
        /// The process died by a signal (`exit_code = 128 + signal`).
        Signaled => "signaled",
    }
}

code_list! {
    /// Why a [`SandboxError::Build`](crate::SandboxError::Build) failed,
    /// when it is not (only) a failed step.
    BuildReason {
        /// The SDK's 10-slot build guard was full, or AWS answered
        /// `ServiceQuotaExceededException` (10 concurrent builds per account).
        BuildQuota => "build_quota",
        /// AWS refused the image create or update for another reason.
        AwsError => "aws_error",
        /// The built image's ready hook answered HTTP 4xx.
        ReadyClientError => "ready_client_error",
        /// The built image's ready hook answered HTTP 5xx.
        ReadyServerError => "ready_server_error",
        /// The build did not settle in time (it continues on the service).
        BuildTimeout => "build_timeout",
        /// The base image's Dockerfile has no `CMD` / `ENTRYPOINT` line.
        BaseImageMissingEntrypoint => "base_image_missing_entrypoint",
        /// The base image's code artifact is not an `s3://` URI.
        BaseImageNotS3 => "base_image_not_s3",
        /// The base image's code artifact is missing from S3.
        BaseImageMissingArtifact => "base_image_missing_artifact",
        /// A `copy` source resolves outside the build context.
        ContextPathOutside => "context_path_outside",
        /// A `copy` source does not exist in the build context.
        ContextPathMissing => "context_path_missing",
    }
}

code_list! {
    /// Why a [`SandboxError::Stack`](crate::SandboxError::Stack) failed.
    StackCode {
        /// The stack is in a state CloudFormation cannot update from (a
        /// failed create, a failed rollback); it must be deleted first.
        Blocked => "blocked",
        /// The stack does not exist.
        NotFound => "not_found",
        /// The stack is being changed by another operation.
        InProgress => "in_progress",
        /// CloudFormation refused the change or a resource of it failed.
        Failed => "failed",
    }
}

code_list! {
    /// Why a [`SandboxError::Mount`](crate::SandboxError::Mount) (an S3
    /// mount) failed or did not settle: the agent's class for the mount,
    /// or `timeout` when the SDK stopped waiting.
    MountCode {
        /// The mount helper could not reach S3 (DNS, routes, egress policy).
        Network => "network",
        /// S3 or the credentials refused the sandbox's execution role.
        IamDenied => "iam_denied",
        /// The bucket or the prefix does not exist.
        NotFound => "not_found",
        /// The bucket is not in the image's allowlist
        /// (`RAYITO_ALLOWED_MOUNT_BUCKETS`), or a path was asked twice.
        NotAllowed => "not_allowed",
        /// The agent refused the mount path.
        InvalidPath => "invalid_path",
        /// The image has no mount helper (or no `/dev/fuse`).
        HelperMissing => "helper_missing",
        /// The mount did not settle in time (the agent's bound or the SDK's).
        Timeout => "timeout",
    }
}

code_list! {
    /// Why a [`SandboxError::VolumeMount`](crate::SandboxError::VolumeMount)
    /// (an EFS volume) did not mount: the agent's class for the volume, or
    /// `timeout` when the SDK stopped waiting.
    VolumeMountCode {
        /// The mount target could not be reached (security groups, the
        /// egress connector, routes).
        Network => "network",
        /// EFS refused the sandbox's execution role (IAM through the
        /// access point).
        IamDenied => "iam_denied",
        /// The file system, the access point or the mount target does not
        /// exist.
        NotFound => "not_found",
        /// The TLS tunnel to the mount target could not be set up.
        Tls => "tls",
        /// The image has no EFS mount helper (amazon-efs-utils).
        HelperMissing => "helper_missing",
        /// The volume did not mount in time (the agent's bound or the SDK's).
        Timeout => "timeout",
        /// The agent refused the mount path.
        InvalidPath => "invalid_path",
    }
}

code_list! {
    /// Why a [`SandboxError::Persistence`](crate::SandboxError::Persistence)
    /// (a checkpoint or restore of the home directory) failed.
    PersistenceCode {
        /// S3 or the credentials refused the agent: the sandbox has no
        /// execution role, or the role may not use the prefix.
        PermissionDenied => "permission_denied",
        /// The operation failed inside the sandbox: the network, an S3 5xx,
        /// the archive, a checksum, a full disk.
        Internal => "internal",
        /// The operation could not start: another checkpoint or restore is
        /// running in the sandbox, or the region is unknown.
        FailedPrecondition => "failed_precondition",
        /// The agent in this sandbox has no checkpoint / restore.
        Unimplemented => "unimplemented",
        /// The stream was cut (a suspend, the proxy, the connection) before
        /// it finished; it is not resumed. The only retryable code.
        Interrupted => "interrupted",
        /// The agent ran out of a resource (disk reserve, memory, its
        /// limit of concurrent operations).
        ResourceExhausted => "resource_exhausted",
    }
}

code_list! {
    /// The agent's error code of an S3-staged transfer that failed or was
    /// cancelled ([`SandboxError::Transfer`](crate::SandboxError::Transfer),
    /// [`SandboxError::FileUpload`](crate::SandboxError::FileUpload)).
    TransferCode {
        /// The object or the file does not meet a condition (too large,
        /// shrank while read, checksum mismatch).
        FailedPrecondition => "failed_precondition",
        /// S3 did not answer.
        Unavailable => "unavailable",
        /// The transfer was cancelled.
        Cancelled => "cancelled",
        /// The agent failed otherwise.
        Internal => "internal",
        /// The agent sent the code `unknown` (gRPC UNKNOWN). Not the same
        /// as a token this SDK does not know, which is [`Self::Unknown`].
        GrpcUnknown => "unknown",
    }
}

code_list! {
    /// Why an S3-staged transfer failed: the agent's reason, the text
    /// before the colon of its failure message (a bare cancel is
    /// `cancelled`). A reason that is not a plain token (`[a-z0-9_]`, at
    /// most 32 characters) is kept as `unknown`, never as sent: the text
    /// before a colon of a message without a reason could be a path or a
    /// URL.
    TransferReason {
        /// The transfer's URLs or its deadline expired (`deadline_exceeded`).
        Expired => "expired",
        /// The object is larger than the transfer allows.
        TooLarge => "too_large",
        /// The file got smaller while it was being exported.
        FileShrank => "file_shrank",
        /// The bytes do not match their sha256.
        ChecksumMismatch => "checksum_mismatch",
        /// S3 refused the agent's request (`permission_denied`).
        S3Denied => "s3_denied",
        /// S3 did not answer (`unavailable`).
        S3Unavailable => "s3_unavailable",
        /// The write would eat into the sandbox's disk reserve.
        DiskReserve => "disk_reserve",
        /// The sandbox's disk is full.
        DiskFull => "disk_full",
        /// The transfer was cancelled.
        Cancelled => "cancelled",
    }
}

/// Which persistence operation failed (it names the operation in the
/// message of a [`SandboxError::Persistence`](crate::SandboxError::Persistence)).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PersistenceOp {
    /// `checkpoint`: archiving the home directory to S3.
    Checkpoint,
    /// `restore`: extracting a checkpoint into the home directory.
    Restore,
}

impl PersistenceOp {
    /// `checkpoint` or `restore`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Checkpoint => "checkpoint",
            Self::Restore => "restore",
        }
    }

    /// The SDK's name for the call (`persistence.checkpoint`), as other
    /// messages name a call.
    pub(crate) const fn feature(self) -> &'static str {
        match self {
            Self::Checkpoint => "persistence.checkpoint",
            Self::Restore => "persistence.restore",
        }
    }
}

impl fmt::Display for PersistenceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way an S3-staged transfer moves bytes: it decides between
/// [`SandboxError::FileUpload`](crate::SandboxError::FileUpload) (import)
/// and [`SandboxError::Transfer`](crate::SandboxError::Transfer) (export).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferDirection {
    /// Into the sandbox: an upload ticket or a staged large write.
    Import,
    /// Out of the sandbox: a download link or a staged large read.
    Export,
}

impl TransferDirection {
    /// `import` or `export`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Import => "import",
            Self::Export => "export",
        }
    }

    /// The word a message uses: `upload` or `download`.
    pub(crate) const fn noun(self) -> &'static str {
        match self {
            Self::Import => "upload",
            Self::Export => "download",
        }
    }
}

impl fmt::Display for TransferDirection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gRPC status code, our own copy so that no `tonic` type appears in the
/// public API. All 17 codes of the gRPC specification.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GrpcCode {
    /// `OK` (0).
    Ok,
    /// `CANCELLED` (1).
    Cancelled,
    /// `UNKNOWN` (2).
    Unknown,
    /// `INVALID_ARGUMENT` (3).
    InvalidArgument,
    /// `DEADLINE_EXCEEDED` (4).
    DeadlineExceeded,
    /// `NOT_FOUND` (5).
    NotFound,
    /// `ALREADY_EXISTS` (6).
    AlreadyExists,
    /// `PERMISSION_DENIED` (7).
    PermissionDenied,
    /// `RESOURCE_EXHAUSTED` (8).
    ResourceExhausted,
    /// `FAILED_PRECONDITION` (9).
    FailedPrecondition,
    /// `ABORTED` (10).
    Aborted,
    /// `OUT_OF_RANGE` (11).
    OutOfRange,
    /// `UNIMPLEMENTED` (12).
    Unimplemented,
    /// `INTERNAL` (13).
    Internal,
    /// `UNAVAILABLE` (14).
    Unavailable,
    /// `DATA_LOSS` (15).
    DataLoss,
    /// `UNAUTHENTICATED` (16).
    Unauthenticated,
}

impl GrpcCode {
    /// All codes, in numeric order.
    pub const ALL: &'static [GrpcCode] = &[
        Self::Ok,
        Self::Cancelled,
        Self::Unknown,
        Self::InvalidArgument,
        Self::DeadlineExceeded,
        Self::NotFound,
        Self::AlreadyExists,
        Self::PermissionDenied,
        Self::ResourceExhausted,
        Self::FailedPrecondition,
        Self::Aborted,
        Self::OutOfRange,
        Self::Unimplemented,
        Self::Internal,
        Self::Unavailable,
        Self::DataLoss,
        Self::Unauthenticated,
    ];

    /// The canonical upper-case name, e.g. `NOT_FOUND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Cancelled => "CANCELLED",
            Self::Unknown => "UNKNOWN",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Self::NotFound => "NOT_FOUND",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::FailedPrecondition => "FAILED_PRECONDITION",
            Self::Aborted => "ABORTED",
            Self::OutOfRange => "OUT_OF_RANGE",
            Self::Unimplemented => "UNIMPLEMENTED",
            Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
            Self::DataLoss => "DATA_LOSS",
            Self::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The numeric code of the gRPC specification.
    pub const fn as_i32(self) -> i32 {
        match self {
            Self::Ok => 0,
            Self::Cancelled => 1,
            Self::Unknown => 2,
            Self::InvalidArgument => 3,
            Self::DeadlineExceeded => 4,
            Self::NotFound => 5,
            Self::AlreadyExists => 6,
            Self::PermissionDenied => 7,
            Self::ResourceExhausted => 8,
            Self::FailedPrecondition => 9,
            Self::Aborted => 10,
            Self::OutOfRange => 11,
            Self::Unimplemented => 12,
            Self::Internal => 13,
            Self::Unavailable => 14,
            Self::DataLoss => 15,
            Self::Unauthenticated => 16,
        }
    }

    /// The code for a number; numbers outside 0..=16 are `UNKNOWN`, as the
    /// gRPC specification says a client must treat them.
    pub fn from_i32(code: i32) -> Self {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.as_i32() == code)
            .unwrap_or(Self::Unknown)
    }

    /// The code for a canonical name (`NOT_FOUND`), if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Captured command output kept in an error.
///
/// Its `Debug` prints only the length: output may hold anything the command
/// printed (environment values included), and `Debug` output ends up in logs.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
// A thin pointer, for the same size reason as `UnknownValue`.
#[allow(clippy::box_collection)]
pub struct CapturedText(Box<String>);

impl CapturedText {
    /// Wraps text.
    pub fn new(text: impl Into<String>) -> Self {
        Self(Box::new(text.into()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Takes the text out.
    pub fn into_string(self) -> String {
        *self.0
    }
}

impl std::ops::Deref for CapturedText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for CapturedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CapturedText({} bytes)", self.0.len())
    }
}

impl PartialEq<str> for CapturedText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CapturedText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use rayito_proto::tokens::end_status;

    use super::CommandExitStatus;

    /// The statuses a `CommandExit` keeps are the agent's end statuses
    /// (spelled as literals above because the list is a `match`).
    #[test]
    fn command_exit_statuses_are_the_agents_end_statuses() {
        assert_eq!(CommandExitStatus::Exited.as_str(), end_status::EXITED);
        assert_eq!(CommandExitStatus::Signaled.as_str(), end_status::SIGNALED);
    }
}
