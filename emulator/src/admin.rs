//! The admin endpoint for fault injection over HTTP, on the control-plane
//! port: `POST /_emulator/faults` with one JSON fault (shapes in
//! docs/local.md), SigV4-signed with one of the emulator's access keys like
//! any control-plane call (refused as they are otherwise: faults can kill
//! any MicroVM); `GET` on it answers the pending faults. A POST answers 200 `{"applied": true}`, 404 for an unknown or
//! already terminated MicroVM, 400 for a body that is not one of the
//! shapes. `GET /_emulator/ca.pem` serves the CA of TLS mode (public, no
//! signature needed).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::faults::{Faults, Operation, ProxyStall};
use super::guard::Signed;
use super::registry::Shared;

/// One fault, as the admin endpoint accepts it.
#[derive(Debug, Deserialize)]
#[serde(
    tag = "fault",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
enum FaultRequest {
    InsufficientCapacity {
        count: u32,
    },
    QuotaExceeded {
        count: u32,
    },
    Throttle {
        operation: String,
        count: u32,
        #[serde(default = "one")]
        retry_after_seconds: u32,
    },
    ProxyStatus {
        count: u32,
        status: u16,
    },
    KillAgent {
        microvm_id: String,
    },
    CutConnections {
        microvm_id: String,
    },
    DiskReserve {
        microvm_id: String,
        bytes: u64,
    },
    ExpireDeadline {
        microvm_id: String,
    },
    Clear,
    HoldBuilds {
        hold: bool,
    },
    StallProxy {
        count: u32,
        #[serde(default)]
        path: Option<String>,
        /// Absent: the request is held; else the response stalls after
        /// this many body frames.
        #[serde(default)]
        after_frames: Option<u32>,
    },
}

fn one() -> u32 {
    1
}

pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_emulator/faults", post(post_fault).get(get_faults))
        .route("/_emulator/ca.pem", get(ca_pem))
}

/// `GET /_emulator/ca.pem`: the CA of TLS mode (404 without TLS mode).
async fn ca_pem(State(shared): State<Arc<Shared>>) -> Response {
    match &shared.tls {
        Some(tls) => (
            StatusCode::OK,
            [(http::header::CONTENT_TYPE, "application/x-pem-file")],
            tls.ca_pem().to_owned(),
        )
            .into_response(),
        None => answer(StatusCode::NOT_FOUND, "The emulator is not in TLS mode."),
    }
}

fn answer(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "message": message }))).into_response()
}

/// `GET /_emulator/faults`: the pending faults ([`Faults::pending`]),
/// signed as a POST is.
async fn get_faults(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
) -> Response {
    if let Err(refused) = signed.check() {
        return refused.into_response();
    }
    (StatusCode::OK, Json(Faults { shared }.pending())).into_response()
}

async fn post_fault(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Response {
    if let Err(refused) = signed.check() {
        return refused.into_response();
    }
    let Ok(req) = serde_json::from_slice::<FaultRequest>(&body) else {
        return answer(StatusCode::BAD_REQUEST, "Not a fault this emulator knows.");
    };
    let faults = Faults { shared };
    let applied = match req {
        FaultRequest::InsufficientCapacity { count } => {
            faults.insufficient_capacity(count);
            true
        }
        FaultRequest::QuotaExceeded { count } => {
            faults.quota_exceeded(count);
            true
        }
        FaultRequest::Throttle {
            operation,
            count,
            retry_after_seconds,
        } => {
            if let Some(op) = Operation::from_name(&operation) {
                faults.throttle(op, count, retry_after_seconds);
            } else if crate::efs::routes::ACTIONS.contains(&operation.as_str()) {
                // EFS's throttle has no Retry-After (EFS sends none).
                faults.shared.efs.throttle(&operation, count);
            } else {
                return answer(StatusCode::BAD_REQUEST, "Unknown operation.");
            }
            true
        }
        FaultRequest::ProxyStatus { count, status } => {
            if !faults.proxy_status(count, status) {
                return answer(StatusCode::BAD_REQUEST, "status must be in 400..=599.");
            }
            true
        }
        FaultRequest::KillAgent { microvm_id } => faults.kill_agent(&microvm_id),
        FaultRequest::CutConnections { microvm_id } => faults.cut_connections(&microvm_id),
        FaultRequest::DiskReserve { microvm_id, bytes } => {
            faults.set_disk_reserve(&microvm_id, bytes)
        }
        FaultRequest::ExpireDeadline { microvm_id } => faults.expire_deadline(&microvm_id),
        FaultRequest::HoldBuilds { hold } => {
            faults.hold_builds(hold);
            true
        }
        FaultRequest::Clear => {
            faults.clear();
            true
        }
        FaultRequest::StallProxy {
            count,
            path,
            after_frames,
        } => {
            let stall = after_frames.map_or(ProxyStall::Request, |frames| {
                ProxyStall::ResponseAfter { frames }
            });
            faults.stall_proxy(count, path.as_deref(), stall);
            true
        }
    };
    if applied {
        (StatusCode::OK, Json(json!({ "applied": true }))).into_response()
    } else {
        answer(StatusCode::NOT_FOUND, "No live MicroVM with this id.")
    }
}
