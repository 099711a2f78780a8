//! Turns an AWS SDK error into the plain-data `AwsFailure` the error module maps.
//!
//! Only facts are extracted (code, message, HTTP status, Retry-After, quota
//! code, request id); the raw response is dropped here, so no signature or
//! credential can travel further. The message is redacted by the mapper.

use std::time::Duration;

use aws_sdk_lambdamicrovms::config::http::HttpResponse;
use aws_sdk_lambdamicrovms::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, NoResponse, from_aws, sanitize_aws_code};

/// The error of an operation of any AWS SDK client: its code and message
/// (the bound of every mapper of the edge).
pub(in crate::aws) trait OperationError:
    ProvideErrorMetadata + std::error::Error + 'static
{
}

impl<E: ProvideErrorMetadata + std::error::Error + 'static> OperationError for E {}

/// The failure of a call of any AWS SDK client whose operation error is `E`.
pub(in crate::aws) type SdkFailure<E> = SdkError<E, HttpResponse>;

/// Maps any operation's `SdkError` to a `SandboxError` (docs/errors.md,
/// "AWS control plane, by error code, never by HTTP status").
pub(in crate::aws) fn map_sdk_error<E: OperationError>(
    operation: &'static str,
    err: &SdkFailure<E>,
) -> SandboxError {
    from_aws(extract(operation, err))
}

/// The facts of an `SdkError`, without the raw response.
pub(in crate::aws) fn extract<E: OperationError>(
    operation: &'static str,
    err: &SdkFailure<E>,
) -> AwsFailure {
    let mut failure = AwsFailure::new(operation);
    match err {
        SdkError::ServiceError(service) => {
            failure.code = service.err().code().map(str::to_owned);
            failure.message = service.err().message().map(str::to_owned);
            fill_from_response(&mut failure, service.raw());
        }
        SdkError::ResponseError(response) => {
            // A response the client could not parse (no error code, bad JSON).
            fill_from_response(&mut failure, response.raw());
        }
        SdkError::TimeoutError(_) => failure.no_response = Some(NoResponse::Timeout),
        SdkError::DispatchFailure(dispatch) => {
            failure.no_response = Some(if dispatch.is_timeout() {
                NoResponse::Timeout
            } else if dispatch.is_io() {
                NoResponse::Connect
            } else {
                NoResponse::Other
            });
        }
        // Building the request failed before anything was sent (e.g. a missing
        // region or credentials): no response either.
        _ => failure.no_response = Some(NoResponse::Other),
    }
    if failure.no_response.is_some() {
        // The chain of a failure without a response (DNS, TLS, timeouts)
        // becomes the error's cause, redacted by the mapper.
        failure.cause = Some(DisplayErrorContext(err).to_string());
    }
    failure
}

fn fill_from_response(failure: &mut AwsFailure, raw: &HttpResponse) {
    failure.http_status = Some(raw.status().as_u16());
    let headers = raw.headers();
    failure.request_id = headers
        .get("x-amzn-requestid")
        .or_else(|| headers.get("x-amz-request-id"))
        .map(str::to_owned);
    failure.retry_after = headers
        .get("retry-after")
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    // Members the generic metadata does not carry: quotaCode and
    // retryAfterSeconds live in the JSON body of the error.
    if let Some(body) = raw.body().bytes()
        && let Ok(serde_json::Value::Object(members)) = serde_json::from_slice(body)
    {
        if failure.quota_code.is_none() {
            failure.quota_code = members
                .get("quotaCode")
                .and_then(|v| v.as_str())
                .map(str::to_owned);
        }
        if failure.retry_after.is_none() {
            failure.retry_after = members
                .get("retryAfterSeconds")
                .and_then(serde_json::Value::as_u64)
                .map(Duration::from_secs);
        }
        if failure.code.is_none() {
            // A body the client could not turn into a typed error still names it.
            failure.code = members
                .get("__type")
                .or_else(|| members.get("code"))
                .and_then(|v| v.as_str())
                .map(|code| sanitize_aws_code(code).to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::error::map::aws::{THROTTLING_CODES, TRANSIENT_CODES};

    /// The error mapping keeps its own copy of the AWS SDK's code lists
    /// (it knows no AWS crate); an AWS SDK that changes them fails here.
    #[test]
    fn the_error_mapping_uses_the_aws_sdks_own_code_lists() {
        assert_eq!(
            THROTTLING_CODES,
            aws_runtime::retries::classifiers::THROTTLING_ERRORS
        );
        assert_eq!(
            TRANSIENT_CODES,
            aws_runtime::retries::classifiers::TRANSIENT_ERRORS
        );
    }
}
