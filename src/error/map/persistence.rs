//! Failures of a checkpoint or restore stream (spec B4): a status before
//! the first message, a `StreamError` inside the stream, a status in the
//! middle of it, and a stream that ended without `done`.
//!
//! This table overrides the generic gRPC mapping (where FAILED_PRECONDITION
//! is `InvalidArgument`). The agent's text is never kept, not even in the
//! metadata: an S3 failure message can name the bucket, a key or the role.
//! Only the status code and the stream code (a cleaned token) are kept.

use std::time::Duration;

use crate::error::codes::{GrpcCode, PersistenceCode, PersistenceOp, SandboxCode, TimeoutScope};
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::{ErrorMeta, SandboxError, clean_token};

use rayito_proto::tokens::{detail, phase, stream_code};

use super::grpc::{GrpcFailure, Origin, from_grpc};

/// Why a persistence stream was cut (the `{cause}` of
/// `persistence.interrupted`): fixed texts, never the agent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interruption {
    /// The agent said the sandbox is suspending.
    Suspending,
    /// The connection or the proxy went away.
    ConnectionCut,
    /// The stream ended cleanly but without `done`.
    EndedWithoutDone,
}

impl Interruption {
    pub(crate) const fn text(self) -> &'static str {
        match self {
            Self::Suspending => "the sandbox is suspending",
            Self::ConnectionCut => "the connection to the sandbox was cut",
            Self::EndedWithoutDone => "the stream ended before the operation finished",
        }
    }
}

fn meta_of(t: Template, op: PersistenceOp, extra: &[(&str, &str)]) -> Box<ErrorMeta> {
    let mut args: Vec<(&str, &str)> = vec![("operation", op.as_str())];
    args.extend_from_slice(extra);
    let mut out = meta(t, &args);
    out.attempts = 1;
    out
}

/// `Persistence { code }` with the message of the code. An unknown code
/// is shown as a token (`[A-Za-z0-9_]`, else `?`), never as sent.
pub(crate) fn persistence(op: PersistenceOp, code: PersistenceCode) -> SandboxError {
    let meta = match &code {
        PersistenceCode::PermissionDenied => meta_of(m::PERSISTENCE_PERMISSION_DENIED, op, &[]),
        PersistenceCode::Internal => meta_of(m::PERSISTENCE_INTERNAL, op, &[]),
        PersistenceCode::FailedPrecondition => meta_of(m::PERSISTENCE_FAILED_PRECONDITION, op, &[]),
        PersistenceCode::Unimplemented => meta_of(m::PERSISTENCE_UNIMPLEMENTED, op, &[]),
        PersistenceCode::Interrupted => meta_of(
            m::PERSISTENCE_INTERRUPTED,
            op,
            &[("cause", Interruption::ConnectionCut.text())],
        ),
        PersistenceCode::ResourceExhausted => meta_of(m::PERSISTENCE_RESOURCE_EXHAUSTED, op, &[]),
        PersistenceCode::Unknown(token) => meta_of(
            m::PERSISTENCE_OTHER,
            op,
            &[("code", &super::agent::token_for_message(token.as_str()))],
        ),
    };
    SandboxError::Persistence { code, meta }
}

/// `Persistence { interrupted }` for `why`.
pub(crate) fn interrupted(op: PersistenceOp, why: Interruption) -> SandboxError {
    SandboxError::Persistence {
        code: PersistenceCode::Interrupted,
        meta: meta_of(m::PERSISTENCE_INTERRUPTED, op, &[("cause", why.text())]),
    }
}

fn not_found(op: PersistenceOp) -> SandboxError {
    let t = match op {
        PersistenceOp::Restore => m::PERSISTENCE_NO_CHECKPOINT,
        PersistenceOp::Checkpoint => m::PERSISTENCE_NOT_FOUND,
    };
    SandboxError::NotFound {
        meta: meta_of(t, op, &[]),
    }
}

fn invalid_argument(op: PersistenceOp) -> SandboxError {
    SandboxError::InvalidArgument {
        argument: None,
        meta: meta_of(m::PERSISTENCE_INVALID_ARGUMENT, op, &[]),
    }
}

