//! The agent gRPC table (docs/errors.md, "Agent gRPC status, first match
//! wins"): every code, the
//! exact markers and their near misses, the proxy route and the transport's
//! own failures, through the `test-util` entry points.

use rayito::error::{GrpcCode, SandboxCode, SandboxError, TimeoutScope};
use rayito::test_util::{Call, TransportFailure, agent_status, proxy_answer, transport_failure};

const RUN: Call = Call::new("commands.run");
const READ: Call = Call::filesystem("files.read");

fn map(code: GrpcCode, message: &str) -> SandboxError {
    agent_status(code, message, RUN)
}

fn reset(code: GrpcCode, text: &str, call: Call) -> SandboxError {
    transport_failure(TransportFailure::Reset { code }, text, call)
}

fn assert_kept(e: &SandboxError, code: GrpcCode, message: &str) {
    assert_eq!(e.meta().grpc_code(), Some(code));
    assert_eq!(e.meta().attempts(), 1);
    let expected = if message.is_empty() {
        None
    } else {
        Some(message)
    };
    assert_eq!(e.meta().server_message(), expected);
}

#[test]
fn phase_gate_is_sandbox_state_and_reconnectable() {
    let e = map(GrpcCode::Unavailable, "suspending");
    assert!(matches!(e, SandboxError::SandboxState { .. }));
    assert_eq!(
        e.to_string(),
        "the sandbox is suspending (commands.run); retry once it has resumed"
    );
    assert_kept(&e, GrpcCode::Unavailable, "suspending");

    let e = map(GrpcCode::Unavailable, "terminating");
    assert!(matches!(e, SandboxError::SandboxState { .. }));
    assert_eq!(
        e.to_string(),
        "the sandbox is terminating (commands.run); create a new sandbox"
    );
}

#[test]
fn phase_gate_near_misses_are_not_the_gate() {
    for text in [
        "suspending now",
        "Suspending",
        " suspending",
        "terminating.",
    ] {
        let e = map(GrpcCode::Unavailable, text);
        assert_eq!(
            e.sandbox_code(),
            Some(&SandboxCode::ConnectionLost),
            "{text:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "lost the connection to the agent during commands.run: {}; retry, or check that the sandbox is still running",
                text.trim()
            )
        );
    }
    // The exact word under another code is not the gate either.
    let e = map(GrpcCode::Internal, "suspending");
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
}

#[test]
fn kernel_gate_is_kernel_not_ready_and_not_reconnected() {
    let e = map(GrpcCode::Unavailable, "kernel not ready: starting");
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::KernelNotReady));
    assert_eq!(
        e.to_string(),
        "the code kernel is not ready (commands.run): starting; retry in a few seconds"
    );
    assert_eq!(e.classify().kind, "kernel_not_ready");
    assert!(e.is_retryable());
    let e = map(GrpcCode::Unavailable, "kernel not ready");
    assert_eq!(
        e.to_string(),
        "the code kernel is not ready (commands.run); retry in a few seconds"
    );
    // Near miss: the prefix is case-sensitive.
    let e = map(GrpcCode::Unavailable, "Kernel not ready");
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
}

#[test]
fn sandbox_timeout_marker_is_exact() {
    let e = map(GrpcCode::FailedPrecondition, "sandbox_timeout");
    assert!(matches!(
        e,
        SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the sandbox reached its timeout (commands.run); extend it with set_timeout before it expires, or create a new sandbox"
    );
    assert_kept(&e, GrpcCode::FailedPrecondition, "sandbox_timeout");

    let e = map(GrpcCode::FailedPrecondition, "sandbox_timeout: x");
    assert!(matches!(
        e,
        SandboxError::InvalidArgument { argument: None, .. }
    ));
    assert_eq!(
        e.to_string(),
        "the agent refused an argument of commands.run: sandbox_timeout: x; fix the value before retrying"
    );
}

#[test]
fn invalid_argument_and_failed_precondition_are_invalid_argument() {
    for code in [GrpcCode::InvalidArgument, GrpcCode::FailedPrecondition] {
        let e = map(code, "invalid cwd");
        assert!(matches!(
            e,
            SandboxError::InvalidArgument { argument: None, .. }
        ));
        assert_eq!(
            e.to_string(),
            "the agent refused an argument of commands.run: invalid cwd; fix the value before retrying"
        );
        assert_kept(&e, code, "invalid cwd");
    }
}

#[test]
fn unauthenticated_and_permission_denied_are_authentication() {
    let e = map(GrpcCode::Unauthenticated, "falta la cabecera");
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: false,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the agent refused the access token (commands.run); connect to the sandbox again to get a valid token"
    );
    // On a call that takes no path, cwd or user, the caller was refused.
    let e = agent_status(
        GrpcCode::PermissionDenied,
        "not allowed",
        Call::new("connect"),
    );
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: false,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the agent denied permission for connect: not allowed; use an allowed user or path"
    );
}

