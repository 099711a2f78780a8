//! The local backend's S3 mount helper: a FUSE file system over one bucket
//! prefix, served in the agent's own process on a `/dev/fuse` descriptor the
//! S3 mounts section (`crate::s3_mounts`) has already mounted inside the
//! sandbox's mount namespace. On a MicroVM the same section runs `mount-s3`
//! instead; this is what the local backend has in its place (never a copy:
//! every read and write goes to the bucket).
//!
//! INTERFACE STUB (session 20): the body of [`serve`] is written by the
//! `s3fuse` part; the section calls only what is declared here.

use std::os::fd::OwnedFd;

use crate::persist::LocalS3;

/// What one mount serves: a bucket prefix and what it lets the sandbox do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FuseMountSpec {
    /// The bucket (never logged).
    pub bucket: String,
    /// The key prefix, relative to the bucket, without a leading `/`
    /// (empty: the whole bucket; never logged).
    pub prefix: String,
    /// Every write refused with EROFS.
    pub read_only: bool,
    /// Opening an existing object for writing (truncating it) allowed.
    pub allow_overwrite: bool,
    /// unlink (DeleteObject) allowed; refused with EPERM otherwise.
    pub allow_delete: bool,
    /// The owner every file and directory is shown with (the sandbox's
    /// host uid and gid, seen as 1000 inside it).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
}

/// Why a mount could not be served: one of the section's closed classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // INTERFACE STUB: the s3fuse part uses every variant.
pub(crate) enum MountFailure {
    /// S3 could not be reached.
    Network,
    /// S3 refused the credentials (403).
    IamDenied,
    /// No such bucket.
    NotFound,
    /// The first answer did not come within the bound.
    Timeout,
    /// The helper could not start.
    HelperMissing,
    /// Anything else.
    Unknown,
}

impl MountFailure {
    /// The section's error class.
    #[allow(dead_code)] // INTERFACE STUB.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::IamDenied => "iam_denied",
            Self::NotFound => "not_found",
            Self::Timeout => "timeout",
            Self::HelperMissing => "helper_missing",
            Self::Unknown => "unknown",
        }
    }
}

/// A served mount. Dropping it stops serving (the caller detaches the
/// mount first).
#[derive(Debug)]
pub(crate) struct FuseDaemon {
    _private: (),
}

impl FuseDaemon {
    /// Whether the session still serves requests (false once the kernel
    /// ended it or its thread died): the section's `/resume` check.
    #[allow(dead_code)] // INTERFACE STUB.
    pub(crate) fn is_alive(&self) -> bool {
        false
    }

    /// Stops serving and waits (bounded) for the session's thread.
    #[allow(dead_code)] // INTERFACE STUB.
    pub(crate) fn stop(self) {}
}

/// Checks that `spec.bucket` answers with `s3`'s key (one bounded
/// request), then serves the FUSE session on `fuse` on a thread of its own
/// and returns at once.
///
/// # Errors
/// The class of the check's failure.
#[allow(dead_code)] // INTERFACE STUB.
pub(crate) async fn serve(
    fuse: OwnedFd,
    spec: FuseMountSpec,
    s3: LocalS3,
) -> Result<FuseDaemon, MountFailure> {
    let _ = (fuse, spec, s3);
    Err(MountFailure::HelperMissing)
}
