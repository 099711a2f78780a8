//! `sandbox.volumes()`: each volume's state as the agent reports it, one
//! ConfigureStatus per read (a volume can degrade after a resume, so
//! nothing is cached).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;

/// Where a volume stands in the sandbox (the agent's states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VolumeState {
    /// Asked for, not yet being mounted (also any state this SDK does not
    /// know).
    Requested,
    /// Being mounted.
    Mounting,
    /// Mounted: the only state in which the volume is usable.
    Mounted,
    /// Mounted but unhealthy after a resume (credentials expired, the
    /// mount target unreachable, ...: see the last error class).
    Degraded,
    /// Being mounted again after a resume.
    Remounting,
    /// Unmounted.
    Unmounted,
    /// The mount failed (see the last error class).
    Failed,
}

impl VolumeState {
    fn from_wire(state: pb::EfsVolumeState) -> Self {
        match state {
            pb::EfsVolumeState::Mounting => Self::Mounting,
            pb::EfsVolumeState::Mounted => Self::Mounted,
            pb::EfsVolumeState::Degraded => Self::Degraded,
            pb::EfsVolumeState::Remounting => Self::Remounting,
            pb::EfsVolumeState::Unmounted => Self::Unmounted,
            pb::EfsVolumeState::Failed => Self::Failed,
            pb::EfsVolumeState::Requested | pb::EfsVolumeState::Unspecified => Self::Requested,
        }
    }

    /// Its name: `requested`, `mounting`, `mounted`, `degraded`,
    /// `remounting`, `unmounted`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Mounting => "mounting",
            Self::Mounted => "mounted",
            Self::Degraded => "degraded",
            Self::Remounting => "remounting",
            Self::Unmounted => "unmounted",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for VolumeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One volume as the agent last reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VolumeStatus {
    /// Its state.
    pub state: VolumeState,
    /// The class of its latest failure or degradation (`network`,
    /// `iam_denied`, `not_found`, `tls`, `timeout`, `credentials_expired`,
    /// `stale`, `unreachable`, `gone`, ...), `None` when there is none. A
    /// class name only, never the helper's text.
    pub last_error_class: Option<String>,
}

impl VolumeStatus {
    fn from_wire(volume: &pb::EfsVolumeStatus) -> Self {
        let class = (!volume.last_error_class.is_empty()).then(|| {
            crate::error::map::configure::error_class(&volume.last_error_class).to_owned()
        });
        Self {
            state: VolumeState::from_wire(volume.state()),
            last_error_class: class,
        }
    }
}

/// The volumes of a ConfigureStatus answer, by mount path (none: empty).
pub(crate) fn statuses(status: &pb::ConfigureStatusResponse) -> BTreeMap<String, VolumeStatus> {
    status
        .efs_volumes
        .as_ref()
        .map(|s| {
            s.volumes
                .iter()
                .map(|v| (v.mount_path.clone(), VolumeStatus::from_wire(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// The handle's part: whether its agent has volumes to report (this handle
/// mounted some, or `connect` found an agent offering the section). Set on
/// `connect` after the handle exists, so shared by its clones.
#[derive(Clone, Debug, Default)]
pub(crate) struct HandleVolumes(Arc<AtomicBool>);

impl HandleVolumes {
    /// A handle whose `create` mounts volumes.
    pub(crate) fn mounted() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    /// `connect`'s recovery: an agent offering Configure and the volume
    /// section is asked on each read (its volumes were mounted by whoever
    /// created the sandbox).
    pub(crate) fn recover(&self, features: Option<&pb::AgentFeatures>) {
        let offered = features.is_some_and(|f| f.configure && f.efs_volumes);
        self.0.store(offered, Ordering::Relaxed);
    }

    fn readable(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The EFS volumes of a sandbox (docs/volumes.md):
/// [`crate::Sandbox::volumes`].
pub struct VolumesView<'a> {
    sandbox: &'a Sandbox,
}

impl fmt::Debug for VolumesView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VolumesView")
            .field("sandbox_id", &self.sandbox.id())
            .finish()
    }
}

impl crate::sandbox::Sandbox {
    /// The sandbox's EFS volumes: each one's state, read from the agent
    /// on each call.
    ///
    /// Only with the `efs` cargo feature.
    pub fn volumes(&self) -> VolumesView<'_> {
        VolumesView { sandbox: self }
    }
}

impl VolumesView<'_> {
    fn readable(&self) -> bool {
        self.sandbox
            .parts()
            .get::<HandleVolumes>()
            .is_some_and(HandleVolumes::readable)
    }

    /// Every volume by mount path, as the agent reports it now (one
    /// ConfigureStatus). Empty, without a call, when the sandbox has no
    /// volumes this handle knows of (none mounted by it, and an agent that
    /// did not offer the section on `connect`).
    ///
    /// # Errors
    /// ConfigureStatus's failures, as the transport maps them.
    pub async fn statuses(&self) -> Result<BTreeMap<String, VolumeStatus>, SandboxError> {
        let sandbox = self.sandbox;
        let readable = self.readable();
        boxed!(Result<BTreeMap<String, VolumeStatus>, SandboxError>, {
            if !readable {
                return Ok(BTreeMap::new());
            }
            let status = crate::configure::read_status(sandbox.conn()).await?;
            Ok(statuses(&status))
        })
    }

    /// The volume at `path`, as the agent reports it now (one
    /// ConfigureStatus); `None` when there is none there.
    ///
    /// # Errors
    /// As [`Self::statuses`].
    pub async fn get(&self, path: &str) -> Result<Option<VolumeStatus>, SandboxError> {
        Ok(self.statuses().await?.remove(path))
    }
}
