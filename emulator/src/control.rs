//! The control plane: the restJson1 routes of `lambda-microvms` 2025-09-09
//! that the SDK uses, on axum. Every request passes the guard (its `Host`,
//! its SigV4 signature); every call is then counted, refused if the
//! signature was, then any injected throttle, validation and the operation.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::admin;
use super::api_error::ApiError;
use super::faults::Operation;
use super::guard::{self, Signed};
use super::ids;
use super::images;
use super::lifecycle;
use super::logs_api;
use super::model::{AuthTokenInput, ListMicrovmsOut, ListMicrovmsQuery, RunMicrovmInput};
use super::registry::{Grant, Shared, Spec, Vm};
use super::validate;

pub(crate) type Reply = Result<Response, ApiError>;

/// The control-plane router (plus the admin routes under `/_emulator`).
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/2025-09-09/microvms", post(run_microvm).get(list_microvms))
        .route(
            "/2025-09-09/microvms/{id}",
            get(get_microvm).delete(terminate_microvm),
        )
        .route("/2025-09-09/microvms/{id}/suspend", post(suspend_microvm))
        .route("/2025-09-09/microvms/{id}/resume", post(resume_microvm))
        .route(
            "/2025-09-09/microvms/{id}/auth-token",
            post(create_auth_token),
        )
        .merge(images::routes::router())
        .merge(super::efs::routes::router())
        .route("/", post(logs_api::handle))
        .merge(admin::router())
        .merge(super::events::routes::router())
        .fallback(unknown_operation)
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            guard::guard,
        ))
        .layer(axum::middleware::map_response(add_request_id))
        .with_state(shared)
}

/// Every answer carries an `x-amzn-requestid`, as AWS's do.
async fn add_request_id(mut resp: Response) -> Response {
    if let Ok(v) = HeaderValue::from_str(&ids::uuid_v4()) {
        resp.headers_mut().insert("x-amzn-requestid", v);
    }
    resp
}

async fn unknown_operation() -> ApiError {
    ApiError::unknown_operation()
}

/// Counts the call, refuses it if its signature was, applies an injected
/// throttle or conflict.
pub(crate) fn gate(shared: &Shared, signed: &Signed, op: Operation) -> Result<(), ApiError> {
    shared.count_call(op);
    signed.check()?;
    if let Some(secs) = shared.faults.take_throttle(op) {
        return Err(ApiError::throttling(secs));
    }
    if shared.faults.take_conflict(op) {
        return Err(ApiError::injected_conflict());
    }
    Ok(())
}

/// Parses a JSON body (empty = `{}`) leniently into `T`, keeping the raw value.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &Bytes) -> Result<(T, Value), ApiError> {
    let value: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|_| ApiError::validation("Malformed request body."))?
    };
    let typed = serde_json::from_value(value.clone())
        .map_err(|_| ApiError::validation("Malformed request body."))?;
    Ok((typed, value))
}

pub(crate) fn ok(value: impl serde::Serialize) -> Reply {
    Ok((StatusCode::OK, Json(value)).into_response())
}

fn find(shared: &Shared, id: &str) -> Result<Arc<Vm>, ApiError> {
    validate::microvm_identifier(id)?;
    shared
        .find(id)
        .ok_or_else(|| ApiError::microvm_not_found(id))
}

