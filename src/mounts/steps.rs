//! The S3 mounts' part in `create`, `connect` and a pool: the builder's
//! setter, the checks before any call, its section of the one Configure
//! `create` sends once the sandbox is ready (before persistence's automatic
//! restore), and the recovery on `connect`.

use super::section;
use super::spec::{self, DOC, S3Mount};
use super::view::HandleMounts;
use crate::configure::SectionPlan;
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::mount_path::{self, MOUNTS};
use crate::pb;
use crate::sandbox::image_variant::official_variant;
use crate::sandbox::named::{self, ToApply};
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The official image variants whose agent can mount S3.
const CAPS_VARIANTS: [&str; 2] = ["base-caps", "base-caps-efs"];

/// The S3 mount setter of the sandbox builder.
impl SandboxBuilder {
    /// Mounts the bucket (or prefix) of `mount` at `path` in the sandbox
    /// (at most 4, together with the EFS volumes; the same path again
    /// replaces it): sandbox code reads the objects there as files and,
    /// on a writable mount, writes objects by writing files
    /// (docs/mounts.md).
    ///
    /// `create` checks, before any call: each mount (bucket name, prefix,
    /// write flags), the mount paths (absolute, canonical, strictly under
    /// `/mnt/` or `/home/user/`, not overlapping each other or the EFS
    /// volumes'), and the image (an official image must be of the variant
    /// `base-caps` or `base-caps-efs`). Once the sandbox is ready it sends
    /// the mounts in its one Configure (with the volumes and gateways) and
    /// waits up to 15 s for each to mount.
    /// An agent that cannot mount S3 fails `Unimplemented` (feature
    /// `mounts`); a mount refused or failed by the agent fails
    /// [`SandboxError::Mount`] with its code; either terminates the
    /// sandbox unless [`Self::keep_on_failure`]. The sandbox's execution
    /// role is what reads and writes the bucket. A pool's builder refuses
    /// mounts.
    pub fn mount(mut self, path: impl Into<String>, mount: S3Mount) -> Self {
        named::give(&mut self, path.into(), mount);
        self
    }
}

/// The builder's S3 mount paths, for the EFS volumes' half of the shared
/// path rules.
#[cfg_attr(not(feature = "efs"), allow(dead_code))]
pub(crate) fn mount_paths(builder: &SandboxBuilder) -> Vec<&str> {
    named::given::<S3Mount>(builder)
        .iter()
        .map(|(p, _)| p.as_str())
        .collect()
}

/// Refuses an official image of a variant whose agent cannot mount S3
/// (other names defer to the agent's Health).
fn check_variant(name: Option<&str>) -> Result<(), SandboxError> {
    match official_variant(name) {
        Some(variant) if !CAPS_VARIANTS.contains(&variant) => Err(SandboxError::unimplemented(
            MOUNTS,
            m::MOUNT_VARIANT_REASON.render(&[("variant", variant)]),
            Some(DOC),
        )),
        _ => Ok(()),
    }
}

/// Every check of `create` for `mounts`, before any call: the paths (this
/// map's half of the shared rules; the EFS volumes' step checks both
/// together), each mount, then the image.
pub(crate) fn check_all(
    builder: &SandboxBuilder,
    mounts: &[(String, S3Mount)],
) -> Result<(), SandboxError> {
    let paths: Vec<&str> = mounts.iter().map(|(p, _)| p.as_str()).collect();
    mount_path::check_all(&paths, &[])?;
    for (path, mount) in mounts {
        spec::check(path, mount)?;
    }
    check_variant(builder.image_name()?.as_deref())
}

/// The S3 mounts' steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        // Connecting mounts nothing: the sandbox's own mounts are read
        // from its agent.
        named::refuse_any::<S3Mount>(builder, || spec::refuse(m::MOUNT_CONNECT, &[]))
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        named::refuse_any::<S3Mount>(builder, || spec::refuse(m::MOUNT_POOLED, &[]))
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        let mounts = named::given::<S3Mount>(builder);
        handle.set(HandleMounts::default());
        if stage == Stage::Create && !mounts.is_empty() {
            check_all(builder, mounts)?;
            handle.set(HandleMounts::mounted());
            handle.set(ToApply::new(mounts.to_vec()));
        }
        Ok(())
    }

    fn configure_section<'a>(
        &'a self,
        sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        let plan = sandbox
            .parts()
            .get::<ToApply<S3Mount>>()
            .map(|to_apply| section::plan(&to_apply.items()));
        Box::pin(async move { Ok(plan) })
    }

    fn after_connect<'a>(
        &'a self,
        sandbox: &'a Sandbox,
        features: Option<&'a pb::AgentFeatures>,
    ) -> StepFuture<'a, ()> {
        if let Some(handle) = sandbox.parts().get::<HandleMounts>() {
            handle.recover(features);
        }
        crate::sandbox::steps::done()
    }
}