pub(crate) fn timeout(op: PersistenceOp, after: Option<Duration>) -> SandboxError {
    SandboxError::Timeout {
        scope: TimeoutScope::Request,
        meta: meta_of(m::PERSISTENCE_TIMEOUT, op, &[("within", &m::within(after))]),
    }
}

fn sandbox_timeout(op: PersistenceOp) -> SandboxError {
    let mut meta = meta(m::GRPC_SANDBOX_TIMEOUT, &[("feature", op.feature())]);
    meta.attempts = 1;
    SandboxError::Timeout {
        scope: TimeoutScope::Sandbox,
        meta,
    }
}

fn cancelled(op: PersistenceOp) -> SandboxError {
    let mut meta = meta(m::SDK_CANCELLED, &[("feature", op.feature())]);
    meta.attempts = 1;
    SandboxError::sandbox_with(SandboxCode::Cancelled, meta)
}

/// The status code stays in the metadata; the agent's message does not.
fn with_status(mut err: SandboxError, f: &GrpcFailure) -> SandboxError {
    err.meta_mut().grpc_code = Some(f.code);
    err
}

/// A status that ended the call before its first message (spec B4, row 1).
/// A proxy 401/403 reaches here only after the SDK's one re-mint and
/// retry; `timeout` is the call's own deadline, named when it passed.
pub(crate) fn before_first_message(
    op: PersistenceOp,
    f: &GrpcFailure,
    timeout_after: Option<Duration>,
) -> SandboxError {
    match f.origin {
        // The proxy answered, not the agent: 401/403 is its refusal of the
        // token, 429 and 502-504 a cut, anything else the proxy's row.
        Origin::HttpWithoutGrpcStatus(401 | 403) => return from_grpc(f.clone()),
        Origin::HttpWithoutGrpcStatus(429 | 502..=504) | Origin::Reset => {
            return with_status(interrupted(op, Interruption::ConnectionCut), f);
        }
        Origin::HttpWithoutGrpcStatus(_) => return from_grpc(f.clone()),
        Origin::Deadline => return with_status(timeout(op, timeout_after), f),
        Origin::NotEstablished => {
            return with_status(interrupted(op, Interruption::ConnectionCut), f);
        }
        Origin::Agent | Origin::Client => {}
    }
    let msg = f.message.as_str();
    let err = match f.code {
        GrpcCode::NotFound => not_found(op),
        GrpcCode::InvalidArgument => invalid_argument(op),
        GrpcCode::DeadlineExceeded => timeout(op, None),
        GrpcCode::Unauthenticated => SandboxError::Authentication {
            proxy_rejected: false,
            meta: meta_of(m::PERSISTENCE_UNAUTHENTICATED, op, &[]),
        },
        GrpcCode::FailedPrecondition if msg == detail::SANDBOX_TIMEOUT => sandbox_timeout(op),
        GrpcCode::FailedPrecondition => persistence(op, PersistenceCode::FailedPrecondition),
        GrpcCode::PermissionDenied => persistence(op, PersistenceCode::PermissionDenied),
        GrpcCode::Unimplemented => persistence(op, PersistenceCode::Unimplemented),
        GrpcCode::ResourceExhausted => persistence(op, PersistenceCode::ResourceExhausted),
        GrpcCode::Unavailable if msg == phase::SUSPENDING => {
            interrupted(op, Interruption::Suspending)
        }
        GrpcCode::Unavailable => interrupted(op, Interruption::ConnectionCut),
        GrpcCode::Cancelled => cancelled(op),
        _ => persistence(op, PersistenceCode::Internal),
    };
    with_status(err, f)
}

/// A `StreamError { code }` inside the stream (spec B4, row 2). The
/// message of the StreamError is not read at all.
pub(crate) fn stream_error(op: PersistenceOp, code: &str) -> SandboxError {
    let mut err = match code {
        stream_code::NOT_FOUND => not_found(op),
        stream_code::INVALID_ARGUMENT => invalid_argument(op),
        stream_code::DEADLINE_EXCEEDED => timeout(op, None),
        stream_code::SANDBOX_TIMEOUT => sandbox_timeout(op),
        stream_code::SUSPENDING => interrupted(op, Interruption::Suspending),
        "" => persistence(op, PersistenceCode::Internal),
        other => persistence(op, PersistenceCode::from(other)),
    };
    let token = clean_token(code);
    if !token.is_empty() {
        err.meta_mut().reason = Some(token);
    }
    err
}

