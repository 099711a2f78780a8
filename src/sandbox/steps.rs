//! The steps a feature adds to `create`, `connect` and `kill`: the core
//! calls every registered [`Step`] at its points, and each feature's step
//! reads its own state from the builder's or the client's
//! [`Parts`](super::parts::Parts). The crate root lists the steps
//! ([`crate::feature_steps`]), so the core names no feature.

use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use super::parts::Parts;
use super::{Sandbox, SandboxBuilder};
use crate::configure::SectionPlan;
use crate::error::SandboxError;
use crate::sandbox::client::Client;

/// A step's future.
pub(crate) type StepFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, SandboxError>> + Send + 'a>>;

/// A finished step (what a step with nothing to do at a point returns).
pub(crate) fn done<'a>() -> StepFuture<'a, ()> {
    Box::pin(async { Ok(()) })
}

/// Whether a handle is being created or connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Create,
    Connect,
}

/// Where a `create` or `connect` stands before anything is launched or
/// dialled (its client resolved).
// Each field is read by the feature named: `handle` by secrets, the rest by
// the index (dynamodb).
#[cfg_attr(not(all(feature = "dynamodb", feature = "secrets")), allow(dead_code))]
pub(crate) struct Launch<'a> {
    pub(crate) builder: &'a SandboxBuilder,
    pub(crate) stage: Stage,
    /// The parts the handle will carry (what `prepare` gave).
    pub(crate) handle: &'a Parts,
    pub(crate) client: &'a Client,
}

/// What RunMicrovm answered for a new sandbox, for the steps after it.
#[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
pub(crate) struct NewVm<'a> {
    pub(crate) builder: &'a SandboxBuilder,
    pub(crate) client: &'a Client,
    pub(crate) id: &'a str,
    pub(crate) image_arn: &'a str,
    pub(crate) image_version: &'a str,
    pub(crate) started_at: SystemTime,
    pub(crate) max_duration_secs: u64,
}

/// A new sandbox after a step's work on it: the sandbox when `outcome` is
/// ok; else the error, the sandbox terminated, or kept (`keep`:
/// `keep_on_failure`) and named on the error.
///
/// # Errors
/// `outcome`'s.
pub(crate) async fn kept_or_killed(
    sandbox: Sandbox,
    keep: bool,
    outcome: Result<(), SandboxError>,
) -> Result<Sandbox, SandboxError> {
    match outcome {
        Ok(()) => Ok(sandbox),
        Err(err) if keep => Err(err.kept_on_failure(sandbox.id())),
        Err(err) => {
            let _ = sandbox.kill().await;
            Err(err)
        }
    }
}

/// Terminates the new MicroVM (a step whose work failed after launch).
pub(crate) type Terminate<'a> = StepFuture<'a, ()>;

/// A feature's part in the core's operations. Every method has a default
/// that does nothing.
pub(crate) trait Step: Sync {
    /// `create`'s first checks (no I/O).
    fn check_create(&self, _builder: &SandboxBuilder) -> Result<(), SandboxError> {
        Ok(())
    }

    /// `connect`'s first checks (no I/O).
    fn check_connect(&self, _builder: &SandboxBuilder) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Refuses what a pool's builder may not carry.
    fn check_pooled(&self, _builder: &SandboxBuilder) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Checks the feature's options (no I/O) and puts the state the handle
    /// will carry into `handle`.
    fn prepare(
        &self,
        _builder: &SandboxBuilder,
        _stage: Stage,
        _handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        Ok(())
    }

    /// `create`'s last checks before any I/O.
    fn check_late(&self, _builder: &SandboxBuilder) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Before anything is launched or dialled (the client is resolved).
    fn before_launch<'a>(&'a self, _at: Launch<'a>) -> StepFuture<'a, ()> {
        done()
    }

