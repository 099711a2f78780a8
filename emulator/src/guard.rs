//! What every request to the control-plane port passes first. Its `Host`
//! must name a loopback address (`127.x.y.z`, `[::1]` or `localhost`, with
//! a port): a web page whose DNS name was rebound to 127.0.0.1 sends its
//! own name, and is refused before anything runs. (Any loopback port, not
//! only the emulator's own: a local port forwarder keeps working, and a
//! page served from another loopback port could name the emulator's
//! anyway; the signature is what keeps such a page out.) Then its SigV4
//! signature is checked ([`super::sigv4`]; scoped to `logs` for a
//! CloudWatch Logs call, to `elasticfilesystem` for an EFS one (under
//! `/2015-02-01/`), to `sts` for GetCallerIdentity, to `lambda` otherwise), and the verdict
//! ([`Signed`]) handed to the handler, which counts the call before acting
//! on it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::header::HOST;

use super::api_error::ApiError;
use super::registry::Shared;
use super::sigv4::{self, Received};

/// The largest body the control plane reads: far above any operation's
/// (a RunMicrovm body is a few KiB).
pub(crate) const MAX_BODY: usize = 1 << 20;

/// The SigV4 verdict on one request.
#[derive(Clone, Debug)]
pub(crate) struct Signed(Result<(), ApiError>);

impl Signed {
    /// `Ok` when the request was signed with one of the emulator's keys.
    pub(crate) fn check(&self) -> Result<(), ApiError> {
        self.0.clone()
    }
}

/// The middleware: refuses a foreign `Host` or an oversized body, and
/// attaches the [`Signed`] verdict for the handler.
pub(crate) async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let own = shared.settings.control_addr;
    let (parts, body) = req.into_parts();
    let host = parts
        .headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))
        .filter(|host| is_loopback_host(host))
        .map(str::to_owned);
    let Some(host) = host else {
        return ApiError::foreign_host(&own.to_string()).into_response();
    };
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return ApiError::too_large(MAX_BODY).into_response();
    };
    let received = Received {
        method: parts.method.as_str(),
        host: &host,
        path_and_query: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        headers: &parts.headers,
        body: &bytes,
    };
    let service = if super::logs_api::is_logs_call(&parts.method, &parts.uri, &parts.headers) {
        sigv4::LOGS
    } else if super::servicequotas::is_call(&parts.method, &parts.uri, &parts.headers) {
        sigv4::SERVICE_QUOTAS
    } else if parts.uri.path().starts_with(super::efs::routes::PREFIX) {
        sigv4::EFS
    } else if parts.method == axum::http::Method::POST
        && parts.uri.path() == "/"
        && super::sts::is_get_caller_identity(&bytes)
    {
        sigv4::STS
    } else {
        sigv4::LAMBDA
    };
    let verdict = sigv4::verify(
        &shared.settings.access_keys,
        service,
        &received,
        SystemTime::now(),
    );
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(Signed(verdict));
    next.run(req).await
}

/// Whether `host` (a `Host` value) is a loopback address or `localhost`,
/// with a port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    if let Ok(addr) = host.parse::<SocketAddr>() {
        return addr.ip().is_loopback();
    }
    host.rsplit_once(':').is_some_and(|(name, port)| {
        name.eq_ignore_ascii_case("localhost") && port.parse::<u16>().is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_are_hosts() {
        for ok in [
            "127.0.0.1:4566",
            "127.0.0.2:443",
            "[::1]:4566",
            "localhost:4566",
            "LOCALHOST:4567",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            "evil.example:4566",
            "127.0.0.1.nip.io:4566",
            "localhost",
            "localhost.evil.example:4566",
            "10.0.0.1:4566",
            "0.0.0.0:4566",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}
