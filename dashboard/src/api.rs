//! The router: the page, its static files and the JSON API under
//! `/api/v1`, all behind [`crate::guard::defend`].

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rayito::fleet::FleetQuery;
use rayito::{Client, CostQuery, SandboxState, UsageCost};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::DashboardOptions;
use crate::actions::Plans;
use crate::errors::ApiError;
use crate::secrets::Secrets;
use crate::source::{self, AccessTokens};

/// The largest POST body taken.
const BODY_LIMIT: usize = 64 * 1024;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) port: u16,
    pub(crate) secrets: Secrets,
    /// Per port: cookies are not, and two dashboards side by side must not
    /// take each other's session.
    pub(crate) cookie_name: String,
    pub(crate) allow_actions: bool,
    pub(crate) poll_interval_ms: u128,
    pub(crate) tokens: AccessTokens,
    pub(crate) plans: Plans,
    /// One for the dashboard's life: its clones share the bill's cache.
    pub(crate) cost: UsageCost,
    /// The client actions run with (hosted: the actions role's; locally
    /// the same as `client`).
    pub(crate) actions_client: Client,
    /// The hosted guard, audit and groups (feature `lambda`); `None` is
    /// the local dashboard.
    #[cfg(feature = "lambda")]
    pub(crate) hosted: Option<Arc<crate::hosted::Gate>>,
}

impl Shared {
    pub(crate) fn new(client: Client, port: u16, secrets: Secrets, o: DashboardOptions) -> Self {
        Self {
            port,
            secrets,
            cookie_name: format!("rayito_dashboard_{port}"),
            allow_actions: o.allow_actions,
            poll_interval_ms: o.poll_interval.as_millis(),
            tokens: o.access_tokens,
            plans: Plans::default(),
            cost: client.cost(),
            actions_client: client.clone(),
            client,
            #[cfg(feature = "lambda")]
            hosted: None,
        }
    }

    /// The hosted dashboard's: no loopback port or cookie (the gate checks
    /// bearer tokens instead).
    #[cfg(feature = "lambda")]
    pub(crate) fn hosted(
        client: Client,
        actions: Option<Client>,
        gate: Arc<crate::hosted::Gate>,
        allow_actions: bool,
    ) -> Self {
        let options = DashboardOptions::new()
            .allow_actions(allow_actions)
            .poll_interval(std::time::Duration::from_secs(15));
        let mut shared = Self::new(client, 443, Secrets::draw(), options);
        if let Some(actions) = actions {
            shared.actions_client = actions;
        }
        shared.hosted = Some(gate);
        shared
    }

    /// Whether the request's caller may act: the local dashboard's
    /// `--allow-actions`; hosted, also the caller's group.
    pub(crate) fn may_act(&self, actor: Option<&crate::actions::ActorExt>) -> bool {
        #[cfg(feature = "lambda")]
        if let Some(gate) = &self.hosted {
            return actor.is_some_and(|a| gate.may_act(&a.0.caller));
        }
        let _ = actor;
        self.allow_actions
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/meta", get(meta))
        .route("/session", get(session))
        .route("/sandboxes", get(sandboxes))
        .route("/sandboxes/{id}", get(sandbox))
        .route("/sandboxes/{id}/metrics", get(metrics))
        .route("/sandboxes/{id}/events", get(events))
        .route("/images", get(images))
        .route("/quotas", get(quotas))
        .route("/cost", get(cost))
        .route("/actions/plan", post(crate::actions::plan))
        .route("/actions/run", post(crate::actions::run))
        .fallback(|| async { ApiError::not_found() });
    let router = Router::new()
        .route("/", get(crate::assets::index))
        .route("/static/{*name}", get(crate::assets::file))
        .nest("/api/v1", api)
        .layer(DefaultBodyLimit::max(BODY_LIMIT));
    #[cfg(feature = "lambda")]
    if shared.hosted.is_some() {
        return router
            .layer(middleware::from_fn_with_state(
                shared.clone(),
                crate::hosted::defend,
            ))
            .with_state(shared);
    }
    router
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            crate::guard::defend,
        ))
        .with_state(shared)
}

