//! One signed POST to an AWS endpoint, for the calls we make without a
//! generated client (EC2's Query reads of feature `efs`, IAM's of feature
//! `permissions`, the awsJson reads of Service Quotas and Cost Explorer): SigV4 by `aws-sigv4` (the AWS
//! SDK's own signer) with the configuration's credentials, sent over
//! hyper-util's client (rustls with the system's roots, or plain http for
//! a local endpoint). The answer's status, request id, error type and body
//! come back as they are: each protocol reads its own.

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
#[cfg(any(feature = "quotas", feature = "permissions"))]
use rustls::pki_types::pem::PemObject as _;

use crate::error::map::aws::{AwsFailure, NoResponse};
use crate::quiet::Quiet as _;

/// The deadline of one attempt (connect, send, read the answer).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read (a page of route tables, quotas or cost groups
/// is a few kilobytes).
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// Attempts of one call: a throttled or failed-in-transit call is tried
/// again after 0.5 s, then 1 s (every call made this way only reads).
const ATTEMPTS: u32 = 3;

/// The HTTPS client, the endpoint and the signer's inputs of one service
/// in one region.
#[derive(Clone)]
pub(crate) struct SignedPost {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: http::Uri,
    region: String,
    /// SigV4's service name (`ec2`, `servicequotas`, `ce`).
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

/// What came back.
pub(crate) struct Answer {
    pub status: u16,
    pub request_id: Option<String>,
    /// `x-amzn-errortype` (the awsJson protocols' error code).
    #[cfg_attr(not(feature = "quotas"), allow(dead_code))] // EC2 reads its XML
    pub error_type: Option<String>,
    pub body: Bytes,
}

impl SignedPost {
    /// Posts to `endpoint` (ends with `/`), signed as `signing_name` in
    /// `region` with `config`'s credentials.
    ///
    /// # Errors
    /// The system's root certificates could not be read, or the endpoint is
    /// not a URI (mapped as a call of `signing_name` that never started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        endpoint: &str,
        region: &str,
        signing_name: &'static str,
    ) -> Result<Self, crate::error::SandboxError> {
        let not_started =
            || crate::error::map::aws::from_aws(no_response(signing_name, NoResponse::Other));
        let endpoint = endpoint.parse::<http::Uri>().map_err(|_| not_started())?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| not_started())?
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

    /// The same POST trusting `roots` (PEM certificates) beside the
    /// system's: the backend's own trust (the TLS local backend's CA,
    /// `AwsOptions::root_certificate`), as every other call of it. No
    /// roots: unchanged.
    ///
    /// # Errors
    /// A PEM holds no certificate, or the TLS configuration could not be
    /// made (mapped as a call of this service that never started).
    #[cfg(any(feature = "quotas", feature = "permissions"))]
    pub(crate) fn trusting(mut self, roots: &[String]) -> Result<Self, crate::error::SandboxError> {
        if roots.is_empty() {
            return Ok(self);
        }
        let signing_name = self.signing_name;
        let not_started =
            || crate::error::map::aws::from_aws(no_response(signing_name, NoResponse::Other));
        let mut store = rustls::RootCertStore::empty();
        // The system's roots, as many as load (an image without any still
        // reaches an endpoint signed by the given roots).
        let native = rustls_native_certs::load_native_certs();
        let _ = store.add_parsable_certificates(native.certs);
        for pem in roots {
            let mut added = 0;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
                store
                    .add(cert.map_err(|_| not_started())?)
                    .map_err(|_| not_started())?;
                added += 1;
            }
            if added == 0 {
                return Err(not_started());
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|_| not_started())?
            .with_root_certificates(store)
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        self.http = HttpClient::builder(TokioExecutor::new()).build(https);
        Ok(self)
    }

    /// Runs `attempt` up to three times while `retryable` says its failure
    /// is worth another (0.5 s, then 1 s apart).
    ///
    /// # Errors
    /// The last attempt's failure.
    pub(crate) async fn with_retries<T, F, Fut>(
        attempt: F,
        retryable: impl Fn(&AwsFailure) -> bool,
    ) -> Result<T, AwsFailure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, AwsFailure>>,
    {
        let mut delay = Duration::from_millis(500);
        let mut tries = 1;
        loop {
            match attempt().await {
                Err(failure) if tries < ATTEMPTS && retryable(&failure) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// One POST of `body` with `headers` (the content type among them) for
    /// `operation`; the answer whatever its status.
    ///
    /// # Errors
    /// No answer arrived (the facts), or the request could not be signed.
    pub(crate) async fn post(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, AwsFailure> {
        let request = self.signed(operation, headers, body).await?;
        let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let response = self.http.request(request).await.map_err(|e| {
                if e.is_connect() {
                    NoResponse::Connect
                } else {
                    NoResponse::Other
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
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|_| NoResponse::Other)?
                .to_bytes();
            Ok::<_, NoResponse>(Answer {
                status,
                request_id,
                error_type,
                body,
            })
        })
        .quiet()
        .await;
        match sent {
            Err(_) => Err(no_response(operation, NoResponse::Timeout)),
            Ok(Err(kind)) => Err(no_response(operation, kind)),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// The POST of `body`, signed for this service in its region.
    async fn signed(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<http::Request<Full<Bytes>>, AwsFailure> {
        let unloaded = || {
            let mut failure = no_response(operation, NoResponse::Other);
            failure.code = Some("CredentialsNotLoaded".to_owned());
            failure
        };
        let provider = self.credentials.as_ref().ok_or_else(unloaded)?;
        let credentials = provider
            .provide_credentials()
            .quiet()
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
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.signing_name)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| no_response(operation, NoResponse::Other))?
            .into();
        let uri = self.endpoint.to_string();
        let signable = SignableRequest::new(
            "POST",
            &uri,
            signed_headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|_| no_response(operation, NoResponse::Other))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| no_response(operation, NoResponse::Other))?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(self.endpoint.clone());
        for (name, value) in &signed_headers {
            request = request.header(*name, *value);
        }
        let mut request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|_| no_response(operation, NoResponse::Other))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

/// A failure of `operation` that got no answer.
pub(crate) fn no_response(operation: &'static str, kind: NoResponse) -> AwsFailure {
    let mut failure = AwsFailure::new(operation);
    failure.no_response = Some(kind);
    failure
}

/// No answer in time or no connection (not a request that could not be
/// built), or a 5xx: worth another attempt, whatever the protocol.
pub(crate) fn transient(failure: &AwsFailure) -> bool {
    failure.no_response.is_some_and(|n| n != NoResponse::Other)
        || failure.http_status.is_some_and(|s| s >= 500)
}

/// `k=v&k=v`, each part percent-encoded as the Query protocols (EC2's,
/// IAM's) want (RFC 3986 unreserved characters kept).
#[cfg(any(feature = "efs", feature = "permissions"))]
pub(crate) fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    fn encode(text: &str, out: &mut String) {
        for byte in text.bytes() {
            if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
                out.push(byte as char);
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

#[cfg(all(test, any(feature = "efs", feature = "permissions")))]
mod tests {
    use super::form_urlencoded;

    #[test]
    fn the_form_encodes_reserved_characters() {
        assert_eq!(
            form_urlencoded(&[("Filter.1.Name", "vpc-id"), ("X", "a b/c")]),
            "Filter.1.Name=vpc-id&X=a%20b%2Fc"
        );
    }
}
