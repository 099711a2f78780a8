//! The lifecycle hooks server (HTTP/1.1, its own port), driven exactly as AWS
//! drives the real agent: `POST /aws/lambda-microvms/runtime/v1/<hook>`.
//! Every hook answers 200 (the body says what happened) except `/ready`
//! while the image's template is not ready: 503 while its ready command
//! has not passed yet, 500 once it failed (see `crate::template`).
//!
//! With [`AgentConfig::hooks_token`](crate::agent::AgentConfig::hooks_token)
//! set (the emulator sets it), a hook runs only for a request carrying
//! `Authorization: Bearer <token>`; any other answers 403 `forbidden`. On
//! the host, sandbox code shares the agent's loopback, and without the
//! token it could suspend or terminate the sandbox, or `/run` a sandbox
//! prepared ahead with a payload of its own (installing its own access
//! token). On a MicroVM only AWS reaches the hooks port.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use axum::routing::post;
use bytes::Buf as _;
use http::StatusCode;
use http_body_util::{BodyExt as _, Full};
use serde::Deserialize;

use crate::state::Shared;

/// The path prefix of every hook.
pub const HOOK_PREFIX: &str = "/aws/lambda-microvms/runtime/v1/";

/// The secret a hook request must carry as `Authorization: Bearer <token>`.
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct HooksToken(String);

impl HooksToken {
    /// A fresh random token (32 random bytes, base64url).
    pub fn generate() -> Self {
        use base64::Engine as _;
        let bytes: [u8; 32] = rand::random();
        Self(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The `Authorization` header value that carries this token.
    pub fn header_value(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// Whether `header` (an `Authorization` value) carries this token,
    /// compared in constant time.
    fn admits(&self, header: Option<&http::HeaderValue>) -> bool {
        use subtle::ConstantTimeEq as _;
        let expected = self.header_value();
        header.is_some_and(|got| bool::from(got.as_bytes().ct_eq(expected.as_bytes())))
    }
}

impl std::fmt::Debug for HooksToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HooksToken(***)")
    }
}

/// The body of `/run`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunBody {
    microvm_id: String,
    run_hook_payload: Option<String>,
}

/// The hooks router of one agent; with a `token`, only requests carrying it
/// reach a hook.
pub(crate) fn router(shared: Arc<Shared>, token: Option<HooksToken>) -> Router {
    let router = Router::new()
        .route(&format!("{HOOK_PREFIX}run"), post(run))
        .route(&format!("{HOOK_PREFIX}suspend"), post(suspend))
        .route(&format!("{HOOK_PREFIX}resume"), post(resume))
        .route(&format!("{HOOK_PREFIX}terminate"), post(terminate))
        .route(&format!("{HOOK_PREFIX}ready"), post(ready))
        .route(&format!("{HOOK_PREFIX}validate"), post(ok))
        .with_state(shared);
    match token {
        Some(token) => router.layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let admitted = token.admits(req.headers().get(http::header::AUTHORIZATION));
                async move {
                    if admitted {
                        next.run(req).await
                    } else {
                        forbidden()
                    }
                }
            },
        )),
        None => router,
    }
}

/// A hook request without the agent's token.
fn forbidden() -> Response {
    (StatusCode::FORBIDDEN, "forbidden").into_response()
}

async fn run(State(shared): State<Arc<Shared>>, body: Bytes) -> &'static str {
    let parsed = serde_json::from_slice::<RunBody>(&body).ok();
    // Before anything starts in the sandbox (the deferred start command,
    // the kernel): its network is isolated first.
    let enforce = parsed
        .as_ref()
        .and_then(|b| b.run_hook_payload.as_deref())
        .and_then(crate::payload::parse)
        .is_some_and(|p| p.enforce_network);
    if enforce
        && shared.run.info.lock().expect("run lock").is_none()
        && let Some(network) = shared.egress.install(shared.serve.subscribe())
    {
        shared.env.set_network(network);
    }
    let deferred = shared
        .deferred_start
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(start) = deferred {
        shared.start_template(start);
    }
    match parsed {
        Some(b) => shared.on_run(&b.microvm_id, b.run_hook_payload.as_deref()),
        None => shared.on_run("", None),
    }
}

async fn suspend(State(shared): State<Arc<Shared>>) -> &'static str {
    shared.on_suspend();
    // Bounded, side by side, before the snapshot: what the volumes hold
    // reaches their servers, the `paused` event line is out, the newest
    // gauges reach the collector (within 2 s).
    tokio::join!(
        shared.volumes.on_suspend(),
        shared.events.paused(),
        shared.telemetry.flush()
    );
    "ok"
}

async fn resume(State(shared): State<Arc<Shared>>) -> &'static str {
    shared.on_resume();
    shared.events.resumed();
    // Bounded probes; a volume that does not answer is remounted in the
    // background.
    shared.volumes.on_resume().await;
    // Never gates the answer: a mount whose helper died is remade in the
    // background (ConfigureStatus shows it PENDING meanwhile).
    let mounts = shared.s3_mounts.clone();
    tokio::spawn(async move { mounts.recheck().await });
    "ok"
}

async fn terminate(State(shared): State<Arc<Shared>>) -> &'static str {
    // Queued before anything ends, written before the answer.
    let killed = shared.events.killed(rayito_events::KillReason::Request);
    shared.on_terminate();
    killed.await;
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
    post_hook_with(addr, hook, body, None).await
}

/// [`post_hook`] carrying `token` (see [`HooksToken`]).
///
/// # Errors
/// Connection or protocol failures talking to the hooks server.
pub async fn post_hook_with(
    addr: SocketAddr,
    hook: &str,
    body: Option<String>,
    token: Option<&HooksToken>,
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
    if let Some(token) = token {
        req = req.header(http::header::AUTHORIZATION, token.header_value());
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
