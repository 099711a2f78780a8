//! The router: the page, its static files and the JSON API under
//! `/api/v1`, all behind [`crate::guard::defend`].

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::TryStreamExt as _;
use rayito::{Client, ListQuery};
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
}

impl Shared {
    pub(crate) fn new(client: Client, port: u16, secrets: Secrets, o: DashboardOptions) -> Self {
        Self {
            client,
            port,
            secrets,
            cookie_name: format!("rayito_dashboard_{port}"),
            allow_actions: o.allow_actions,
            poll_interval_ms: o.poll_interval.as_millis(),
            tokens: o.access_tokens,
            plans: Plans::default(),
        }
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/meta", get(meta))
        .route("/session", get(session))
        .route("/sandboxes", get(sandboxes))
        .route("/sandboxes/{id}", get(sandbox))
        .route("/sandboxes/{id}/metrics", get(metrics))
        .route("/actions/plan", post(crate::actions::plan))
        .route("/actions/run", post(crate::actions::run))
        .fallback(|| async { ApiError::not_found() });
    Router::new()
        .route("/", get(crate::assets::index))
        .route("/static/{*name}", get(crate::assets::file))
        .nest("/api/v1", api)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            crate::guard::defend,
        ))
        .with_state(shared)
}

async fn meta(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "api_version": 1,
        "rayito_version": env!("CARGO_PKG_VERSION"),
        "backend": if s.client.is_local() { "local" } else { "aws" },
        "region": s.client.region(),
        "allow_actions": s.allow_actions,
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

async fn sandboxes(
    State(s): State<Arc<Shared>>,
    Query(q): Query<SandboxesQuery>,
) -> Result<Response, ApiError> {
    let _ = (&q.state, &q.image);
    let rows: Vec<_> = s.client.list(ListQuery::new()).try_collect().await?;
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "sandbox_id": r.sandbox_id,
                "state": r.state.as_str(),
                "image": r.template,
                "version": r.template_version,
                "started_at": r.started_at.map(source::unix),
                "metadata": r.metadata,
            })
        })
        .collect();
    Ok(Json(rows).into_response())
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
