//! One EC2 Query call: a form-encoded POST signed with SigV4 by
//! `aws-sigv4`, sent over hyper-util's client (rustls, the system's roots),
//! its XML answer parsed, an error answer turned into [`AwsFailure`] facts
//! (its code only: EC2's text is never kept).

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::sdk_config::SharedCredentialsProvider;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::xml::{Element, parse};
use crate::error::map::aws::{AwsFailure, NoResponse};
use crate::quiet::Quiet as _;

/// The EC2 API version every call names (the Query protocol's `Version`).
const API_VERSION: &str = "2016-11-15";
/// The deadline of one attempt (connect, send, read the answer).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts of one call: a throttled or failed-in-transit call is tried
/// again after 0.5 s, then 1 s (the read-only calls are idempotent).
const ATTEMPTS: u32 = 3;
/// The largest answer read (a page of route tables is a few kilobytes).
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// Codes worth another attempt: EC2's throttling and its transient faults.
const RETRYABLE_CODES: [&str; 4] = [
    "RequestLimitExceeded",
    "Throttling",
    "InternalError",
    "ServiceUnavailable",
];

/// The HTTPS client, the endpoint and the signer's inputs of one region.
#[derive(Clone)]
pub(crate) struct QueryClient {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: http::Uri,
    region: String,
    credentials: Option<SharedCredentialsProvider>,
}

impl std::fmt::Debug for QueryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryClient")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl QueryClient {
    /// The client of `region` at `endpoint` (EC2's own when `None`).
    ///
    /// # Errors
    /// The system's root certificates could not be read, or the endpoint is
    /// not a URI (mapped as a call that never started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        region: &str,
        endpoint: Option<&str>,
    ) -> Result<Self, crate::error::SandboxError> {
        let endpoint = match endpoint {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://ec2.{region}.amazonaws.com/"),
        };
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
            credentials: config.credentials_provider(),
        })
    }

    /// DescribeVpcs (`ec2:DescribeVpcs`).
    pub(crate) fn describe_vpcs(&self) -> Request<'_> {
        self.request("DescribeVpcs")
    }

    /// DescribeVpcAttribute (`ec2:DescribeVpcAttribute`).
    pub(crate) fn describe_vpc_attribute(&self) -> Request<'_> {
        self.request("DescribeVpcAttribute")
    }

    /// DescribeSubnets (`ec2:DescribeSubnets`).
    pub(crate) fn describe_subnets(&self) -> Request<'_> {
        self.request("DescribeSubnets")
    }

    /// DescribeRouteTables (`ec2:DescribeRouteTables`).
    pub(crate) fn describe_route_tables(&self) -> Request<'_> {
        self.request("DescribeRouteTables")
    }

    fn request(&self, action: &'static str) -> Request<'_> {
        Request {
            client: self,
            action,
            params: Vec::new(),
        }
    }

    /// Calls `action` with `params` (besides `Action` and `Version`); the
    /// answer's root element.
    ///
    /// # Errors
    /// EC2 answered an error (its code) or no answer arrived (the facts).
    async fn call(
        &self,
        action: &'static str,
        params: &[(String, String)],
    ) -> Result<Element, AwsFailure> {
        let mut form = form_urlencoded(&[("Action", action), ("Version", API_VERSION)]);
        for (key, value) in params {
            form.push('&');
            form.push_str(&form_urlencoded(&[(key, value)]));
        }
        let mut delay = Duration::from_millis(500);
        let mut attempt = 1;
        loop {
            match self.attempt(action, &form).await {
                Err(failure) if attempt < ATTEMPTS && retryable(&failure) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, action: &'static str, form: &str) -> Result<Element, AwsFailure> {
        let request = self.signed(action, form).await?;
        let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let response = self.http.request(request).await?;
            let status = response.status().as_u16();
            let request_id = response
                .headers()
                .get("x-amzn-requestid")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|_| Transit::Body)?
                .to_bytes();
            Ok::<_, Transit>((status, request_id, body))
        })
        .quiet()
        .await;
        let (status, request_id, body) = match sent {
            Err(_) => return Err(no_response(action, NoResponse::Timeout)),
            Ok(Err(Transit::Connect(e))) => {
                let kind = if e.is_connect() {
                    NoResponse::Connect
                } else {
                    NoResponse::Other
                };
                return Err(no_response(action, kind));
            }
            Ok(Err(Transit::Body)) => return Err(no_response(action, NoResponse::Other)),
            Ok(Ok(answer)) => answer,
        };
        let document = std::str::from_utf8(&body).ok().and_then(parse);
        if (200..300).contains(&status)
            && let Some(document) = document
        {
            return Ok(document);
        }
        let mut failure = AwsFailure::new(action);
        failure.http_status = Some(status);
        failure.request_id = request_id;
        failure.code = document
            .as_ref()
            .and_then(|d| d.find("Error"))
            .and_then(|e| e.text_of("Code"))
            .map(|c| crate::error::map::aws::sanitize_aws_code(c).to_owned());
        Err(failure)
    }

    /// The POST of `form`, signed for `ec2` in this client's region.
    async fn signed(
        &self,
        action: &'static str,
        form: &str,
    ) -> Result<http::Request<Full<Bytes>>, AwsFailure> {
        use aws_sdk_efs::config::ProvideCredentials as _;
        let provider = self.credentials.as_ref().ok_or_else(|| {
            let mut failure = no_response(action, NoResponse::Other);
            failure.code = Some("CredentialsNotLoaded".to_owned());
            failure
        })?;
        let credentials = provider.provide_credentials().quiet().await.map_err(|_| {
            let mut failure = no_response(action, NoResponse::Other);
            failure.code = Some("CredentialsNotLoaded".to_owned());
            failure
        })?;
        let identity = Identity::from(credentials);
        let host = self
            .endpoint
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let uri = self.endpoint.to_string();
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let headers = [("content-type", content_type), ("host", host.as_str())];
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| no_response(action, NoResponse::Other))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            &uri,
            headers.iter().copied(),
            SignableBody::Bytes(form.as_bytes()),
        )
        .map_err(|_| no_response(action, NoResponse::Other))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| no_response(action, NoResponse::Other))?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(self.endpoint.clone())
            .header("content-type", content_type)
            .header("host", host)
            .body(Full::new(Bytes::from(form.to_owned())))
            .map_err(|_| no_response(action, NoResponse::Other))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

