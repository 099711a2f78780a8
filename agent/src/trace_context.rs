//! The agent's request span, with the caller's W3C trace context.
//!
//! Every gRPC request runs inside a `rayito.agent.request` span (target
//! `rayito_agent::request`) naming its RPC. When the request carries a
//! valid `traceparent` (an SDK built with its `otel` feature sends the one
//! of the operation's span), the span records its `trace_id` and parent
//! `span_id`, so the agent's logs of that request join the caller's trace.
//! An invalid header is ignored: a request is never refused for it.

use std::task::{Context, Poll};

use tower::{Layer, Service};
use tracing::Instrument as _;

/// The W3C trace-context header.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// Longest RPC path kept on the span (a peer's path is bounded text).
const MAX_RPC_CHARS: usize = 128;

/// The trace id and parent span id of a valid version-00 `traceparent`:
/// `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, neither id all zeros.
pub(crate) fn parse_traceparent(header: &str) -> Option<(&str, &str)> {
    if header.len() != 55 {
        return None;
    }
    let mut parts = header.split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || version != "00" {
        return None;
    }
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    (hex(trace_id, 32)
        && hex(span_id, 16)
        && hex(flags, 2)
        && nonzero(trace_id)
        && nonzero(span_id))
    .then_some((trace_id, span_id))
}

/// The span of one request.
fn request_span<B>(req: &http::Request<B>) -> tracing::Span {
    let path = req.uri().path();
    let rpc: String = path.chars().take(MAX_RPC_CHARS).collect();
    let parent = req
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_traceparent);
    // Recorded when the span is made, so that its first line has them.
    match parent {
        Some((trace_id, span_id)) => tracing::info_span!(
            target: "rayito_agent::request",
            "rayito.agent.request",
            rpc = %rpc,
            trace_id = %trace_id,
            span_id = %span_id,
        ),
        None => tracing::info_span!(
            target: "rayito_agent::request",
            "rayito.agent.request",
            rpc = %rpc,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        ),
    }
}

/// The layer that runs each request in its span.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = TraceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TraceService { inner }
    }
}

/// See [`TraceLayer`].
#[derive(Debug, Clone)]
pub(crate) struct TraceService<S> {
    inner: S,
}

impl<S, B> Service<http::Request<B>> for TraceService<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = tracing::instrument::Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let span = request_span(&req);
        // Entered only for the synchronous part of `call`; the future is
        // instrumented (no guard held across an await).
        let future = span.in_scope(|| self.inner.call(req));
        future.instrument(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_header_gives_its_ids() {
        assert_eq!(
            parse_traceparent(VALID),
            Some(("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"))
        );
    }

    #[test]
    fn invalid_headers_are_ignored() {
        let cases = [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e47-3600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ];
        for case in cases {
            assert_eq!(parse_traceparent(case), None, "{case:?}");
        }
    }
}