async fn meta(
    State(s): State<Arc<Shared>>,
    actor: Option<axum::Extension<crate::actions::ActorExt>>,
) -> Json<Value> {
    #[cfg(feature = "lambda")]
    let deployment = if s.hosted.is_some() { "stack" } else { "local" };
    #[cfg(not(feature = "lambda"))]
    let deployment = "local";
    Json(json!({
        "api_version": 1,
        "rayito_version": env!("CARGO_PKG_VERSION"),
        "backend": if s.client.is_local() { "local" } else { "aws" },
        "deployment": deployment,
        "region": s.client.region(),
        "allow_actions": s.may_act(actor.as_ref().map(|a| &a.0)),
        "poll_interval_ms": s.poll_interval_ms,
    }))
}

/// The CSRF value the page sends back on every POST (readable only by a
/// same-origin script holding the session cookie).
async fn session(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({ "csrf_token": s.secrets.csrf() }))
}

#[derive(Debug, Deserialize)]
struct SandboxesQuery {
    state: Option<String>,
    image: Option<String>,
}

/// The fleet's sandboxes, with a state (`RUNNING`, ...) and an image
/// (name or ARN) to filter on.
async fn sandboxes(
    State(s): State<Arc<Shared>>,
    Query(q): Query<SandboxesQuery>,
) -> Result<Response, ApiError> {
    let mut query = FleetQuery::new();
    if let Some(state) = q.state.as_deref().filter(|v| !v.is_empty()) {
        query = query.states([parse_state(state)?]);
    }
    if let Some(image) = q.image.filter(|v| !v.is_empty()) {
        query = query.image(image);
    }
    Ok(Json(s.client.fleet().sandboxes(query).await?).into_response())
}

/// A state as the page names it (the control plane's token).
pub(crate) fn parse_state(name: &str) -> Result<SandboxState, ApiError> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "PENDING" => SandboxState::Pending,
        "RUNNING" => SandboxState::Running,
        "SUSPENDING" => SandboxState::Suspending,
        "SUSPENDED" => SandboxState::Suspended,
        "TERMINATING" => SandboxState::Terminating,
        "TERMINATED" => SandboxState::Terminated,
        _ => {
            return Err(ApiError::invalid_argument(format!(
                "state: not a sandbox state: {name:?} (PENDING, RUNNING, SUSPENDING, SUSPENDED, TERMINATING, TERMINATED)"
            )));
        }
    })
}

async fn images(State(s): State<Arc<Shared>>) -> Result<Response, ApiError> {
    Ok(Json(s.client.fleet().images().await?).into_response())
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    limit: Option<u32>,
}

/// One sandbox's lifecycle events, newest first (empty when the events
/// stack is not deployed).
async fn events(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    let records = s
        .client
        .fleet()
        .events(Some(&id), q.limit.unwrap_or(50))
        .await?;
    let rows: Vec<Value> = records
        .iter()
        .map(|e| {
            json!({
                "event_id": e.event_id,
                "type": e.event_type(),
                "timestamp": e.occurred_at_ms as f64 / 1000.0,
                "generation": e.generation,
                "detail": e.kill_reason.map(|r| format!("kill reason: {}", r.as_str())),
            })
        })
        .collect();
    Ok(Json(rows).into_response())
}

async fn quotas(State(s): State<Arc<Shared>>) -> Result<Response, ApiError> {
    Ok(Json(s.client.quotas().report().await?).into_response())
}

#[derive(Debug, Deserialize)]
struct CostParams {
    billed: Option<String>,
}

/// The estimate (free), and Cost Explorer's bill with `?billed=1` (paid:
/// $0.01 a request on a cache miss; the cache lives as long as the
/// dashboard).
async fn cost(
    State(s): State<Arc<Shared>>,
    Query(q): Query<CostParams>,
) -> Result<Response, ApiError> {
    let billed = q.billed.as_deref() == Some("1");
    Ok(Json(s.cost.report(CostQuery::new().billed(billed)).await?).into_response())
}

async fn metrics(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    Json(source::metrics(&s.client, &s.tokens, &id).await).into_response()
}

async fn sandbox(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let info = s.client.get_info_by_id(&id).await?;
    let end_at = info.started_at.map(|t| t + info.max_duration);
    Ok(Json(json!({
        "sandbox_id": info.sandbox_id,
        "state": info.state.as_str(),
        "state_reason": info.state_reason,
        "image": info.image_arn,
        "version": info.image_version,
        "started_at": info.started_at.map(source::unix),
        "end_at": end_at.map(source::unix),
        "terminated_at": info.terminated_at.map(source::unix),
    }))
    .into_response())
}