#[test]
fn permission_denied_on_a_path_cwd_or_user_is_the_sandbox_users() {
    // The sandbox's user was refused, not the caller's credentials; the
    // message names the role of the refused argument.
    let cases = [
        (
            Call::new("commands.run"),
            "running as root is not allowed",
            "the sandbox's user may not use the cwd or user given to commands.run: running as root is not allowed; pass a cwd or user that user may use (its home is /home/user)",
        ),
        (
            Call::filesystem("files.write"),
            "path not allowed",
            "the sandbox's user may not use the path given to files.write: path not allowed; pass a path that user may use (its home is /home/user)",
        ),
        (
            Call::filesystem("files.rename"),
            "path not allowed",
            "the sandbox's user may not use the source or destination path given to files.rename: path not allowed; pass a source or destination path that user may use (its home is /home/user)",
        ),
        (
            Call::new("code.create_context"),
            "path not allowed",
            "the sandbox's user may not use the cwd given to code.create_context: path not allowed; pass a cwd that user may use (its home is /home/user)",
        ),
    ];
    for (call, text, message) in cases {
        let e = agent_status(GrpcCode::PermissionDenied, text, call);
        assert_eq!(
            e.sandbox_code(),
            Some(&SandboxCode::PermissionDenied),
            "{e:?}"
        );
        assert!(!e.is_retryable());
        assert_eq!(e.to_string(), message);
        assert_kept(&e, GrpcCode::PermissionDenied, text);
    }
}

#[test]
fn proxy_403_without_grpc_status_is_a_proxy_rejection() {
    let e = proxy_answer(403, RUN);
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: true,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the AWS proxy refused the sandbox's token for commands.run even after a fresh one; check the IAM permission to create MicroVM auth tokens"
    );
    assert_eq!(e.meta().http_status(), Some(403));
    assert_eq!(e.meta().grpc_code(), Some(GrpcCode::PermissionDenied));
}

#[test]
fn not_found_depends_on_the_call() {
    let e = agent_status(GrpcCode::NotFound, "missing path", READ);
    assert!(matches!(e, SandboxError::FileNotFound { .. }));
    assert_eq!(
        e.to_string(),
        "file not found (files.read): missing path; check the path"
    );
    let e = map(GrpcCode::NotFound, "unknown pid");
    assert!(matches!(e, SandboxError::NotFound { .. }));
    assert_eq!(
        e.to_string(),
        "not found (commands.run): unknown pid; the process, context or execution no longer exists"
    );
    let e = map(GrpcCode::OutOfRange, "from_seq dropped");
    assert!(matches!(e, SandboxError::NotFound { .. }));
    assert_eq!(
        e.to_string(),
        "the requested output is no longer kept by the agent (commands.run); connect again from sequence 0"
    );
    assert!(e.is_not_found());
}