    /// Right after RunMicrovm answered (and a pool's hook ran); `terminate`
    /// ends the MicroVM when the step fails.
    fn after_launch<'a>(&'a self, _vm: &'a NewVm<'a>, _end: Terminate<'a>) -> StepFuture<'a, ()> {
        done()
    }

    /// Adds the state that needs the sandbox id to the handle's parts.
    fn bind(&self, _builder: &SandboxBuilder, _sandbox_id: &str, _handle: &mut Parts) {}

    /// This feature's section of the one Configure `create` (and a
    /// pool's take) sends once the sandbox is ready and its network gated,
    /// before any [`Self::after_create`] (so before persistence's
    /// automatic restore): `None` when the feature has nothing to
    /// configure. The core applies every plan together
    /// ([`crate::configure::apply_plans`]) and terminates the sandbox on
    /// failure unless kept.
    fn configure_section<'a>(
        &'a self,
        _sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        Box::pin(async { Ok(None) })
    }

    /// After `create` made a ready handle (its span still open); `keep`:
    /// the builder keeps the sandbox when this step fails
    /// (`keep_on_failure`).
    fn after_create<'a>(
        &'a self,
        _builder: &'a Parts,
        _keep: bool,
        sandbox: Sandbox,
    ) -> StepFuture<'a, Sandbox> {
        Box::pin(async move { Ok(sandbox) })
    }

    /// After `connect` made a ready handle; `features` is what its agent's
    /// Health offered.
    fn after_connect<'a>(
        &'a self,
        _sandbox: &'a Sandbox,
        _features: Option<&'a crate::pb::AgentFeatures>,
    ) -> StepFuture<'a, ()> {
        done()
    }

    /// After a kill through `client` terminated `sandbox_id` (failures are
    /// the step's to log).
    fn after_kill<'a>(
        &'a self,
        _client: &'a Client,
        _sandbox_id: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async {})
    }

    /// Drops what a pool's warm sandboxes get only when taken.
    fn unbind(&self, _builder: &mut Parts) {}

    /// What a pool's take checks before it claims a parked sandbox.
    fn preflight<'a>(&'a self, _builder: &'a SandboxBuilder) -> StepFuture<'a, ()> {
        done()
    }
}

/// Sends every step's Configure section of a new `sandbox` in one call
/// (none: no call): the sandbox when it succeeds, else the error with the
/// sandbox terminated or kept (`keep`).
///
/// # Errors
/// A step's failure to make its plan; the first section's refusal or
/// failure, as [`crate::configure::apply_plans`].
pub(crate) async fn configure_all(
    steps: &[&'static dyn Step],
    sandbox: Sandbox,
    keep: bool,
) -> Result<Sandbox, SandboxError> {
    let plans = plans_of(steps, &sandbox).await;
    configure_planned(sandbox, keep, plans).await
}

/// Every step's plan for `sandbox`, in the steps' order.
async fn plans_of(
    steps: &[&'static dyn Step],
    sandbox: &Sandbox,
) -> Result<Vec<SectionPlan>, SandboxError> {
    let mut plans = Vec::new();
    for step in steps {
        plans.extend(step.configure_section(sandbox).await?);
    }
    Ok(plans)
}

/// Sends `plans` in one Configure on a new `sandbox` (a `create`'s, or
/// the one a pool's take gives with gateways): the sandbox when it
/// succeeds, else the error (making the plans' included) with the sandbox
/// terminated or kept (`keep`).
///
/// # Errors
/// `plans`' error; the first section's refusal or failure, as
/// [`crate::configure::apply_plans`].
pub(crate) async fn configure_planned(
    sandbox: Sandbox,
    keep: bool,
    plans: Result<Vec<SectionPlan>, SandboxError>,
) -> Result<Sandbox, SandboxError> {
    let outcome = match plans {
        Ok(plans) => crate::configure::apply_plans(&sandbox, plans).await,
        Err(err) => Err(err),
    };
    kept_or_killed(sandbox, keep, outcome).await
}
