//! One SigV4-signed HTTPS POST to an AWS service, for the calls rayito
//! makes without a generated client (Service Quotas, Cost Explorer, EC2's
//! and IAM's Query calls in the SDK; Service Quotas, SNS and CloudWatch in
//! the stacks' Lambda functions): a generated client per service would add
//! minutes to a clean build for a handful of calls. [`SignedPost::send`]
//! takes another method and a path too (the local emulator's REST-style
//! events API).
//!
//! Signed by `aws-sigv4` (the AWS SDK's own signer) with the
//! configuration's credentials and sent over hyper-util's client (rustls
//! with the platform's roots, optionally more roots, or plain http for a
//! test's endpoint). Each attempt ends by its deadline and the answer is
//! read up to a bound; a failure is a [`PostError`] that names what went
//! wrong and nothing else (never the request, the credentials or the
//! answer's text), so each caller maps it to its own error type.

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials as _;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::sdk_config::SharedCredentialsProvider;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject as _;

/// Why a POST got no answer (or could not be sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The endpoint is not a URI.
    Endpoint,
    /// The TLS roots could not be loaded, or a given PEM holds no
    /// certificate.
    Roots,
    /// The configuration has no credentials, or they could not be loaded.
    Credentials,
    /// The request could not be signed or built.
    Signing,
    /// The connection could not be made (DNS, TCP, TLS).
    Connect,
    /// The deadline passed before the whole answer arrived.
    Timeout,
    /// Any other failure in transit, or an answer past the size bound.
    Transport,
}

/// What came back, whatever its status.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// `x-amzn-requestid`, when sent.
    pub request_id: Option<String>,
    /// `x-amzn-errortype` as sent (the awsJson protocols' error code,
    /// possibly followed by `:` and a URL).
    pub error_type: Option<String>,
    /// The body, at most the client's bound.
    pub body: Bytes,
}

/// The HTTPS client, the endpoint and the signer's inputs of one service
/// in one region. Cheap to clone.
#[derive(Clone)]
pub struct SignedPost {
    http: Https,
    endpoint: http::Uri,
    region: String,
    /// SigV4's service name (`ec2`, `servicequotas`, `ce`, `sns`).
    signing_name: &'static str,
    credentials: Option<SharedCredentialsProvider>,
    timeout: Duration,
    max_answer_bytes: usize,
}