/// A status after the first message (spec B4, row 3): the sandbox's
/// timeout or a deadline is `Timeout`, the caller's cancel is
/// `Sandbox { cancelled }`, anything else cut the stream: `interrupted`
/// (never resumed).
pub(crate) fn mid_stream(
    op: PersistenceOp,
    f: &GrpcFailure,
    timeout_after: Option<Duration>,
) -> SandboxError {
    let msg = f.message.as_str();
    let err = match (f.origin, f.code) {
        (Origin::Deadline, _) => timeout(op, timeout_after),
        (Origin::Agent, GrpcCode::FailedPrecondition) if msg == detail::SANDBOX_TIMEOUT => {
            sandbox_timeout(op)
        }
        (Origin::Agent, GrpcCode::DeadlineExceeded) => timeout(op, None),
        (_, GrpcCode::Cancelled) if f.call.caller_cancelled || f.origin == Origin::Agent => {
            cancelled(op)
        }
        (Origin::Agent, GrpcCode::Unavailable) if msg == phase::SUSPENDING => {
            interrupted(op, Interruption::Suspending)
        }
        _ => interrupted(op, Interruption::ConnectionCut),
    };
    with_status(err, f)
}

/// The stream ended without `done` (and without an error).
pub(crate) fn ended_without_done(op: PersistenceOp) -> SandboxError {
    interrupted(op, Interruption::EndedWithoutDone)
}

/// The first message was not `started`: the agent broke the protocol.
pub(crate) fn not_started(op: PersistenceOp) -> SandboxError {
    let mut meta = meta(m::PERSISTENCE_NOT_STARTED, &[("operation", op.as_str())]);
    meta.attempts = 1;
    SandboxError::sandbox_with(SandboxCode::ProtocolViolation, meta)
}

#[cfg(test)]
mod tests {
    use super::super::grpc::CallContext;
    use super::*;
    use crate::error::ErrorKind;

    const CALL: CallContext = CallContext::new("persistence.checkpoint");

    fn agent(code: GrpcCode, msg: &str) -> GrpcFailure {
        GrpcFailure::new(code, msg, Origin::Agent, CALL)
    }

    fn code_of(e: &SandboxError) -> String {
        match e {
            SandboxError::Persistence { code, .. } => format!("persistence:{code}"),
            SandboxError::Sandbox { code, .. } => {
                format!("sandbox:{}", code.as_ref().map_or("", |c| c.as_str()))
            }
            other => super::super::test_shape(other),
        }
    }

