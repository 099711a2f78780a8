//! The emulated AWS proxy in front of one MicroVM: its own loopback listener
//! (HTTP/2 cleartext with prior knowledge, or HTTP/1.1), forwarding each
//! request with streaming bodies and trailers both ways, after the checks
//! the real proxy makes (docs/local.md, "The proxy"):
//!
//! - `x-aws-proxy-port` absent means 8080; not a port number -> 400;
//! - `x-aws-proxy-auth` must be an unexpired token minted for this MicroVM
//!   whose ports cover that port, else 403; the hooks port 9000 -> 403 always;
//! - every `x-aws-proxy-*` header is stripped and an `x-amzn-requestid` added;
//! - port 8080 goes to the agent's gRPC address over h2c; any other port goes
//!   to `127.0.0.1:<port>` (HTTP/1.1, or h2c with `x-aws-proxy-force-h2: true`);
//! - a SUSPENDING/SUSPENDED MicroVM answers 502, unless its idle policy has
//!   `autoResumeEnabled`, in which case a SUSPENDED one is resumed first;
//!   a TERMINATING one answers 502.
//!
//! Rejections are plain HTTP with a short text body and no grpc-status.
//!
//! In TLS mode the listener is port 443 of the MicroVM's own loopback
//! address and each connection is a TLS one (ALPN h2 or http/1.1) first.
//! Every request and every body frame in either direction counts as activity
//! for idle auto-suspend; a silent open stream does not, as on AWS.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::agent_link::AgentConnector;
use super::faults::ProxyStall;
use super::ids;
use super::lifecycle;
use super::model::MicrovmState;
use super::registry::{Shared, Vm};

/// The port the agent's gRPC server stands for.
pub(crate) const APP_PORT: u16 = 8080;
/// The hooks port: never reachable through the proxy.
pub(crate) const HOOKS_PORT: u16 = 9000;

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Hop-by-hop headers that must not cross (h2 refuses them outright).
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// How long a client has to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The upstream HTTP clients of one MicroVM's proxy: their pooled
/// connections go with the proxy (a pool shared by every proxy would keep
/// the idle connections of each ended MicroVM for its idle timeout, 90 s:
/// memory that follows the creation rate).
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// To the agent's gRPC server (port 8080), in this process.
    agent: Client<AgentConnector, ProxyBody>,
    /// To a sandbox's own server that asked for h2c.
    h2: Client<HttpConnector, ProxyBody>,
    h1: Client<HttpConnector, ProxyBody>,
}

impl Upstream {
    pub(crate) fn new(vm: &Arc<Vm>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let h2_builder = || {
            let mut builder = Client::builder(TokioExecutor::new());
            builder
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .http2_only(true)
                .http2_keep_alive_interval(Duration::from_secs(30))
                .http2_keep_alive_timeout(Duration::from_secs(10));
            builder
        };
        let agent = h2_builder().build(AgentConnector::new(vm));
        let h2 = h2_builder().build(connector.clone());
        let h1 = Client::builder(TokioExecutor::new()).build(connector);
        Self { agent, h2, h1 }
    }
}

/// Accepts connections until aborted; each connection ends when the
/// client closes it or when the MicroVM's cut signal fires. Aborting this
/// task drops every connection it serves.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    vm: Arc<Vm>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
) {
    let mut conns = JoinSet::new();
    let upstream = Upstream::new(&vm);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tracing::trace!(microvm = %vm.id, "emulator: proxy connection accepted");
        while conns.try_join_next().is_some() {}
        let (shared, vm, upstream) = (shared.clone(), vm.clone(), upstream.clone());
        let mut cut = vm.cut_signal();
        let tls = tls.clone();
        conns.spawn(async move {
            let svc =
                service_fn(move |req| handle(shared.clone(), vm.clone(), upstream.clone(), req));
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http2().timer(TokioTimer::new());
            match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::select! {
                        _ = conn => {}
                        _ = cut.changed() => {}
                    }
                }
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                    let stream = tokio::select! {
                        accepted = handshake => match accepted {
                            Ok(Ok(stream)) => {
                                tracing::trace!("emulator: proxy TLS handshake done");
                                stream
                            }
                            _ => return,
                        },
                        _ = cut.changed() => return,
                    };
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::select! {
                        _ = conn => {}
                        _ = cut.changed() => {}
                    }
                }
            }
        });
    }
}