/// One call being built: its action and parameters (the shape of the AWS
/// SDK's fluent builders, so that `crate::aws::iam`'s scan finds each
/// operation by name).
pub(crate) struct Request<'a> {
    client: &'a QueryClient,
    action: &'static str,
    params: Vec<(String, String)>,
}

impl Request<'_> {
    /// Adds the parameter `key=value`.
    pub(crate) fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((key.into(), value.into()));
        self
    }

    /// Sends the call; the answer's root element.
    ///
    /// # Errors
    /// EC2 answered an error (its code) or no answer arrived (the facts).
    pub(crate) async fn send(self) -> Result<Element, AwsFailure> {
        self.client.call(self.action, &self.params).await
    }
}

/// Why an attempt got no answer.
enum Transit {
    Connect(hyper_util::client::legacy::Error),
    Body,
}

impl From<hyper_util::client::legacy::Error> for Transit {
    fn from(e: hyper_util::client::legacy::Error) -> Self {
        Self::Connect(e)
    }
}

fn retryable(failure: &AwsFailure) -> bool {
    failure.no_response.is_some_and(|n| n != NoResponse::Other)
        || failure
            .code
            .as_deref()
            .is_some_and(|c| RETRYABLE_CODES.contains(&c))
        || failure.http_status.is_some_and(|s| s >= 500)
}

fn no_response(action: &'static str, kind: NoResponse) -> AwsFailure {
    let mut failure = AwsFailure::new(action);
    failure.no_response = Some(kind);
    failure
}

fn not_started() -> crate::error::SandboxError {
    crate::error::map::aws::from_aws(no_response("EC2", NoResponse::Other))
}

/// `k=v&k=v`, each part percent-encoded as the Query protocol wants
/// (RFC 3986 unreserved characters kept).
fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
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

#[cfg(test)]
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
