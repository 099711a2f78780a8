//! `Fleet::run_bulk`: applies a confirmed plan to its `act` targets, a few
//! at a time, and reports each one; one failure never stops the others.

use std::time::Duration;

use futures_util::StreamExt as _;
use serde::Serialize;

use super::Fleet;
use super::plan::{self, BulkAction, BulkPlan, MAX_BULK_TARGETS};
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::sandbox::lifecycle::{self, LifecycleMarks};

/// How many sandboxes a bulk run acts on at once (the client's pacing
/// still holds each operation to its rate: terminate 10/s, suspend 2/s,
/// resume 5/s by default).
pub const BULK_CONCURRENCY: usize = 4;
/// How long a pause waits for SUSPENDED (and a resume for RUNNING).
const STATE_WAIT: Duration = Duration::from_secs(90);

/// How one sandbox of a bulk run went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BulkResult {
    /// The sandbox.
    pub sandbox_id: String,
    /// The sandbox is now as the action leaves it (killed, paused,
    /// resumed, its timeout set).
    pub ok: bool,
    /// The action changed it (`false` with `ok` when it already was so:
    /// a kill of a sandbox that ended since the plan, a pause of one
    /// paused since).
    pub changed: bool,
    /// The failure's kind (`sandbox_not_found`, `rate_limit`, ...; see
    /// docs/errors.md) when not `ok`.
    pub error_kind: Option<String>,
    /// The failure's message when not `ok`.
    pub message: Option<String>,
}

/// What a bulk run did: one result per `act` target of the plan, in the
/// plan's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BulkOutcome {
    /// The action.
    pub action: BulkAction,
    /// One per sandbox acted on.
    pub results: Vec<BulkResult>,
}

impl BulkOutcome {
    /// How many sandboxes ended as the action leaves them.
    pub fn succeeded(&self) -> usize {
        self.results.iter().filter(|r| r.ok).count()
    }

    /// How many failed.
    pub fn failed(&self) -> usize {
        self.results.len() - self.succeeded()
    }
}

impl Fleet {
    /// Runs `plan` (from [`Fleet::plan_bulk`]) on its `act` targets, at most
    /// [`BULK_CONCURRENCY`] at a time, after checking that `confirmation`
    /// is the plan's: the one derived from its action and the ids it acts
    /// on (a plan whose targets were edited has another). Each target gets
    /// a result, ok or with its failure's kind; a failure never stops the
    /// run. Skipped targets are not touched.
    ///
    /// # Errors
    /// `InvalidArgument` (`confirmation`) when the confirmation does not
    /// match, before any call; `InvalidArgument` (`filter`) for a plan
    /// that acts on more than [`MAX_BULK_TARGETS`] sandboxes.
    pub async fn run_bulk(
        &self,
        plan: &BulkPlan,
        confirmation: &str,
    ) -> Result<BulkOutcome, SandboxError> {
        boxed!(Result<BulkOutcome, SandboxError>, {
            let expected =
                plan::confirmation(plan.action, plan.acting().into_iter().map(|t| t.sandbox_id.as_str()));
            if confirmation != expected {
                return Err(SandboxError::invalid_argument(
                    "confirmation",
                    m::FLEET_CONFIRMATION.render(&[]),
                ));
            }
            let count = plan.act_count();
            if count > MAX_BULK_TARGETS {
                return Err(plan::too_many(count));
            }
            // The futures are made first (they run only when polled): a
            // closure inside the stream would not be `Send` for every
            // lifetime.
            let applies: Vec<_> = plan
                .acting()
                .into_iter()
                .map(|target| self.apply(plan.action, &target.sandbox_id))
                .collect();
            let results = futures_util::stream::iter(applies)
                .buffered(BULK_CONCURRENCY)
                .collect()
                .await;
            Ok(BulkOutcome {
                action: plan.action,
                results,
            })
        })
    }

    /// `action` on `sandbox_id`, as a result.
    async fn apply(&self, action: BulkAction, sandbox_id: &str) -> BulkResult {
        let outcome = match action {
            BulkAction::Kill => self.client.kill_by_id(sandbox_id).await,
            BulkAction::Pause => {
                let control = self.client.backend().control.clone();
                lifecycle::pause(
                    control.as_ref(),
                    sandbox_id,
                    &LifecycleMarks::new(0),
                    Some(STATE_WAIT),
                )
                .await
            }
            BulkAction::Resume => self
                .client
                .resume_by_id_within(sandbox_id, STATE_WAIT)
                .await
                .map(|()| true),
            BulkAction::SetTimeout(timeout) => self.set_timeout(sandbox_id, timeout).await,
        };
        match outcome {
            Ok(changed) => BulkResult {
                sandbox_id: sandbox_id.to_owned(),
                ok: true,
                changed,
                error_kind: None,
                message: None,
            },
            Err(err) => BulkResult {
                sandbox_id: sandbox_id.to_owned(),
                ok: false,
                changed: false,
                error_kind: Some(err.kind().as_str().to_owned()),
                message: Some(err.to_string()),
            },
        }
    }

    /// SetTimeout through the sandbox's agent, with the fleet's token.
    async fn set_timeout(&self, sandbox_id: &str, timeout: Duration) -> Result<bool, SandboxError> {
        let Some(token) = self.token(sandbox_id) else {
            return Err(SandboxError::invalid_argument(
                "access_token",
                m::FLEET_NO_TOKEN.render(&[]),
            ));
        };
        let sandbox = self.client.connect(sandbox_id, token.clone()).await?;
        sandbox.set_timeout(timeout).await?;
        Ok(true)
    }
}
