//! The kind graph, classify(), the code lists and the size pins, through the
//! public API only.

use std::collections::BTreeSet;
use std::time::Duration;

use rayito::error::{
    CapacityCode, CommandExitStatus, ErrorInfo, ErrorKind, SandboxCode, SandboxError, TimeoutScope,
};

/// Golden: every kind with all its ancestors (itself excluded). A change
/// here is a change of the public contract.
const GOLDEN: &[(&str, &[&str])] = &[
    ("sandbox", &[]),
    ("timeout", &["sandbox"]),
    ("invalid_argument", &["sandbox"]),
    ("not_found", &["sandbox"]),
    ("file_not_found", &["not_found", "sandbox"]),
    ("sandbox_not_found", &["not_found", "sandbox"]),
    ("sandbox_not_ready", &["sandbox"]),
    ("sandbox_state", &["sandbox"]),
    ("sandbox_lifetime", &["sandbox"]),
    ("command_exit", &["sandbox"]),
    ("disk_full", &["sandbox"]),
    ("rate_limit", &["sandbox"]),
    ("authentication", &[]),
    ("quota_exceeded", &[]),
    ("capacity", &[]),
    ("unimplemented", &[]),
    ("lifecycle_unsupported", &["unimplemented"]),
];

#[test]
fn golden_kind_graph() {
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    let golden: Vec<&str> = GOLDEN.iter().map(|(k, _)| *k).collect();
    assert_eq!(names, golden);
    for (name, ancestors) in GOLDEN {
        let kind = ErrorKind::from_name(name).expect("known kind");
        let got: BTreeSet<&str> = ErrorKind::ALL
            .iter()
            .filter(|a| **a != kind && kind.is_a(**a))
            .map(|a| a.as_str())
            .collect();
        let want: BTreeSet<&str> = ancestors.iter().copied().collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(
            kind.outside_sandbox_root(),
            !ancestors.contains(&"sandbox") && *name != "sandbox",
            "{name}"
        );
        assert_eq!(kind.to_string(), *name);
    }
    assert_eq!(
        ErrorKind::FileNotFound.parents(),
        &[ErrorKind::NotFound][..]
    );
    assert!(ErrorKind::Sandbox.parents().is_empty());
    assert_eq!(ErrorKind::from_name("nope"), None);
}

/// Golden: errors.md section 2 (kind, retryable, larger limits).
const CLASSIFY: &[(&str, bool, bool)] = &[
    ("sandbox", false, false),
    ("timeout", false, true),
    ("invalid_argument", false, false),
    ("not_found", false, false),
    ("file_not_found", false, false),
    ("sandbox_not_found", false, false),
    ("sandbox_not_ready", true, true),
    ("sandbox_state", true, false),
    ("sandbox_lifetime", false, false),
    ("command_exit", false, false),
    ("disk_full", false, true),
    ("rate_limit", true, false),
    ("authentication", false, false),
    ("quota_exceeded", false, true),
    ("capacity", true, false),
    ("unimplemented", false, false),
    ("lifecycle_unsupported", false, false),
    ("agent_vm_lost", false, false),
    ("kernel_not_ready", true, false),
    ("connection_lost", true, false),
    ("service_error", true, false),
    ("cancelled", false, false),
    ("closed", false, false),
    ("protocol_violation", false, false),
    ("output_truncated", false, true),
    ("internal", false, false),
    ("permission_denied", false, false),
    ("kernel_failed", false, false),
];

#[test]
fn golden_classification_table() {
    let rows: Vec<(&str, bool, bool)> = ErrorInfo::all()
        .iter()
        .map(|i| (i.kind, i.retryable, i.retry_with_larger_limits))
        .collect();
    assert_eq!(rows, CLASSIFY);
    let retryable: BTreeSet<&str> = ErrorInfo::all()
        .iter()
        .filter(|i| i.retryable)
        .map(|i| i.kind)
        .collect();
    assert_eq!(
        retryable,
        BTreeSet::from([
            "sandbox_not_ready",
            "sandbox_state",
            "rate_limit",
            "capacity",
            "kernel_not_ready",
            "connection_lost",
            "service_error",
        ])
    );
}

#[test]
fn classify_uses_the_code_row_for_a_bare_sandbox_error() {
    let e = SandboxError::connection_lost("commands.run", None);
    let info = e.classify();
    assert_eq!(info.kind, "connection_lost");
    assert!(info.retryable);
    assert_eq!(e.kind().as_str(), "sandbox");
    assert_eq!(
        info.to_json(),
        serde_json::json!({
            "kind": "connection_lost",
            "retryable": true,
            "retry_with_larger_limits": false,
            "summary": "the agent or the control plane stopped answering (a reset, a connection never established once its retries are spent, proxy 429/502/503/504)",
        })
    );
    let e = SandboxError::closed();
    assert_eq!(e.classify().kind, "closed");
    assert!(!e.is_retryable());
    let e = SandboxError::timeout(TimeoutScope::Request, "x", None);
    assert_eq!(
        e.classify().to_json().to_string(),
        r#"{"kind":"timeout","retry_with_larger_limits":true,"retryable":false,"summary":"a deadline passed (the scope says which)"}"#
    );
}

