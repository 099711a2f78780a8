//! A layer over the channel that turns an HTTP answer without `grpc-status`
//! into a typed error, so that the transport can tell the AWS proxy's plain
//! HTTP answers (403, 429, 502 ...) from the agent's statuses by type, not
//! by the wording tonic gives them.

use std::fmt;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::{Service, StdError};

/// The HTTP answer carried no `grpc-status` and was not a gRPC success
/// (HTTP 200): something in front of the agent answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoGrpcStatus {
    pub(crate) http_status: u16,
}

impl fmt::Display for NoGrpcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an HTTP {} answer without grpc-status (not from the agent)",
            self.http_status
        )
    }
}

impl std::error::Error for NoGrpcStatus {}

/// Wraps a gRPC channel; see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct GrpcOnly<S> {
    inner: S,
}

impl<S> GrpcOnly<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S> Service<http::Request<Body>> for GrpcOnly<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Error: Into<StdError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = StdError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            // gRPC always answers HTTP 200; a trailers-only gRPC error
            // carries grpc-status in its headers.
            if response.status() != http::StatusCode::OK
                && !response.headers().contains_key("grpc-status")
            {
                return Err(NoGrpcStatus {
                    http_status: response.status().as_u16(),
                }
                .into());
            }
            Ok(response)
        })
    }
}
