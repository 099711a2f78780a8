//! One SigV4-signed POST to an AWS endpoint, for the quota-alerts
//! function's three calls without a generated client: Service Quotas'
//! `ListServiceQuotas` (awsJson1.1), SNS's `Publish` and CloudWatch's
//! `PutMetricData` (awsQuery, a form body). Signed by `aws-sigv4` (the AWS
//! SDK's own signer, already in the tree) with the configuration's
//! credentials and sent over hyper-util's client (rustls with the
//! platform's roots, or plain http for a test's endpoint): two generated
//! clients would add minutes to a clean build for two calls.
//!
//! The answer is bounded ([`MAX_ANSWER_BYTES`]) and each attempt ends by
//! [`ATTEMPT_TIMEOUT`]; a failure keeps the operation and the service's
//! error code only, never the request or the answer's text.

use std::time::{Duration, SystemTime};

use aws_sdk_lambdamicrovms::config::ProvideCredentials as _;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::sdk_config::SharedCredentialsProvider;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::Failure;

/// The deadline of one call (connect, send, read the answer).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest answer read (a page of quotas is a few kilobytes).
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// A signed POST to one service of one region.
#[derive(Clone)]
pub struct SignedPost {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: http::Uri,
    region: String,
    signing_name: &'static str,
    credentials: Option<SharedCredentialsProvider>,
}

impl std::fmt::Debug for SignedPost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedPost")
            .field("service", &self.signing_name)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// An answer: its status and body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// `x-amzn-errortype` (awsJson's error code), when sent.
    pub error_type: Option<String>,
    /// The body, at most [`MAX_ANSWER_BYTES`].
    pub body: Bytes,
}

impl SignedPost {
    /// Posts to `config`'s endpoint override (a test's server) or else
    /// `https://<host>.<region>.amazonaws.com/`, signed as `signing_name`.
    ///
    /// # Errors
    /// The platform's root certificates could not be read, or the endpoint
    /// is not a URI.
    pub fn new(
        config: &aws_types::SdkConfig,
        host: &str,
        region: &str,
        signing_name: &'static str,
    ) -> Result<Self, Failure> {
        let endpoint = match config.endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://{host}.{region}.amazonaws.com/"),
        };
        let endpoint = endpoint
            .parse::<http::Uri>()
            .map_err(|_| Failure::other("config", "endpoint"))?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| Failure::other("config", "tls roots"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            http: HttpClient::builder(TokioExecutor::new()).build(https),
            endpoint,
            region: region.to_owned(),
            signing_name,
            credentials: config.credentials_provider(),
        })
    }

    /// One POST of `body` with `headers` (the content type among them).
    ///
    /// # Errors
    /// No credentials, no answer in time, or an answer past the bound.
    pub async fn post(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, Failure> {
        let request = self.signed(operation, headers, body).await?;
        let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|_| Failure::other(operation, "transport"))?;
            let status = response.status().as_u16();
            let error_type = response
                .headers()
                .get("x-amzn-errortype")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.split(':').next().unwrap_or_default().to_owned());
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|_| Failure::other(operation, "answer"))?
                .to_bytes();
            Ok::<_, Failure>(Answer {
                status,
                error_type,
                body,
            })
        })
        .await;
        sent.map_err(|_| Failure::other(operation, "timeout"))?
    }

    async fn signed(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<http::Request<Full<Bytes>>, Failure> {
        let unloaded = || Failure::other(operation, "CredentialsNotLoaded");
        let provider = self.credentials.as_ref().ok_or_else(unloaded)?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|_| unloaded())?;
        let identity = Identity::from(credentials);
        let host = self
            .endpoint
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let mut signed_headers = vec![("host", host.as_str())];
        signed_headers.extend_from_slice(headers);
        let not_signed = || Failure::other(operation, "signing");
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.signing_name)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| not_signed())?
            .into();
        let uri = self.endpoint.to_string();
        let signable = SignableRequest::new(
            "POST",
            &uri,
            signed_headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|_| not_signed())?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| not_signed())?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(self.endpoint.clone());
        for (name, value) in &signed_headers {
            request = request.header(*name, *value);
        }
        let mut request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|_| not_signed())?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

/// An awsQuery error answer's `<Code>`, else the status.
pub fn query_error_code(answer: &Answer) -> String {
    let text = String::from_utf8_lossy(&answer.body);
    text.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code)
        .filter(|c| {
            !c.is_empty()
                && c.len() <= 64
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
        })
        .map_or_else(|| format!("http {}", answer.status), str::to_owned)
}

/// `application/x-www-form-urlencoded` of `pairs` (RFC 3986 unreserved
/// characters kept, every other byte escaped).
pub fn form(pairs: &[(&str, &str)]) -> String {
    fn escape(out: &mut String, text: &str) {
        for b in text.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        escape(&mut out, key);
        out.push('=');
        escape(&mut out, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_escapes_everything_but_the_unreserved() {
        assert_eq!(
            form(&[("Action", "Publish"), ("Subject", "a b/ñ&=")]),
            "Action=Publish&Subject=a%20b%2F%C3%B1%26%3D"
        );
    }

    #[test]
    fn a_query_error_keeps_its_code_only() {
        let answer = Answer {
            status: 400,
            error_type: None,
            body: Bytes::from_static(
                b"<ErrorResponse><Error><Code>NotFound</Code><Message>Topic arn:aws:sns:x does not exist</Message></Error></ErrorResponse>",
            ),
        };
        assert_eq!(query_error_code(&answer), "NotFound");
        let answer = Answer {
            status: 503,
            error_type: None,
            body: Bytes::from_static(b"<Code>has space</Code>"),
        };
        assert_eq!(query_error_code(&answer), "http 503");
    }
}
