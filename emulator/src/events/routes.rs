//! The local events API on the control-plane port (docs/local.md,
//! "Lifecycle events pipeline"), SigV4-signed like every control-plane call (the
//! guard; scope `lambda`), JSON in camelCase, errors `{"message": ...}`
//! with their status: every call but `PUT /_rayito/events/stack` answers
//! 404 [`NOT_DEPLOYED`] while the stack is not deployed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::StatusCode;
use rayito_events::Event;
use rayito_events::line::Rejection;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::deliver::Secret;
use super::stack::StackView;
use super::store::Query as EventQuery;
use super::webhooks::{Refused, WebhookView, parse_types};
use crate::api_error::ApiError;
use crate::guard::Signed;
use crate::registry::Shared;

/// The 404 of every call but deploy while the stack is not deployed.
pub(crate) const NOT_DEPLOYED: &str = "the events stack is not deployed";
/// A body that is not the call's JSON.
const MALFORMED: &str = "Malformed request body.";
/// The reconciler's interval bounds, in minutes (AWS's template's).
const INTERVAL_MINUTES: std::ops::RangeInclusive<i64> = 2..=60;
/// The interval when a deploy names none (the reference's default).
const DEFAULT_INTERVAL_MINUTES: u32 = 5;
/// `get_events`'s limit bounds, and its default.
const MAX_LIMIT: usize = 100;

type Answer = Result<Response, Refusal>;

/// A refused call: the guard's verdict, or a status and a message.
#[derive(Debug)]
enum Refusal {
    Unsigned(ApiError),
    Status(StatusCode, String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Unsigned(e) => e.into_response(),
            Refusal::Status(status, message) => {
                (status, Json(json!({ "message": message }))).into_response()
            }
        }
    }
}

pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/_rayito/events/stack",
            get(status).put(deploy).delete(destroy),
        )
        .route("/_rayito/events/stack-key", get(stack_key))
        .route(
            "/_rayito/events/webhooks",
            post(register_webhook).get(list_webhooks),
        )
        .route("/_rayito/events/webhooks/{id}", delete(delete_webhook))
        .route("/_rayito/events/records", get(records))
        .route("/_rayito/events/dead-letters", get(dead_letters))
        .route("/_rayito/events/counters", get(counters))
}

fn invalid(message: &str) -> Refusal {
    Refusal::Status(StatusCode::BAD_REQUEST, message.to_owned())
}

fn not_deployed() -> Refusal {
    Refusal::Status(StatusCode::NOT_FOUND, NOT_DEPLOYED.to_owned())
}

fn ok(value: Value) -> Answer {
    Ok((StatusCode::OK, Json(value)).into_response())
}

fn signed(signed: &Signed) -> Result<(), Refusal> {
    signed.check().map_err(Refusal::Unsigned)
}

