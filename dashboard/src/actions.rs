//! Bulk actions: a dry-run plan first (what would happen to which
//! sandbox, and the confirmation it takes: `Fleet::plan_bulk`), kept here
//! by a random id; then its run (`Fleet::run_bulk`), only with that plan's
//! confirmation, and only when the dashboard was started with
//! `--allow-actions`. The page never sends a plan back: the server runs the
//! one it made, once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use rand::RngCore as _;
use rayito::fleet::{BulkAction, BulkFilter, BulkPlan, Fleet, FleetQuery};
use serde::Deserialize;
use serde_json::Value;

use crate::api::{Shared, parse_state};
use crate::errors::ApiError;

/// How long a plan can be run after it was made.
const PLAN_TTL: Duration = Duration::from_secs(600);
/// How many plans are kept at most (the oldest goes first).
const PLANS_KEPT: usize = 20;

/// Who acts (hosted: the caller the gate checked, and its request); put
/// in the request's extensions by the hosted guard only.
#[cfg(feature = "lambda")]
#[derive(Debug, Clone)]
pub(crate) struct ActorExt(pub(crate) crate::hosted::Actor);

/// Who acts: nothing is known of a local caller.
#[cfg(not(feature = "lambda"))]
#[derive(Debug, Clone)]
#[allow(dead_code)] // only ever extracted (as absent)
pub(crate) struct ActorExt(pub(crate) ());

/// The plans not yet run, by id, with the fleet (and its tokens) each was
/// made with.
#[derive(Debug, Default)]
pub(crate) struct Plans(Mutex<BTreeMap<String, Kept>>);

#[derive(Debug)]
struct Kept {
    made: Instant,
    plan: BulkPlan,
    fleet: Fleet,
}

