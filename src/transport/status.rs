//! Reads a `tonic::Status` into the plain-data `GrpcFailure` that the error
//! module maps. The transport facts (the connection was never established,
//! the stream was reset, the HTTP answer carried no `grpc-status`) are read
//! from the *types* in the status's source chain, never from its text: a
//! status message is whatever the agent (or the guest behind it) wrote.

use std::error::Error;

use tonic::{Code, ConnectError, Status};

use super::grpc_only::NoGrpcStatus;
use crate::error::GrpcCode;
use crate::error::map::grpc::{CallContext, GrpcFailure, Origin};

/// The plain-data form of a status. A status our client made up from a
/// transport error keeps that error's text, redacted, as the cause.
pub(crate) fn failure(status: &Status, call: CallContext) -> GrpcFailure {
    let (origin, cause) = classify(status);
    let code = match origin {
        // tonic makes an UNKNOWN status of our own error: the code the
        // gRPC spec derives from the HTTP status is the real one.
        Origin::HttpWithoutGrpcStatus(http) => {
            return GrpcFailure::http_without_grpc_status(http, call).with_cause(cause.as_deref());
        }
        _ => grpc_code(status.code()),
    };
    GrpcFailure::new(code, status.message(), origin, call).with_cause(cause.as_deref())
}

/// Where a status came from, by the types in its source chain, and the
/// text of that chain (`: `-separated) when there is one.
fn classify(status: &Status) -> (Origin, Option<String>) {
    let mut origin = None;
    let mut texts: Vec<String> = Vec::new();
    let mut source = status.source();
    while let Some(err) = source {
        texts.push(err.to_string());
        origin = origin.or_else(|| origin_of(err));
        source = err.source();
    }
    if texts.is_empty() {
        // No source: the server sent this status (grpc-status).
        return (Origin::Agent, None);
    }
    (origin.unwrap_or(Origin::Client), Some(texts.join(": ")))
}

/// The origin one error of a chain proves, if any.
fn origin_of(err: &(dyn Error + 'static)) -> Option<Origin> {
    if let Some(answer) = err.downcast_ref::<NoGrpcStatus>() {
        return Some(Origin::HttpWithoutGrpcStatus(answer.http_status));
    }
    if err.downcast_ref::<ConnectError>().is_some() {
        return Some(Origin::NotEstablished);
    }
    if let Some(h2) = err.downcast_ref::<h2::Error>()
        && (h2.is_reset() || h2.is_go_away() || h2.is_io() || h2.is_remote())
    {
        return Some(Origin::Reset);
    }
    if let Some(hyper) = err.downcast_ref::<hyper::Error>()
        && (hyper.is_closed() || hyper.is_incomplete_message() || hyper.is_canceled())
    {
        return Some(Origin::Reset);
    }
    if let Some(io) = err.downcast_ref::<std::io::Error>()
        && matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        )
    {
        return Some(Origin::Reset);
    }
    None
}

/// The failure for a deadline the SDK itself enforced.
pub(crate) fn deadline_failure(call: CallContext) -> GrpcFailure {
    GrpcFailure::new(
        GrpcCode::DeadlineExceeded,
        "deadline exceeded",
        Origin::Deadline,
        call,
    )
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
    fn a_status_without_source_is_the_agents_whatever_its_text() {
        for text in [
            "grpc-status header missing, mapped from HTTP status code 403",
            "transport error: connection reset",
            "tcp connect error: Connection refused",
        ] {
            let f = failure(&Status::permission_denied(text), ctx());
            assert_eq!(f.origin, Origin::Agent, "{text}");
            assert_eq!(f.code, GrpcCode::PermissionDenied);
            assert!(f.cause.is_none());
        }
    }

    #[test]
    fn a_proxy_answer_is_read_from_its_type() {
        let status = Status::from_error(Box::new(NoGrpcStatus { http_status: 403 }));
        let f = failure(&status, ctx());
        assert_eq!(f.origin, Origin::HttpWithoutGrpcStatus(403));
        assert_eq!(f.code, GrpcCode::PermissionDenied);
        assert!(f.cause.is_some());
    }

    #[test]
    fn an_io_reset_in_the_chain_is_a_reset() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let f = failure(&Status::from_error(Box::new(io)), ctx());
        assert_eq!(f.origin, Origin::Reset);
        let other = std::io::Error::other("whatever");
        let f = failure(&Status::from_error(Box::new(other)), ctx());
        assert_eq!(f.origin, Origin::Client);
    }
}
