//! A sandbox's binding to a named persistence prefix (`SandboxBuilder::persist`)
//! and the rebirth it allows: the state the persistence feature keeps on a
//! handle, and its code.

use super::{CheckpointOptions, RestoreOptions, S3Prefix};
use crate::error::SandboxError;
use crate::sandbox::parts::{Parts, S3Prefixes};
use crate::sandbox::steps::{Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The prefix a handle is bound to (named) and the builder it was created
/// with: `reincarnate` creates with it again.
#[derive(Debug)]
pub(crate) struct Binding {
    prefix: S3Prefix,
    rebirth: Box<SandboxBuilder>,
}

impl Binding {
    pub(crate) fn new(prefix: S3Prefix, rebirth: Box<SandboxBuilder>) -> Self {
        Self { prefix, rebirth }
    }

    /// The bound prefix, with its name.
    pub(crate) fn prefix(&self) -> &S3Prefix {
        &self.prefix
    }

    /// Checkpoints `sandbox` to the prefix, creates a new one with the same
    /// options (which restores it), and kills `sandbox` once the new one is
    /// up (see `Sandbox::reincarnate`).
    pub(crate) async fn reincarnate(&self, sandbox: &Sandbox) -> Result<Sandbox, SandboxError> {
        Box::pin(
            sandbox
                .persistence()
                .checkpoint(CheckpointOptions::new(self.prefix.clone())),
        )
        .await?;
        let next = (*self.rebirth).clone().persist(self.prefix.clone());
        let born = Box::pin(next.create()).await?;
        // The new one is up: the old one goes. A failed kill leaves it to
        // its timeout; the new handle is what the caller needs.
        if let Err(err) = sandbox.kill().await {
            tracing::warn!(target: "rayito::persistence", sandbox_id = %sandbox.id(), kind = %err.kind(), "reincarnate: the old sandbox could not be killed");
        }
        Ok(born)
    }
}

/// A persistence prefix given to the builder (its part).
#[derive(Debug, Clone, Default)]
struct PersistOn {
    /// `None` only while `persist_keep_on_failure` came first (then
    /// nothing is bound).
    prefix: Option<S3Prefix>,
    /// A failed auto-restore keeps the new sandbox instead of terminating it.
    keep_on_failure: bool,
}

impl PersistOn {
    /// The builder's prefix, if one was given.
    fn of(builder: &SandboxBuilder) -> Option<(&S3Prefix, bool)> {
        Self::in_parts(builder.parts())
    }

    fn in_parts(parts: &Parts) -> Option<(&S3Prefix, bool)> {
        let on = parts.get::<Self>()?;
        Some((on.prefix.as_ref()?, on.keep_on_failure))
    }
}

/// The persistence setters of the sandbox builder.
impl SandboxBuilder {
    /// Binds the sandbox to a persistence prefix (docs/persistence.md):
    /// `sbx.persistence()` checkpoints and restores there by default.
    ///
    /// On `create` it needs an execution role
    /// ([`Self::execution_role_arn`]: the agent reaches S3 with it). The
    /// name defaults to the sandbox id; only a name given here restores
    /// automatically: `create` restores the checkpoint of that name once
    /// the sandbox is ready. No checkpoint there (`NotFound`) is a first
    /// life and not an error; any other failure of the restore terminates
    /// the new sandbox and is returned, unless
    /// [`Self::persist_keep_on_failure`]. Not with a pool.
    ///
    /// On `connect` it only binds, and the name is required.
    pub fn persist(mut self, prefix: S3Prefix) -> Self {
        // Recorded with the core, for the features that must keep clear
        // of it (the transfer staging).
        self.parts_mut().update::<S3Prefixes>(|bound| {
            bound.record("persist", &prefix.bucket, &prefix.prefix);
        });
        self.parts_mut()
            .update::<PersistOn>(|on| on.prefix = Some(prefix));
        self
    }

    /// Keeps a newly created sandbox whose automatic restore failed (the
    /// error is still returned; kill the sandbox by id when done). Call it
    /// after [`Self::persist`]; without a prefix it does nothing.
    pub fn persist_keep_on_failure(mut self, keep: bool) -> Self {
        if self.parts().get::<PersistOn>().is_some() {
            self.parts_mut()
                .update::<PersistOn>(|on| on.keep_on_failure = keep);
        }
        self
    }
}

/// Persistence's part in `create` and `connect`: the prefix's checks,
/// the binding of the handle, the automatic restore.
pub(crate) struct Steps;

impl Step for Steps {
    /// The persistence checks of `create`, before any I/O.
    fn check_create(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        let Some((prefix, _)) = PersistOn::of(builder) else {
            return Ok(());
        };
        if !builder.has_execution_role() {
            return Err(SandboxError::invalid_argument(
                "persist",
                "persistence needs an execution role (the agent reaches S3 with it); set execution_role_arn",
            ));
        }
        prefix.clone().or_name("placeholder").validate()
    }

    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        if let Some((prefix, _)) = PersistOn::of(builder) {
            if prefix.name.is_none() {
                return Err(SandboxError::invalid_argument(
                    "persist",
                    "connect binds a named prefix; give the S3Prefix a name",
                ));
            }
            prefix.validate()?;
        }
        Ok(())
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        if PersistOn::of(builder).is_some() {
            return Err(SandboxError::invalid_argument(
                "persist",
                "a pooled sandbox is made before anyone names it; bind a persistence prefix with persistence() calls on the taken sandbox instead",
            ));
        }
        Ok(())
    }

    fn bind(&self, builder: &SandboxBuilder, sandbox_id: &str, handle: &mut Parts) {
        if let Some((prefix, _)) = PersistOn::of(builder) {
            handle.set(Binding::new(
                prefix.clone().or_name(sandbox_id),
                Box::new(builder.clone()),
            ));
        }
    }

    fn after_create<'a>(
        &'a self,
        builder: &'a Parts,
        keep: bool,
        sandbox: Sandbox,
    ) -> StepFuture<'a, Sandbox> {
        Box::pin(async move {
            match PersistOn::in_parts(builder) {
                Some((prefix, keep_on_failure)) => {
                    auto_restore(sandbox, prefix, keep_on_failure || keep).await
                }
                None => Ok(sandbox),
            }
        })
    }
}

/// The automatic restore of `create` with a named persistence prefix: a
/// missing checkpoint is a first life; another failure terminates the new
/// sandbox (unless kept on failure) and is returned.
async fn auto_restore(
    sandbox: Sandbox,
    prefix: &S3Prefix,
    keep_on_failure: bool,
) -> Result<Sandbox, SandboxError> {
    if prefix.name.is_none() {
        return Ok(sandbox);
    }
    let restored = Box::pin(sandbox.persistence().restore(RestoreOptions::default())).await;
    match restored {
        Ok(_) => Ok(sandbox),
        Err(err) if err.kind() == crate::ErrorKind::NotFound => Ok(sandbox),
        Err(err) if keep_on_failure => Err(err.kept_on_failure(sandbox.id())),
        Err(err) => {
            let _ = sandbox.kill().await;
            Err(err)
        }
    }
}
