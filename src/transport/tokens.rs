//! The token store of one sandbox and the interceptor that puts the tokens on
//! every call.
//!
//! Rotation swaps an `Arc` behind a lock; the channel is never rebuilt, and the
//! interceptor reads the current value on each call (docs/architecture.md, "Calls on the agent").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::secret::Secret;

/// The port of the agent's gRPC server behind the proxy.
pub(crate) const AGENT_PORT: u16 = 8080;
/// The hooks port: a token covering it lets anyone terminate the sandbox, so
/// it is never requested.
pub(crate) const HOOKS_PORT: u16 = 9000;

/// The tokens of one sandbox.
#[derive(Debug, Clone)]
struct Tokens {
    /// The proxy token (JWE) for port 8080 and the caller's allowed ports.
    proxy: Option<Secret>,
    /// The sandbox's access token.
    access: Option<Secret>,
}

/// Current tokens; cheap to read on every call.
#[derive(Debug)]
pub(crate) struct TokenStore {
    current: RwLock<Arc<Tokens>>,
    /// Bumped by every proxy-token replacement: a call that met a 403 re-mints
    /// only when no other call replaced the token since it was sent.
    proxy_generation: AtomicU64,
}

impl TokenStore {
    pub(crate) fn new(proxy: Option<Secret>, access: Option<Secret>) -> Self {
        Self {
            current: RwLock::new(Arc::new(Tokens { proxy, access })),
            proxy_generation: AtomicU64::new(0),
        }
    }

    fn snapshot(&self) -> Arc<Tokens> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the proxy token (after a re-mint).
    pub(crate) fn set_proxy(&self, proxy: Secret) {
        let mut guard = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let access = guard.access.clone();
        *guard = Arc::new(Tokens {
            proxy: Some(proxy),
            access,
        });
        self.proxy_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times the proxy token was replaced.
    pub(crate) fn proxy_generation(&self) -> u64 {
        self.proxy_generation.load(Ordering::SeqCst)
    }
}

impl TokenStore {
    /// Forgets the access token: later calls are anonymous.
    pub(crate) fn clear_access(&self) {
        let mut guard = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let proxy = guard.proxy.clone();
        *guard = Arc::new(Tokens {
            proxy,
            access: None,
        });
    }
}

/// Adds `x-aws-proxy-auth`, `x-aws-proxy-port: 8080`, `x-aws-proxy-force-h2:
/// true` and `x-access-token` to every call.
#[derive(Debug, Clone)]
pub(crate) struct AuthInterceptor {
    store: Arc<TokenStore>,
}

impl AuthInterceptor {
    pub(crate) fn new(store: Arc<TokenStore>) -> Self {
        Self { store }
    }
}

impl Interceptor for AuthInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let tokens = self.store.snapshot();
        let metadata = request.metadata_mut();
        if let Some(proxy) = &tokens.proxy {
            metadata.insert("x-aws-proxy-auth", secret_value(proxy)?);
        }
        metadata.insert("x-aws-proxy-port", MetadataValue::from(AGENT_PORT));
        metadata.insert(
            "x-aws-proxy-force-h2",
            AsciiMetadataValue::from_static("true"),
        );
        if let Some(access) = &tokens.access {
            metadata.insert(
                rayito_proto::tokens::header::ACCESS_TOKEN,
                secret_value(access)?,
            );
        }
        // Feature `otel`: the W3C trace context of the span the call runs
        // under, computed per call (a retry carries the same span's).
        #[cfg(feature = "otel")]
        if let Some((traceparent, tracestate)) = crate::otel::trace_headers() {
            if let Ok(value) = AsciiMetadataValue::try_from(traceparent) {
                metadata.insert("traceparent", value);
            }
            if let Some(Ok(value)) = tracestate.map(AsciiMetadataValue::try_from) {
                metadata.insert("tracestate", value);
            }
        }
        Ok(request)
    }
}

/// A header value from a secret, marked sensitive so that HTTP/2 never puts it
/// in its compression table; the value never appears in the error.
fn secret_value(secret: &Secret) -> Result<AsciiMetadataValue, Status> {
    let mut value = AsciiMetadataValue::try_from(secret.expose())
        .map_err(|_| Status::internal("a token is not a valid header value"))?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_gets_the_four_headers_and_rotation_is_seen() {
        let store = Arc::new(TokenStore::new(
            Some(Secret::new("proxy-1")),
            Some(Secret::new("access-1")),
        ));
        let mut interceptor = AuthInterceptor::new(store.clone());
        let req = interceptor.call(Request::new(())).unwrap();
        let md = req.metadata();
        assert_eq!(md.get("x-aws-proxy-auth").unwrap(), "proxy-1");
        assert_eq!(md.get("x-aws-proxy-port").unwrap(), "8080");
        assert_eq!(md.get("x-aws-proxy-force-h2").unwrap(), "true");
        assert_eq!(md.get("x-access-token").unwrap(), "access-1");

        store.set_proxy(Secret::new("proxy-2"));
        let req = interceptor.call(Request::new(())).unwrap();
        assert_eq!(req.metadata().get("x-aws-proxy-auth").unwrap(), "proxy-2");
        assert_eq!(req.metadata().get("x-access-token").unwrap(), "access-1");
    }

    /// Feature `otel`: the current span's `traceparent` and `tracestate`,
    /// per call; nothing without a span; never `baggage` or
    /// `grpc-trace-bin`.
    #[cfg(feature = "otel")]
    #[test]
    fn a_call_under_a_span_carries_its_trace_context_only() {
        use opentelemetry::baggage::BaggageExt as _;
        use opentelemetry::trace::TraceContextExt as _;
        let store = Arc::new(TokenStore::new(None, Some(Secret::new("access-1"))));
        let mut interceptor = AuthInterceptor::new(store);
        let req = interceptor.call(Request::new(())).unwrap();
        assert!(req.metadata().get("traceparent").is_none());
        assert!(req.metadata().get("tracestate").is_none());

        let cx = opentelemetry::Context::new()
            .with_remote_span_context(crate::otel::remote_parent())
            .with_baggage([opentelemetry::KeyValue::new("user", "secret")]);
        let _guard = cx.attach();
        let req = interceptor.call(Request::new(())).unwrap();
        let md = req.metadata();
        assert_eq!(
            md.get("traceparent").unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(md.get("tracestate").unwrap(), "vendor=v1");
        assert!(md.get("baggage").is_none());
        assert!(md.get("grpc-trace-bin").is_none());
    }
}
