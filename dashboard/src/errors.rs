//! The API's error answers: `{"error":{"code","message"}}` with an HTTP
//! status, the codes and statuses of the reference's dashboard, and the
//! English messages pinned here (docs/dashboard.md transcribes them; a test
//! keeps both in step).

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use rayito::{ErrorKind, SandboxError};

/// The pinned messages of the dashboard's refusals.
pub mod messages {
    /// 401 `unauthorized`: no session cookie, or a wrong start token.
    pub const UNAUTHORIZED: &str =
        "missing or wrong dashboard token: open the URL `rayito dashboard` printed";
    /// 421 `misdirected_request`: a Host other than the dashboard's.
    pub const MISDIRECTED: &str =
        "the Host header must be 127.0.0.1:<port> or localhost:<port> of this dashboard";
    /// 403 `forbidden`: a cross-origin (or `null`) Origin, or a cross-site
    /// `Sec-Fetch-Site`.
    pub const CROSS_ORIGIN: &str = "cross-origin requests are refused";
    /// 403 `csrf_failed`: a POST without the session's `X-Rayito-CSRF`.
    pub const CSRF_FAILED: &str =
        "missing or wrong X-Rayito-CSRF header (GET /api/v1/session gives it)";
    /// 403 `actions_disabled`: an action on a dashboard started without
    /// `--allow-actions`.
    pub const ACTIONS_DISABLED: &str =
        "actions are disabled: start the dashboard with --allow-actions";
    /// 415 `unsupported_media_type`: a POST body that is not JSON.
    pub const NOT_JSON: &str = "the body must be application/json";
    /// 400 `invalid_json`: a POST body that does not parse.
    pub const INVALID_JSON: &str = "the body is not the JSON this endpoint takes";
    /// 404 `plan_not_found`: a run of a plan this dashboard does not hold
    /// (never made, already run, or expired after 10 minutes).
    pub const PLAN_NOT_FOUND: &str =
        "no such plan: it was never made, was already run, or expired (10 minutes); plan again";
    /// 400 `confirmation_required`: a run whose confirmation is not its
    /// plan's.
    pub const CONFIRMATION: &str =
        "the confirmation is not the plan's: type the plan's confirmation to run it";
    /// 404 `not_found`: no such path.
    pub const NOT_FOUND: &str = "no such API path";
    /// 413 `payload_too_large`: a body over 64 KiB.
    pub const TOO_LARGE: &str = "the body is over 64 KiB";
    /// 405 `method_not_allowed`: a method other than GET (and POST under
    /// `/api/v1`) on the hosted dashboard.
    pub const METHOD_NOT_ALLOWED: &str = "method not allowed";
    /// 401 `unauthorized` (hosted): no `Authorization: Bearer` token.
    pub const NO_TOKEN: &str = "missing token: sign in to the dashboard";
    /// 401 `unauthorized` (hosted): a token that is not a valid, current
    /// access token of the stack's pool and client (which check failed is
    /// only logged).
    pub const BAD_TOKEN: &str = "invalid or expired token: sign in again";
    /// 403 `actions_disabled` (hosted): an action on a stack deployed
    /// without `AllowActions=true`.
    pub const STACK_ACTIONS_DISABLED: &str =
        "actions are disabled: the stack was deployed with AllowActions=false";
    /// 403 `forbidden` (hosted): an action by a user outside the actions
    /// group.
    pub const NOT_IN_GROUP: &str = "the account is not in the dashboard's actions group";
    /// 503 `auth_unavailable` (hosted): the pool's keys or clients could
    /// not be read, so no token can be judged.
    pub const AUTH_UNAVAILABLE: &str = "sign-in cannot be checked right now (the pool's keys or clients are unreachable): try again shortly";
    /// 503 `audit_unavailable` (hosted): the audit rows of an action could
    /// not be written, so it did not run.
    pub const AUDIT_UNAVAILABLE: &str =
        "the action was not run: its audit record could not be written";
    /// 503 `plans_unavailable` (hosted): the plan could not be kept in or
    /// read from the stack's cache table.
    pub const PLANS_UNAVAILABLE: &str = "the plan could not be kept or read (the dashboard's cache table is unreachable): try again shortly";
}

/// One error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            messages::UNAUTHORIZED,
        )
    }

    pub(crate) fn misdirected() -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            messages::MISDIRECTED,
        )
    }

    pub(crate) fn cross_origin() -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", messages::CROSS_ORIGIN)
    }

    pub(crate) fn csrf() -> Self {
        Self::new(StatusCode::FORBIDDEN, "csrf_failed", messages::CSRF_FAILED)
    }

    pub(crate) fn actions_disabled() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "actions_disabled",
            messages::ACTIONS_DISABLED,
        )
    }

    pub(crate) fn not_json() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            messages::NOT_JSON,
        )
    }

    pub(crate) fn invalid_json() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            messages::INVALID_JSON,
        )
    }

    pub(crate) fn too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            messages::TOO_LARGE,
        )
    }

    pub(crate) fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", messages::NOT_FOUND)
    }

    pub(crate) fn plan_not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "plan_not_found",
            messages::PLAN_NOT_FOUND,
        )
    }

    pub(crate) fn confirmation_required() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "confirmation_required",
            messages::CONFIRMATION,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            messages::METHOD_NOT_ALLOWED,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn no_token() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", messages::NO_TOKEN)
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn bad_token() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            messages::BAD_TOKEN,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn stack_actions_disabled() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "actions_disabled",
            messages::STACK_ACTIONS_DISABLED,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn not_in_group() -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", messages::NOT_IN_GROUP)
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn auth_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "auth_unavailable",
            messages::AUTH_UNAVAILABLE,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn audit_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "audit_unavailable",
            messages::AUDIT_UNAVAILABLE,
        )
    }

    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    pub(crate) fn plans_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "plans_unavailable",
            messages::PLANS_UNAVAILABLE,
        )
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
}

/// An SDK error as an answer: its kind picks the status and code, its
/// message (which by the SDK's rules carries no secret) goes as it is.
impl From<SandboxError> for ApiError {
    fn from(err: SandboxError) -> Self {
        let (status, code) = match err.kind() {
            ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
            ErrorKind::NotFound | ErrorKind::SandboxNotFound => {
                (StatusCode::NOT_FOUND, "not_found")
            }
            ErrorKind::SandboxState => (StatusCode::CONFLICT, "sandbox_state"),
            ErrorKind::Authentication => (StatusCode::FORBIDDEN, "aws_access_denied"),
            ErrorKind::RateLimit => (StatusCode::TOO_MANY_REQUESTS, "aws_throttled"),
            ErrorKind::Unimplemented => (StatusCode::NOT_IMPLEMENTED, "unimplemented"),
            _ => (StatusCode::BAD_GATEWAY, "aws_error"),
        };
        Self::new(status, code, err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message }
        });
        (self.status, Json(body)).into_response()
    }
}
