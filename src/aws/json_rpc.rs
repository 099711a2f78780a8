//! One awsJson1.1 call (Service Quotas, Cost Explorer): `POST /` with
//! `X-Amz-Target: <prefix>.<Operation>`, a JSON body, signed with SigV4 by
//! `aws-sigv4`, sent over hyper-util's client (rustls with the system's
//! roots, or plain http for the local emulator). The answer's JSON is
//! returned; an error answer becomes [`AwsFailure`] facts (its code and
//! the `x-amzn-requestid`; the service's text is kept only as the
//! redacted message `from_aws` already handles).
//!
//! Our own small caller rather than `aws-sdk-servicequotas` and
//! `aws-sdk-costexplorer`: two read calls do not pay for two generated
//! clients (minutes of a clean build each), and every crate used here is
//! already in the tree (the AWS SDK's own HTTPS client and signer).

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
use serde_json::Value;

use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, NoResponse};
use crate::quiet::Quiet as _;

/// The deadline of one attempt (connect, send, read the answer).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts of one call: a throttled or failed-in-transit call is tried
/// again after 0.5 s, then 1 s (every call made here only reads).
const ATTEMPTS: u32 = 3;
/// The largest answer read (a page of quotas or of cost groups is a few
/// kilobytes).
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// awsJson1.1's content type.
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// One service's client: endpoint, signing name and region, credentials.
#[derive(Clone)]
pub(crate) struct JsonClient {
    http: HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: http::Uri,
    /// SigV4's service name (`servicequotas`, `ce`).
    signing_name: &'static str,
    /// `X-Amz-Target`'s prefix (`ServiceQuotasV20190624`).
    target_prefix: &'static str,
    region: String,
    credentials: Option<SharedCredentialsProvider>,
}

impl std::fmt::Debug for JsonClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonClient")
            .field("service", &self.signing_name)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// What a service client is built from.
pub(crate) struct Service {
    /// SigV4's service name.
    pub signing_name: &'static str,
    /// `X-Amz-Target`'s prefix.
    pub target_prefix: &'static str,
    /// The public endpoint's host prefix: `https://<host>.<region>.amazonaws.com/`.
    pub host: &'static str,
}

impl JsonClient {
    /// The client of `service` in `region`, at the configuration's
    /// endpoint override (the local emulator, a test's server) or else
    /// AWS's own.
    ///
    /// # Errors
    /// The system's root certificates could not be read, or the endpoint is
    /// not a URI (mapped as a call that never started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        service: &Service,
        region: &str,
    ) -> Result<Self, SandboxError> {
        let endpoint = match config.endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://{}.{region}.amazonaws.com/", service.host),
        };
        let not_started = || {
            crate::error::map::aws::from_aws(no_response(service.signing_name, NoResponse::Other))
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
            signing_name: service.signing_name,
            target_prefix: service.target_prefix,
            region: region.to_owned(),
            credentials: config.credentials_provider(),
        })
    }

    /// A call of `operation` being built (the shape of the AWS SDK's
    /// fluent builders, so that `crate::aws::iam`'s scan finds each
    /// operation by name in the files that call it).
    pub(crate) fn request(&self, operation: &'static str) -> JsonRequest<'_> {
        JsonRequest {
            client: self,
            operation,
            input: Value::Object(serde_json::Map::new()),
        }
    }

    /// Calls `operation` with `input`; the answer's JSON.
    ///
    /// # Errors
    /// The service answered an error (its code) or no answer arrived.
    async fn call(&self, operation: &'static str, input: &Value) -> Result<Value, AwsFailure> {
        let body = input.to_string();
        let mut delay = Duration::from_millis(500);
        let mut attempt = 1;
        loop {
            match self.attempt(operation, &body).await {
                Err(failure) if attempt < ATTEMPTS && retryable(&failure) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, operation: &'static str, body: &str) -> Result<Value, AwsFailure> {
        let request = self.signed(operation, body).await?;
        let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| e.is_connect())?;
            let status = response.status().as_u16();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let request_id = header("x-amzn-requestid");
            let error_type = header("x-amzn-errortype");
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|_| false)?
                .to_bytes();
            Ok::<_, bool>((status, request_id, error_type, bytes))
        })
        .quiet()
        .await;
        let (status, request_id, error_type, bytes) = match sent {
            Err(_) => return Err(no_response(operation, NoResponse::Timeout)),
            Ok(Err(true)) => return Err(no_response(operation, NoResponse::Connect)),
            Ok(Err(false)) => return Err(no_response(operation, NoResponse::Other)),
            Ok(Ok(answer)) => answer,
        };
        let document: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&status)
            && let Some(document) = document
        {
            return Ok(document);
        }
        let mut failure = AwsFailure::new(operation);
        failure.http_status = Some(status);
        failure.request_id = request_id;
        let field = |name: &str| {
            document
                .as_ref()
                .and_then(|d| d.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        failure.code = error_type
            .or_else(|| field("__type"))
            .or_else(|| field("code"))
            .map(|c| crate::error::map::aws::sanitize_aws_code(&c).to_owned());
        failure.message = field("message").or_else(|| field("Message"));
        Err(failure)
    }

    /// The POST of `body`, signed for this service in its region.
    async fn signed(
        &self,
        operation: &'static str,
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
        let target = format!("{}.{operation}", self.target_prefix);
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("host", host.as_str()),
            ("x-amz-target", target.as_str()),
        ];
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
            headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|_| no_response(operation, NoResponse::Other))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| no_response(operation, NoResponse::Other))?
            .into_parts();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(self.endpoint.clone())
            .header("content-type", CONTENT_TYPE)
            .header("host", host)
            .header("x-amz-target", target)
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|_| no_response(operation, NoResponse::Other))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}

/// One call being built: its operation and its JSON input.
pub(crate) struct JsonRequest<'a> {
    client: &'a JsonClient,
    operation: &'static str,
    input: Value,
}

impl JsonRequest<'_> {
    /// The call's input (a JSON object of the operation's members).
    pub(crate) fn input(mut self, input: Value) -> Self {
        self.input = input;
        self
    }

    /// Sends the call; the answer's JSON.
    ///
    /// # Errors
    /// The service answered an error (its code) or no answer arrived.
    pub(crate) async fn send(self) -> Result<Value, AwsFailure> {
        self.client.call(self.operation, &self.input).await
    }
}

/// Throttling, a transient fault, or no answer: worth another attempt.
fn retryable(failure: &AwsFailure) -> bool {
    const RETRYABLE_CODES: [&str; 4] = [
        "ThrottlingException",
        "TooManyRequestsException",
        "LimitExceededException",
        "ServiceException",
    ];
    failure.no_response.is_some_and(|n| n != NoResponse::Other)
        || failure
            .code
            .as_deref()
            .is_some_and(|c| RETRYABLE_CODES.contains(&c))
        || failure.http_status.is_some_and(|s| s >= 500)
}

fn no_response(operation: &'static str, kind: NoResponse) -> AwsFailure {
    let mut failure = AwsFailure::new(operation);
    failure.no_response = Some(kind);
    failure
}