/// A plain-text rejection with no grpc-status. gRPC callers get an empty
/// body: gRPC clients read any body as message frames, and an empty one is
/// what lets tonic report the bare HTTP status (`grpc-status header missing,
/// mapped from HTTP status code 403`), as it does behind the real proxy.
fn plain(status: StatusCode, grpc: bool) -> Response<ProxyBody> {
    let text = if grpc {
        String::new()
    } else {
        format!("{}\n", status.canonical_reason().unwrap_or("Error"))
    };
    let mut resp = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// The requested port: `Ok(8080)` when absent, `Err(())` when malformed.
fn requested_port(req: &Request<Incoming>) -> Result<u16, ()> {
    match req.headers().get("x-aws-proxy-port") {
        None => Ok(APP_PORT),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u16>().ok())
            .filter(|p| *p != 0)
            .ok_or(()),
    }
}

/// Whether the request carries a live token of this MicroVM covering `port`.
fn authorized(shared: &Shared, vm: &Vm, req: &Request<Incoming>, port: u16) -> bool {
    let Some(token) = req
        .headers()
        .get("x-aws-proxy-auth")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    shared.grant(token).is_some_and(|g| {
        g.microvm_id == vm.id && g.expires > Instant::now() && g.ports.covers(port)
    })
}

/// Whether the caller speaks gRPC (`content-type: application/grpc...`).
fn is_grpc(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

async fn handle(
    shared: Arc<Shared>,
    vm: Arc<Vm>,
    upstream: Upstream,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let grpc = is_grpc(&req);
    let reject = |status| plain(status, grpc);
    vm.touch();
    if let Some(status) = shared.faults.take_proxy_status() {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        return Ok(reject(status));
    }
    let Ok(port) = requested_port(&req) else {
        return Ok(reject(StatusCode::BAD_REQUEST));
    };
    if port == HOOKS_PORT || !authorized(&shared, &vm, &req, port) {
        return Ok(reject(StatusCode::FORBIDDEN));
    }
    match vm.state() {
        MicrovmState::Pending | MicrovmState::Running => {}
        MicrovmState::Suspended if auto_resume(&vm) => {
            let resumed = lifecycle::resume(&shared, &vm).await.is_ok();
            if !resumed || vm.state() != MicrovmState::Running {
                return Ok(reject(StatusCode::BAD_GATEWAY));
            }
        }
        _ => return Ok(reject(StatusCode::BAD_GATEWAY)),
    }
    match shared.faults.take_stall(req.uri().path()) {
        None => {
            // Not the path: a request to a sandbox's own port may carry a
            // token in it.
            tracing::trace!(grpc, "emulator: proxy request");
            let resp = forward(&upstream, &vm, req, port, grpc).await;
            tracing::trace!(
                status = resp.status().as_u16(),
                "emulator: proxy upstream answered"
            );
            vm.note_answered();
            Ok(resp)
        }
        Some(ProxyStall::Request) => {
            stall_ends(&shared, &vm).await;
            Ok(reject(StatusCode::GATEWAY_TIMEOUT))
        }
        Some(ProxyStall::ResponseAfter { frames }) => {
            let resp = forward(&upstream, &vm, req, port, grpc).await;
            Ok(stalled_after(&shared, &vm, resp, frames))
        }
    }
}

/// The longest a stall fault holds anything.
const MAX_STALL: Duration = Duration::from_secs(600);

/// Resolves when a stall must end: the MicroVM's connections are cut, the
/// faults are cleared, or [`MAX_STALL`] passed. (A caller that gives up
/// resets its stream, and hyper drops what waits on it.)
fn stall_ends(shared: &Shared, vm: &Vm) -> impl Future<Output = ()> + Send + 'static {
    let mut cut = vm.cut_signal();
    let mut release = shared.faults.stall_release();
    async move {
        tokio::select! {
            _ = cut.changed() => {}
            _ = release.changed() => {}
            _ = tokio::time::sleep(MAX_STALL) => {}
        }
    }
}

