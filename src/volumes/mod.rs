//! EFS volumes (issue 46; docs/volumes.md): an EFS file system mounted into
//! a sandbox through an access point, shared by every sandbox that mounts
//! it and outliving them all. Experimental, as in the reference.
//!
//! The sandbox side:
//! - [`EfsVolume`] (`spec`): the file system, the access point and the
//!   options; every check of `create`, in the reference's order, before any
//!   call.
//! - `steps`: [`crate::SandboxBuilder::volume`], the checks, the mount
//!   target lookup before RunMicrovm (`targets`), the `efs_volumes`
//!   section applied once the sandbox is ready (`section`; terminated on
//!   failure unless kept), the recovery on `connect`.
//! - `view`: [`crate::Sandbox::volumes`], [`VolumeStatus`],
//!   [`VolumeState`] (one ConfigureStatus per read).
//!
//! Ids are the caller's resource names: no message of this module echoes
//! one (a mount path, which the caller chose, may be named).
//!
//! Only with the `efs` cargo feature.

#[cfg(test)]
mod seam_tests;
mod section;
mod spec;
mod steps;
mod targets;
#[cfg(test)]
mod tests;
mod view;
mod shim;

pub use spec::{EfsVolume, MAX_VOLUMES};
pub(crate) use steps::Steps;
pub use view::{VolumeState, VolumeStatus, VolumesView};
