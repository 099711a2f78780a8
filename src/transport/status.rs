//! Reads a `tonic::Status` into the plain-data `GrpcFailure` that the error
//! module maps, plus the two transport facts the mapper cannot see from
//! text alone: whether the HTTP response carried a grpc-status at all, and
//! whether the connection was never established (nothing was sent).

use std::error::Error as _;

use tonic::{Code, ConnectError, Status};

use crate::error::GrpcCode;
use crate::error::map::grpc::{CallContext, GrpcFailure};

/// tonic's message for an HTTP response without `grpc-status` (for example the
/// AWS proxy's plain 403).
const NO_GRPC_STATUS_PREFIX: &str = "grpc-status header missing, mapped from HTTP status code ";

/// The plain-data form of a status.
///
/// A status the client made up from a transport error has a source chain;
/// its `Display`s are appended to the message (`: `-separated) so that the
/// mapper can read transport markers. They describe sockets and frames,
/// never tokens or payloads.
pub(crate) fn failure(status: &Status, call: CallContext) -> GrpcFailure {
    let mut message = status.message().to_owned();
    let mut has_grpc_status = !message.starts_with(NO_GRPC_STATUS_PREFIX);
    let mut source = status.source();
    while let Some(err) = source {
        has_grpc_status = false;
        message.push_str(": ");
        message.push_str(&err.to_string());
        source = err.source();
    }
    GrpcFailure::new(grpc_code(status.code()), message, has_grpc_status, call)
}

/// The failure for a deadline the SDK itself enforced.
pub(crate) fn deadline_failure(call: CallContext) -> GrpcFailure {
    GrpcFailure::new(GrpcCode::DeadlineExceeded, "deadline exceeded", false, call)
}

/// True when the connection could not be established, so the request never
/// left the client and any RPC may be retried (wire-contract 2.7).
pub(crate) fn is_not_established(status: &Status) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    let mut source = status.source();
    while let Some(err) = source {
        if err.downcast_ref::<ConnectError>().is_some() {
            return true;
        }
        source = err.source();
    }
    false
}

/// tonic's code as ours. Exhaustive: a new tonic code fails the build here.
pub(crate) fn grpc_code(code: Code) -> GrpcCode {
    match code {
        Code::Ok => GrpcCode::Ok,
        Code::Cancelled => GrpcCode::Cancelled,
        Code::Unknown => GrpcCode::Unknown,
        Code::InvalidArgument => GrpcCode::InvalidArgument,
        Code::DeadlineExceeded => GrpcCode::DeadlineExceeded,
        Code::NotFound => GrpcCode::NotFound,
        Code::AlreadyExists => GrpcCode::AlreadyExists,
        Code::PermissionDenied => GrpcCode::PermissionDenied,
        Code::ResourceExhausted => GrpcCode::ResourceExhausted,
        Code::FailedPrecondition => GrpcCode::FailedPrecondition,
        Code::Aborted => GrpcCode::Aborted,
        Code::OutOfRange => GrpcCode::OutOfRange,
        Code::Unimplemented => GrpcCode::Unimplemented,
        Code::Internal => GrpcCode::Internal,
        Code::Unavailable => GrpcCode::Unavailable,
        Code::DataLoss => GrpcCode::DataLoss,
        Code::Unauthenticated => GrpcCode::Unauthenticated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> CallContext {
        CallContext::new("test")
    }

    #[test]
    fn proxy_403_has_no_grpc_status() {
        let status = Status::permission_denied(
            "grpc-status header missing, mapped from HTTP status code 403",
        );
        let f = failure(&status, ctx());
        assert!(!f.has_grpc_status);
        assert_eq!(f.code, GrpcCode::PermissionDenied);

        let from_agent = Status::permission_denied("path is not allowed");
        assert!(failure(&from_agent, ctx()).has_grpc_status);
    }

    #[test]
    fn plain_unavailable_is_not_a_connect_failure() {
        assert!(!is_not_established(&Status::unavailable("suspending")));
    }
}