/// `resp` with only its first `frames` body frames passed on, then silence
/// until the stall ends (then the body ends without trailers). The upstream
/// body is kept open meanwhile, so the agent sees a slow reader, not a
/// cancelled call.
fn stalled_after(
    shared: &Shared,
    vm: &Vm,
    resp: Response<ProxyBody>,
    frames: u32,
) -> Response<ProxyBody> {
    let (parts, mut body) = resp.into_parts();
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let ends = stall_ends(shared, vm);
    tokio::spawn(async move {
        for _ in 0..frames {
            match body.frame().await {
                Some(frame) => {
                    if tx.send(frame).await.is_err() {
                        return;
                    }
                }
                None => return,
            }
        }
        tokio::select! {
            _ = ends => {}
            _ = tx.closed() => {}
        }
        drop(body);
    });
    let body = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    Response::from_parts(parts, BodyExt::boxed(body))
}

/// `body` with every frame counted as activity of `vm`.
fn counted<B>(vm: &Arc<Vm>, body: B) -> ProxyBody
where
    B: hyper::body::Body<Data = Bytes, Error = hyper::Error> + Send + Sync + 'static,
{
    let vm = vm.clone();
    body.map_frame(move |frame| {
        vm.touch();
        frame
    })
    .boxed()
}

fn auto_resume(vm: &Vm) -> bool {
    vm.spec
        .idle_policy
        .as_ref()
        .and_then(|p| p.auto_resume_enabled)
        .unwrap_or(false)
}

async fn forward(
    upstream: &Upstream,
    vm: &Arc<Vm>,
    req: Request<Incoming>,
    port: u16,
    grpc: bool,
) -> Response<ProxyBody> {
    let reject = |status| plain(status, grpc);
    let (mut parts, body) = req.into_parts();
    let force_h2 = parts
        .headers
        .get("x-aws-proxy-force-h2")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let target = if port == APP_PORT {
        vm.grpc_addr
    } else {
        // Only a server of this MicroVM's own sandbox: the host's loopback
        // also holds other sandboxes' servers and host services. Anything
        // else answers as a port nobody listens on.
        let own = vm
            .with_agent(|agent| agent.env().listens_on(port))
            .unwrap_or(false);
        if !own {
            return reject(StatusCode::BAD_GATEWAY);
        }
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
    };
    let h2 = port == APP_PORT || force_h2;
    let stripped: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|n| n.as_str().starts_with("x-aws-proxy-"))
        .cloned()
        .collect();
    for name in stripped
        .into_iter()
        .chain(HOP_BY_HOP.iter().map(|h| HeaderName::from_static(h)))
    {
        parts.headers.remove(name);
    }
    if let Ok(id) = HeaderValue::from_str(&ids::uuid_v4()) {
        parts.headers.insert("x-amzn-requestid", id);
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let Ok(uri) = format!("http://{target}{path}").parse() else {
        return reject(StatusCode::BAD_REQUEST);
    };
    parts.uri = uri;
    parts.version = if h2 {
        Version::HTTP_2
    } else {
        Version::HTTP_11
    };
    let request = Request::from_parts(parts, counted(vm, body));
    let answer = if port == APP_PORT {
        upstream.agent.request(request).await
    } else if h2 {
        upstream.h2.request(request).await
    } else {
        upstream.h1.request(request).await
    };
    match answer {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            for h in HOP_BY_HOP {
                parts.headers.remove(h);
            }
            Response::from_parts(parts, counted(vm, body))
        }
        Err(_) => reject(StatusCode::BAD_GATEWAY),
    }
}
