//! One route's listener: an HTTP/1.1 server on a loopback port that
//! checks each request against the route's allow rules and rate, adds the
//! route's secret headers and forwards it to the upstream, streaming both
//! bodies. Nothing here logs a name, a value, a method or a path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use zeroize::Zeroizing;

use super::bucket::TokenBucket;
use super::path::{self, Rule};
use super::upstream::{Body, HttpsClient};
use super::validate::RouteSpec;

/// Hop-by-hop headers, never forwarded either way.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// Connections one route serves at once. Sandbox code can open sockets
/// faster than any upstream answers; past this many, the next connection
/// waits in the listen backlog instead of costing the agent a task and
/// hyper's buffers each (the agent's memory is not the sandbox's).
const MAX_CONNECTIONS: usize = 256;

/// A route in force.
pub(crate) struct Route {
    upstream: String,
    headers: Vec<(HeaderName, Zeroizing<Vec<u8>>)>,
    rules: Vec<Rule>,
    bucket: TokenBucket,
    client: HttpsClient,
    head_timeout: std::time::Duration,
    /// The class of the latest failed request (sticky).
    last_error: Mutex<Option<&'static str>>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route").finish_non_exhaustive()
    }
}

impl Route {
    pub(crate) fn new(
        spec: RouteSpec,
        client: HttpsClient,
        head_timeout: std::time::Duration,
    ) -> Self {
        Self {
            upstream: spec.upstream,
            headers: spec.headers,
            rules: spec.rules,
            bucket: TokenBucket::new(spec.rate_per_minute, Instant::now()),
            client,
            head_timeout,
            last_error: Mutex::new(None),
        }
    }

    pub(crate) fn last_error(&self) -> Option<&'static str> {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, status: StatusCode, class: &'static str) -> Response<Body> {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(class);
        refusal(status, class)
    }

    fn injects(&self, name: &HeaderName) -> bool {
        self.headers.iter().any(|(h, _)| h == name)
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        // Origin-form only: an absolute-form or authority-form target
        // (a proxy request, CONNECT) or `*` names no path of this route.
        let uri = req.uri();
        let origin_form = uri.scheme().is_none() && uri.authority().is_none();
        let path = uri.path();
        if !origin_form
            || req.method() == http::Method::CONNECT
            || !path::allowed(&self.rules, req.method().as_str(), path)
        {
            return self.fail(StatusCode::FORBIDDEN, "not_allowed");
        }
        if !self.bucket.take(Instant::now()) {
            return self.fail(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
        }
        let target = uri.path_and_query().map_or(path, |pq| pq.as_str());
        let Ok(target) = format!("{}{target}", self.upstream).parse::<Uri>() else {
            return self.fail(StatusCode::BAD_GATEWAY, "upstream_error");
        };
        let (mut parts, body) = req.into_parts();
        parts.uri = target;
        parts.version = http::Version::HTTP_11;
        strip(&mut parts.headers, |name| self.injects(name));
        parts.headers.remove(header::HOST);
        for (name, value) in &self.headers {
            let Ok(mut value) = HeaderValue::from_bytes(value) else {
                return self.fail(StatusCode::BAD_GATEWAY, "upstream_error");
            };
            value.set_sensitive(true);
            parts.headers.insert(name.clone(), value);
        }
        let outbound = Request::from_parts(parts, body.boxed());
        let answer = tokio::time::timeout(self.head_timeout, self.client.request(outbound)).await;
        match answer {
            Err(_) => self.fail(StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
            Ok(Err(err)) if err.is_connect() => {
                self.fail(StatusCode::BAD_GATEWAY, "upstream_unreachable")
            }
            Ok(Err(_)) => self.fail(StatusCode::BAD_GATEWAY, "upstream_error"),
            Ok(Ok(response)) => {
                let (mut parts, body) = response.into_parts();
                strip(&mut parts.headers, |name| self.injects(name));
                Response::from_parts(parts, body.boxed())
            }
        }
    }
}

/// Removes hop-by-hop headers (the fixed ones and those the `Connection`
/// header names) and every header `drop` names.
fn strip(headers: &mut HeaderMap, drop: impl Fn(&HeaderName) -> bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().copied() {
        headers.remove(name);
    }
    for name in named {
        headers.remove(name);
    }
    let dropped: Vec<HeaderName> = headers.keys().filter(|n| drop(n)).cloned().collect();
    for name in dropped {
        headers.remove(name);
    }
}

/// The gateway's own answer: the status and the class, as a short text.
fn refusal(status: StatusCode, class: &'static str) -> Response<Body> {
    let body = Full::new(Bytes::from_static(class.as_bytes()))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Serves `route` on `listener` until `stop` is cancelled; then every open
/// connection is dropped too.
pub(crate) async fn serve(listener: TcpListener, route: Arc<Route>, stop: CancellationToken) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            () = stop.cancelled() => return,
            slot = slots.clone().acquire_owned() => slot,
        };
        let Ok(slot) = slot else { return };
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors and the like: try again shortly.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let route = route.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let route = route.clone();
                async move { Ok::<_, std::convert::Infallible>(route.handle(req).await) }
            });
            // The timer bounds how long a request head may take to come.
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .max_headers(100)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                _ = connection => {}
            }
            drop(slot);
        });
    }
}