fn stack_json(view: &StackView) -> Value {
    json!({
        "status": view.status,
        "outputs": {
            "EventsTableName": view.table_name,
            "StackKeySecretArn": view.secret_arn,
        },
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeployIn {
    log_group_name: Option<String>,
    reconciler_interval_minutes: Option<i64>,
}

/// `PUT /_rayito/events/stack`: deploy, or update the settings.
async fn deploy(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
    body: Bytes,
) -> Answer {
    signed(&s)?;
    let input: DeployIn = serde_json::from_slice(&body).map_err(|_| invalid(MALFORMED))?;
    let group = input
        .log_group_name
        .filter(|g| !g.trim().is_empty())
        .ok_or_else(|| invalid("logGroupName must be a non-empty string"))?;
    let minutes = match input.reconciler_interval_minutes {
        None => DEFAULT_INTERVAL_MINUTES,
        Some(n) if INTERVAL_MINUTES.contains(&n) => n as u32,
        Some(_) => {
            return Err(invalid(
                "reconcilerIntervalMinutes must be between 2 and 60",
            ));
        }
    };
    let settings = &shared.settings;
    let view = shared
        .events
        .deploy(group, minutes, &settings.region, &settings.account_id);
    ok(stack_json(&view))
}

/// `GET /_rayito/events/stack`.
async fn status(State(shared): State<Arc<Shared>>, Extension(s): Extension<Signed>) -> Answer {
    signed(&s)?;
    let view = shared.events.status().ok_or_else(not_deployed)?;
    ok(stack_json(&view))
}

/// `DELETE /_rayito/events/stack`.
async fn destroy(State(shared): State<Arc<Shared>>, Extension(s): Extension<Signed>) -> Answer {
    signed(&s)?;
    if !shared.events.destroy() {
        return Err(not_deployed());
    }
    ok(json!({ "status": "DELETE_COMPLETE" }))
}

/// `GET /_rayito/events/stack-key`: what GetSecretValue gives on AWS.
async fn stack_key(State(shared): State<Arc<Shared>>, Extension(s): Extension<Signed>) -> Answer {
    signed(&s)?;
    let key = shared.events.stack_key().ok_or_else(not_deployed)?;
    ok(json!({ "stackKey": STANDARD.encode(key) }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookIn {
    url: String,
    secret_name: String,
    secret: String,
    types: Vec<String>,
}

fn webhook_json(w: &WebhookView) -> Value {
    json!({
        "webhookId": w.id,
        "url": w.url,
        "types": w.types.iter().map(|k| k.type_name()).collect::<Vec<_>>(),
    })
}

/// `POST /_rayito/events/webhooks`.
async fn register_webhook(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
    body: Bytes,
) -> Answer {
    signed(&s)?;
    if shared.events.status().is_none() {
        return Err(not_deployed());
    }
    let input: WebhookIn = serde_json::from_slice(&body).map_err(|_| invalid(MALFORMED))?;
    if input.secret_name.trim().is_empty() {
        return Err(invalid("secretName must not be empty"));
    }
    let secret = STANDARD
        .decode(input.secret.as_bytes())
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("secret must be the base64 of a non-empty value"))?;
    let registered = shared
        .events
        .register_webhook(&input.url, &input.types, Secret(secret));
    let (view, worker) = registered.map_err(|refused| match refused {
        Refused::NotDeployed => not_deployed(),
        Refused::Invalid(message) => invalid(&message),
    })?;
    shared.spawn(worker);
    ok(webhook_json(&view))
}

/// `GET /_rayito/events/webhooks`.
async fn list_webhooks(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
) -> Answer {
    signed(&s)?;
    let hooks = shared.events.webhooks().ok_or_else(not_deployed)?;
    ok(json!({ "webhooks": hooks.iter().map(webhook_json).collect::<Vec<_>>() }))
}

/// `DELETE /_rayito/events/webhooks/{id}`.
async fn delete_webhook(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
    Path(id): Path<String>,
) -> Answer {
    signed(&s)?;
    let deleted = shared.events.delete_webhook(&id).ok_or_else(not_deployed)?;
    ok(json!({ "deleted": deleted }))
}

fn record_json(e: &Event) -> Value {
    json!({
        "eventId": e.event_id,
        "sandboxId": e.sandbox_id,
        "kind": e.kind.as_str(),
        "killReason": e.kill_reason.map(|r| r.as_str()),
        "generation": e.generation,
        "occurredAtMs": e.occurred_at_ms,
        "imageArn": e.image_arn,
        "imageVersion": e.image_version,
    })
}

/// The records query (`type` repeatable).
fn event_query(params: &[(String, String)]) -> Result<EventQuery, Refusal> {
    let mut q = EventQuery {
        sandbox_id: None,
        kinds: Vec::new(),
        limit: MAX_LIMIT,
        ascending: false,
    };
    let mut types = Vec::new();
    for (name, value) in params {
        match name.as_str() {
            "sandboxId" if !value.is_empty() => q.sandbox_id = Some(value.clone()),
            "type" => types.push(value.clone()),
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| invalid("limit must be between 1 and 100"))?;
            }
            "order" => {
                q.ascending = match value.as_str() {
                    "asc" => true,
                    "desc" => false,
                    _ => return Err(invalid("order must be asc or desc")),
                };
            }
            _ => {}
        }
    }
    if !types.is_empty() {
        q.kinds = parse_types(&types).map_err(|m| invalid(&m))?;
    }
    Ok(q)
}

/// `GET /_rayito/events/records?sandboxId=&type=..&limit=&order=`.
async fn records(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
    Query(params): Query<Vec<(String, String)>>,
) -> Answer {
    signed(&s)?;
    let q = event_query(&params)?;
    let guard = shared.events.stack();
    let stack = guard.as_ref().ok_or_else(not_deployed)?;
    let events: Vec<Value> = stack.store.query(&q).iter().map(record_json).collect();
    drop(guard);
    ok(json!({ "events": events }))
}

/// `GET /_rayito/events/dead-letters`, oldest first.
async fn dead_letters(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Signed>,
) -> Answer {
    signed(&s)?;
    let guard = shared.events.stack();
    let stack = guard.as_ref().ok_or_else(not_deployed)?;
    let letters: Vec<Value> = stack
        .dead_letters
        .iter()
        .map(|d| {
            json!({
                "webhookId": d.webhook_id,
                "eventId": d.event_id,
                "attempts": d.attempts,
                "reason": d.reason,
                "lastStatus": d.last_status,
            })
        })
        .collect();
    drop(guard);
    ok(json!({ "deadLetters": letters }))
}

/// `GET /_rayito/events/counters`: admitted, delivered, each rejection,
/// and the lines dropped before the router (`dropped`).
async fn counters(State(shared): State<Arc<Shared>>, Extension(s): Extension<Signed>) -> Answer {
    signed(&s)?;
    let dropped = shared.events.dropped.load(Ordering::Relaxed);
    let guard = shared.events.stack();
    let stack = guard.as_ref().ok_or_else(not_deployed)?;
    let c = &stack.counters;
    let rejected: Map<String, Value> = Rejection::ALL
        .iter()
        .zip(c.rejected)
        .map(|(r, n)| (r.as_str().to_owned(), json!(n)))
        .collect();
    let body = json!({
        "admitted": c.admitted,
        "delivered": c.delivered,
        "rejected": rejected,
        "dropped": dropped,
    });
    drop(guard);
    ok(body)
}
