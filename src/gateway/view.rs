//! `sandbox.gateways()`: the routes the agent serves ([`GatewayStatus`] per
//! gateway name), `refresh()`, and whether the handle recovered them on
//! `connect` (then it knows names and ports only, never the upstreams or
//! the headers, which the agent does not report).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::spec::SecretGateway;
use crate::configure::{Section, SectionPlan};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;
use crate::secrets::SecretCache;
use crate::secrets::inject::HandleSecrets;

/// One gateway as the agent last reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayStatus {
    port: u16,
    last_error_class: Option<String>,
}

impl GatewayStatus {
    pub(crate) fn from_route(route: &pb::SecretGatewayRouteStatus) -> Self {
        let class = (!route.last_error_class.is_empty())
            .then(|| crate::error::map::configure::error_class(&route.last_error_class).to_owned());
        Self {
            // A port above 65,535 is no port: reported as 0.
            port: u16::try_from(route.port).unwrap_or(0),
            last_error_class: class,
        }
    }

    /// The loopback port the gateway listens on inside the sandbox.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`: the base URL sandbox code calls (not a
    /// secret: only code inside the sandbox reaches it).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The class of the latest request the gateway failed (`not_allowed`,
    /// `rate_limited`, `upstream_unreachable`, `upstream_timeout`,
    /// `upstream_error`, ...), kept until another fails; `None` when none
    /// has. A class name only, never text from the request.
    pub fn last_error_class(&self) -> Option<&str> {
        self.last_error_class.as_deref()
    }
}

/// What a handle knows of its gateways (shared by its clones).
#[derive(Default)]
struct State {
    statuses: BTreeMap<String, GatewayStatus>,
    /// Recovered on `connect` from ConfigureStatus: refresh only re-reads.
    recovered: bool,
    /// The gateways this handle applied (none when recovered or unused),
    /// what `refresh` sends again.
    applied: Vec<(String, SecretGateway)>,
}

/// The handle's part: its gateways' state, replaced in place by apply,
/// recovery and refresh (a `Parts` value is otherwise never changed; this
/// one is behind a lock because a refresh on any clone must be seen by
/// all).
#[derive(Clone, Default)]
pub(crate) struct HandleGateways(Arc<Mutex<State>>);

// Names, ports and the flag; the gateways' own Debug hides their secrets.
impl fmt::Debug for HandleGateways {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("HandleGateways")
            .field("statuses", &state.statuses)
            .field("recovered", &state.recovered)
            .field("applied", &state.applied.len())
            .finish()
    }
}

impl HandleGateways {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is replaced whole: a panic leaves a consistent one.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records gateways this handle applied and what the agent reported.
    pub(crate) fn set_applied(
        &self,
        applied: Vec<(String, SecretGateway)>,
        statuses: BTreeMap<String, GatewayStatus>,
    ) {
        *self.lock() = State {
            statuses,
            recovered: false,
            applied,
        };
    }

    /// Records gateways recovered from ConfigureStatus (`connect`).
    pub(crate) fn set_recovered(&self, statuses: BTreeMap<String, GatewayStatus>) {
        *self.lock() = State {
            recovered: !statuses.is_empty(),
            statuses,
            applied: Vec::new(),
        };
    }

    fn set_statuses(&self, statuses: BTreeMap<String, GatewayStatus>) {
        self.lock().statuses = statuses;
    }
}

/// The secret cache a handle reads its gateways' headers with: the one of
/// its secrets (the builder's `secret_cache`, else the default of its
/// client).
pub(crate) async fn cache_of(sandbox: &Sandbox) -> Result<SecretCache, SandboxError> {
    match sandbox.parts().get::<HandleSecrets>() {
        Some(secrets) => secrets.cache(sandbox.client()).await,
        None => crate::secrets::inject::default_cache(sandbox.client()),
    }
}

/// The `secret_gateway` part of a Configure for `gateways` on `sandbox`:
/// every header read through the handle's secret cache now; once applied,
/// the ports read from the one ConfigureStatus after it are recorded on
/// the handle with the gateways.
///
/// # Errors
/// The secret reads' errors.
pub(crate) async fn plan(
    sandbox: &Sandbox,
    gateways: Vec<(String, SecretGateway)>,
) -> Result<SectionPlan, SandboxError> {
    let cache = cache_of(sandbox).await?;
    let request = super::section::request(&gateways, &cache).await?;
    let mut plan = SectionPlan::generic(Section::SecretGateway, request);
    plan.after = Some(Box::new(move |sandbox, status| {
        part(sandbox).set_applied(gateways, super::section::statuses(status));
        Ok(())
    }));
    Ok(plan)
}