    /// B4 row 1: every status before the first message, with its variant,
    /// fields and message. The agent's text (here naming a bucket and a
    /// key) never reaches the error.
    #[test]
    fn statuses_before_the_first_message_are_pinned() {
        let secret = "AccessDenied on s3://my-bucket/rayito-home/alice/home.tar.gz";
        let op = PersistenceOp::Checkpoint;
        let cases: Vec<(GrpcFailure, &str, &str)> = vec![
            (
                agent(GrpcCode::NotFound, secret),
                "not_found",
                "the checkpoint found nothing to archive (not_found); check the user and its home directory",
            ),
            (
                agent(GrpcCode::InvalidArgument, secret),
                "invalid_argument",
                "the agent refused an argument of the checkpoint (invalid_argument); check the bucket, the prefix, the region, the excludes and the user",
            ),
            (
                agent(GrpcCode::DeadlineExceeded, secret),
                "timeout:request",
                "the checkpoint did not finish; raise its timeout and run it again",
            ),
            (
                agent(GrpcCode::Unauthenticated, secret),
                "authentication:false",
                "the agent refused the access token for the checkpoint; connect to the sandbox again to get a valid token",
            ),
            (
                agent(GrpcCode::FailedPrecondition, secret),
                "persistence:failed_precondition",
                "the checkpoint could not start (failed_precondition): another checkpoint or restore is running in this sandbox, or the region is unknown; wait for the other operation or fix the region, then run it again",
            ),
            (
                agent(GrpcCode::FailedPrecondition, "sandbox_timeout"),
                "timeout:sandbox",
                "the sandbox reached its timeout (persistence.checkpoint); extend it with set_timeout before it expires, or create a new sandbox",
            ),
            (
                agent(GrpcCode::PermissionDenied, secret),
                "persistence:permission_denied",
                "the checkpoint was refused access to S3 (permission_denied): the sandbox has no execution role, or the role may not use the prefix; create the sandbox with an execution role that may (docs/persistence.md), then run it again",
            ),
            (
                agent(GrpcCode::Unimplemented, secret),
                "persistence:unimplemented",
                "the agent in this sandbox cannot checkpoint (unimplemented); create the sandbox from an image with a newer agent",
            ),
            (
                agent(GrpcCode::ResourceExhausted, secret),
                "persistence:resource_exhausted",
                "the checkpoint ran out of a sandbox resource (resource_exhausted: the disk or the agent's limits); free disk space in the sandbox, then run it again",
            ),
            (
                agent(GrpcCode::Unavailable, "suspending"),
                "persistence:interrupted",
                "the checkpoint was interrupted: the sandbox is suspending; it is not resumed, run it again",
            ),
            (
                agent(GrpcCode::Unavailable, secret),
                "persistence:interrupted",
                "the checkpoint was interrupted: the connection to the sandbox was cut; it is not resumed, run it again",
            ),
            (
                GrpcFailure::new(GrpcCode::Internal, secret, Origin::Reset, CALL),
                "persistence:interrupted",
                "the checkpoint was interrupted: the connection to the sandbox was cut; it is not resumed, run it again",
            ),
            (
                GrpcFailure::http_without_grpc_status(502, CALL),
                "persistence:interrupted",
                "the checkpoint was interrupted: the connection to the sandbox was cut; it is not resumed, run it again",
            ),
            (
                GrpcFailure::http_without_grpc_status(403, CALL),
                "authentication:true",
                "the AWS proxy refused the sandbox's token for persistence.checkpoint even after a fresh one; check the IAM permission to create MicroVM auth tokens",
            ),
            (
                agent(GrpcCode::Cancelled, secret),
                "sandbox:cancelled",
                "the call persistence.checkpoint was cancelled by the caller; start it again if still needed",
            ),
            (
                agent(GrpcCode::Internal, secret),
                "persistence:internal",
                "the checkpoint failed in the sandbox (internal: the network, S3, the archive, a checksum or the disk); run it again, and check the sandbox's free disk if it fails again",
            ),
            (
                agent(GrpcCode::DataLoss, secret),
                "persistence:internal",
                "the checkpoint failed in the sandbox (internal: the network, S3, the archive, a checksum or the disk); run it again, and check the sandbox's free disk if it fails again",
            ),
        ];
        for (f, want, message) in cases {
            let e = before_first_message(op, &f, None);
            assert_eq!(code_of(&e), want, "{f:?}");
            assert_eq!(e.to_string(), message, "{f:?}");
            let all = format!("{e:?} {} {}", e.to_wire(), e);
            assert!(
                !all.contains("my-bucket") && !all.contains("alice"),
                "{all}"
            );
            assert_eq!(e.meta().grpc_code(), Some(f.code));
            assert_eq!(
                SandboxError::from_wire(&e.to_wire()).as_ref(),
                Ok(&e),
                "{want}"
            );
        }
        // The call's own deadline names it.
        let f = GrpcFailure::new(GrpcCode::DeadlineExceeded, "", Origin::Deadline, CALL);
        let e = before_first_message(PersistenceOp::Restore, &f, Some(Duration::from_secs(600)));
        assert_eq!(
            e.to_string(),
            "the restore did not finish within 600 s; raise its timeout and run it again"
        );
        // A restore with no checkpoint is NotFound, the first-life signal.
        let e = before_first_message(
            PersistenceOp::Restore,
            &agent(GrpcCode::NotFound, secret),
            None,
        );
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(
            e.to_string(),
            "there is no checkpoint at the prefix to restore from; checkpoint first (a first life has none)"
        );
    }

