//! AWS control-plane failures (docs/errors.md,
//! "AWS control plane, by error code, never by HTTP status"): by error
//! code, never by HTTP status (ServiceQuotaExceededException arrives as HTTP 402,
//! InsufficientCapacityException as 500). The HTTP status only decides for
//! an unknown code: any 5xx is a service error.

use std::fmt;
use std::time::Duration;

use crate::error::codes::SandboxCode;
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::meta::RedactedCause;
use crate::error::{ErrorMeta, SandboxError, TimeoutScope};

use super::redact::sanitize_remote_text;

/// What the control-plane adapter saw when an AWS call failed, as plain data.
#[non_exhaustive]
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AwsFailure {
    /// The operation, e.g. `RunMicrovm`.
    pub operation: &'static str,
    /// The AWS error code (`x-amzn-errortype`, `__type` or `code`).
    pub code: Option<String>,
    /// The AWS error message (redacted before it is kept).
    pub message: Option<String>,
    /// The HTTP status, when a response arrived.
    pub http_status: Option<u16>,
    /// `Retry-After` / `retryAfterSeconds`, when given.
    pub retry_after: Option<Duration>,
    /// The `quotaCode` member, when given.
    pub quota_code: Option<String>,
    /// `x-amzn-requestid`, when given.
    pub request_id: Option<String>,
    /// Set when no HTTP response arrived at all.
    pub no_response: Option<NoResponse>,
    /// The text of the error behind the failure (e.g. the dispatch
    /// failure), redacted before it is kept as the error's cause.
    pub cause: Option<String>,
}

impl AwsFailure {
    /// A failure of `operation` with nothing else known yet.
    pub fn new(operation: &'static str) -> Self {
        Self {
            operation,
            ..Self::default()
        }
    }
}

// Nothing here is redacted yet: the message prints as its length only, the
// short fields redacted.
impl fmt::Debug for AwsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = |v: &Option<String>| v.as_deref().map(|t| sanitize_remote_text(t, 256));
        f.debug_struct("AwsFailure")
            .field("operation", &self.operation)
            .field("code", &clean(&self.code))
            .field("message_len", &self.message.as_ref().map(String::len))
            .field("http_status", &self.http_status)
            .field("retry_after", &self.retry_after)
            .field("quota_code", &clean(&self.quota_code))
            .field("request_id", &clean(&self.request_id))
            .field("no_response", &self.no_response)
            .field("cause_len", &self.cause.as_ref().map(String::len))
            .finish()
    }
}

/// Why no HTTP response arrived.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoResponse {
    /// The call's deadline passed.
    Timeout,
    /// The connection could not be made (DNS, TCP, TLS).
    Connect,
    /// Any other dispatch failure.
    Other,
}

/// Codes that mean the credentials or the signature were refused, without
/// their `Exception` suffix (AWS spells most both ways): every credential
/// and signature code of the AWS common errors, STS and the SDK's
/// credential providers.
pub(crate) const AUTH_CODES: &[&str] = &[
    "AccessDenied",
    "AuthFailure",
    "ExpiredToken",
    "IDPRejectedClaim",
    "IncompleteSignature",
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "InvalidIdentityToken",
    "InvalidSignature",
    "InvalidToken",
    "MissingAuthenticationToken",
    "NotAuthorized",
    "OptInRequired",
    "RequestExpired",
    "SignatureDoesNotMatch",
    "TokenRefreshRequired",
    "UnauthorizedOperation",
    "Unauthorized",
    "UnrecognizedClient",
];

/// Codes of an AWS fault on the service side, without their `Exception`
/// suffix; any other code with a 5xx status is one too.
pub(crate) const SERVICE_FAULT_CODES: &[&str] = &[
    "InternalServer",
    "Service",
    "InternalFailure",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
];

/// `code` without an `Exception` suffix.
fn base_code(code: &str) -> &str {
    code.strip_suffix("Exception").unwrap_or(code)
}

fn is_auth_code(code: &str) -> bool {
    AUTH_CODES.contains(&base_code(code))
}

/// The AWS SDK's own throttling codes (the retry classifier of
/// `aws-runtime`), as data here so that the error module needs no AWS
/// crate; a test of the control-plane adapter pins them to the AWS SDK's
/// list, so an upgrade that changes it fails there.
pub(crate) const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// The AWS SDK's own transient codes (pinned like [`THROTTLING_CODES`]).
pub(crate) const TRANSIENT_CODES: &[&str] = &["RequestTimeout", "RequestTimeoutException"];

fn is_throttling_code(code: &str) -> bool {
    THROTTLING_CODES.contains(&code)
}

fn is_service_fault_code(code: &str) -> bool {
    SERVICE_FAULT_CODES.contains(&base_code(code)) || TRANSIENT_CODES.contains(&code)
}

/// Strips what the AWS JSON protocol allows around a code: a namespace up to
/// `#` and anything from the first `:` (`aws.foo#ConflictException:http://..`
/// is `ConflictException`).
pub fn sanitize_aws_code(raw: &str) -> &str {
    let code = raw.split(':').next().unwrap_or(raw);
    let code = code.rsplit('#').next().unwrap_or(code);
    code.trim()
}

