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
//!   section sent in the one Configure once the sandbox is ready
//!   (`section`; terminated on failure unless kept), the recovery on
//!   `connect`.
//! - `view`: [`crate::Sandbox::volumes`], [`VolumeStatus`],
//!   [`VolumeState`] (one ConfigureStatus per read).
//!
//! The AWS side (docs/volumes.md):
//! - [`VolumeStore`] (`store`): the volumes (access points) of a file
//!   system, with the caller's credentials; `store_errors` says what each
//!   EFS failure means.
//! - [`EfsVolumes`] (`stack`): the efs-volumes stack in an existing VPC,
//!   its template generated in `template`, and the read-only network check
//!   it runs first (`network`).
//!
//! Ids are the caller's resource names: no message of this module echoes
//! one (a mount path, which the caller chose, may be named).
//!
//! Only with the `efs` cargo feature.

mod network;
#[cfg(test)]
mod seam_tests;
mod section;
mod spec;
pub(crate) mod stack;
mod steps;
mod store;
mod store_errors;
mod targets;
mod template;
#[cfg(test)]
mod tests;
mod view;

pub use network::{EfsNetworkReport, FindingLevel, NetworkFinding};
pub use spec::{EfsVolume, MAX_VOLUMES};
pub use stack::{
    DEFAULT_CONNECTOR_NAME, DEFAULT_STACK_NAME, EfsDeployOptions, EfsStackStatus, EfsVolumes,
};
pub(crate) use steps::Steps;
pub use store::{
    LIST_VISIBILITY_BUDGET, ROOT_DIRECTORY_PREFIX, VOLUME_GID, VOLUME_TAG_KEY, VOLUME_UID,
    VolumeInfo, VolumeStore,
};
pub use template::OUTPUTS as STACK_OUTPUTS;
pub use view::{VolumeState, VolumeStatus, VolumesView};