#[test]
fn disk_markers_are_exact_and_the_rest_is_rate_limit() {
    let e = map(GrpcCode::ResourceExhausted, "disk_reserve");
    assert!(matches!(e, SandboxError::DiskFull { .. }));
    assert_eq!(
        e.to_string(),
        "the sandbox has less than 256 MiB of free disk (commands.run); free space or use a larger disk"
    );
    let e = map(GrpcCode::ResourceExhausted, "disk_full");
    assert!(matches!(e, SandboxError::DiskFull { .. }));
    assert_eq!(
        e.to_string(),
        "the sandbox disk is full (commands.run); free space or use a larger disk"
    );
    assert!(!e.is_retryable() && e.classify().retry_with_larger_limits);

    let e = map(GrpcCode::ResourceExhausted, "disk_full: ENOSPC");
    assert!(matches!(
        e,
        SandboxError::RateLimit {
            retry_after: None,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the agent refused commands.run at one of its limits: disk_full: ENOSPC; wait for running work to finish, then retry"
    );
}

#[test]
fn deadline_and_cancellation() {
    let e = map(GrpcCode::DeadlineExceeded, "Deadline Exceeded");
    assert!(matches!(
        e,
        SandboxError::Timeout {
            scope: TimeoutScope::Request,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the call commands.run did not finish; raise request_timeout or retry"
    );

    let e = reset(GrpcCode::Cancelled, "", RUN.cancelled_by_caller());
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::Cancelled));
    assert_eq!(
        e.to_string(),
        "the call commands.run was cancelled by the caller; start it again if still needed"
    );
    assert!(!e.is_retryable());
}

#[test]
fn unimplemented_from_the_agent_names_the_feature() {
    let e = map(GrpcCode::Unimplemented, "");
    assert!(matches!(
        &e,
        SandboxError::Unimplemented { feature, doc: None, .. } if &**feature == "commands.run"
    ));
    assert_eq!(
        e.to_string(),
        "feature commands.run is not available: the agent in this image does not implement it; publish an image with a newer agent"
    );
    assert!(!e.is_sandbox_error());
}

#[test]
fn unimplemented_language_keeps_the_agents_reason() {
    let msg = "language javascript needs node, which is not installed on this host";
    let e = map(GrpcCode::Unimplemented, msg);
    assert!(matches!(
        &e,
        SandboxError::Unimplemented { reason, .. } if &**reason == msg
    ));
    assert_eq!(
        e.to_string(),
        "feature commands.run is not available: language javascript needs node, which is not installed on this host"
    );
    // Anything else keeps the generic reason (the text stays in server_message).
    for other in [
        "Method not found",
        &format!("language {}", "x".repeat(300)),
        "language a\nb",
    ] {
        let e = map(GrpcCode::Unimplemented, other);
        assert!(
            e.to_string()
                .ends_with("publish an image with a newer agent"),
            "{other}: {e}"
        );
    }
}

#[test]
fn resets_are_reconnectable_and_end_as_connection_lost() {
    for (code, text) in [
        (
            GrpcCode::Internal,
            "h2 protocol error: stream error received: RST_STREAM",
        ),
        (GrpcCode::Cancelled, "Received RST_STREAM with error code 8"),
        (GrpcCode::Internal, "GOAWAY received"),
        (GrpcCode::Unavailable, "transport error"),
        // tonic's code for a body cut by a broken pipe mid-stream.
        (
            GrpcCode::Unknown,
            "h2 protocol error: error reading a body from connection",
        ),
    ] {
        let e = reset(code, text, RUN);
        assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
        assert!(e.is_retryable());
    }
    // The same words from the agent (with a grpc-status) are not a reset.
    let e = map(GrpcCode::Internal, "Connection reset by peer");
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
    assert_eq!(
        e.to_string(),
        "the agent failed commands.run with INTERNAL: Connection reset by peer; the SDK does not retry this failure"
    );
    assert!(!e.is_retryable());
    // A cancellation by the caller is never a reset.
    let e = reset(GrpcCode::Cancelled, "RST_STREAM", RUN.cancelled_by_caller());
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::Cancelled));
}

#[test]
fn agent_text_that_mimics_the_transport_never_chooses_the_variant() {
    // tonic's own wording for an answer without grpc-status, and transport
    // words, sent by the agent as its status message: still the agent's.
    for text in [
        "grpc-status header missing, mapped from HTTP status code 503",
        "grpc-status header missing, mapped from HTTP status code 403",
        "transport error: connection reset",
        "h2 protocol error: stream error received: RST_STREAM",
        "tcp connect error: Connection refused",
    ] {
        for code in [GrpcCode::Internal, GrpcCode::Unknown, GrpcCode::Cancelled] {
            let e = map(code, text);
            assert!(
                matches!(e, SandboxError::Sandbox { code: None, .. }),
                "{code:?} {text}: {e:?}"
            );
            assert!(!e.is_retryable());
            assert_eq!(e.meta().http_status(), None);
        }
        // On a call that takes no path, cwd or user: the agent refused the
        // caller, never the proxy.
        let e = agent_status(GrpcCode::PermissionDenied, text, Call::new("connect"));
        assert!(matches!(
            e,
            SandboxError::Authentication {
                proxy_rejected: false,
                ..
            }
        ));
        let e = map(GrpcCode::PermissionDenied, text);
        assert_eq!(e.sandbox_code(), Some(&SandboxCode::PermissionDenied));
    }
}

