//! The gateways' part in `create`, `connect` and a pool: the builder's
//! setter, the checks before any call, the preflight read of every header's
//! secret before anything is launched, its section of the one Configure
//! `create` sends once the sandbox is ready (before persistence's automatic
//! restore), and the recovery on `connect`.

use super::spec::{self, SecretGateway};
use super::view::{self, HandleGateways};
use crate::configure::SectionPlan;
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::named::{self, ToApply};
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Launch, Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};
use crate::secrets::inject::HandleSecrets;

/// The gateway setter of the sandbox builder.
impl SandboxBuilder {
    /// Gives the sandbox the secret gateway `name` (1 to 64 of `a-z`,
    /// `0-9`, `-`; at most 8 gateways; the same name again replaces it):
    /// sandbox code calls `sandbox.gateways().get(name)`'s URL and the agent
    /// adds the secret headers to each allowed request before forwarding it
    /// to the upstream, so the code never sees the values
    /// (docs/secrets.md, "Gateways").
    ///
    /// `create` checks every gateway before any call, reads every header's
    /// secret (through the builder's secret cache) before launching, and
    /// once the sandbox is ready sends them in its one Configure (with the
    /// mounts and volumes), then reads
    /// the ports. An agent without the feature fails `Unimplemented`
    /// (feature `secret_gateway`); a refused or failed section fails
    /// `Sandbox` (`secret_gateway: <class>`); either terminates the sandbox
    /// unless [`Self::keep_on_failure`]. A pool's builder refuses gateways:
    /// pass them to [`crate::Pool::take_with_gateways`].
    ///
    /// Only with the `secrets` cargo feature.
    pub fn gateway(mut self, name: impl Into<String>, gateway: SecretGateway) -> Self {
        named::give(&mut self, name.into(), gateway);
        self
    }
}

/// The prefix of the cache that reads the headers' secrets (the builder's
/// `secret_cache`, else the default one's).
fn prefix_of(builder: &SandboxBuilder) -> String {
    crate::secrets::inject::builder_cache(builder).map_or_else(
        || crate::secrets::DEFAULT_PREFIX.to_owned(),
        |c| c.prefix().to_owned(),
    )
}

/// The gateways' steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        // Connecting applies nothing: the sandbox's own gateways are
        // recovered from the agent.
        named::refuse_any::<SecretGateway>(builder, || {
            spec::refuse("gateways", m::GATEWAY_CONNECT, &[])
        })
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        named::refuse_any::<SecretGateway>(builder, || {
            spec::refuse("gateways", m::GATEWAY_POOLED, &[])
        })
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        handle.set(HandleGateways::default());
        let gateways = named::given::<SecretGateway>(builder);
        if stage == Stage::Create && !gateways.is_empty() {
            spec::check_all(gateways, &prefix_of(builder))?;
            handle.set(ToApply::new(gateways.to_vec()));
        }
        Ok(())
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let Some(to_apply) = at.handle.get::<ToApply<SecretGateway>>() else {
                return Ok(());
            };
            let gateways = to_apply.items();
            let cache = match at.handle.get::<HandleSecrets>() {
                Some(secrets) => secrets.cache(at.client).await?,
                None => crate::secrets::inject::default_cache(at.client)?,
            };
            super::section::preflight(&gateways, &cache).await
        })
    }

    fn configure_section<'a>(
        &'a self,
        sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        Box::pin(async move {
            match sandbox.parts().get::<ToApply<SecretGateway>>() {
                Some(to_apply) => Ok(Some(view::plan(sandbox, to_apply.items()).await?)),
                None => Ok(None),
            }
        })
    }

    fn after_connect<'a>(
        &'a self,
        sandbox: &'a Sandbox,
        features: Option<&'a pb::AgentFeatures>,
    ) -> StepFuture<'a, ()> {
        Box::pin(view::recover(sandbox, features))
    }
}

/// Checks `gateways` for a pool's take (before a slot is claimed), with the
/// default secret prefix or the pool builder's cache's.
pub(crate) fn check_for_take(
    builder: &SandboxBuilder,
    gateways: &[(String, SecretGateway)],
) -> Result<(), SandboxError> {
    spec::check_all(gateways, &prefix_of(builder))
}

/// Applies `gateways` on a sandbox a pool's take just gave (its one
/// Configure); a failure terminates it (a pool's sandboxes are never kept
/// on failure).
pub(crate) async fn apply_on_take(
    sandbox: Sandbox,
    gateways: Vec<(String, SecretGateway)>,
) -> Result<Sandbox, SandboxError> {
    let plan = view::plan(&sandbox, gateways).await.map(|plan| vec![plan]);
    crate::sandbox::steps::configure_planned(sandbox, false, plan).await
}
