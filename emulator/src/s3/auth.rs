//! Who may call the S3 endpoint: requests signed (SigV4, in headers, a
//! presigned URL or a POST policy; s3s checks the signature) with one of
//! the emulator's access keys, carrying the key's session token when it has
//! one. Anything else is refused before the operation runs.

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Error, S3ErrorCode, S3Result};
use subtle::ConstantTimeEq as _;

use crate::AccessKey;

/// The emulator's access keys, as s3s's secret lookup and access check.
pub(super) struct Keys(Vec<AccessKey>);

impl Keys {
    pub(super) fn new(keys: &[AccessKey]) -> Self {
        Self(keys.to_vec())
    }

    fn find(&self, id: &str) -> Option<&AccessKey> {
        self.0.iter().find(|k| k.id == id)
    }
}

/// S3's answer to an unsigned request, or one whose token is not the key's.
fn access_denied() -> S3Error {
    S3Error::with_message(S3ErrorCode::AccessDenied, "Access Denied")
}

#[async_trait::async_trait]
impl S3Auth for Keys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.find(access_key) {
            Some(key) => Ok(SecretKey::from(key.secret.as_str())),
            None => Err(S3Error::with_message(
                S3ErrorCode::InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records.",
            )),
        }
    }
}

#[async_trait::async_trait]
impl S3Access for Keys {
    /// Runs for every operation once the signature was checked: an
    /// unsigned request has no credentials here.
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let key = cx
            .credentials()
            .and_then(|c| self.find(&c.access_key))
            .ok_or_else(access_denied)?;
        let sent = match cx.headers().get("x-amz-security-token") {
            Some(v) => Some(v.to_str().map_err(|_| invalid_token())?.to_owned()),
            None => cx.uri().query().and_then(presigned_token),
        };
        let matches = match (key.session_token.as_deref(), sent.as_deref()) {
            (None, None) => true,
            (Some(expected), Some(got)) => bool::from(expected.as_bytes().ct_eq(got.as_bytes())),
            _ => false,
        };
        if matches {
            Ok(())
        } else {
            Err(invalid_token())
        }
    }
}

/// 400 InvalidToken, as S3 answers a session token it does not accept.
fn invalid_token() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidToken,
        "The provided token is malformed or otherwise invalid.",
    )
}

/// The `X-Amz-Security-Token` of a presigned URL's query, decoded.
fn presigned_token(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("X-Amz-Security-Token="))
        .and_then(percent_decode)
}

/// `%XX`-decodes a query value (`+` stays `+`: SigV4 encodes a space as
/// `%20`); `None` when malformed or not UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presigned_tokens_are_found_and_decoded() {
        assert_eq!(
            presigned_token(
                "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Security-Token=a%2Fb%3D%3D&x=1"
            ),
            Some("a/b==".to_owned())
        );
        assert_eq!(presigned_token("x-id=GetObject"), None);
        assert_eq!(presigned_token("X-Amz-Security-Token=%zz"), None);
        assert_eq!(presigned_token("X-Amz-Security-Token=%4"), None);
        assert_eq!(presigned_token("X-Amz-Security-Token=%+1"), None);
        assert_eq!(presigned_token("X-Amz-Security-Token=%FF"), None);
    }
}