#[test]
fn a_proxy_401_is_the_proxy_refusing_the_token() {
    // tonic derives UNAUTHENTICATED from an HTTP 401; without grpc-status
    // it is the proxy's answer, not "the agent refused the access token".
    let e = proxy_answer(401, RUN);
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: true,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "the AWS proxy refused the sandbox's token for commands.run even after a fresh one; check the IAM permission to create MicroVM auth tokens"
    );
    assert_eq!(e.meta().http_status(), Some(401));
    assert_eq!(e.meta().grpc_code(), Some(GrpcCode::Unauthenticated));
    // The agent's own UNAUTHENTICATED keeps its row.
    let e = map(GrpcCode::Unauthenticated, "bad token");
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: false,
            ..
        }
    ));
}

#[test]
fn a_connection_never_established_ends_as_connection_lost_with_its_cause() {
    let text = "transport error: tcp connect error: Connection refused (os error 111)";
    let e = transport_failure(TransportFailure::NotEstablished, text, RUN);
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
    assert!(e.is_retryable());
    let meta = std::error::Error::source(&e).expect("meta");
    let cause = meta.source().expect("cause");
    assert_eq!(cause.to_string(), text);
    assert!(cause.source().is_none());
}

#[test]
fn proxy_http_statuses() {
    for status in [429, 502, 503, 504] {
        let e = proxy_answer(status, RUN);
        assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
        assert_eq!(e.meta().http_status(), Some(status));
        assert_eq!(e.meta().grpc_code(), Some(GrpcCode::Unavailable));
    }
    assert_eq!(
        proxy_answer(429, RUN).to_string(),
        "the AWS proxy rate-limited commands.run (http 429); retry later with backoff"
    );
    assert_eq!(
        proxy_answer(502, RUN).to_string(),
        "the AWS proxy could not reach the sandbox for commands.run (http 502); retry, or check that the sandbox is still running"
    );
    let e = proxy_answer(403, RUN);
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: true,
            ..
        }
    ));
    let e = proxy_answer(500, RUN);
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
    assert_eq!(
        e.to_string(),
        "the AWS proxy answered commands.run with http 500; the SDK does not retry this failure"
    );
    for (code, status) in [(GrpcCode::Unknown, 500), (GrpcCode::Unimplemented, 404)] {
        let e = proxy_answer(status, RUN);
        assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
        assert_eq!(
            e.to_string(),
            format!(
                "the AWS proxy answered commands.run with http {status}; the SDK does not retry this failure"
            )
        );
        assert_eq!(e.meta().http_status(), Some(status));
        assert_eq!(e.meta().grpc_code(), Some(code));
    }
}

#[test]
fn every_other_code_is_a_bare_sandbox_error_with_the_code_kept() {
    for code in [
        GrpcCode::Ok,
        GrpcCode::Unknown,
        GrpcCode::AlreadyExists,
        GrpcCode::Aborted,
        GrpcCode::Internal,
        GrpcCode::DataLoss,
        GrpcCode::Cancelled,
    ] {
        let e = map(code, "boom");
        assert!(
            matches!(e, SandboxError::Sandbox { code: None, .. }),
            "{code:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the agent failed commands.run with {}: boom; the SDK does not retry this failure",
                code.as_str()
            )
        );
        assert_kept(&e, code, "boom");
    }
}

#[test]
fn every_code_maps_to_something() {
    for code in GrpcCode::ALL {
        for e in [agent_status(*code, "", READ), reset(*code, "", READ)] {
            assert_eq!(e.meta().grpc_code(), Some(*code));
            assert!(!e.to_string().is_empty());
        }
    }
    assert_eq!(GrpcCode::ALL.len(), 17);
    for (n, code) in GrpcCode::ALL.iter().enumerate() {
        assert_eq!(code.as_i32(), n as i32);
        assert_eq!(GrpcCode::from_i32(n as i32), *code);
        assert_eq!(GrpcCode::from_name(code.as_str()), Some(*code));
    }
    assert_eq!(GrpcCode::from_i32(99), GrpcCode::Unknown);
}
