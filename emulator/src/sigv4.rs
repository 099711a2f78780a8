//! The SigV4 gate: every control-plane call must be signed with one of the
//! emulator's access keys, and is refused as AWS (Lambda's frontend) refuses
//! it otherwise, all with HTTP 403:
//!
//! - no `Authorization` header: MissingAuthenticationTokenException;
//! - a header that is not an AWS4-HMAC-SHA256 one with a five-part
//!   Credential scope, SignedHeaders and a 64-hex-digit Signature, or no
//!   `X-Amz-Date`: IncompleteSignatureException;
//! - a key id the emulator does not hold, or a session token that is not
//!   the key's: UnrecognizedClientException;
//! - a scope for another service, a date more than 5 minutes away from the
//!   emulator's clock (Lambda's window, as its "Signature expired" messages
//!   say), or a signature that differs from the one the emulator computes:
//!   InvalidSignatureException.
//!
//! The signature is computed again with `aws-sigv4` (the signer of the AWS
//! SDKs) over the request as received, with the headers the caller listed
//! in SignedHeaders, and compared in constant time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sigv4::http_request::{
    SessionTokenMode, SignableBody, SignableRequest, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use http::HeaderMap;
use http::header::{AUTHORIZATION, HOST};
use subtle::ConstantTimeEq as _;

use super::access_key::AccessKey;
use super::api_error::ApiError;

/// How far a request's `X-Amz-Date` may be from the emulator's clock.
const MAX_SKEW: Duration = Duration::from_secs(5 * 60);

/// The signing name of the `lambda-microvms` API.
pub(crate) const LAMBDA: &str = "lambda";

/// The signing name of CloudWatch Logs (served on the same port).
pub(crate) const LOGS: &str = "logs";

/// The signing name of STS (GetCallerIdentity, served on the same port).
pub(crate) const STS: &str = "sts";

/// The signing name of EFS (its API under `/2015-02-01/`, same port).
pub(crate) const EFS: &str = "elasticfilesystem";

/// The signing name of Service Quotas (ListServiceQuotas, same port).
pub(crate) const SERVICE_QUOTAS: &str = "servicequotas";

const X_AMZ_DATE: &str = "x-amz-date";
const X_AMZ_SECURITY_TOKEN: &str = "x-amz-security-token";

/// The parts of a received request the signature covers.
#[derive(Debug)]
pub(crate) struct Received<'a> {
    pub(crate) method: &'a str,
    /// The host the request named (`Host`, or the HTTP/2 authority).
    pub(crate) host: &'a str,
    /// The path and query, as received.
    pub(crate) path_and_query: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

/// The fields of an `Authorization: AWS4-HMAC-SHA256 ...` header.
#[derive(Debug, PartialEq)]
struct Authorization<'a> {
    key_id: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

/// Checks that `request` is signed with one of `keys` for `service` (a
/// signing name: [`LAMBDA`], [`LOGS`]), at a date within [`MAX_SKEW`] of
/// `now`.
pub(crate) fn verify(
    keys: &[AccessKey],
    service: &str,
    request: &Received<'_>,
    now: SystemTime,
) -> Result<(), ApiError> {
    let Some(value) = request.headers.get(AUTHORIZATION) else {
        return Err(ApiError::missing_authentication());
    };
    let auth = value
        .to_str()
        .ok()
        .and_then(parse_authorization)
        .ok_or_else(ApiError::incomplete_signature)?;
    let date = request
        .headers
        .get(X_AMZ_DATE)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(ApiError::missing_date)?;
    let signed_at = parse_amz_date(date).ok_or_else(ApiError::missing_date)?;
    let key = keys
        .iter()
        .find(|k| k.id == auth.key_id)
        .ok_or_else(ApiError::unrecognized_client)?;
    let token = match request.headers.get(X_AMZ_SECURITY_TOKEN) {
        Some(v) => Some(v.to_str().map_err(|_| ApiError::unrecognized_client())?),
        None => None,
    };
    let token_ok = match (key.session_token.as_deref(), token) {
        (None, None) => true,
        (Some(expected), Some(got)) => bool::from(expected.as_bytes().ct_eq(got.as_bytes())),
        _ => false,
    };
    if !token_ok {
        return Err(ApiError::unrecognized_client());
    }
    if auth.service != service {
        return Err(ApiError::invalid_signature(format!(
            "Credential should be scoped to correct service: '{service}'."
        )));
    }
    check_skew(signed_at, now)?;
    let expected = signature(key, &auth, token, signed_at, request)
        .ok_or_else(ApiError::signature_mismatch)?;
    if bool::from(expected.as_bytes().ct_eq(auth.signature.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::signature_mismatch())
    }
}

