//! One export: the OTLP/HTTP POST of a protobuf body, gzip-compressed,
//! signed with SigV4 (service `monitoring`, the execution role's
//! credentials) or carrying a bearer token, within the reference's
//! timeouts (connect 5 s, the answer's head 6 s, the whole attempt 8 s).
//! A failure keeps only its class: `network` (no answer in time, a
//! connection failure), `rejected` (any answer but 2xx) or
//! `no_credentials` (SigV4 without credentials at the time). Nothing here
//! logs or keeps a token, a credential or an answer's body.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use zeroize::Zeroizing;

use crate::persist::Persist;
use crate::persist::creds::Creds;

/// How long the answer's head may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(6);
/// How long one attempt may take in all.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(8);
/// Largest answer body read (then dropped).
const MAX_ANSWER: usize = 64 * 1024;

/// The classes of a failed export.
pub(crate) mod class {
    /// No answer in time, or the connection failed.
    pub(crate) const NETWORK: &str = "network";
    /// The collector answered, but not 2xx.
    pub(crate) const REJECTED: &str = "rejected";
    /// SigV4 without credentials at the time (no role, IMDS not answering).
    pub(crate) const NO_CREDENTIALS: &str = "no_credentials";
}

/// The User-Agent of every export.
pub(crate) fn user_agent() -> String {
    format!("rayito-agent/{}", crate::AGENT_VERSION)
}

/// How a request is signed.
pub(crate) enum Signer {
    /// SigV4 in `region` with the role's credentials, read per export.
    SigV4 {
        persist: Arc<Persist>,
        region: String,
    },
    /// A bearer token.
    Bearer(Zeroizing<String>),
}

/// Where and how exports go.
pub(crate) struct Sink {
    pub client: crate::persist::s3::HttpsClient,
    pub url: http::Uri,
    pub signer: Signer,
}

impl std::fmt::Debug for Sink {
    // Neither the token nor the URL's query reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink").finish_non_exhaustive()
    }
}

/// `body` (protobuf) gzip-compressed.
pub(crate) fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

impl Sink {
    /// Posts one export (`body`: the encoded request, not compressed).
    ///
    /// # Errors
    /// The failure's class.
    pub(crate) async fn send(&self, body: &[u8]) -> Result<(), &'static str> {
        let body = Bytes::from(gzip(body));
        let mut req = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .header(http::header::CONTENT_ENCODING, "gzip")
            .header(http::header::USER_AGENT, user_agent())
            .body(Full::new(body.clone()))
            .map_err(|_| class::NETWORK)?;
        if let Some(host) = self.url.authority() {
            let value = http::HeaderValue::from_str(host.as_str()).map_err(|_| class::NETWORK)?;
            req.headers_mut().insert(http::header::HOST, value);
        }
        match &self.signer {
            Signer::Bearer(token) => {
                let mut value = http::HeaderValue::from_str(&format!("Bearer {}", token.as_str()))
                    .map_err(|_| class::REJECTED)?;
                value.set_sensitive(true);
                req.headers_mut().insert(http::header::AUTHORIZATION, value);
            }
            Signer::SigV4 { persist, region } => {
                let creds = persist.role_creds().await.ok_or(class::NO_CREDENTIALS)?;
                sign(&mut req, &body, &creds, region).ok_or(class::NO_CREDENTIALS)?;
            }
        }
        let attempt = async {
            let resp = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(req))
                .await
                .map_err(|_| class::NETWORK)?
                .map_err(|_| class::NETWORK)?;
            let ok = resp.status().is_success();
            // Read (bounded) and drop: the connection can be reused.
            let _ = Limited::new(resp.into_body(), MAX_ANSWER).collect().await;
            if ok { Ok(()) } else { Err(class::REJECTED) }
        };
        tokio::time::timeout(ATTEMPT_TIMEOUT, attempt)
            .await
            .map_err(|_| class::NETWORK)?
    }
}

/// SigV4 for CloudWatch's OTLP endpoint: service `monitoring`, the body's
/// sha256 in `x-amz-content-sha256` (with `x-amz-date` and, for temporary
/// credentials, `x-amz-security-token`).
fn sign(
    req: &mut http::Request<Full<Bytes>>,
    body: &[u8],
    creds: &Creds,
    region: &str,
) -> Option<()> {
    use aws_sigv4::http_request::{PayloadChecksumKind, SigningSettings};
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    crate::persist::s3::sign_v4(req, body, creds, region, "monitoring", settings)
}
