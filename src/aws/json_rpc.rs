//! One awsJson1.1 call (Service Quotas, Cost Explorer): `POST /` with
//! `X-Amz-Target: <prefix>.<Operation>` and a JSON body, signed and sent by
//! [`super::signed_post`]. The answer's JSON is returned; an error answer
//! becomes [`AwsFailure`] facts (its code, the request id, and the
//! service's message, which `from_aws` redacts before keeping).
//!
//! Our own small caller rather than `aws-sdk-servicequotas` and
//! `aws-sdk-costexplorer`: two read calls do not pay for two generated
//! clients (minutes of a clean build each), and every crate used here is
//! already in the tree (the AWS SDK's own HTTPS client and signer).

use serde_json::Value;

use super::signed_post::{SignedPost, transient};
use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;

/// awsJson1.1's content type.
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
/// Codes worth another attempt: the services' throttling and faults.
const RETRYABLE_CODES: [&str; 4] = [
    "ThrottlingException",
    "TooManyRequestsException",
    "LimitExceededException",
    "ServiceException",
];

/// What a service client is built from.
pub(crate) struct Service {
    /// SigV4's service name.
    pub signing_name: &'static str,
    /// `X-Amz-Target`'s prefix.
    pub target_prefix: &'static str,
    /// The public endpoint's host prefix: `https://<host>.<region>.amazonaws.com/`.
    pub host: &'static str,
}

/// One service's client.
#[derive(Clone, Debug)]
pub(crate) struct JsonClient {
    post: SignedPost,
    /// `X-Amz-Target`'s prefix (`ServiceQuotasV20190624`).
    target_prefix: &'static str,
}

impl JsonClient {
    /// The client of `service` in `region`, at the configuration's
    /// endpoint override (the local emulator, a test's server) or else
    /// AWS's own.
    ///
    /// # Errors
    /// The HTTPS client could not be built (mapped as a call that never
    /// started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        service: &Service,
        region: &str,
    ) -> Result<Self, SandboxError> {
        let endpoint = match config.endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://{}.{region}.amazonaws.com/", service.host),
        };
        Ok(Self {
            post: SignedPost::new(config, &endpoint, region, service.signing_name)?,
            target_prefix: service.target_prefix,
        })
    }

    /// The same client trusting `roots` (PEM) beside the system's roots:
    /// the backend's own trust (see [`SignedPost::trusting`]).
    ///
    /// # Errors
    /// A PEM holds no certificate (mapped as a call that never started).
    #[cfg_attr(not(feature = "quotas"), allow(dead_code))]
    pub(crate) fn trusting(mut self, roots: &[String]) -> Result<Self, SandboxError> {
        self.post = self.post.trusting(roots)?;
        Ok(self)
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

    async fn attempt(&self, operation: &'static str, body: &str) -> Result<Value, AwsFailure> {
        let target = format!("{}.{operation}", self.target_prefix);
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("x-amz-target", target.as_str()),
        ];
        let answer = self.post.post(operation, &headers, body).await?;
        let document: Option<Value> = serde_json::from_slice(&answer.body).ok();
        if (200..300).contains(&answer.status)
            && let Some(document) = document
        {
            return Ok(document);
        }
        let field = |name: &str| {
            document
                .as_ref()
                .and_then(|d| d.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let mut failure = AwsFailure::new(operation);
        failure.http_status = Some(answer.status);
        failure.request_id = answer.request_id;
        failure.code = answer
            .error_type
            .or_else(|| field("__type"))
            .or_else(|| field("code"))
            .map(|c| crate::error::map::aws::sanitize_aws_code(&c).to_owned());
        failure.message = field("message").or_else(|| field("Message"));
        Err(failure)
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

    /// Sends the call (retried when throttled or not answered); the
    /// answer's JSON.
    ///
    /// # Errors
    /// The service answered an error (its code) or no answer arrived.
    pub(crate) async fn send(self) -> Result<Value, AwsFailure> {
        let body = self.input.to_string();
        SignedPost::with_retries(
            || self.client.attempt(self.operation, &body),
            |failure| {
                transient(failure)
                    || failure
                        .code
                        .as_deref()
                        .is_some_and(|c| RETRYABLE_CODES.contains(&c))
            },
        )
        .await
    }
}