/// The signature `key` gives `request`, signed at `signed_at` over the
/// headers `auth` lists; `None` when the request cannot be signed at all
/// (a header that is not text, a URI the signer refuses).
fn signature(
    key: &AccessKey,
    auth: &Authorization<'_>,
    token: Option<&str>,
    signed_at: SystemTime,
    request: &Received<'_>,
) -> Option<String> {
    let identity = aws_credential_types::Credentials::new(
        key.id.clone(),
        key.secret.clone(),
        token.map(str::to_owned),
        None,
        "rayito-emulator",
    )
    .into();
    let mut settings = SigningSettings::default();
    // Sign exactly what the caller listed, nothing the signer would skip.
    settings.excluded_headers = None;
    settings.session_token_mode = if auth.signed_headers.contains(&X_AMZ_SECURITY_TOKEN) {
        SessionTokenMode::Include
    } else {
        SessionTokenMode::Exclude
    };
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(auth.region)
        .name(auth.service)
        .time(signed_at)
        .settings(settings)
        .build()
        .ok()?
        .into();
    // The signer adds the date and the token itself, and the host from the
    // URI when the caller sent no `Host` (HTTP/2).
    let mut headers = Vec::new();
    for name in &auth.signed_headers {
        if matches!(*name, X_AMZ_DATE | X_AMZ_SECURITY_TOKEN) {
            continue;
        }
        for value in request.headers.get_all(*name) {
            headers.push((*name, value.to_str().ok()?));
        }
        if *name == HOST.as_str() && !request.headers.contains_key(HOST) {
            headers.push((*name, request.host));
        }
    }
    let uri = format!("http://{}{}", request.host, request.path_and_query);
    let signable = SignableRequest::new(
        request.method,
        uri,
        headers.into_iter(),
        SignableBody::Bytes(request.body),
    )
    .ok()?;
    let (_, signature) = sign(signable, &params).ok()?.into_parts();
    Some(signature)
}

/// Refuses a date more than [`MAX_SKEW`] before or after `now`, with
/// Lambda's messages.
fn check_skew(signed_at: SystemTime, now: SystemTime) -> Result<(), ApiError> {
    let earliest = now.checked_sub(MAX_SKEW).unwrap_or(UNIX_EPOCH);
    let latest = now.checked_add(MAX_SKEW).unwrap_or(now);
    let minutes = MAX_SKEW.as_secs() / 60;
    if signed_at < earliest {
        return Err(ApiError::invalid_signature(format!(
            "Signature expired: {} is now earlier than {} ({} - {minutes} min.)",
            format_amz_date(signed_at),
            format_amz_date(earliest),
            format_amz_date(now),
        )));
    }
    if signed_at > latest {
        return Err(ApiError::invalid_signature(format!(
            "Signature not yet current: {} is still later than {} ({} + {minutes} min.)",
            format_amz_date(signed_at),
            format_amz_date(latest),
            format_amz_date(now),
        )));
    }
    Ok(())
}

fn parse_authorization(v: &str) -> Option<Authorization<'_>> {
    let rest = v.strip_prefix("AWS4-HMAC-SHA256 ")?;
    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(c) = part.strip_prefix("Credential=") {
            credential = Some(c);
        } else if let Some(s) = part.strip_prefix("SignedHeaders=") {
            signed_headers = Some(s);
        } else if let Some(s) = part.strip_prefix("Signature=") {
            signature = Some(s);
        }
    }
    let scope: Vec<&str> = credential?.split('/').collect();
    let [key_id, date, region, service, terminator] = scope[..] else {
        return None;
    };
    let scope_ok = [key_id, date, region, service]
        .iter()
        .all(|p| !p.is_empty())
        && terminator == "aws4_request";
    let signed_headers: Vec<&str> = signed_headers?.split(';').collect();
    let headers_ok = signed_headers.iter().all(|h| !h.is_empty());
    let signature = signature?;
    let signature_ok = signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit());
    (scope_ok && headers_ok && signature_ok).then_some(Authorization {
        key_id,
        region,
        service,
        signed_headers,
        signature,
    })
}