/// Maps an AWS failure to its variant (docs/errors.md, "AWS control plane,
/// by error code, never by HTTP status").
pub fn from_aws(f: AwsFailure) -> SandboxError {
    let operation = f.operation;
    let code = f
        .code
        .as_deref()
        .map(sanitize_aws_code)
        .filter(|c| !c.is_empty());
    let server = f
        .message
        .as_deref()
        .map(|t| sanitize_remote_text(t, 512))
        .filter(|t| !t.is_empty());
    let detail = m::detail(server.as_deref());
    let op: &[(&str, &str)] = &[("operation", operation), ("detail", &detail)];

    let build = |t: Template, extra: &[(&str, &str)]| -> Box<ErrorMeta> {
        let mut args = op.to_vec();
        args.extend_from_slice(extra);
        meta(t, &args)
    };

    let mut err = if let Some(kind) = f.no_response {
        match kind {
            NoResponse::Timeout => SandboxError::Timeout {
                scope: TimeoutScope::Request,
                meta: build(m::AWS_TIMEOUT, &[]),
            },
            NoResponse::Connect => {
                SandboxError::sandbox_with(SandboxCode::ConnectionLost, build(m::AWS_CONNECT, &[]))
            }
            NoResponse::Other => SandboxError::sandbox_with(
                SandboxCode::ConnectionLost,
                build(m::AWS_NO_RESPONSE, &[]),
            ),
        }
    } else {
        match code {
            // What RunMicrovm and every image operation miss is an image
            // (or one of its versions), never a sandbox.
            Some("ResourceNotFoundException")
                if operation == "RunMicrovm" || operation.contains("MicrovmImage") =>
            {
                SandboxError::SandboxNotFound {
                    meta: build(m::AWS_IMAGE_NOT_FOUND, &[]),
                }
            }
            Some("ResourceNotFoundException") => SandboxError::SandboxNotFound {
                meta: build(m::AWS_SANDBOX_NOT_FOUND, &[]),
            },
            Some("ValidationException" | "InvalidParameterValueException") => {
                SandboxError::InvalidArgument {
                    argument: None,
                    meta: build(m::AWS_INVALID_ARGUMENT, &[]),
                }
            }
            Some(c) if is_auth_code(c) => SandboxError::Authentication {
                proxy_rejected: false,
                meta: build(m::AWS_AUTHENTICATION, &[("aws_code", c)]),
            },
            Some(c) if is_throttling_code(c) => {
                let meta = match f.retry_after {
                    Some(d) => build(m::AWS_RATE_LIMIT_AFTER, &[("retry_after", &m::duration(d))]),
                    None => build(m::AWS_RATE_LIMIT, &[]),
                };
                SandboxError::RateLimit {
                    retry_after: f.retry_after,
                    meta,
                }
            }
            Some("ConflictException" | "ResourceConflictException") => SandboxError::SandboxState {
                meta: build(m::AWS_SANDBOX_STATE, &[]),
            },
            Some("ServiceQuotaExceededException") => SandboxError::QuotaExceeded {
                quota_code: f
                    .quota_code
                    .as_deref()
                    .map(|q| sanitize_remote_text(q, 128))
                    .filter(|q| !q.is_empty()),
                meta: build(m::AWS_QUOTA_EXCEEDED, &[]),
            },
            Some("InsufficientCapacityException") => SandboxError::Capacity {
                code: None,
                meta: build(m::AWS_CAPACITY, &[]),
            },
            _ => {
                let cause = match (code, f.http_status) {
                    (Some(c), _) => sanitize_remote_text(c, 128),
                    (None, Some(status)) => format!("http {status}"),
                    (None, None) => "no error code".to_owned(),
                };
                let service_fault = code.is_some_and(is_service_fault_code)
                    || f.http_status.is_some_and(|s| (500..600).contains(&s));
                if service_fault {
                    SandboxError::sandbox_with(
                        SandboxCode::ServiceError,
                        build(m::AWS_SERVICE_ERROR, &[("cause", &cause)]),
                    )
                } else {
                    SandboxError::Sandbox {
                        code: None,
                        meta: build(m::AWS_OTHER, &[("cause", &cause)]),
                    }
                }
            }
        }
    };

    let kept = err.meta_mut();
    kept.attempts = 1;
    if let Some(text) = &f.message {
        *kept = std::mem::take(kept).with_server_message(text);
    }
    if let Some(c) = code {
        *kept = std::mem::take(kept).with_aws_code(c);
    }
    kept.http_status = f.http_status;
    kept.cause = f.cause.as_deref().and_then(RedactedCause::new);
    if let Some(id) = &f.request_id {
        *kept = std::mem::take(kept).with_request_id(id);
    }
    err
}

/// `Authentication`: no AWS credentials or region were found. The message
/// says how to configure AWS or choose the local backend. `detail` is our
/// own or the credential chain's text (redacted before use).
pub fn no_credentials(detail: &str) -> SandboxError {
    let detail = sanitize_remote_text(detail, 512);
    SandboxError::Authentication {
        proxy_rejected: false,
        meta: meta(
            m::AWS_NO_CREDENTIALS,
            &[("detail", &m::detail(Some(&detail)))],
        ),
    }
}

/// `Authentication`: the AWS profile the caller named (`AwsOptions::profile`
/// or `AWS_PROFILE`) is in neither AWS file, so nothing it would configure
/// (region, credentials) exists.
pub fn profile_not_found(profile: &str) -> SandboxError {
    let profile = sanitize_remote_text(profile, 128);
    SandboxError::Authentication {
        proxy_rejected: false,
        meta: meta(m::AWS_PROFILE_NOT_FOUND, &[("profile", &profile)]),
    }
}