async fn run_microvm(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Reply {
    gate(&shared, &signed, Operation::RunMicrovm)?;
    tracing::trace!("emulator: RunMicrovm");
    let (input, raw): (RunMicrovmInput, Value) = parse_body(&body)?;
    shared.record_client_token(input.client_token.clone());
    let valid = validate::run_microvm(&input)?;
    let s = &shared.settings;
    if valid.image.region != s.region || valid.image.account != s.account_id {
        return Err(ApiError::image_not_found(&valid.image_arn));
    }
    let target = shared.images.launch_target(
        &valid.image.name,
        &valid.image_arn,
        input.image_version.as_deref(),
    )?;
    // Held until the MicroVM is registered: a second call with the same
    // token waits here, then finds the first one's MicroVM.
    let _token_guard = match &input.client_token {
        Some(token) => Some(shared.lock_client_token(token).await),
        None => None,
    };
    if let Some(token) = &input.client_token
        && let Some((same, vm)) = shared.by_client_token(token, &raw)
    {
        return if same {
            ok(vm.to_out())
        } else {
            Err(ApiError::idempotency_mismatch())
        };
    }
    if shared.faults.take_quota() {
        return Err(ApiError::quota_exceeded(
            "L-MICROVMS",
            "Concurrent MicroVMs quota exceeded.",
        ));
    }
    if shared.faults.take_capacity() {
        return Err(ApiError::insufficient_capacity());
    }
    let default_ingress = format!(
        "arn:aws:lambda:{}:aws:network-connector:aws-network-connector:HTTP_INGRESS",
        s.region
    );
    let spec = Spec {
        image_arn: valid.image_arn.clone(),
        image_version: format!("{}.0", target.version),
        execution_role_arn: input.execution_role_arn.clone(),
        idle_policy: input.idle_policy.clone(),
        kms_key_identifier: input.kms_key_identifier.clone(),
        ingress: input
            .ingress_network_connectors
            .clone()
            .unwrap_or_else(|| vec![default_ingress]),
        egress: input.egress_network_connectors.clone().unwrap_or_default(),
        max_duration_seconds: valid.max_duration_seconds,
        log_group: super::sandbox_logs::log_group(input.logging.as_ref()),
    };
    let vm = lifecycle::create(&shared, spec, target.layer).await?;
    shared.insert(vm.clone(), input.client_token.clone().map(|t| (t, raw)));
    lifecycle::start(&shared, &vm, valid.payload);
    super::sandbox_logs::record(
        &shared,
        &vm,
        format!(
            "rayito emulator: MicroVM {} started from {} version {}",
            vm.id, valid.image.name, vm.spec.image_version
        ),
    );
    tracing::trace!(microvm = %vm.id, "emulator: RunMicrovm answered");
    ok(vm.to_out())
}

async fn get_microvm(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::GetMicrovm)?;
    ok(find(&shared, &id)?.to_out())
}

pub(crate) fn encode_page_token(index: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("rayito-emulator-page:{index}"))
}

pub(crate) fn decode_page_token(token: &str) -> Option<usize> {
    let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.strip_prefix("rayito-emulator-page:")?.parse().ok()
}

async fn list_microvms(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Query(query): Query<ListMicrovmsQuery>,
) -> Reply {
    gate(&shared, &signed, Operation::ListMicrovms)?;
    let q = validate::list_microvms(&query, decode_page_token)?;
    let matching: Vec<Arc<Vm>> = shared
        .all()
        .into_iter()
        .filter(|vm| {
            q.image_identifier.as_deref().is_none_or(|i| {
                vm.spec.image_arn == i || vm.spec.image_arn.rsplit(':').next() == Some(i)
            }) && q.image_version.as_deref().is_none_or(|v| {
                // `1` and `1.0` name one version.
                vm.spec.image_version == v
                    || images::parse_version(v)
                        .is_some_and(|n| images::parse_version(&vm.spec.image_version) == Some(n))
            })
        })
        .collect();
    let end = (q.start + q.max_results).min(matching.len());
    let items = matching
        .get(q.start..end)
        .unwrap_or_default()
        .iter()
        .map(|vm| vm.to_item())
        .collect();
    let next_token = (end < matching.len()).then(|| encode_page_token(end));
    ok(ListMicrovmsOut { items, next_token })
}

async fn terminate_microvm(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::TerminateMicrovm)?;
    let vm = find(&shared, &id)?;
    lifecycle::terminate(&shared, &vm);
    ok(json!({}))
}

async fn suspend_microvm(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::SuspendMicrovm)?;
    let vm = find(&shared, &id)?;
    lifecycle::suspend(&shared, &vm)?;
    ok(json!({}))
}

async fn resume_microvm(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::ResumeMicrovm)?;
    let vm = find(&shared, &id)?;
    lifecycle::resume(&shared, &vm).await?;
    ok(json!({}))
}

async fn create_auth_token(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    gate(&shared, &signed, Operation::CreateMicrovmAuthToken)?;
    tracing::trace!("emulator: CreateMicrovmAuthToken");
    let vm = find(&shared, &id)?;
    let (input, _): (AuthTokenInput, Value) = parse_body(&body)?;
    let valid = validate::auth_token(&input)?;
    let state = vm.state();
    if state.is_ending() {
        return Err(ApiError::conflict(
            &vm.id,
            format!(
                "Cannot create an auth token for MicroVM {} in state {}.",
                vm.id,
                state.as_str()
            ),
        ));
    }
    let ttl = shared.settings.auth_token_ttl.unwrap_or(valid.ttl);
    let token = ids::proxy_token();
    shared.add_token(
        token.clone(),
        Grant {
            microvm_id: vm.id.clone(),
            ports: valid.ports,
            expires: std::time::Instant::now() + ttl,
        },
    );
    ok(json!({ "authToken": { "X-aws-proxy-auth": token } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_reject_garbage() {
        assert_eq!(decode_page_token(&encode_page_token(50)), Some(50));
        assert_eq!(decode_page_token("bm9wZQ"), None);
        assert_eq!(decode_page_token("%%%"), None);
    }
}
