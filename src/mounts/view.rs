//! `sandbox.mounts()`: each S3 mount's state as the agent reports it, one
//! ConfigureStatus per read (a mount's helper can die and be relaunched
//! after a resume, so nothing is cached).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;

/// Where an S3 mount stands in the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MountState {
    /// Being mounted (also any phase this SDK does not know).
    Pending,
    /// Mounted: its files are the bucket's objects.
    Mounted,
    /// The mount failed (see the last error class).
    Failed,
}

impl MountState {
    fn from_wire(phase: pb::S3MountPhase) -> Self {
        match phase {
            pb::S3MountPhase::Mounted => Self::Mounted,
            pb::S3MountPhase::Failed => Self::Failed,
            pb::S3MountPhase::Pending | pb::S3MountPhase::Unspecified => Self::Pending,
        }
    }

    /// Its name: `pending`, `mounted`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Mounted => "mounted",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for MountState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One S3 mount as the agent last reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MountStatus {
    /// Its state.
    pub state: MountState,
    /// The class of its failure (`network`, `iam_denied`, `not_found`,
    /// `not_allowed`, `invalid_path`, `helper_missing`, `timeout`, ...),
    /// `None` unless it failed. A class name only, never the agent's text.
    pub last_error_class: Option<String>,
}

impl MountStatus {
    fn from_wire(mount: &pb::S3MountState) -> Self {
        let class = (!mount.error_class.is_empty())
            .then(|| crate::error::map::configure::error_class(&mount.error_class).to_owned());
        Self {
            // An out-of-range phase reads as unspecified: pending.
            state: MountState::from_wire(mount.phase()),
            last_error_class: class,
        }
    }
}

/// The mounts of a ConfigureStatus answer, by mount path (none: empty).
pub(crate) fn statuses(status: &pb::ConfigureStatusResponse) -> BTreeMap<String, MountStatus> {
    status
        .s3_mounts
        .as_ref()
        .map(|s| {
            s.mounts
                .iter()
                .map(|m| (m.mount_path.clone(), MountStatus::from_wire(m)))
                .collect()
        })
        .unwrap_or_default()
}

/// The handle's part: whether its agent has mounts to report (this handle
/// mounted some, or `connect` found an agent offering the section). Set on
/// `connect` after the handle exists, so shared by its clones.
#[derive(Clone, Debug, Default)]
pub(crate) struct HandleMounts(Arc<AtomicBool>);

impl HandleMounts {
    /// A handle whose `create` mounts S3.
    pub(crate) fn mounted() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    /// `connect`'s recovery: an agent offering Configure and the S3 mount
    /// section is asked on each read (its mounts were made by whoever
    /// created the sandbox).
    pub(crate) fn recover(&self, features: Option<&pb::AgentFeatures>) {
        let offered = features.is_some_and(|f| f.configure && f.s3_mounts);
        self.0.store(offered, Ordering::Relaxed);
    }

    fn readable(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The S3 mounts of a sandbox (docs/mounts.md): [`crate::Sandbox::mounts`].
pub struct MountsView<'a> {
    sandbox: &'a Sandbox,
}

impl fmt::Debug for MountsView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MountsView")
            .field("sandbox_id", &self.sandbox.id())
            .finish()
    }
}

impl crate::sandbox::Sandbox {
    /// The sandbox's S3 mounts: each one's state, read from the agent on
    /// each call (docs/mounts.md).
    pub fn mounts(&self) -> MountsView<'_> {
        MountsView { sandbox: self }
    }
}

impl MountsView<'_> {
    fn readable(&self) -> bool {
        self.sandbox
            .parts()
            .get::<HandleMounts>()
            .is_some_and(HandleMounts::readable)
    }

    /// Every S3 mount by mount path, as the agent reports it now (one
    /// ConfigureStatus). Empty, without a call, when the sandbox has no
    /// mounts this handle knows of (none made by it, and an agent that did
    /// not offer the section on `connect`).
    ///
    /// # Errors
    /// ConfigureStatus's failures, as the transport maps them.
    pub async fn statuses(&self) -> Result<BTreeMap<String, MountStatus>, SandboxError> {
        let sandbox = self.sandbox;
        let readable = self.readable();
        boxed!(Result<BTreeMap<String, MountStatus>, SandboxError>, {
            if !readable {
                return Ok(BTreeMap::new());
            }
            let status = crate::configure::read_status(sandbox.conn()).await?;
            Ok(statuses(&status))
        })
    }

    /// The S3 mount at `path`, as the agent reports it now (one
    /// ConfigureStatus); `None` when there is none there.
    ///
    /// # Errors
    /// As [`Self::statuses`].
    pub async fn get(&self, path: &str) -> Result<Option<MountStatus>, SandboxError> {
        Ok(self.statuses().await?.remove(path))
    }
}
