//! The access-token rule: `x-access-token` carries base64url(secret), the
//! agent only knows sha256(secret) from the run payload, and compares the two
//! digests in constant time.

use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Name of the metadata key that carries the access token.
pub const ACCESS_TOKEN_HEADER: &str = rayito_proto::tokens::header::ACCESS_TOKEN;

/// Why a call was refused; each variant has one fixed English message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenRejection {
    /// No `x-access-token` header on the call.
    Missing,
    /// The header is not printable ASCII or not base64url.
    Malformed,
    /// No `/run` installed a digest (or its payload was invalid).
    NotInstalled,
    /// The token does not hash to the installed digest.
    Mismatch,
}

impl TokenRejection {
    /// The exact UNAUTHENTICATED message.
    pub(crate) fn message(self) -> &'static str {
        match self {
            TokenRejection::Missing => "missing access token",
            TokenRejection::Malformed => "malformed access token",
            TokenRejection::NotInstalled => "no access token installed",
            TokenRejection::Mismatch => "access token mismatch",
        }
    }
}

/// Parses the payload's `token_sha256`: exactly 64 lower-case hex digits.
pub(crate) fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
    }
    Some(out)
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Checks a call's header against the installed digest. The header checks
/// come first so that a caller learns what is wrong with its own request.
pub(crate) fn check(
    header: Option<&http::HeaderValue>,
    digest: Option<&[u8; 32]>,
) -> Result<(), TokenRejection> {
    let header = header.ok_or(TokenRejection::Missing)?;
    let text = header.to_str().map_err(|_| TokenRejection::Malformed)?;
    // Padding is tolerated: clients in other languages may add it.
    let trimmed = text.trim_end_matches('=');
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(trimmed)
        .map_err(|_| TokenRejection::Malformed)?;
    let digest = digest.ok_or(TokenRejection::NotInstalled)?;
    let presented: [u8; 32] = Sha256::digest(&secret).into();
    if bool::from(presented.ct_eq(digest)) {
        Ok(())
    } else {
        Err(TokenRejection::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(secret: &[u8]) -> [u8; 32] {
        Sha256::digest(secret).into()
    }

    #[test]
    fn parses_lower_hex_only() {
        let hex = "00ff".repeat(16);
        let d = parse_digest(&hex).expect("valid");
        assert_eq!(d[0], 0);
        assert_eq!(d[1], 0xff);
        assert!(parse_digest(&hex.to_uppercase()).is_none());
        assert!(parse_digest("abc").is_none());
        assert!(parse_digest(&"g".repeat(64)).is_none());
    }

    #[test]
    fn accepts_token_with_and_without_padding() {
        let secret = [7u8; 32];
        let d = digest_of(&secret);
        let tok = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let hv = http::HeaderValue::from_str(&tok).unwrap();
        assert_eq!(check(Some(&hv), Some(&d)), Ok(()));
        let padded = http::HeaderValue::from_str(&format!("{tok}=")).unwrap();
        assert_eq!(check(Some(&padded), Some(&d)), Ok(()));
    }

    #[test]
    fn rejections_in_order() {
        let d = digest_of(b"0123456789abcdef");
        assert_eq!(check(None, Some(&d)), Err(TokenRejection::Missing));
        let bad = http::HeaderValue::from_static("not base64!");
        assert_eq!(check(Some(&bad), Some(&d)), Err(TokenRejection::Malformed));
        let other = http::HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(check(Some(&other), None), Err(TokenRejection::NotInstalled));
        assert_eq!(check(Some(&other), Some(&d)), Err(TokenRejection::Mismatch));
    }
}
