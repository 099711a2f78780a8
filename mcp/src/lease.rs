//! The one sandbox of this server process: created on the first tool call
//! that needs it (under a lock, so that concurrent calls share it),
//! forgotten when a call finds it gone (the next call creates a new one),
//! replaced by `reset`, and killed when the server stops.

use std::sync::Arc;
use std::time::Instant;

use rayito::{Client, IdlePolicy, Sandbox, SandboxError, SandboxLogging};
use tokio::sync::{Mutex, OnceCell};

use crate::failure::Failure;
use crate::settings::Settings;

/// The lease and the client it is made with.
#[derive(Debug)]
pub struct Lease {
    settings: Settings,
    /// Made on first use: `RAYITO_BACKEND` and the AWS configuration are
    /// read then, so that a server nobody calls needs no credentials.
    client: OnceCell<Client>,
    sandbox: Mutex<Option<Arc<Sandbox>>>,
}

impl Lease {
    /// No sandbox yet.
    pub fn new(settings: Settings) -> Lease {
        Lease {
            settings,
            client: OnceCell::new(),
            sandbox: Mutex::new(None),
        }
    }

    /// The client (made on first use; a failure is tried again next time).
    ///
    /// # Errors
    /// As `Client::from_env`.
    pub async fn client(&self) -> Result<&Client, SandboxError> {
        self.client.get_or_try_init(Client::from_env).await
    }

    /// The sandbox of the lease, created when there is none.
    ///
    /// # Errors
    /// The failure of making the client or creating the sandbox.
    pub async fn get(&self) -> Result<Arc<Sandbox>, Failure> {
        let mut held = self.sandbox.lock().await;
        if let Some(sandbox) = held.as_ref() {
            return Ok(sandbox.clone());
        }
        let sandbox = Arc::new(self.create().await?);
        *held = Some(sandbox.clone());
        Ok(sandbox)
    }

    /// The secret gateways every sandbox of the lease gets.
    pub fn gateways(&self) -> &[(String, rayito::gateway::SecretGateway)] {
        &self.settings.gateways
    }

    /// The id of the lease's sandbox, if there is one (never creates).
    pub async fn current_id(&self) -> Option<String> {
        self.sandbox
            .lock()
            .await
            .as_ref()
            .map(|s| s.id().to_owned())
    }

    /// Forgets the sandbox `id` if it is still the lease's (a call found it
    /// gone); a newer sandbox is kept.
    pub async fn forget(&self, id: &str) {
        let mut held = self.sandbox.lock().await;
        if held.as_ref().is_some_and(|s| s.id() == id) {
            *held = None;
            tracing::info!(sandbox_id = id, "lease forgotten: the sandbox is gone");
        }
    }

    /// Kills the lease's sandbox, if any, and creates a new one. Returns
    /// the old id and the new sandbox. A failed kill is logged, not
    /// returned: the old sandbox is forgotten either way (its own timeout
    /// ends it).
    ///
    /// # Errors
    /// The failure of creating the new sandbox.
    pub async fn reset(&self) -> Result<(Option<String>, Arc<Sandbox>), Failure> {
        let mut held = self.sandbox.lock().await;
        let previous = held.take();
        let previous_id = previous.as_ref().map(|s| s.id().to_owned());
        if let Some(old) = previous {
            kill(&old).await;
        }
        let sandbox = Arc::new(self.create().await?);
        *held = Some(sandbox.clone());
        Ok((previous_id, sandbox))
    }

    /// Kills the lease's sandbox, if any (the server is stopping).
    pub async fn shutdown(&self) {
        let previous = self.sandbox.lock().await.take();
        if let Some(old) = previous {
            kill(&old).await;
        }
    }

    /// A new sandbox with the settings.
    async fn create(&self) -> Result<Sandbox, Failure> {
        let started = Instant::now();
        // The SDK's message goes to the operator's log here: creating a
        // sandbox involves nothing the model sent, and its messages hold
        // no secret (docs/errors.md).
        let client = self.client().await.map_err(|e| {
            let failure = Failure::of_create(&e);
            tracing::warn!(error_kind = failure.kind, error = %e, "the client could not be made");
            failure
        })?;
        let mut builder = client.sandbox().timeout(self.settings.timeout);
        builder = match self.settings.idle {
            Some(idle) => builder.idle_policy(IdlePolicy::new(idle).auto_resume(true)),
            None => builder.no_idle_policy(),
        };
        if let Some(version) = self.settings.template_version {
            builder = builder.template_version(version);
        }
        if let Some(role) = &self.settings.execution_role_arn {
            builder = builder
                .execution_role_arn(role.clone())
                .logging(SandboxLogging::cloudwatch());
        }
        for (name, gateway) in &self.settings.gateways {
            builder = builder.gateway(name.clone(), gateway.clone());
        }
        match builder.create().await {
            Ok(sandbox) => {
                tracing::info!(
                    sandbox_id = sandbox.id(),
                    duration_ms = started.elapsed().as_millis() as u64,
                    "sandbox created"
                );
                Ok(sandbox)
            }
            Err(e) => {
                let failure = Failure::of_create(&e);
                tracing::warn!(
                    error_kind = failure.kind,
                    error = %e,
                    duration_ms = started.elapsed().as_millis() as u64,
                    "sandbox creation failed"
                );
                Err(failure)
            }
        }
    }
}

/// Kills `sandbox`, logging the outcome (never failing: the caller is
/// replacing or dropping it).
async fn kill(sandbox: &Sandbox) {
    match sandbox.kill().await {
        Ok(_) => tracing::info!(sandbox_id = sandbox.id(), "sandbox killed"),
        Err(e) => tracing::warn!(
            sandbox_id = sandbox.id(),
            error_kind = e.classify().kind,
            "the sandbox could not be killed; its timeout will end it"
        ),
    }
}
