//! The volumes' part in `create`, `connect` and a pool: the builder's
//! setter, the checks before any call, the mount target lookup before
//! RunMicrovm, its section of the one Configure `create` sends once the
//! sandbox is ready (before persistence's automatic restore), and the
//! recovery on `connect`.

use super::spec::{self, EfsVolume};
use super::view::HandleVolumes;
use super::{section, targets};
use crate::configure::SectionPlan;
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::named::{self, ToApply};
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Launch, Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The volume setter of the sandbox builder.
impl SandboxBuilder {
    /// Mounts the EFS volume `volume` at `path` in the sandbox (at most 4,
    /// together with the S3 mounts; the same path again replaces it):
    /// sandbox code reads and writes the access point's files there, and
    /// every sandbox that mounts the same access point sees them
    /// (docs/volumes.md). Experimental, as in the reference.
    ///
    /// `create` checks, before any call: the volumes (ids, name, region),
    /// the mount paths (absolute, canonical, under `/mnt/` or
    /// `/home/user/`, not overlapping the S3 mounts' or each other), the
    /// image (an official image must be of the variant `base-caps-efs`),
    /// the egress (exactly one connector of your VPC, not
    /// `INTERNET_EGRESS`) and the execution role. Then, before launching,
    /// it looks up the mount target of each volume without one; once the
    /// sandbox is ready it mounts them in its one Configure (with the S3
    /// mounts and gateways; 65 s at most). An
    /// agent that cannot mount EFS fails `Unimplemented` (feature
    /// `volumes`); a volume that does not mount fails `VolumeMount` with
    /// its code; either terminates the sandbox unless
    /// [`Self::keep_on_failure`]. A pool's builder refuses volumes.
    ///
    /// Only with the `efs` cargo feature.
    pub fn volume(mut self, path: impl Into<String>, volume: EfsVolume) -> Self {
        named::give(&mut self, path.into(), volume);
        self
    }
}

/// The builder's volume paths, for the checks of the mount paths that S3
/// mounts and volumes share.
#[allow(dead_code, reason = "read by the S3 mounts' checks")]
pub(crate) fn volume_paths(builder: &SandboxBuilder) -> Vec<&str> {
    named::given::<EfsVolume>(builder)
        .iter()
        .map(|(p, _)| p.as_str())
        .collect()
}

/// The builder's S3 mount paths (the other half of the shared path rules).
fn mount_paths(builder: &SandboxBuilder) -> Vec<&str> {
    crate::mounts::mount_paths(builder)
}

/// The volumes' steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        named::refuse_any::<EfsVolume>(builder, || spec::refuse(m::VOLUME_CONNECT, &[]))
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        named::refuse_any::<EfsVolume>(builder, || spec::refuse(m::VOLUME_POOLED, &[]))
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        let volumes = named::given::<EfsVolume>(builder);
        let mounting = stage == Stage::Create && !volumes.is_empty();
        handle.set(HandleVolumes::default());
        if mounting {
            spec::check_all(builder, volumes, &mount_paths(builder))?;
            handle.set(HandleVolumes::mounted());
            handle.set(ToApply::new(volumes.to_vec()));
        }
        Ok(())
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let Some(to_apply) = at.handle.get::<ToApply<EfsVolume>>() else {
                return Ok(());
            };
            let mut volumes = to_apply.items();
            if !targets::needed(&volumes) {
                return Ok(());
            }
            let Some(config) = at.client.backend().sdk_config.as_ref() else {
                return Err(SandboxError::volume(m::VOLUME_NO_AWS.render(&[])));
            };
            targets::resolve(&mut volumes, |region, fs| {
                targets::describe(config, region, fs)
            })
            .await?;
            to_apply.replace(volumes);
            Ok(())
        })
    }

    fn configure_section<'a>(
        &'a self,
        sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        let plan = sandbox
            .parts()
            .get::<ToApply<EfsVolume>>()
            .map(|to_apply| section::plan(&to_apply.items()));
        Box::pin(async move { Ok(plan) })
    }

    fn after_connect<'a>(
        &'a self,
        sandbox: &'a Sandbox,
        features: Option<&'a pb::AgentFeatures>,
    ) -> StepFuture<'a, ()> {
        if let Some(handle) = sandbox.parts().get::<HandleVolumes>() {
            handle.recover(features);
        }
        crate::sandbox::steps::done()
    }
}