/// SigV4's date: `YYYYMMDD'T'HHMMSS'Z'` (ISO 8601 basic, UTC).
const AMZ_DATE: &str = "%Y%m%dT%H%M%SZ";

/// Parses an `X-Amz-Date`; `None` for anything but exactly that form.
fn parse_amz_date(v: &str) -> Option<SystemTime> {
    // chrono's %Y takes a sign and more digits: the form is fixed here.
    if v.len() != 16 || !v.bytes().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let at = chrono::NaiveDateTime::parse_from_str(v, AMZ_DATE).ok()?;
    Some(SystemTime::from(at.and_utc()))
}

fn format_amz_date(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format(AMZ_DATE)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Signs a request as an AWS SDK does, with `aws-sigv4`.
    fn signed_headers(key: &AccessKey, at: SystemTime, body: &[u8]) -> HeaderMap {
        let identity = aws_credential_types::Credentials::new(
            key.id.clone(),
            key.secret.clone(),
            key.session_token.clone(),
            None,
            "test",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("lambda")
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let mut req = http::Request::builder()
            .method("POST")
            .uri("http://127.0.0.1:4566/2025-09-09/microvms?maxResults=5")
            .header("host", "127.0.0.1:4566")
            .header("content-type", "application/json")
            .body(body.to_vec())
            .unwrap();
        let signable = SignableRequest::new(
            "POST",
            req.uri().to_string(),
            req.headers()
                .iter()
                .map(|(k, v)| (k.as_str(), v.to_str().unwrap())),
            SignableBody::Bytes(body),
        )
        .unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        instructions.apply_to_request_http1x(&mut req);
        req.headers().clone()
    }

    fn received<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Received<'a> {
        Received {
            method: "POST",
            host: "127.0.0.1:4566",
            path_and_query: "/2025-09-09/microvms?maxResults=5",
            headers,
            body,
        }
    }

    fn name(r: Result<(), ApiError>) -> &'static str {
        r.err().map_or("ok", |e| e.name)
    }

    #[test]
    fn a_request_signed_with_the_key_passes_and_any_change_fails() {
        let key = AccessKey::generate();
        let now = SystemTime::now();
        let body = br#"{"imageIdentifier":"x"}"#;
        let headers = signed_headers(&key, now, body);
        assert_eq!(
            name(verify(
                std::slice::from_ref(&key),
                LAMBDA,
                &received(&headers, body),
                now
            )),
            "ok"
        );
        // Another body, another path, another method, another secret.
        let keys = std::slice::from_ref(&key);
        let other_body = br#"{"imageIdentifier":"y"}"#;
        assert_eq!(
            name(verify(keys, LAMBDA, &received(&headers, other_body), now)),
            "InvalidSignatureException"
        );
        let mut r = received(&headers, body);
        r.path_and_query = "/2025-09-09/microvms?maxResults=6";
        assert_eq!(
            name(verify(keys, LAMBDA, &r, now)),
            "InvalidSignatureException"
        );
        let mut r = received(&headers, body);
        r.method = "GET";
        assert_eq!(
            name(verify(keys, LAMBDA, &r, now)),
            "InvalidSignatureException"
        );
        let wrong_secret = AccessKey::new(key.id.clone(), "not-the-secret");
        assert_eq!(
            name(verify(
                &[wrong_secret],
                LAMBDA,
                &received(&headers, body),
                now
            )),
            "InvalidSignatureException"
        );
        // A key the emulator does not hold.
        assert_eq!(
            name(verify(
                &[AccessKey::generate()],
                LAMBDA,
                &received(&headers, body),
                now
            )),
            "UnrecognizedClientException"
        );
    }

    #[test]
    fn session_tokens_must_be_the_keys() {
        let key = AccessKey::generate().with_session_token("session-1");
        let now = SystemTime::now();
        let headers = signed_headers(&key, now, b"");
        let check = |k: &AccessKey| {
            name(verify(
                std::slice::from_ref(k),
                LAMBDA,
                &received(&headers, b""),
                now,
            ))
        };
        assert_eq!(check(&key), "ok");
        assert_eq!(
            check(&key.clone().with_session_token("session-2")),
            "UnrecognizedClientException"
        );
        let mut permanent = key.clone();
        permanent.session_token = None;
        assert_eq!(check(&permanent), "UnrecognizedClientException");
    }

    #[test]
    fn dates_outside_five_minutes_are_refused_with_lambdas_messages() {
        let key = AccessKey::generate();
        let now = UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let keys = std::slice::from_ref(&key);
        let at = |offset: i64| {
            if offset < 0 {
                now - Duration::from_secs(offset.unsigned_abs())
            } else {
                now + Duration::from_secs(offset.unsigned_abs())
            }
        };
        for ok in [-299, 0, 299] {
            let headers = signed_headers(&key, at(ok), b"");
            assert_eq!(
                name(verify(keys, LAMBDA, &received(&headers, b""), now)),
                "ok"
            );
        }
        let headers = signed_headers(&key, at(-301), b"");
        let err = verify(keys, LAMBDA, &received(&headers, b""), now).unwrap_err();
        assert_eq!(err.name, "InvalidSignatureException");
        assert_eq!(err.status, http::StatusCode::FORBIDDEN);
        assert_eq!(
            err.message,
            "Signature expired: 20260528T202139Z is now earlier than 20260528T202140Z (20260528T202640Z - 5 min.)"
        );
        let headers = signed_headers(&key, at(301), b"");
        let err = verify(keys, LAMBDA, &received(&headers, b""), now).unwrap_err();
        assert_eq!(
            err.message,
            "Signature not yet current: 20260528T203141Z is still later than 20260528T203140Z (20260528T202640Z + 5 min.)"
        );
    }

    #[test]
    fn presence_and_shape_are_checked_first() {
        let key = AccessKey::generate();
        let keys = std::slice::from_ref(&key);
        let now = SystemTime::now();
        let mut h = HeaderMap::new();
        assert_eq!(
            name(verify(keys, LAMBDA, &received(&h, b""), now)),
            "MissingAuthenticationTokenException"
        );
        for bad in [
            "Bearer x",
            "AWS4-HMAC-SHA256 Credential=AKID/x/aws4_request, SignedHeaders=host, Signature=00",
        ] {
            h.insert(AUTHORIZATION, bad.parse().unwrap());
            assert_eq!(
                name(verify(keys, LAMBDA, &received(&h, b""), now)),
                "IncompleteSignatureException"
            );
        }
        // Well shaped, no date.
        let mut h = signed_headers(&key, now, b"");
        h.remove(X_AMZ_DATE);
        let err = verify(keys, LAMBDA, &received(&h, b""), now).unwrap_err();
        assert_eq!(err.name, "IncompleteSignatureException");
        assert_eq!(
            err.message,
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        );
    }

    #[test]
    fn another_service_is_refused() {
        let key = AccessKey::generate();
        let now = SystemTime::now();
        let mut h = signed_headers(&key, now, b"");
        let auth = h[AUTHORIZATION]
            .to_str()
            .unwrap()
            .replace("/lambda/", "/s3/");
        h.insert(AUTHORIZATION, auth.parse().unwrap());
        let err = verify(std::slice::from_ref(&key), LAMBDA, &received(&h, b""), now).unwrap_err();
        assert_eq!(
            (err.name, err.message.as_str()),
            (
                "InvalidSignatureException",
                "Credential should be scoped to correct service: 'lambda'."
            )
        );
        // A call to CloudWatch Logs must be scoped to `logs`.
        let h = signed_headers(&key, now, b"");
        let err = verify(std::slice::from_ref(&key), LOGS, &received(&h, b""), now).unwrap_err();
        assert_eq!(
            err.message,
            "Credential should be scoped to correct service: 'logs'."
        );
    }

    #[test]
    fn dates_round_trip() {
        for secs in [0u64, 951_782_400, 1_780_000_000, 4_102_444_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_amz_date(&format_amz_date(t)), Some(t), "{secs}");
        }
        assert_eq!(format_amz_date(UNIX_EPOCH), "19700101T000000Z");
        for bad in [
            "",
            "20260101T000000",
            "2026010lT000000Z",
            "20261301T000000Z",
            "+0260101T000000Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }
}