#[test]
fn predicates_follow_the_graph() {
    let e = SandboxError::sandbox_not_found("m-1");
    assert!(e.is(ErrorKind::SandboxNotFound));
    assert!(e.is(ErrorKind::NotFound));
    assert!(e.is(ErrorKind::Sandbox));
    assert!(e.is_not_found() && e.is_sandbox_error() && !e.is_timeout());
    let e = SandboxError::lifecycle_unsupported("pause", "no hook");
    assert!(e.is(ErrorKind::Unimplemented));
    assert!(!e.is_sandbox_error());
    let e = SandboxError::timeout(TimeoutScope::Execution, "run_code", None);
    assert!(e.is_timeout() && e.is_sandbox_error());
    assert_eq!(e.retry_after(), None);
}

#[test]
fn golden_code_lists() {
    assert_eq!(
        SandboxCode::VALUES,
        &[
            "agent_vm_lost",
            "kernel_not_ready",
            "connection_lost",
            "service_error",
            "cancelled",
            "closed",
            "protocol_violation",
            "output_truncated",
            "internal",
            "permission_denied",
            "kernel_failed",
        ]
    );
    assert_eq!(
        TimeoutScope::VALUES,
        &["request", "command", "execution", "sandbox", "state_wait"]
    );
    assert_eq!(CapacityCode::VALUES, &["agent_capacity"]);
    assert_eq!(CommandExitStatus::VALUES, &["exited", "signaled"]);

    assert_eq!(SandboxCode::from("closed"), SandboxCode::Closed);
    assert_eq!(TimeoutScope::from("state_wait"), TimeoutScope::StateWait);
    assert_eq!(
        CapacityCode::from("agent_capacity"),
        CapacityCode::AgentCapacity
    );
    assert_eq!(
        CommandExitStatus::from("signaled"),
        CommandExitStatus::Signaled
    );
    let unknown = SandboxCode::from("vm_frozen");
    assert!(matches!(&unknown, SandboxCode::Unknown(v) if v.as_str() == "vm_frozen"));
    assert_eq!(unknown.as_str(), "vm_frozen");
    assert_eq!(unknown.to_string(), "vm_frozen");
    assert!(!unknown.is_known());
    assert_eq!(
        "readiness".parse::<TimeoutScope>().unwrap().as_str(),
        "readiness"
    );
    assert_eq!(
        serde_json::to_string(&CommandExitStatus::Exited).unwrap(),
        "\"exited\""
    );
    let back: CapacityCode = serde_json::from_str("\"brand_new\"").unwrap();
    assert_eq!(back.as_str(), "brand_new");
}

#[test]
fn size_send_sync_are_pinned() {
    fn assert_traits<T: Send + Sync + 'static + std::error::Error>() {}
    assert_traits::<SandboxError>();
    assert!(
        std::mem::size_of::<SandboxError>() <= 64,
        "SandboxError grew to {} bytes",
        std::mem::size_of::<SandboxError>()
    );
}

#[test]
fn retry_after_is_exposed() {
    let mut f = rayito::test_util::AwsError::new("RunMicrovm");
    f = f.code("ThrottlingException".to_owned());
    f = f.retry_after(Duration::from_millis(1_500));
    let e = f.build();
    assert_eq!(e.retry_after(), Some(Duration::from_millis(1_500)));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm was throttled; retry after 1,500 ms"
    );
}

#[test]
fn source_is_a_sanitized_summary() {
    use std::error::Error as _;
    let mut f = rayito::test_util::AwsError::new("RunMicrovm");
    f = f.code("ThrottlingException".to_owned());
    f = f.http_status(429);
    f = f.request_id("req-123".to_owned());
    f = f.message("Signature=0123456789abcdef0123456789abcdef".to_owned());
    let e = f.build().with_attempts(5);
    let source = e.source().expect("every error has its summary as source");
    assert_eq!(
        source.to_string(),
        "aws code ThrottlingException, http 429, request id req-123, 5 attempts"
    );
    assert!(source.source().is_none());

    let e = rayito::test_util::stream_error(
        "resource_exhausted",
        "disk_full",
        rayito::test_util::Call::new("files.write"),
    );
    assert_eq!(
        e.source().map(ToString::to_string).as_deref(),
        Some("agent reason resource_exhausted, 1 attempt")
    );
    let e = rayito::test_util::agent_status(
        rayito::error::GrpcCode::Unavailable,
        "suspending",
        rayito::test_util::Call::new("commands.run"),
    );
    assert_eq!(
        e.source().map(ToString::to_string).as_deref(),
        Some("grpc UNAVAILABLE, 1 attempt")
    );
    assert_eq!(
        SandboxError::closed()
            .source()
            .map(ToString::to_string)
            .as_deref(),
        Some("no server answer, 0 attempts")
    );

    // A failure of the transport keeps its redacted text as the cause,
    // one link further: what anyhow/eyre print as the last "Caused by".
    let e = rayito::test_util::transport_failure(
        rayito::test_util::TransportFailure::NotEstablished,
        "tcp connect error: Connection refused, x-access-token: abc123",
        rayito::test_util::Call::new("health"),
    );
    let summary = e.source().expect("summary");
    let cause = summary.source().expect("cause");
    assert_eq!(
        cause.to_string(),
        "tcp connect error: Connection refused, x-access-token: [redacted]"
    );
    assert!(cause.source().is_none());
}
