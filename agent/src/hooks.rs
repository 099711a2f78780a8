//! The lifecycle hooks server (HTTP/1.1, its own port), driven exactly as AWS
//! drives the real agent: `POST /aws/lambda-microvms/runtime/v1/<hook>`.
//! Every hook answers 200 (the body says what happened) except `/ready`
//! while the image's template is not ready: 503 while its ready command
//! has not passed yet, 500 once it failed (see `crate::template`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use bytes::Buf as _;
use http_body_util::{BodyExt as _, Full};
use serde::Deserialize;

use crate::state::Shared;

/// The path prefix of every hook.
pub const HOOK_PREFIX: &str = "/aws/lambda-microvms/runtime/v1/";

/// The body of `/run`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunBody {
    microvm_id: String,
    run_hook_payload: Option<String>,
}

/// The hooks router of one agent.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(&format!("{HOOK_PREFIX}run"), post(run))
        .route(&format!("{HOOK_PREFIX}suspend"), post(suspend))
        .route(&format!("{HOOK_PREFIX}resume"), post(resume))
        .route(&format!("{HOOK_PREFIX}terminate"), post(terminate))
        .route(&format!("{HOOK_PREFIX}ready"), post(ready))
        .route(&format!("{HOOK_PREFIX}validate"), post(ok))
        .with_state(shared)
}

async fn run(State(shared): State<Arc<Shared>>, body: Bytes) -> &'static str {
    match serde_json::from_slice::<RunBody>(&body) {
        Ok(b) => shared.on_run(&b.microvm_id, b.run_hook_payload.as_deref()),
        Err(_) => shared.on_run("", None),
    }
}

async fn suspend(State(shared): State<Arc<Shared>>) -> &'static str {
    shared.on_suspend();
    "ok"
}

async fn resume(State(shared): State<Arc<Shared>>) -> &'static str {
    shared.on_resume();
    "ok"
}

async fn terminate(State(shared): State<Arc<Shared>>) -> &'static str {
    shared.on_terminate();
    "ok"
}

async fn ready(State(shared): State<Arc<Shared>>) -> (StatusCode, String) {
    shared.template.ready_answer()
}

async fn ok() -> &'static str {
    "ok"
}

/// Posts one hook to an agent's hooks server, as AWS does (`hook` is `run`,
/// `suspend`, `resume` or `terminate`; `body` is the JSON body of `/run`).
/// Returns the HTTP status and the answer body.
///
/// # Errors
/// Connection or protocol failures talking to the hooks server.
pub async fn post_hook(
    addr: SocketAddr,
    hook: &str,
    body: Option<String>,
) -> std::io::Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(std::io::Error::other)?;
    let driver = tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("{HOOK_PREFIX}{hook}"))
        .header(http::header::HOST, addr.to_string());
    if body.is_some() {
        req = req.header(http::header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(std::io::Error::other)?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let collected = resp
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?;
    let mut buf = collected.aggregate();
    let text = String::from_utf8_lossy(&buf.copy_to_bytes(buf.remaining())).into_owned();
    driver.abort();
    Ok((status, text))
}

/// The `/run` body AWS sends: `{"microvmId": ..., "runHookPayload": ...}`.
pub fn run_body(microvm_id: &str, run_hook_payload: &str) -> String {
    serde_json::json!({ "microvmId": microvm_id, "runHookPayload": run_hook_payload }).to_string()
}
