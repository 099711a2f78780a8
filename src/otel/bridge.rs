//! Feature `otel`: the operation spans as OpenTelemetry spans (API only:
//! the caller brings the SDK and its exporter through a tracer provider),
//! and the W3C trace context of the current span for each gRPC call.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider};
use opentelemetry::{Context, InstrumentationScope, KeyValue};

use super::{Attr, Value};
use crate::error::SandboxError;

/// The tracer's name (the spec's `rayito`); its version is the crate's.
pub(crate) const TRACER_NAME: &str = "rayito";

/// The tracer of a handle: built once from the provider given to the
/// builder, shared by its clones and the handles it makes.
#[derive(Clone)]
pub(crate) struct Tracer(Arc<BoxedTracer>);

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tracer(rayito)")
    }
}

impl Tracer {
    /// The tracer `rayito` (with the crate's version) of `provider`.
    pub(crate) fn from_provider<P>(provider: &P) -> Self
    where
        P: TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as opentelemetry::trace::Tracer>::Span: Send + Sync + 'static,
    {
        let scope = InstrumentationScope::builder(TRACER_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Self(Arc::new(BoxedTracer::new(Box::new(
            provider.tracer_with_scope(scope),
        ))))
    }

    /// Starts the CLIENT span `name` under the current context (the
    /// caller's span, if any) with `attrs`, and returns the context that
    /// holds it.
    pub(crate) fn start(&self, name: &'static str, attrs: &[Attr]) -> Context {
        let parent = Context::current();
        let span = self
            .0
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attrs.iter().map(key_value))
            .start_with_context(self.0.as_ref(), &parent);
        parent.with_span(span)
    }
}

/// An attribute of the closed set as an OpenTelemetry key-value.
fn key_value(attr: &Attr) -> KeyValue {
    match attr.value() {
        Value::Str(s) => KeyValue::new(attr.key(), s.to_owned()),
        Value::I64(n) => KeyValue::new(attr.key(), n),
        Value::Bool(b) => KeyValue::new(attr.key(), b),
    }
}

/// Ends the span of `cx` with what the outcome taught; a failure sets the
/// ERROR status and an `exception` event whose type and message are the
/// error's kind only (never its message, which may quote a path).
pub(super) fn finish(cx: &Context, learned: &[Attr], err: Option<&SandboxError>) {
    let span = cx.span();
    span.set_attributes(learned.iter().map(key_value));
    if let Some(err) = err {
        let kind = err.kind().as_str();
        span.add_event(
            "exception",
            vec![
                KeyValue::new("exception.type", kind),
                KeyValue::new("exception.message", kind),
            ],
        );
        span.set_status(Status::Error {
            description: Cow::Borrowed(kind),
        });
    }
    span.end();
}

/// The W3C `traceparent` (and `tracestate`, when not empty) of the current
/// context's span, or `None` without a valid one. Only these two: never
/// `baggage` or `grpc-trace-bin`.
pub(crate) fn trace_headers() -> Option<(String, Option<String>)> {
    let cx = Context::current();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    );
    let state = sc.trace_state().header();
    Some((traceparent, (!state.is_empty()).then_some(state)))
}

/// The tests' remote parent: sampled, with trace state `vendor=v1`; its
/// `traceparent` is `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
#[cfg(test)]
pub(crate) fn remote_parent() -> opentelemetry::trace::SpanContext {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    SpanContext::new(
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::from_key_value([("vendor", "v1")]).unwrap(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_header_without_a_valid_span() {
        assert_eq!(trace_headers(), None);
    }

    #[test]
    fn the_header_of_a_remote_parent() {
        let _guard = Context::new()
            .with_remote_span_context(remote_parent())
            .attach();
        assert_eq!(
            trace_headers(),
            Some((
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
                Some("vendor=v1".to_owned())
            ))
        );
    }
}
