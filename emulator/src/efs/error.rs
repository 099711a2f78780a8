//! EFS's errors as its restJson1 wire carries them: the model's HTTP
//! status, `content-type: application/json`, `x-amzn-errortype: <Name>`
//! and a body `{"ErrorCode": "<Name>", "Message": "..", ..members}` (every
//! EFS error shape has the `ErrorCode` and `Message` members; a few add an
//! id, e.g. `AccessPointAlreadyExists`'s `AccessPointId`). A request the
//! SigV4 gate refused keeps the frontend's shape ([`ApiError`]), as on AWS.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::api_error::ApiError;

/// One EFS error, ready to be sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EfsError {
    /// A modelled EFS error.
    Service {
        /// The shape's name, also its `ErrorCode`.
        code: &'static str,
        status: StatusCode,
        /// Human text: ids and values the caller sent, never a secret.
        message: String,
        /// An extra member (`FileSystemId`, `AccessPointId`).
        member: Option<(&'static str, String)>,
    },
    /// Refused before EFS saw it (the signature, the host).
    Frontend(ApiError),
}

impl From<ApiError> for EfsError {
    fn from(err: ApiError) -> Self {
        EfsError::Frontend(err)
    }
}

impl EfsError {
    fn service(code: &'static str, status: StatusCode, message: impl Into<String>) -> Self {
        EfsError::Service {
            code,
            status,
            message: message.into(),
            member: None,
        }
    }

    fn with(mut self, key: &'static str, value: &str) -> Self {
        if let EfsError::Service { member, .. } = &mut self {
            *member = Some((key, value.to_owned()));
        }
        self
    }

    /// 400 BadRequest: a malformed request or an invalid parameter.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::service("BadRequest", StatusCode::BAD_REQUEST, message)
    }

    /// 404 FileSystemNotFound.
    pub(crate) fn file_system_not_found(id: &str) -> Self {
        Self::service(
            "FileSystemNotFound",
            StatusCode::NOT_FOUND,
            format!("File system '{id}' does not exist."),
        )
    }

    /// 404 AccessPointNotFound.
    pub(crate) fn access_point_not_found(id: &str) -> Self {
        Self::service(
            "AccessPointNotFound",
            StatusCode::NOT_FOUND,
            format!("Access point '{id}' does not exist."),
        )
    }

    /// 404 MountTargetNotFound.
    pub(crate) fn mount_target_not_found(id: &str) -> Self {
        Self::service(
            "MountTargetNotFound",
            StatusCode::NOT_FOUND,
            format!("Mount target '{id}' does not exist."),
        )
    }

    /// 409 FileSystemAlreadyExists, naming the file system the creation
    /// token already made.
    pub(crate) fn file_system_already_exists(id: &str) -> Self {
        Self::service(
            "FileSystemAlreadyExists",
            StatusCode::CONFLICT,
            format!("File system '{id}' already exists with the creation token you provided."),
        )
        .with("FileSystemId", id)
    }

    /// 409 AccessPointAlreadyExists, naming the access point the client
    /// token already made.
    pub(crate) fn access_point_already_exists(id: &str) -> Self {
        Self::service(
            "AccessPointAlreadyExists",
            StatusCode::CONFLICT,
            format!("Access point '{id}' already exists with the client token you provided."),
        )
        .with("AccessPointId", id)
    }

    /// 409 FileSystemInUse: mount targets or access points remain.
    pub(crate) fn file_system_in_use(id: &str, what: &str) -> Self {
        Self::service(
            "FileSystemInUse",
            StatusCode::CONFLICT,
            format!("File system '{id}' is in use: it still has {what}."),
        )
    }

    /// 403 AccessPointLimitExceeded.
    pub(crate) fn access_point_limit(id: &str, limit: usize) -> Self {
        Self::service(
            "AccessPointLimitExceeded",
            StatusCode::FORBIDDEN,
            format!("File system '{id}' already has the maximum of {limit} access points."),
        )
    }

    /// 429 ThrottlingException (injected: [`super::LocalEfs::throttle`]).
    pub(crate) fn throttling() -> Self {
        Self::service(
            "ThrottlingException",
            StatusCode::TOO_MANY_REQUESTS,
            "Rate exceeded",
        )
    }

    /// 500 InternalServerError: the emulator could not keep a change.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::service(
            "InternalServerError",
            StatusCode::INTERNAL_SERVER_ERROR,
            message,
        )
    }

    /// The error's name (`x-amzn-errortype`).
    #[cfg(test)]
    pub(crate) fn code(&self) -> &'static str {
        match self {
            EfsError::Service { code, .. } => code,
            EfsError::Frontend(e) => e.name,
        }
    }

    /// The JSON body of a modelled error.
    fn body(code: &str, message: &str, member: Option<&(&'static str, String)>) -> Value {
        let mut obj = Map::new();
        obj.insert("ErrorCode".into(), json!(code));
        obj.insert("Message".into(), json!(message));
        if let Some((k, v)) = member {
            obj.insert((*k).to_owned(), json!(v));
        }
        Value::Object(obj)
    }
}

impl IntoResponse for EfsError {
    fn into_response(self) -> Response {
        let (code, status, message, member) = match self {
            EfsError::Frontend(err) => return err.into_response(),
            EfsError::Service {
                code,
                status,
                message,
                member,
            } => (code, status, message, member),
        };
        let body = Self::body(code, &message, member.as_ref()).to_string();
        let mut resp = (status, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert("x-amzn-errortype", HeaderValue::from_static(code));
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modelled_error_carries_its_code_message_and_member() {
        let r = EfsError::access_point_already_exists("fsap-0123456789abcdef0").into_response();
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(r.headers()["x-amzn-errortype"], "AccessPointAlreadyExists");
        assert_eq!(
            EfsError::body(
                "AccessPointAlreadyExists",
                "m",
                Some(&("AccessPointId", "fsap-1".into()))
            ),
            json!({"ErrorCode": "AccessPointAlreadyExists", "Message": "m", "AccessPointId": "fsap-1"})
        );
    }
}
