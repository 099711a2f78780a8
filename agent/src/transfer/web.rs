//! The HTTP client the transfers call presigned URLs with: HTTPS (the
//! system's roots) for AWS, plain HTTP for the local emulator's endpoint
//! (the URL check decides which a transfer may use). Connections time out
//! after 5 s; a response that stays silent for 30 s is cut. Nothing here
//! logs a URL.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Connecting to S3, at most.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Silence on a connection (no response head, no body bytes), at most.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A request body: chunks, or an error that aborts the request.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// Why a call failed, as the transfer reports it.
#[derive(Debug)]
pub(crate) enum CallError {
    /// No connection, a timeout, a cut: S3 unavailable.
    Unavailable,
    /// The request body failed (the exported file).
    Body,
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// One client per agent: connections are pooled across transfers.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    inner: Client<Connector, Body>,
}

impl HttpClient {
    /// A client trusting the system's roots.
    ///
    /// # Errors
    /// The TLS configuration cannot be built (no usable root store).
    pub(crate) fn new() -> std::io::Result<Self> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_nodelay(true);
        http.enforce_http(false);
        // One provider named explicitly: the process may link two.
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider.clone())
        {
            Ok(builder) => builder,
            // No root store on this host: the local endpoint (plain HTTP)
            // still works, every HTTPS call fails as S3 unavailable.
            Err(_) => {
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(std::io::Error::other)?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .build(connector);
        Ok(Self { inner })
    }

    /// Sends a request; the head must come within `head_timeout`.
    pub(crate) async fn send(
        &self,
        req: http::Request<Body>,
        head_timeout: Duration,
    ) -> Result<http::Response<hyper::body::Incoming>, CallError> {
        match tokio::time::timeout(head_timeout, self.inner.request(req)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => {
                // The body's own error (the file) is not S3's fault.
                let mut source: Option<&dyn std::error::Error> = Some(&e);
                while let Some(s) = source {
                    if s.downcast_ref::<BodyFailed>().is_some() {
                        return Err(CallError::Body);
                    }
                    source = s.source();
                }
                Err(CallError::Unavailable)
            }
            Err(_) => Err(CallError::Unavailable),
        }
    }
}

/// The error a request body carries when the file under it failed.
#[derive(Debug)]
pub(crate) struct BodyFailed;

impl std::fmt::Display for BodyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body failed")
    }
}

impl std::error::Error for BodyFailed {}

/// An empty body.
pub(crate) fn empty() -> Body {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// The next chunk of a response body, `None` at its end; silence for
/// [`IDLE_TIMEOUT`] or a cut is [`CallError::Unavailable`].
pub(crate) async fn next_chunk(
    body: &mut hyper::body::Incoming,
) -> Result<Option<Bytes>, CallError> {
    loop {
        let frame = tokio::time::timeout(IDLE_TIMEOUT, body.frame())
            .await
            .map_err(|_| CallError::Unavailable)?;
        match frame {
            None => return Ok(None),
            Some(Err(_)) => return Err(CallError::Unavailable),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Reads and drops a (short) response body, so the connection is reused.
pub(crate) async fn drain(mut body: hyper::body::Incoming) {
    let mut left: usize = 64 * 1024;
    while let Ok(Some(chunk)) = next_chunk(&mut body).await {
        left = left.saturating_sub(chunk.len());
        if left == 0 {
            return;
        }
    }
}
