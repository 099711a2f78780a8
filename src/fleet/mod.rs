//! The fleet (feature `fleet`): every sandbox of the account with its
//! image, version and size, the images with their versions, each sandbox's
//! lifecycle events, and bulk actions (kill, pause, resume, set-timeout)
//! planned as a dry run first and run only with the plan's confirmation.
//!
//! ```no_run
//! use rayito::fleet::{BulkAction, BulkFilter, FleetQuery};
//! use rayito::SandboxState;
//!
//! # async fn tour(client: rayito::Client) -> Result<(), rayito::SandboxError> {
//! let fleet = client.fleet();
//! for sandbox in fleet.sandboxes(FleetQuery::new()).await? {
//!     println!("{} {} {:?} MiB", sandbox.sandbox_id, sandbox.state, sandbox.memory_mib);
//! }
//! // A dry run: what a pause of every RUNNING sandbox would do.
//! let plan = fleet
//!     .plan_bulk(BulkAction::Pause, BulkFilter::new().states([SandboxState::Running]))
//!     .await?;
//! println!("confirm with: {}", plan.confirmation);
//! let outcome = fleet.run_bulk(&plan, &plan.confirmation).await?;
//! for result in &outcome.results {
//!     println!("{} ok={} {:?}", result.sandbox_id, result.ok, result.error_kind);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Costs: the reads are free calls of the MicroVMs API (ListMicrovms,
//! GetMicrovm, ListMicrovmImages, ListMicrovmImageVersions), paced by the
//! client; [`Fleet::events`] reads the events stack's table (a few on-demand
//! DynamoDB reads). The actions cost nothing to call but change the bill:
//! a kill stops compute billing, a pause writes a snapshot and stores it,
//! a resume reads it and bills compute again (docs/fleet.md).

mod inventory;
mod plan;
mod run;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use inventory::{FleetImage, FleetImageVersion, FleetQuery, FleetSandbox};
pub use plan::{BulkAction, BulkFilter, BulkPlan, BulkTarget, BulkWill, MAX_BULK_TARGETS};
pub use run::{BULK_CONCURRENCY, BulkOutcome, BulkResult};

use crate::Client;
use crate::error::SandboxError;
use crate::secret::Secret;

/// The sandboxes, images and events of one [`Client`]'s account and
/// region, and bulk actions over them. Made by [`Client::fleet`]; a cheap
/// handle that makes no call until a method runs.
///
/// [`BulkAction::SetTimeout`] talks to each sandbox's agent, which needs
/// the sandbox's access token: give the fleet the tokens it may use with
/// [`Fleet::access_token`] (a sandbox without one is planned as `skip`).
#[derive(Clone)]
pub struct Fleet {
    client: Client,
    /// The access tokens of the sandboxes set-timeout and metrics may use.
    tokens: Arc<BTreeMap<String, Secret>>,
}

crate::secret::redacted_debug! {
    non_exhaustive Fleet |o| client = o.client, tokens = o.tokens.len()
}

impl Client {
    /// The fleet of this client's backend (feature `fleet`): see [`Fleet`].
    pub fn fleet(&self) -> Fleet {
        Fleet {
            client: self.clone(),
            tokens: Arc::new(BTreeMap::new()),
        }
    }
}

impl Fleet {
    /// Lets set-timeout and [`Fleet::metrics`] reach the sandbox
    /// `sandbox_id` with its access token (the one it was created with).
    #[must_use]
    pub fn access_token(mut self, sandbox_id: impl Into<String>, token: impl Into<Secret>) -> Self {
        Arc::make_mut(&mut self.tokens).insert(sandbox_id.into(), token.into());
        self
    }

    /// The client the fleet reads and acts through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether the fleet holds the access token of `sandbox_id`.
    pub(crate) fn token(&self, sandbox_id: &str) -> Option<&Secret> {
        self.tokens.get(sandbox_id)
    }

    /// The resources of the RUNNING sandbox `sandbox_id` now (through its
    /// agent, with the token given to [`Fleet::access_token`]); `None`
    /// when the fleet holds no token for it.
    ///
    /// # Errors
    /// As [`Client::get_metrics_by_id`].
    pub async fn metrics(
        &self,
        sandbox_id: &str,
    ) -> Result<Option<crate::SandboxMetrics>, SandboxError> {
        boxed!(Result<Option<crate::SandboxMetrics>, SandboxError>, {
            match self.token(sandbox_id) {
                Some(token) => Ok(Some(
                    self.client
                        .get_metrics_by_id(sandbox_id, token.clone())
                        .await?,
                )),
                None => Ok(None),
            }
        })
    }

    /// The lifecycle events of one sandbox (or every sandbox's with
    /// `None`), newest first, at most `limit` (1 to 100), through
    /// [`Client::events`] (feature `events`). Empty when the events stack
    /// is not deployed: [`crate::events::LifecycleEvents::status`] says so.
    ///
    /// # Errors
    /// `InvalidArgument` (`limit`); the events stack's read failures.
    #[cfg(feature = "events")]
    pub async fn events(
        &self,
        sandbox_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<crate::events::EventRecord>, SandboxError> {
        boxed!(Result<Vec<crate::events::EventRecord>, SandboxError>, {
            // Checked before the status call, with the events' own message.
            if !(1..=crate::events::MAX_EVENTS_LIMIT).contains(&limit) {
                return Err(SandboxError::invalid_argument(
                    "limit",
                    crate::error::messages::EVENTS_LIMIT.render(&[("limit", &limit.to_string())]),
                ));
            }
            let mut query = crate::events::EventQuery::new().limit(limit);
            if let Some(id) = sandbox_id {
                crate::sandbox::lifecycle::check_sandbox_id(id)?;
                query = query.sandbox_id(id);
            }
            let events = self.client.events();
            if events.status().await?.is_none() {
                return Ok(Vec::new());
            }
            events.get_events(query).await
        })
    }
}
