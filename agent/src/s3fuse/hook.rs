//! The helper as its own tests reach it (`rayito_agent::s3fuse_for_tests`,
//! doc-hidden): the same [`super::serve`], with public types. Not an API.

use std::os::fd::OwnedFd;

use crate::persist::LocalS3;

/// What one mount serves (see the section's `FuseMountSpec`).
#[derive(Clone, Debug, Default)]
pub struct TestMountSpec {
    /// The bucket.
    pub bucket: String,
    /// The key prefix (empty: the whole bucket).
    pub prefix: String,
    /// Every write refused with EROFS.
    pub read_only: bool,
    /// An existing object may be replaced (opened with O_TRUNC).
    pub allow_overwrite: bool,
    /// unlink deletes the object.
    pub allow_delete: bool,
    /// Owner of every file and directory.
    pub uid: u32,
    /// Group of every file and directory.
    pub gid: u32,
}

/// A served mount.
#[derive(Debug)]
pub struct TestDaemon(super::FuseDaemon);

impl TestDaemon {
    /// Whether the session still serves.
    pub fn is_alive(&self) -> bool {
        self.0.is_alive()
    }

    /// Stops serving (bounded).
    pub fn stop(self) {
        self.0.stop();
    }
}

/// [`super::serve`] on `fuse` (a `/dev/fuse` descriptor already mounted).
///
/// # Errors
/// The failure's class (`iam_denied`, `not_found`, `network`, ...).
pub async fn serve(
    fuse: OwnedFd,
    spec: TestMountSpec,
    s3: LocalS3,
) -> Result<TestDaemon, &'static str> {
    let spec = super::FuseMountSpec {
        bucket: spec.bucket,
        prefix: spec.prefix,
        read_only: spec.read_only,
        allow_overwrite: spec.allow_overwrite,
        allow_delete: spec.allow_delete,
        uid: spec.uid,
        gid: spec.gid,
    };
    super::serve(fuse, spec, s3)
        .await
        .map(TestDaemon)
        .map_err(super::MountFailure::class)
}