impl std::fmt::Debug for SignedPost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedPost")
            .field("service", &self.signing_name)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl SignedPost {
    /// Posts to `endpoint` (an `https://` or a test's `http://` URI),
    /// signed as `signing_name` in `region` with `config`'s credentials;
    /// each attempt limited to `timeout`, the answer to
    /// `max_answer_bytes`.
    ///
    /// # Errors
    /// [`PostError::Endpoint`] or [`PostError::Roots`] (the platform's
    /// roots could not be read).
    pub fn new(
        config: &aws_types::SdkConfig,
        endpoint: &str,
        region: &str,
        signing_name: &'static str,
        timeout: Duration,
        max_answer_bytes: usize,
    ) -> Result<Self, PostError> {
        let endpoint = parse(endpoint)?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| PostError::Roots)?
            .https_or_http()
            .enable_http1()
            .build();
        let http = HttpClient::builder(TokioExecutor::new()).build(https);
        let parts = (region, signing_name, timeout, max_answer_bytes);
        Self::with_client(config, endpoint, parts, http)
    }

    /// The client's fields around `http`.
    fn with_client(
        config: &aws_types::SdkConfig,
        endpoint: http::Uri,
        (region, signing_name, timeout, max_answer_bytes): (&str, &'static str, Duration, usize),
        http: Https,
    ) -> Result<Self, PostError> {
        Ok(Self {
            http,
            endpoint,
            region: region.to_owned(),
            signing_name,
            credentials: config.credentials_provider(),
            timeout,
            max_answer_bytes,
        })
    }

    /// As [`SignedPost::new`], for an `http://` endpoint on this host
    /// (the local emulator's own APIs): no TLS roots are loaded, and an
    /// `https://` endpoint is refused.
    ///
    /// # Errors
    /// [`PostError::Endpoint`]: the endpoint is not an `http://` URI;
    /// [`PostError::Roots`]: the TLS configuration could not be built.
    pub fn plain_http(
        config: &aws_types::SdkConfig,
        endpoint: &str,
        region: &str,
        signing_name: &'static str,
        timeout: Duration,
        max_answer_bytes: usize,
    ) -> Result<Self, PostError> {
        let endpoint = parse(endpoint)?;
        if endpoint.scheme() != Some(&http::uri::Scheme::HTTP) {
            return Err(PostError::Endpoint);
        }
        // No root at all: nothing over TLS could be trusted, and nothing
        // is read from the platform's store.
        let http = client_trusting(rustls::RootCertStore::empty())?;
        let parts = (region, signing_name, timeout, max_answer_bytes);
        Self::with_client(config, endpoint, parts, http)
    }

    /// SigV4's service name this client signs as.
    pub fn signing_name(&self) -> &'static str {
        self.signing_name
    }

    /// The same client trusting `roots` (PEM certificates) beside the
    /// system's: a backend's own trust (a private CA, a corporate proxy's).
    /// No roots: unchanged.
    ///
    /// # Errors
    /// [`PostError::Roots`]: a PEM holds no certificate, or the TLS
    /// configuration could not be made.
    pub fn trusting(mut self, roots: &[String]) -> Result<Self, PostError> {
        if roots.is_empty() {
            return Ok(self);
        }
        let mut store = rustls::RootCertStore::empty();
        // The system's roots, as many as load (an image without any still
        // reaches an endpoint signed by the given roots).
        let native = rustls_native_certs::load_native_certs();
        let _ = store.add_parsable_certificates(native.certs);
        for pem in roots {
            let mut added = 0;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
                store
                    .add(cert.map_err(|_| PostError::Roots)?)
                    .map_err(|_| PostError::Roots)?;
                added += 1;
            }
            if added == 0 {
                return Err(PostError::Roots);
            }
        }
        self.http = client_trusting(store)?;
        Ok(self)
    }

    /// One POST of `body` with `headers` (the content type among them)
    /// to the endpoint; the answer whatever its status.
    ///
    /// # Errors
    /// No answer arrived in time or whole, or the request could not be
    /// signed (see [`PostError`]).
    pub async fn post(&self, headers: &[(&str, &str)], body: &str) -> Result<Answer, PostError> {
        self.send("POST", "", headers, body.as_bytes()).await
    }

    /// One `method` request of `body` with `headers` to the endpoint
    /// followed by `path_and_query` (empty, or starting with `/`); the
    /// answer whatever its status.
    ///
    /// # Errors
    /// `path_and_query` does not make a URI with the endpoint
    /// ([`PostError::Endpoint`]), or as [`SignedPost::post`].
    pub async fn send(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Answer, PostError> {
        let request = self.signed(method, path_and_query, headers, body).await?;
        let sent = tokio::time::timeout(self.timeout, async {
            let response = self.http.request(request).await.map_err(|e| {
                if e.is_connect() {
                    PostError::Connect
                } else {
                    PostError::Transport
                }
            })?;
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let status = response.status().as_u16();
            let request_id = header("x-amzn-requestid");
            let error_type = header("x-amzn-errortype");
            let body = http_body_util::Limited::new(response.into_body(), self.max_answer_bytes)
                .collect()
                .await
                .map_err(|_| PostError::Transport)?
                .to_bytes();
            Ok(Answer {
                status,
                request_id,
                error_type,
                body,
            })
        })
        .await;
        sent.map_err(|_| PostError::Timeout)?
    }

    /// The request, signed for this service in its region.
    async fn signed(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<http::Request<Full<Bytes>>, PostError> {
        let uri = if path_and_query.is_empty() {
            self.endpoint.clone()
        } else {
            let base = self.endpoint.to_string();
            format!("{}{path_and_query}", base.trim_end_matches('/'))
                .parse::<http::Uri>()
                .map_err(|_| PostError::Endpoint)?
        };
        let method = http::Method::from_bytes(method.as_bytes()).map_err(|_| PostError::Signing)?;
        let provider = self.credentials.as_ref().ok_or(PostError::Credentials)?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|_| PostError::Credentials)?;
        let identity = Identity::from(credentials);
        let host = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let mut signed_headers = vec![("host", host.as_str())];
        signed_headers.extend_from_slice(headers);
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.signing_name)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| PostError::Signing)?
            .into();
        let text = uri.to_string();
        let signable = SignableRequest::new(
            method.as_str(),
            &text,
            signed_headers.iter().copied(),
            SignableBody::Bytes(body),
        )
        .map_err(|_| PostError::Signing)?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| PostError::Signing)?
            .into_parts();
        let mut request = http::Request::builder().method(method).uri(uri);
        for (name, value) in &signed_headers {
            request = request.header(*name, *value);
        }
        let mut request = request
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|_| PostError::Signing)?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

