//! S3 mounts (issue 46; docs/mounts.md): a bucket, or a prefix of it,
//! mounted into the sandbox's file system by its agent (FUSE), so sandbox
//! code reads and writes the objects in place, never a copy.
//!
//! - [`S3Mount`] (`spec`): the bucket, the prefix and the write flags;
//!   every check of `create`, before any call.
//! - `steps`: [`crate::SandboxBuilder::mount`], the checks (the mount
//!   paths' shared rules in `crate::mount_path`, the image's variant), the
//!   `s3_mounts` section sent in the one Configure once the sandbox is
//!   ready (terminated on failure unless kept), the recovery on `connect`.
//! - `section`: the Configure section and what the agent's answers mean
//!   for mounts ([`crate::SandboxError::Mount`] with its code, or
//!   `Unimplemented` naming `mounts`).
//! - `view`: [`crate::Sandbox::mounts`], [`MountStatus`], [`MountState`]
//!   (one ConfigureStatus per read).
//!
//! Buckets and prefixes are the caller's data: no message, `Debug` of a
//! handle or log line of this module holds one (a mount path, which the
//! caller chose, may be named).

#[cfg(test)]
mod seam_tests;
mod section;
mod spec;
mod steps;
#[cfg(test)]
mod tests;
mod view;

pub use spec::S3Mount;
pub(crate) use steps::Steps;
#[cfg(feature = "efs")]
pub(crate) use steps::mount_paths;
pub use view::{MountState, MountStatus, MountsView};