    /// B4 row 2: stream error codes.
    #[test]
    fn stream_errors_are_pinned() {
        let op = PersistenceOp::Restore;
        let cases = [
            ("not_found", "not_found"),
            ("invalid_argument", "invalid_argument"),
            ("deadline_exceeded", "timeout:request"),
            ("sandbox_timeout", "timeout:sandbox"),
            ("suspending", "persistence:interrupted"),
            ("unimplemented", "persistence:unimplemented"),
            ("permission_denied", "persistence:permission_denied"),
            ("failed_precondition", "persistence:failed_precondition"),
            ("resource_exhausted", "persistence:resource_exhausted"),
            ("internal", "persistence:internal"),
            ("", "persistence:internal"),
            ("interrupted", "persistence:interrupted"),
            ("s3_went_away", "persistence:s3_went_away"),
        ];
        for (code, want) in cases {
            let e = stream_error(op, code);
            assert_eq!(code_of(&e), want, "{code}");
            assert_eq!(
                e.meta().reason(),
                (!code.is_empty()).then_some(code),
                "{code}"
            );
        }
        assert_eq!(
            stream_error(op, "suspending").to_string(),
            "the restore was interrupted: the sandbox is suspending; it is not resumed, run it again"
        );
        assert_eq!(
            stream_error(op, "s3_went_away").to_string(),
            "the restore failed with code s3_went_away; run it again, or report it with the image version"
        );
        // A code that is not a token is shown as one.
        let e = stream_error(op, "bad code: s3://b/k");
        assert_eq!(
            e.to_string(),
            "the restore failed with code bad?code??s3???b?k; run it again, or report it with the image version"
        );
    }

    /// B4 row 3 and the end without `done`.
    #[test]
    fn statuses_mid_stream_and_a_missing_done_are_pinned() {
        let op = PersistenceOp::Checkpoint;
        let cases: Vec<(GrpcFailure, &str)> = vec![
            (
                agent(GrpcCode::FailedPrecondition, "sandbox_timeout"),
                "timeout:sandbox",
            ),
            (agent(GrpcCode::DeadlineExceeded, ""), "timeout:request"),
            (
                GrpcFailure::new(
                    GrpcCode::Cancelled,
                    "",
                    Origin::Client,
                    CALL.cancelled_by_caller(),
                ),
                "sandbox:cancelled",
            ),
            (agent(GrpcCode::Cancelled, ""), "sandbox:cancelled"),
            (
                agent(GrpcCode::Unavailable, "suspending"),
                "persistence:interrupted",
            ),
            (agent(GrpcCode::NotFound, "x"), "persistence:interrupted"),
            (
                agent(GrpcCode::PermissionDenied, "x"),
                "persistence:interrupted",
            ),
            (
                agent(GrpcCode::FailedPrecondition, "x"),
                "persistence:interrupted",
            ),
            (
                GrpcFailure::new(GrpcCode::Unknown, "", Origin::Reset, CALL),
                "persistence:interrupted",
            ),
            (
                GrpcFailure::http_without_grpc_status(403, CALL),
                "persistence:interrupted",
            ),
        ];
        for (f, want) in cases {
            assert_eq!(code_of(&mid_stream(op, &f, None)), want, "{f:?}");
        }
        let e = mid_stream(op, &agent(GrpcCode::Unavailable, "suspending"), None);
        assert!(e.is_retryable());
        assert_eq!(e.classify().kind, "persistence");
        let e = ended_without_done(op);
        assert_eq!(
            e.to_string(),
            "the checkpoint was interrupted: the stream ended before the operation finished; it is not resumed, run it again"
        );
        assert!(e.is_retryable());
        let e = not_started(op);
        assert_eq!(code_of(&e), "sandbox:protocol_violation");
        assert_eq!(
            e.to_string(),
            "the agent did not start the checkpoint with a started event; the call was abandoned, report this with the image version"
        );
    }
}