/// Applies `gateways` on `sandbox` (one Configure with the section, the
/// feature gate before it), then reads the ports (one ConfigureStatus) and
/// records both on the handle.
///
/// # Errors
/// The secret reads' errors; `Unimplemented { feature: "secret_gateway" }`
/// when the agent lacks the feature; `Sandbox` `secret_gateway: <class>`
/// when it refuses (INVALID) or fails (FAILED) the section; RPC failures.
async fn apply(
    sandbox: &Sandbox,
    gateways: Vec<(String, SecretGateway)>,
) -> Result<(), SandboxError> {
    let plan = plan(sandbox, gateways).await?;
    crate::configure::apply_plans(sandbox, vec![plan]).await
}

/// The handle's gateway part (a handle made without one gets an empty one
/// that nothing else sees: it has no gateways).
fn part(sandbox: &Sandbox) -> HandleGateways {
    sandbox
        .parts()
        .get::<HandleGateways>()
        .cloned()
        .unwrap_or_default()
}

/// `connect`'s recovery: with an agent offering Configure and the gateway
/// section, one ConfigureStatus makes a recovered view (empty when the
/// sandbox has no gateways); a refused token there is ignored, as the
/// reference does.
///
/// # Errors
/// ConfigureStatus's other failures.
pub(crate) async fn recover(
    sandbox: &Sandbox,
    features: Option<&pb::AgentFeatures>,
) -> Result<(), SandboxError> {
    let offered = features.is_some_and(|f| f.configure && f.secret_gateway);
    if !offered {
        return Ok(());
    }
    match crate::configure::read_status(sandbox.conn()).await {
        Ok(status) => {
            part(sandbox).set_recovered(super::section::statuses(&status));
            Ok(())
        }
        Err(err) if err.kind() == crate::ErrorKind::Authentication => Ok(()),
        Err(err) => Err(err),
    }
}

/// The secret gateways of a sandbox (docs/secrets.md, "Gateways"):
/// [`crate::Sandbox::gateways`].
pub struct Gateways<'a> {
    sandbox: &'a Sandbox,
}

impl fmt::Debug for Gateways<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateways")
            .field("sandbox_id", &self.sandbox.id())
            .field("state", &part(self.sandbox))
            .finish()
    }
}

impl crate::sandbox::Sandbox {
    /// The sandbox's secret gateways: what the agent last reported for
    /// each (its port and last error class), `refresh()` after a secret
    /// rotation, and whether they were recovered on `connect`. Empty when
    /// the sandbox has none.
    ///
    /// Only with the `secrets` cargo feature.
    pub fn gateways(&self) -> Gateways<'_> {
        Gateways { sandbox: self }
    }
}

impl Gateways<'_> {
    /// The gateway `name`, as last reported.
    pub fn get(&self, name: &str) -> Option<GatewayStatus> {
        part(self.sandbox).lock().statuses.get(name).cloned()
    }

    /// Every gateway by name, as last reported.
    pub fn statuses(&self) -> BTreeMap<String, GatewayStatus> {
        part(self.sandbox).lock().statuses.clone()
    }

    /// The gateways' names.
    pub fn names(&self) -> Vec<String> {
        part(self.sandbox).lock().statuses.keys().cloned().collect()
    }

    /// How many gateways the sandbox has.
    pub fn len(&self) -> usize {
        part(self.sandbox).lock().statuses.len()
    }

    /// Whether the sandbox has no gateway.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` when `connect` rebuilt these from the agent's status: this
    /// handle knows their names and ports but not their upstreams or
    /// headers, so [`Self::refresh`] only reads the status again (rotate a
    /// secret from the handle that created the sandbox).
    pub fn recovered(&self) -> bool {
        part(self.sandbox).lock().recovered
    }

    /// For gateways this handle applied: drops every header's secret from
    /// the secret cache, sends the gateway section again with the values
    /// read now (the way to push a rotated secret without a new sandbox),
    /// and reads the ports again (they may change: the agent rebinds on
    /// every apply). For recovered gateways: reads the status again only.
    /// Without gateways: nothing.
    ///
    /// # Errors
    /// As the gateways of `create`: the secret reads' errors;
    /// `Sandbox` `secret_gateway: <class>` when the agent refuses or fails
    /// the section (it keeps serving the previous routes);
    /// `Unimplemented`; RPC failures.
    pub async fn refresh(&self) -> Result<(), SandboxError> {
        let sandbox = self.sandbox;
        boxed!(Result<(), SandboxError>, {
            let handle = part(sandbox);
            let (applied, recovered) = {
                let state = handle.lock();
                (state.applied.clone(), state.recovered)
            };
            if !applied.is_empty() {
                let cache = cache_of(sandbox).await?;
                super::section::forget(&applied, &cache);
                return apply(sandbox, applied).await;
            }
            if recovered {
                let status = crate::configure::read_status(sandbox.conn()).await?;
                handle.set_statuses(super::section::statuses(&status));
            }
            Ok(())
        })
    }
}
