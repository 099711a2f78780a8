//! The tower layer in front of every gRPC service: the access-token check,
//! then the deadline gate, then the phase gate. Refusals are answered before
//! tonic decodes anything, after draining the request body a little, because
//! an early trailers-only answer on a half-open HTTP/2 stream reaches clients
//! behind a proxy as a stream reset instead of a status.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Body as HttpBody;
use rayito_proto::tokens::detail;
use tonic::Status;
use tower::{Layer, Service};

use crate::phase::{Phase, PhaseCell};
use crate::run::RunState;
use crate::token::{self, ACCESS_TOKEN_HEADER};

/// The one anonymous RPC.
pub(crate) const HEALTH_PATH: &str = "/rayito.v1.HealthService/Health";
/// Answers during the deadline gate (with Health).
const SET_TIMEOUT_PATH: &str = "/rayito.v1.LifecycleService/SetTimeout";
/// Calls that open a new stream, refused while suspending or terminating.
const PHASE_GATED: &[&str] = &[
    "/rayito.v1.ProcessService/Start",
    "/rayito.v1.ProcessService/Connect",
    "/rayito.v1.FilesystemService/Read",
    "/rayito.v1.FilesystemService/Write",
    "/rayito.v1.FilesystemService/WatchDir",
    "/rayito.v1.CodeService/Execute",
    "/rayito.v1.CodeService/Reattach",
    "/rayito.v1.PtyService/Create",
    "/rayito.v1.PtyService/Connect",
];
/// How much of a refused request's body is drained, and for how long.
const DRAIN_MAX_BYTES: usize = 1 << 20;
const DRAIN_MAX_TIME: Duration = Duration::from_secs(2);

/// Builds [`GateService`]s.
#[derive(Clone, Debug)]
pub(crate) struct GateLayer {
    /// Whose token the calls must carry.
    pub(crate) run: Arc<RunState>,
    pub(crate) phase: PhaseCell,
}

impl<S> Layer<S> for GateLayer {
    type Service = GateService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GateService {
            inner,
            run: self.run.clone(),
            phase: self.phase.clone(),
        }
    }
}

/// The gate in front of the tonic routes.
#[derive(Clone, Debug)]
pub(crate) struct GateService<S> {
    inner: S,
    run: Arc<RunState>,
    phase: PhaseCell,
}

impl<S> GateService<S> {
    /// The refusal for a call, if any.
    fn verdict(&self, req: &http::Request<impl HttpBody>) -> Option<Status> {
        let path = req.uri().path();
        if path == HEALTH_PATH {
            return None;
        }
        let digest = self.run.token_digest();
        if let Err(rejection) =
            token::check(req.headers().get(ACCESS_TOKEN_HEADER), digest.as_ref())
        {
            return Some(Status::unauthenticated(rejection.message()));
        }
        match self.phase.get() {
            Phase::Running => None,
            Phase::Expired if path != SET_TIMEOUT_PATH => {
                Some(Status::failed_precondition(detail::SANDBOX_TIMEOUT))
            }
            Phase::Expired => None,
            phase @ (Phase::Suspending | Phase::Terminating) => {
                if PHASE_GATED.contains(&path) {
                    phase.gate_status()
                } else {
                    None
                }
            }
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<http::Request<B>> for GateService<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        match self.verdict(&req) {
            None => {
                // The clone-and-swap keeps the service that was polled ready.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                Box::pin(inner.call(req))
            }
            Some(status) => Box::pin(async move {
                drain(req.into_body()).await;
                Ok(status.into_http())
            }),
        }
    }
}

/// Reads and discards up to 1 MiB of a body for at most 2 s.
async fn drain<B: HttpBody<Data = Bytes> + Unpin>(mut body: B) {
    let mut seen = 0usize;
    let _ = tokio::time::timeout(DRAIN_MAX_TIME, async {
        while seen <= DRAIN_MAX_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        seen += data.len();
                    }
                }
                _ => break,
            }
        }
    })
    .await;
}
