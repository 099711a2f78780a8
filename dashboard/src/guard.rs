//! The defences every request passes before a handler sees it, and the
//! headers every answer carries (errors included).
//!
//! Order: the Host (421), the Origin and `Sec-Fetch-Site` (403), then the
//! start token's exchange for the session cookie (`GET /?token=`), then the
//! session cookie itself (401), then for a POST the JSON content type (415)
//! and the CSRF header (403). A DNS-rebinding page reaches the server with
//! its own Host and is refused first; a cross-site page's requests carry
//! its Origin or a `cross-site` fetch site and no SameSite=Strict cookie.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use crate::api::Shared;
use crate::errors::ApiError;

/// The page's policy: everything from this origin only, no inline script
/// or style, no plugin, no framing, no `<base>`, forms to itself only.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The header a POST carries the session's CSRF value in.
pub(crate) const CSRF_HEADER: &str = "x-rayito-csrf";

pub(crate) async fn defend(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    let mut answer = match check(&shared, &req) {
        Err(refusal) => refusal.into_response(),
        Ok(Some(exchange)) => exchange,
        Ok(None) => next.run(req).await,
    };
    harden(answer.headers_mut());
    answer
}

/// `Err` a refusal; `Ok(Some)` the answer to a token exchange; `Ok(None)`
/// the request goes on.
fn check(shared: &Shared, req: &Request) -> Result<Option<Response>, ApiError> {
    let headers = req.headers();
    let port = shared.port;
    if !host_ok(headers, port) {
        return Err(ApiError::misdirected());
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin_ok(origin, port)
    {
        return Err(ApiError::cross_origin());
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return Err(ApiError::cross_origin());
    }
    if req.method() == Method::GET
        && req.uri().path() == "/"
        && let Some(token) = query_param(req.uri().query(), "token")
    {
        if !shared.secrets.is_start_token(&token) {
            return Err(ApiError::unauthorized());
        }
        return Ok(Some(exchange(shared)));
    }
    let session = cookie(headers, &shared.cookie_name);
    if !session.is_some_and(|s| shared.secrets.is_session(s)) {
        return Err(ApiError::unauthorized());
    }
    if req.method() == Method::POST {
        require_json(headers)?;
        let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !csrf.is_some_and(|c| shared.secrets.is_csrf(c)) {
            return Err(ApiError::csrf());
        }
    }
    Ok(None)
}

/// A POST's body must be JSON (415).
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if json {
        Ok(())
    } else {
        Err(ApiError::not_json())
    }
}

/// The start token's exchange: a 303 to `/` setting the session cookie, so
/// the token leaves the address bar and the history at once.
fn exchange(shared: &Shared) -> Response {
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        shared.cookie_name,
        shared.secrets.session()
    );
    let mut answer = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
    answer
}

/// The headers of every answer.
pub(crate) fn harden(headers: &mut HeaderMap) {
    let set = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
}

fn host_ok(headers: &HeaderMap, port: u16) -> bool {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| is_own_authority(h, port))
}

fn origin_ok(origin: &HeaderValue, port: u16) -> bool {
    origin
        .to_str()
        .ok()
        .and_then(|o| o.strip_prefix("http://"))
        .is_some_and(|authority| is_own_authority(authority, port))
}

/// `127.0.0.1:<port>` or `localhost:<port>` (the port always: a browser
/// sends it for any port but 80, and the dashboard never listens there
/// unless asked to, where it is still written).
fn is_own_authority(authority: &str, port: u16) -> bool {
    let Some((host, p)) = authority.rsplit_once(':') else {
        return false;
    };
    p.parse::<u16>().is_ok_and(|p| p == port)
        && (host == "127.0.0.1" || host.eq_ignore_ascii_case("localhost"))
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// One query parameter (the token is hex: no percent-decoding needed; a
/// token that needs it is wrong anyway).
pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert!(is_own_authority("127.0.0.1:8080", 8080));
        assert!(is_own_authority("localhost:8080", 8080));
        assert!(is_own_authority("LOCALHOST:8080", 8080));
        assert!(!is_own_authority("127.0.0.1:8081", 8080));
        assert!(!is_own_authority("127.0.0.1", 8080));
        assert!(!is_own_authority("evil.example:8080", 8080));
        assert!(!is_own_authority("127.0.0.1.evil.example:8080", 8080));
        assert!(!origin_ok(&HeaderValue::from_static("null"), 8080));
        assert!(!origin_ok(
            &HeaderValue::from_static("https://127.0.0.1:8080"),
            8080
        ));
        assert!(origin_ok(
            &HeaderValue::from_static("http://localhost:8080"),
            8080
        ));
    }

    #[test]
    fn cookies_by_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; rayito_dashboard_9=xyz"),
        );
        assert_eq!(cookie(&h, "rayito_dashboard_9"), Some("xyz"));
        assert_eq!(cookie(&h, "rayito_dashboard_8"), None);
    }
}
