//! The SigV4 gate. The emulator has no secret keys, so it cannot verify a
//! signature; it checks what it can: an `Authorization` header is present
//! (else 403 MissingAuthenticationTokenException, as AWS answers unsigned
//! calls) and has the AWS4-HMAC-SHA256 shape with a five-part Credential
//! scope, SignedHeaders and a 64-hex-digit Signature (else 403
//! IncompleteSignatureException). Any access key and secret are accepted.

use http::HeaderMap;
use http::header::AUTHORIZATION;

use super::api_error::ApiError;

/// Checks the presence and shape of the SigV4 `Authorization` header.
pub(crate) fn check(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(ApiError::missing_authentication());
    };
    let ok = value.to_str().ok().is_some_and(well_formed);
    if ok {
        Ok(())
    } else {
        Err(ApiError::incomplete_signature())
    }
}

fn well_formed(v: &str) -> bool {
    let Some(rest) = v.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return false;
    };
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
    let scope_ok = credential.is_some_and(|c| {
        let parts: Vec<&str> = c.split('/').collect();
        parts.len() == 5 && parts.iter().all(|p| !p.is_empty()) && parts[4] == "aws4_request"
    });
    let headers_ok = signed_headers.is_some_and(|h| !h.is_empty());
    let signature_ok =
        signature.is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    scope_ok && headers_ok && signature_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = v {
            h.insert(AUTHORIZATION, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn presence_and_shape_are_checked() {
        let good = format!(
            "AWS4-HMAC-SHA256 Credential=AKID/20261130/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature={}",
            "ab".repeat(32)
        );
        assert!(check(&headers(Some(&good))).is_ok());
        assert_eq!(
            check(&headers(None)).unwrap_err().name,
            "MissingAuthenticationTokenException"
        );
        for bad in [
            "Bearer x",
            "AWS4-HMAC-SHA256 Credential=AKID/x/aws4_request, SignedHeaders=host, Signature=00",
        ] {
            assert_eq!(
                check(&headers(Some(bad))).unwrap_err().name,
                "IncompleteSignatureException"
            );
        }
    }
}
