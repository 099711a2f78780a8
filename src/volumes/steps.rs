//! The volumes' part in `create`, `connect` and a pool: the builder's
//! setter, the checks before any call, the mount target lookup before
//! RunMicrovm, the section applied once the sandbox is ready (before
//! persistence's automatic restore), and the recovery on `connect`.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::spec::{self, EfsVolume};
use super::view::HandleVolumes;
use super::{section, targets};
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Launch, Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The volumes given to a builder (its part), by mount path, in the order
/// given.
#[derive(Clone, Debug, Default)]
struct BuilderVolumes(Vec<(String, EfsVolume)>);

/// The checked volumes a `create` mounts, their mount targets filled in
/// before the launch (shared: the lookup writes where the apply reads).
#[derive(Clone, Default)]
struct ToApply(Arc<Mutex<Vec<(String, EfsVolume)>>>);

impl ToApply {
    fn volumes(&self) -> Vec<(String, EfsVolume)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, volumes: Vec<(String, EfsVolume)>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = volumes;
    }
}

// The mount paths only: the ids stay out of logs, as out of messages.
impl fmt::Debug for ToApply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths: Vec<String> = self.volumes().into_iter().map(|(p, _)| p).collect();
        f.debug_tuple("ToApply").field(&paths).finish()
    }
}

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
    /// sandbox is ready it mounts them in one Configure (65 s at most). An
    /// agent that cannot mount EFS fails `Unimplemented` (feature
    /// `volumes`); a volume that does not mount fails `VolumeMount` with
    /// its code; either terminates the sandbox unless
    /// [`Self::keep_on_failure`]. A pool's builder refuses volumes.
    ///
    /// Only with the `efs` cargo feature.
    pub fn volume(mut self, path: impl Into<String>, volume: EfsVolume) -> Self {
        let path = path.into();
        self.parts_mut()
            .update::<BuilderVolumes>(|v| spec::put(&mut v.0, path, volume));
        self
    }
}

/// The builder's volumes (none: empty).
fn given(builder: &SandboxBuilder) -> &[(String, EfsVolume)] {
    builder
        .parts()
        .get::<BuilderVolumes>()
        .map_or(&[], |v| v.0.as_slice())
}

/// The builder's volume paths, for the checks of the mount paths that S3
/// mounts and volumes share.
#[allow(dead_code, reason = "read by the S3 mounts' checks")]
pub(crate) fn volume_paths(builder: &SandboxBuilder) -> Vec<&str> {
    given(builder).iter().map(|(p, _)| p.as_str()).collect()
}

/// The builder's S3 mount paths (the other half of the shared path rules).
fn mount_paths(_builder: &SandboxBuilder) -> Vec<&str> {
    Vec::new()
}

/// Mounts `volumes` on a sandbox `create` just made ready: on failure the
/// sandbox is terminated, or kept (and named on the error).
async fn apply_on_create(
    sandbox: Sandbox,
    volumes: Vec<(String, EfsVolume)>,
    keep: bool,
) -> Result<Sandbox, SandboxError> {
    match section::apply(sandbox.conn(), &volumes).await {
        Ok(()) => Ok(sandbox),
        Err(err) if keep => Err(err.kept_on_failure(sandbox.id())),
        Err(err) => {
            let _ = sandbox.kill().await;
            Err(err)
        }
    }
}

/// The volumes' steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        if given(builder).is_empty() {
            Ok(())
        } else {
            Err(spec::refuse(m::VOLUME_CONNECT, &[]))
        }
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        if given(builder).is_empty() {
            Ok(())
        } else {
            Err(spec::refuse(m::VOLUME_POOLED, &[]))
        }
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        let volumes = given(builder);
        let mounting = stage == Stage::Create && !volumes.is_empty();
        handle.set(HandleVolumes::default());
        if mounting {
            spec::check_all(builder, volumes, &mount_paths(builder))?;
            handle.set(HandleVolumes::mounted());
            handle.set(ToApply(Arc::new(Mutex::new(volumes.to_vec()))));
        }
        Ok(())
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let Some(to_apply) = at.handle.get::<ToApply>() else {
                return Ok(());
            };
            let mut volumes = to_apply.volumes();
            if !targets::needed(&volumes) {
                return Ok(());
            }
            let Some(config) = at.client.backend().sdk_config.as_ref() else {
                return Err(super::shim::volume(m::VOLUME_NO_AWS.render(&[])));
            };
            targets::resolve(&mut volumes, |region, fs| {
                targets::describe(config, region, fs)
            })
            .await?;
            to_apply.replace(volumes);
            Ok(())
        })
    }

    fn after_create<'a>(
        &'a self,
        _builder: &'a Parts,
        keep: bool,
        sandbox: Sandbox,
    ) -> StepFuture<'a, Sandbox> {
        Box::pin(async move {
            match sandbox.parts().get::<ToApply>().map(ToApply::volumes) {
                Some(volumes) => apply_on_create(sandbox, volumes, keep).await,
                None => Ok(sandbox),
            }
        })
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