/// `endpoint` as a URI.
fn parse(endpoint: &str) -> Result<http::Uri, PostError> {
    endpoint
        .parse::<http::Uri>()
        .map_err(|_| PostError::Endpoint)
}

type Https = HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTP/1 client (https, or http for a test's or the emulator's
/// endpoint) trusting exactly `store`.
fn client_trusting(store: rustls::RootCertStore) -> Result<Https, PostError> {
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| PostError::Roots)?
        .with_root_certificates(store)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(HttpClient::builder(TokioExecutor::new()).build(https))
}

/// `application/x-www-form-urlencoded` of `pairs` as the Query protocols
/// (EC2's, IAM's, SNS's, CloudWatch's) want: RFC 3986 unreserved
/// characters kept, every other byte escaped.
pub fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    fn encode(text: &str, out: &mut String) {
        for byte in text.bytes() {
            if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
                out.push(char::from(byte));
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode(key, &mut out);
        out.push('=');
        encode(value, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_escapes_everything_but_the_unreserved() {
        assert_eq!(
            form_urlencoded(&[("Filter.1.Name", "vpc-id"), ("Subject", "a b/ñ&=~")]),
            "Filter.1.Name=vpc-id&Subject=a%20b%2F%C3%B1%26%3D~"
        );
    }

    #[test]
    fn a_bad_endpoint_or_pem_is_refused_before_any_call() {
        let config = aws_types::SdkConfig::builder().build();
        let timeout = Duration::from_secs(1);
        let err = SignedPost::new(&config, "not a uri", "us-east-1", "ce", timeout, 1024)
            .expect_err("no URI");
        assert_eq!(err, PostError::Endpoint);
        let post = SignedPost::new(
            &config,
            "https://127.0.0.1:1/",
            "us-east-1",
            "ce",
            timeout,
            1024,
        )
        .expect("a client");
        assert_eq!(
            post.clone()
                .trusting(&["no certificate here".to_owned()])
                .unwrap_err(),
            PostError::Roots
        );
        assert!(post.trusting(&[]).is_ok());
        // The loopback client takes plain http only.
        for https in ["https://127.0.0.1:1", "not a uri"] {
            let err = SignedPost::plain_http(&config, https, "us-east-1", "lambda", timeout, 1024)
                .expect_err(https);
            assert_eq!(err, PostError::Endpoint);
        }
        SignedPost::plain_http(
            &config,
            "http://127.0.0.1:1",
            "us-east-1",
            "lambda",
            timeout,
            1024,
        )
        .expect("plain http");
    }

    #[tokio::test]
    async fn no_credentials_is_said_before_sending() {
        let config = aws_types::SdkConfig::builder().build();
        let post = SignedPost::new(
            &config,
            "http://127.0.0.1:1/",
            "us-east-1",
            "ce",
            Duration::from_secs(1),
            1024,
        )
        .expect("a client");
        assert_eq!(
            post.post(&[], "{}").await.unwrap_err(),
            PostError::Credentials
        );
    }
}
