//! Control-plane errors in the restJson1 wire format the AWS SDKs parse:
//! the model's HTTP status, `content-type: application/json`,
//! `x-amzn-errortype: <Name>` and a body `{"__type": "<Name>", "message": ..,
//! ..members}` (docs/local.md, "Errors"). `x-amzn-requestid` is added to
//! every response by the router.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};

/// One modelled error, ready to be sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    /// The error shape's name, e.g. `ValidationException`.
    pub(crate) name: &'static str,
    /// The HTTP status the model gives that shape.
    pub(crate) status: StatusCode,
    /// Human text; never carries a token, a payload or any other secret.
    pub(crate) message: String,
    /// Extra members of the shape (`resourceId`, `retryAfterSeconds`, ...).
    /// Boxed: the error stays small (clippy's `result_large_err`) whatever
    /// features a build unifies into serde_json's map.
    pub(crate) members: Box<Map<String, Value>>,
    /// Sent as the `Retry-After` header (integer seconds) when set.
    pub(crate) retry_after: Option<u32>,
}

impl ApiError {
    fn new(name: &'static str, status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            name,
            status,
            message: message.into(),
            members: Box::default(),
            retry_after: None,
        }
    }

    fn member(mut self, key: &str, value: Value) -> Self {
        self.members.insert(key.to_string(), value);
        self
    }

    /// 400 ValidationException.
    pub(crate) fn validation(message: impl Into<String>) -> Self {
        Self::new("ValidationException", StatusCode::BAD_REQUEST, message)
    }

    /// 404 ResourceNotFoundException for a MicroVM id.
    pub(crate) fn microvm_not_found(id: &str) -> Self {
        Self::new(
            "ResourceNotFoundException",
            StatusCode::NOT_FOUND,
            format!("MicroVM not found: {id}"),
        )
        .member("resourceType", json!("Microvm"))
        .member("resourceId", json!(id))
    }

    /// 404 ResourceNotFoundException for an image ARN this emulator does not know.
    pub(crate) fn image_not_found(arn: &str) -> Self {
        Self::new(
            "ResourceNotFoundException",
            StatusCode::NOT_FOUND,
            format!("MicroVM image not found: {arn}"),
        )
        .member("resourceType", json!("MicrovmImage"))
        .member("resourceId", json!(arn))
    }

    /// 404 ResourceNotFoundException for another resource (an image
    /// version, a build).
    pub(crate) fn not_found(resource_type: &str, id: &str, message: impl Into<String>) -> Self {
        Self::new("ResourceNotFoundException", StatusCode::NOT_FOUND, message)
            .member("resourceType", json!(resource_type))
            .member("resourceId", json!(id))
    }

    /// 409 ConflictException about a MicroVM image (a name in use, a build
    /// in flight).
    pub(crate) fn image_conflict(arn: &str, message: impl Into<String>) -> Self {
        Self::new("ConflictException", StatusCode::CONFLICT, message)
            .member("resourceType", json!("MicrovmImage"))
            .member("resourceId", json!(arn))
    }

    /// 409 ConflictException injected by [`super::faults::Faults::conflict`].
    pub(crate) fn injected_conflict() -> Self {
        Self::new(
            "ConflictException",
            StatusCode::CONFLICT,
            "The resource was changed by another request; retry.",
        )
    }

    /// 409 ConflictException about a MicroVM in the wrong state.
    pub(crate) fn conflict(id: &str, message: impl Into<String>) -> Self {
        Self::new("ConflictException", StatusCode::CONFLICT, message)
            .member("resourceType", json!("Microvm"))
            .member("resourceId", json!(id))
    }

    /// 409 ConflictException for a clientToken reused with another request.
    pub(crate) fn idempotency_mismatch() -> Self {
        Self::new(
            "ConflictException",
            StatusCode::CONFLICT,
            "The clientToken was already used with different parameters.",
        )
    }

    /// 429 ThrottlingException with `Retry-After` and `retryAfterSeconds`.
    pub(crate) fn throttling(retry_after_seconds: u32) -> Self {
        let mut e = Self::new(
            "ThrottlingException",
            StatusCode::TOO_MANY_REQUESTS,
            "Rate exceeded",
        )
        .member("retryAfterSeconds", json!(retry_after_seconds));
        e.retry_after = Some(retry_after_seconds);
        e
    }

    /// 500 InsufficientCapacityException (RunMicrovm only). 500 as the model
    /// says, so the AWS SDK's own retry classifier treats it as transient.
    pub(crate) fn insufficient_capacity() -> Self {
        Self::new(
            "InsufficientCapacityException",
            StatusCode::INTERNAL_SERVER_ERROR,
            "Insufficient capacity to run the MicroVM. Retry later.",
        )
    }

    /// 402 ServiceQuotaExceededException (the model's status for quotas).
    pub(crate) fn quota_exceeded(quota_code: &str, message: impl Into<String>) -> Self {
        Self::new(
            "ServiceQuotaExceededException",
            StatusCode::PAYMENT_REQUIRED,
            message,
        )
        .member("serviceCode", json!("lambda"))
        .member("quotaCode", json!(quota_code))
    }

    /// 403 MissingAuthenticationTokenException: no `Authorization` header.
    pub(crate) fn missing_authentication() -> Self {
        Self::new(
            "MissingAuthenticationTokenException",
            StatusCode::FORBIDDEN,
            "Missing Authentication Token",
        )
    }

    /// 403 IncompleteSignatureException: an `Authorization` header that is not
    /// SigV4-shaped.
    pub(crate) fn incomplete_signature() -> Self {
        Self::new(
            "IncompleteSignatureException",
            StatusCode::FORBIDDEN,
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters of an AWS4-HMAC-SHA256 signature.",
        )
    }

    /// 403 IncompleteSignatureException: a SigV4 header without a usable
    /// `X-Amz-Date` (the emulator takes no `Date` header, but says what AWS says).
    pub(crate) fn missing_date() -> Self {
        Self::new(
            "IncompleteSignatureException",
            StatusCode::FORBIDDEN,
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        )
    }

    /// 403 UnrecognizedClientException: a key id the emulator does not hold,
    /// or a session token that is not the key's.
    pub(crate) fn unrecognized_client() -> Self {
        Self::new(
            "UnrecognizedClientException",
            StatusCode::FORBIDDEN,
            "The security token included in the request is invalid.",
        )
    }

    /// 403 InvalidSignatureException with AWS's text for a signature that
    /// does not match.
    pub(crate) fn signature_mismatch() -> Self {
        Self::invalid_signature(
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
        )
    }

    /// 403 InvalidSignatureException (a wrong scope, an expired date).
    pub(crate) fn invalid_signature(message: impl Into<String>) -> Self {
        Self::new("InvalidSignatureException", StatusCode::FORBIDDEN, message)
    }

    /// 403 AccessDeniedException for a request whose `Host` is not the
    /// emulator's own address (a DNS-rebinding page, a mistyped proxy).
    pub(crate) fn foreign_host(own: &str) -> Self {
        Self::new(
            "AccessDeniedException",
            StatusCode::FORBIDDEN,
            format!("The Host header must name this emulator ({own})."),
        )
    }

    /// 413 RequestEntityTooLargeException: a body above what any operation takes.
    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            "RequestEntityTooLargeException",
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request must be smaller than {limit} bytes."),
        )
    }

    /// 500 InternalServerException (an emulator-side failure, e.g. an agent that
    /// could not start).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            "InternalServerException",
            StatusCode::INTERNAL_SERVER_ERROR,
            message,
        )
    }

    /// 404 UnknownOperationException: no route matched.
    pub(crate) fn unknown_operation() -> Self {
        Self::new(
            "UnknownOperationException",
            StatusCode::NOT_FOUND,
            "Unknown operation",
        )
    }

    /// The JSON body: `{"__type", "message", ..members}`.
    pub(crate) fn body(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("__type".into(), json!(self.name));
        obj.insert("message".into(), json!(self.message));
        for (k, v) in self.members.iter() {
            obj.insert(k.clone(), v.clone());
        }
        Value::Object(obj)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body().to_string();
        let mut resp = (self.status, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert("x-amzn-errortype", HeaderValue::from_static(self.name));
        if let Some(secs) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_carries_type_message_and_members() {
        let e = ApiError::throttling(3);
        assert_eq!(
            e.body(),
            json!({"__type": "ThrottlingException", "message": "Rate exceeded", "retryAfterSeconds": 3})
        );
    }

    #[test]
    fn response_has_status_and_headers() {
        let r = ApiError::throttling(2).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["x-amzn-errortype"], "ThrottlingException");
        assert_eq!(r.headers()["retry-after"], "2");
        assert_eq!(r.headers()["content-type"], "application/json");
    }
}
