//! A sandbox's binding to a named persistence prefix (`SandboxBuilder::persist`)
//! and the rebirth it allows: the state the persistence feature keeps on a
//! handle, and its code.

use super::{CheckpointOptions, S3Prefix};
use crate::error::SandboxError;
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
