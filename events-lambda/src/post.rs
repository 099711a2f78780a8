//! One delivery attempt: the webhook's URL checked (https with a host),
//! its host resolved once and every address checked public
//! (`rayito_events::url::is_blocked`, the rule the SDK applies at registration), then one POST to those addresses, at most
//! [`ATTEMPT_TIMEOUT`] end to end, following no redirect and reading at
//! most [`MAX_RESPONSE`] bytes of the answer (a receiver that streams
//! forever costs nothing more).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;

use rayito_events::url::is_blocked;

/// The longest one attempt takes (connect, send, read the answer).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of an answer read.
pub const MAX_RESPONSE: usize = 64 * 1024;

/// Which URLs the deliverer posts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlPolicy {
    /// The stack's: https only, to public addresses only.
    Public,
    /// Plain http and loopback or private addresses too: for tests and
    /// local receivers only, never the stack's functions.
    AnyHost,
}

/// Why an attempt had no HTTP answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The URL is not a deliverable one (`invalid_url`).
    InvalidUrl,
    /// The host resolved to a non-public address (`ssrf_blocked`).
    Blocked,
    /// Resolving, connecting, sending or reading failed or timed out
    /// (retried).
    Transport,
}

/// A resolver that answers with the addresses resolved and checked
/// beforehand, so that the connection goes where the check looked.
#[derive(Clone, Debug)]
struct Checked(Arc<Vec<SocketAddr>>);

impl tower::Service<Name> for Checked {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Name) -> Self::Future {
        std::future::ready(Ok(self.0.as_ref().clone().into_iter()))
    }
}

/// The URL's scheme and host checked, its addresses resolved and checked.
async fn resolve(uri: &Uri, policy: UrlPolicy) -> Result<Vec<SocketAddr>, PostError> {
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") if policy == UrlPolicy::AnyHost => false,
        _ => return Err(PostError::InvalidUrl),
    };
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or(PostError::InvalidUrl)?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    if port == 0 {
        return Err(PostError::InvalidUrl);
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|_| PostError::Transport)?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(PostError::Transport);
    }
    if policy == UrlPolicy::Public && addrs.iter().any(|a| is_blocked(a.ip())) {
        return Err(PostError::Blocked);
    }
    Ok(addrs)
}

/// POSTs `body` with `headers` to `url`: the answer's status.
///
/// # Errors
/// [`PostError`]: no answer (see its variants).
pub async fn post(
    url: &str,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
    policy: UrlPolicy,
    timeout: Duration,
) -> Result<u16, PostError> {
    let uri: Uri = url.parse().map_err(|_| PostError::InvalidUrl)?;
    let attempt = async {
        let addrs = resolve(&uri, policy).await?;
        let mut http = HttpConnector::new_with_resolver(Checked(Arc::new(addrs)));
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| PostError::Transport)?;
        let connector = match policy {
            UrlPolicy::Public => tls.https_only(),
            UrlPolicy::AnyHost => tls.https_or_http(),
        }
        .enable_http1()
        .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let mut request = Request::post(uri.clone());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| PostError::InvalidUrl)?;
        let response = client
            .request(request)
            .await
            .map_err(|_| PostError::Transport)?;
        let status = response.status().as_u16();
        let mut answer = response.into_body();
        let mut read = 0;
        while read < MAX_RESPONSE {
            match answer.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
                Some(Err(_)) | None => break,
            }
        }
        Ok(status)
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(Err(PostError::Transport))
}