/// A new plan id: 16 random bytes in hex.
fn new_id() -> String {
    let mut id = [0u8; 16];
    rand::rng().fill_bytes(&mut id);
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The action `name` (with `timeout_seconds` for set_timeout).
fn parse_action(name: &str, timeout_seconds: Option<u64>) -> Result<BulkAction, ApiError> {
    match (name, timeout_seconds) {
        ("kill", _) => Ok(BulkAction::Kill),
        ("pause", _) => Ok(BulkAction::Pause),
        ("resume", _) => Ok(BulkAction::Resume),
        ("set_timeout", Some(secs)) => Ok(BulkAction::SetTimeout(Duration::from_secs(secs))),
        ("set_timeout", None) => Err(ApiError::invalid_argument(
            "timeout_seconds: set_timeout needs one",
        )),
        (other, _) => Err(ApiError::invalid_argument(format!(
            "action: not an action: {other:?} (kill, pause, resume, set_timeout)"
        ))),
    }
}

/// Plan `id` from the hosted cache table, planned again over the ids it
/// acts on with the fleet of this environment: the same plan when the
/// fleet did not change (the same confirmation), else 404
/// `plan_not_found` (plan again). `Ok(Err(action))`: it acts on nothing.
#[cfg(feature = "lambda")]
async fn take_stored(
    s: &Shared,
    store: &crate::hosted::PlanStore,
    id: &str,
    confirmation: &str,
) -> Result<Result<(BulkPlan, Fleet), BulkAction>, ApiError> {
    let stored = store.take(id, confirmation).await?;
    let action = parse_action(&stored.action, stored.timeout_seconds)?;
    if stored.acting.is_empty() {
        return Ok(Err(action));
    }
    let mut fleet = s.actions_client.fleet();
    for id in &stored.acting {
        if let Some(token) = s.tokens.get(id) {
            fleet = fleet.access_token(id.clone(), token);
        }
    }
    let plan = fleet
        .plan_bulk(action, BulkFilter::new().ids(stored.acting.clone()))
        .await?;
    let same = plan
        .acting()
        .iter()
        .map(|t| t.sandbox_id.as_str())
        .eq(stored.acting.iter().map(String::as_str));
    if !same || plan.confirmation != stored.confirmation {
        return Err(ApiError::plan_not_found());
    }
    Ok(Ok((plan, fleet)))
}

impl Plans {
    fn keep(&self, plan: BulkPlan, fleet: Fleet) -> String {
        let id = new_id();
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|_, k| k.made.elapsed() < PLAN_TTL);
        while all.len() >= PLANS_KEPT {
            let oldest = all
                .iter()
                .min_by_key(|(_, k)| k.made)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(oldest) => all.remove(&oldest),
                None => break,
            };
        }
        all.insert(
            id.clone(),
            Kept {
                made: Instant::now(),
                plan,
                fleet,
            },
        );
        id
    }

    /// The plan `id` when its confirmation is `confirmation` (taken out: a
    /// plan runs once); a wrong confirmation leaves it in place.
    fn take(&self, id: &str, confirmation: &str) -> Result<(BulkPlan, Fleet), ApiError> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|_, k| k.made.elapsed() < PLAN_TTL);
        let kept = all.get(id).ok_or_else(ApiError::plan_not_found)?;
        if kept.plan.confirmation != confirmation {
            return Err(ApiError::confirmation_required());
        }
        let kept = all.remove(id).ok_or_else(ApiError::plan_not_found)?;
        Ok((kept.plan, kept.fleet))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanRequest {
    action: String,
    timeout_seconds: Option<u64>,
    #[serde(default)]
    ids: Vec<String>,
    #[serde(default)]
    states: Vec<String>,
    image: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunRequest {
    plan_id: String,
    confirmation: String,
}

pub(crate) async fn plan(
    State(s): State<Arc<Shared>>,
    body: Result<Json<PlanRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    if !s.allow_actions {
        return Err(ApiError::actions_disabled());
    }
    let Json(req) = body.map_err(rejection)?;
    let action = parse_action(&req.action, req.timeout_seconds)?;
    let states = req
        .states
        .iter()
        .map(|s| parse_state(s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut filter = BulkFilter::new()
        .ids(req.ids.clone())
        .states(states.clone());
    if let Some(image) = req.image.clone().filter(|i| !i.is_empty()) {
        filter = filter.image(image);
    }
    let fleet = with_tokens(&s, &req, states).await?;
    let plan = fleet.plan_bulk(action, filter).await?;
    let mut answer = serde_json::to_value(&plan).unwrap_or(Value::Null);
    #[cfg(feature = "lambda")]
    let id = match s.hosted.as_ref().and_then(|g| g.plans.as_ref()) {
        Some(store) => {
            let id = new_id();
            let stored = crate::hosted::StoredPlan {
                action: req.action.clone(),
                timeout_seconds: req.timeout_seconds.filter(|_| req.action == "set_timeout"),
                acting: plan.acting().iter().map(|t| t.sandbox_id.clone()).collect(),
                confirmation: plan.confirmation.clone(),
            };
            store.keep(&id, &stored, PLAN_TTL.as_secs()).await?;
            id
        }
        None => s.plans.keep(plan, fleet),
    };
    #[cfg(not(feature = "lambda"))]
    let id = s.plans.keep(plan, fleet);
    if let Value::Object(map) = &mut answer {
        map.insert("plan_id".to_owned(), Value::String(id));
    }
    Ok(Json(answer).into_response())
}

/// The fleet with the access tokens the dashboard knows of the sandboxes
/// the plan may select (set-timeout reaches each one's agent with it).
async fn with_tokens(
    s: &Shared,
    req: &PlanRequest,
    states: Vec<rayito::SandboxState>,
) -> Result<Fleet, ApiError> {
    let mut fleet = s.actions_client.fleet();
    let candidates: Vec<String> = if req.ids.is_empty() {
        let mut query = FleetQuery::new();
        if !states.is_empty() {
            query = query.states(states);
        }
        if let Some(image) = req.image.clone().filter(|i| !i.is_empty()) {
            query = query.image(image);
        }
        fleet
            .sandboxes(query)
            .await?
            .into_iter()
            .map(|sbx| sbx.sandbox_id)
            .collect()
    } else {
        req.ids.clone()
    };
    for id in candidates {
        if let Some(token) = s.tokens.get(&id) {
            fleet = fleet.access_token(id, token);
        }
    }
    Ok(fleet)
}

pub(crate) async fn run(
    State(s): State<Arc<Shared>>,
    actor: Option<axum::Extension<ActorExt>>,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    if !s.allow_actions {
        return Err(ApiError::actions_disabled());
    }
    let Json(req) = body.map_err(rejection)?;
    #[cfg(feature = "lambda")]
    let (plan, fleet) = match s.hosted.as_ref().and_then(|g| g.plans.as_ref()) {
        Some(store) => match take_stored(&s, store, &req.plan_id, &req.confirmation).await? {
            Ok(taken) => taken,
            Err(action) => {
                return Ok(
                    Json(serde_json::json!({ "action": action, "results": [] })).into_response()
                );
            }
        },
        None => s.plans.take(&req.plan_id, &req.confirmation)?,
    };
    #[cfg(not(feature = "lambda"))]
    let (plan, fleet) = s.plans.take(&req.plan_id, &req.confirmation)?;
    #[cfg(feature = "lambda")]
    if let Some(gate) = &s.hosted {
        // The gate let no POST through without its actor.
        let Some(axum::Extension(ActorExt(actor))) = actor else {
            return Err(ApiError::no_token());
        };
        let action = plan.action.name();
        let ids: Vec<&str> = plan
            .acting()
            .iter()
            .map(|t| t.sandbox_id.as_str())
            .collect();
        if !ids.is_empty() {
            gate.audit_requested(&actor, action, &ids).await?;
        }
        let outcome = fleet.run_bulk(&plan, &req.confirmation).await;
        let (status, ok, failed) = match &outcome {
            Ok(o) => (200, o.succeeded(), o.failed()),
            Err(_) => (502, 0, ids.len()),
        };
        gate.audit_outcome(&actor, action, status, ok, failed).await;
        return Ok(Json(outcome?).into_response());
    }
    let _ = actor;
    let outcome = fleet.run_bulk(&plan, &req.confirmation).await?;
    Ok(Json(outcome).into_response())
}

pub(crate) fn rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::not_json(),
        JsonRejection::BytesRejection(_) => ApiError::too_large(),
        _ => ApiError::invalid_json(),
    }
}
