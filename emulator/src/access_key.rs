//! The AWS access keys the control plane accepts. An emulator generates one
//! at start unless given its own, so that only whoever started it (and was
//! handed the key) can sign calls: sandbox code on the same host cannot.

use std::fmt;

use rand::Rng as _;
use rand::distr::Alphanumeric;

/// An AWS access key the emulator's control plane accepts: requests must be
/// SigV4-signed with it, as AWS requires.
///
/// `Debug` shows the key id only (an id is not secret: it travels in every
/// request's `Authorization` header).
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// The access key id, e.g. `AKIA...`.
    pub id: String,
    /// The secret access key.
    pub secret: String,
    /// For temporary credentials: the session token every request must
    /// carry in `x-amz-security-token` (default `None`: requests carry none).
    pub session_token: Option<String>,
}

impl AccessKey {
    /// A key with this id and secret, without a session token.
    pub fn new(id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            secret: secret.into(),
            session_token: None,
        }
    }

    /// A fresh random key shaped like an AWS one: the id `AKIA` and 16
    /// upper-case letters and digits, the secret 40 random letters and
    /// digits (about 238 bits).
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let id: String = (0..16)
            .map(|_| {
                let c = rng.sample(Alphanumeric);
                char::from(c).to_ascii_uppercase()
            })
            .collect();
        let secret: String = (0..40)
            .map(|_| char::from(rng.sample(Alphanumeric)))
            .collect();
        Self::new(format!("AKIA{id}"), secret)
    }

    /// The same key, requiring `token` in every request.
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }

    /// The headers that SigV4-sign a request with this key, as an AWS SDK
    /// would (`authorization`, `x-amz-date`, and `x-amz-security-token`
    /// with a session token; the signature covers the method, the URL's
    /// host, path and query, and `body`), for a client without an AWS SDK,
    /// e.g. one posting to `/_emulator/faults`. Send the request to `url`
    /// with these headers added and the same body.
    ///
    /// # Errors
    /// A message when `url` is not an absolute URL with a host.
    pub fn sign(
        &self,
        method: &str,
        url: &str,
        body: &[u8],
        region: &str,
    ) -> Result<Vec<(String, String)>, String> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let identity = aws_credential_types::Credentials::new(
            self.id.clone(),
            self.secret.clone(),
            self.session_token.clone(),
            None,
            "rayito-emulator",
        )
        .into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name("lambda")
            .time(std::time::SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| "the signing parameters are incomplete".to_owned())?
            .into();
        let unsignable =
            |_| format!("cannot sign a request to {url}; pass an absolute URL with a host");
        let signable =
            SignableRequest::new(method, url, std::iter::empty(), SignableBody::Bytes(body))
                .map_err(unsignable)?;
        let (instructions, _) = sign(signable, &params).map_err(unsignable)?.into_parts();
        let (headers, _) = instructions.into_parts();
        Ok(headers
            .into_iter()
            .map(|h| (h.name().to_owned(), h.value().to_owned()))
            .collect())
    }
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey")
            .field("id", &self.id)
            .field("secret", &"***")
            .field("session_token", &self.session_token.as_ref().map(|_| "***"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_aws_shaped_random_and_debug_hides_the_secret() {
        let a = AccessKey::generate();
        let b = AccessKey::generate();
        assert_ne!(a, b);
        assert_eq!(a.id.len(), 20);
        assert!(a.id.starts_with("AKIA"));
        assert!(
            a.id.bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        );
        assert_eq!(a.secret.len(), 40);
        let shown = format!("{:?}", a.clone().with_session_token("tok-canary"));
        assert!(shown.contains(&a.id), "{shown}");
        assert!(!shown.contains(&a.secret), "{shown}");
        assert!(!shown.contains("tok-canary"), "{shown}");
    }
}
