//! The kind graph, classify(), the code lists and the size pins, through the
//! public API only.

use std::collections::BTreeSet;
use std::time::Duration;

use rayito::error::{
    BuildReason, CapacityCode, CommandExitStatus, ErrorInfo, ErrorKind, MountCode, PersistenceCode,
    PersistenceOp, SandboxCode, SandboxError, StackCode, TimeoutScope, TransferCode,
    TransferReason, VolumeMountCode,
};

/// docs/errors.md is the one written copy of the kind, classification and
/// code tables: `src/error/docs_check.rs` checks every cell of it against
/// the code, and the tests here take their expected values from it (never
/// from a second copy) to check what the public API derives from them.
const DOC: &str = include_str!("../../docs/errors.md");

/// The rows of the first table at or after `heading`, as trimmed cells.
fn table_after(heading: &str) -> Vec<Vec<String>> {
    let start = DOC
        .find(heading)
        .unwrap_or_else(|| panic!("docs/errors.md has no `{heading}`"));
    DOC[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .map(|l| {
            l.trim()
                .trim_start_matches('|')
                .trim_end_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The `code` spans of a cell, before any parenthesised remark.
fn ticked(cell: &str) -> Vec<String> {
    let before_remark = cell.split('(').next().unwrap_or_default();
    before_remark
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn yes(cell: &str) -> bool {
    match cell {
        "yes" => true,
        "no" => false,
        other => panic!("not yes or no: {other}"),
    }
}

/// (kind, parents) of the documented kind table.
fn documented_kinds() -> Vec<(String, Vec<String>)> {
    table_after("## Kinds")
        .iter()
        .map(|r| (ticked(&r[0])[0].clone(), ticked(&r[1])))
        .collect()
}

/// Every ancestor of `name` by the documented parents (itself excluded).
fn documented_ancestors(name: &str, kinds: &[(String, Vec<String>)]) -> BTreeSet<String> {
    let parents = |n: &str| {
        kinds
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| panic!("{n} is not a documented kind"))
    };
    let mut found = BTreeSet::new();
    let mut todo = parents(name);
    while let Some(next) = todo.pop() {
        if found.insert(next.clone()) {
            todo.extend(parents(&next));
        }
    }
    found
}

#[test]
fn the_kind_graph_is_the_documented_one() {
    let kinds = documented_kinds();
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    let documented: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, documented);
    for (name, _) in &kinds {
        let kind = ErrorKind::from_name(name).expect("known kind");
        let want = documented_ancestors(name, &kinds);
        // `is` / `is_a` answer for the whole ancestry, not only parents.
        let got: BTreeSet<String> = ErrorKind::ALL
            .iter()
            .filter(|a| **a != kind && kind.is_a(**a))
            .map(|a| a.as_str().to_owned())
            .collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(
            kind.outside_sandbox_root(),
            !want.contains("sandbox") && name != "sandbox",
            "{name}"
        );
        assert_eq!(kind.to_string(), *name);
    }
    assert_eq!(ErrorKind::from_name("nope"), None);
}

/// `ErrorInfo::all()` is the documented kind rows, then the documented
/// sandbox code rows, in order.
#[test]
fn classification_rows_are_the_documented_ones() {
    let kinds = table_after("## Kinds")
        .into_iter()
        .map(|r| (ticked(&r[0])[0].clone(), yes(&r[2]), yes(&r[3])));
    let codes = table_after("### Sandbox codes")
        .into_iter()
        .map(|r| (ticked(&r[0])[0].clone(), yes(&r[1]), yes(&r[2])));
    let documented: Vec<(String, bool, bool)> = kinds.chain(codes).collect();
    let rows: Vec<(String, bool, bool)> = ErrorInfo::all()
        .iter()
        .map(|i| (i.kind.to_owned(), i.retryable, i.retry_with_larger_limits))
        .collect();
    assert_eq!(rows, documented);
}

#[test]
fn classify_uses_the_code_row_for_a_bare_sandbox_error() {
    let e = SandboxError::connection_lost("commands.run", None);
    let info = e.classify();
    assert_eq!(info.kind, "connection_lost");
    assert!(info.retryable);
    assert_eq!(e.kind().as_str(), "sandbox");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&info.to_json()).unwrap(),
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
        e.classify().to_json(),
        r#"{"kind":"timeout","retryable":false,"retry_with_larger_limits":true,"summary":"a deadline passed (the scope says which)"}"#
    );
}

/// A `persistence` error is retryable only when `interrupted`; a transfer
/// only when S3 was `unavailable`; `file_upload` is a `transfer`.
#[test]
fn persistence_and_transfer_classify_by_code() {
    for token in PersistenceCode::VALUES {
        let e = SandboxError::persistence(PersistenceOp::Checkpoint, PersistenceCode::from(*token));
        assert!(e.is(ErrorKind::Persistence) && e.is_sandbox_error());
        assert_eq!(e.is_retryable(), *token == "interrupted", "{token}");
        assert_eq!(e.classify().kind, "persistence");
        assert_eq!(
            e.persistence_code().map(PersistenceCode::as_str),
            Some(*token)
        );
    }
    let e = SandboxError::file_upload(TransferCode::Unavailable, TransferReason::S3Unavailable);
    assert!(e.is(ErrorKind::Transfer) && e.is(ErrorKind::FileUpload) && e.is_retryable());
    assert!(e.to_string().starts_with("s3_unavailable: "));
    let e = SandboxError::transfer(
        TransferCode::FailedPrecondition,
        TransferReason::ChecksumMismatch,
    );
    assert!(e.is(ErrorKind::Transfer) && !e.is(ErrorKind::FileUpload) && !e.is_retryable());
    assert_eq!(e.transfer_reason(), Some(&TransferReason::ChecksumMismatch));
    assert_eq!(
        e.to_string(),
        "checksum_mismatch: the bytes of the download do not match their sha256; start the download again"
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
    let e = SandboxError::build_quota(10);
    assert!(e.is(ErrorKind::Build) && e.is_sandbox_error() && !e.is_retryable());
    assert_eq!(e.classify().kind, "build");
    let e = SandboxError::template_name("it holds a :tag");
    assert!(e.is(ErrorKind::Template) && e.is_sandbox_error() && !e.is_not_found());
    assert_eq!(e.retry_after(), None);
}

#[test]
fn code_lists_are_the_documented_ones() {
    let lists = table_after("| list | values |");
    let documented = |list: &str| -> Vec<String> {
        let row = lists
            .iter()
            .find(|r| r[0] == format!("`{list}`"))
            .unwrap_or_else(|| panic!("docs/errors.md lists no {list}"));
        ticked(&row[1])
    };
    assert_eq!(SandboxCode::VALUES, documented("SandboxCode"));
    assert_eq!(TimeoutScope::VALUES, documented("TimeoutScope"));
    assert_eq!(CapacityCode::VALUES, documented("CapacityCode"));
    assert_eq!(CommandExitStatus::VALUES, documented("CommandExitStatus"));
    assert_eq!(BuildReason::VALUES, documented("BuildReason"));
    assert_eq!(StackCode::VALUES, documented("StackCode"));
    assert_eq!(StackCode::from("in_progress"), StackCode::InProgress);
    assert_eq!(MountCode::VALUES, documented("MountCode"));
    assert_eq!(MountCode::from("not_allowed"), MountCode::NotAllowed);
    assert_eq!(VolumeMountCode::VALUES, documented("VolumeMountCode"));
    assert_eq!(VolumeMountCode::from("tls"), VolumeMountCode::Tls);
    assert_eq!(PersistenceCode::VALUES, documented("PersistenceCode"));
    assert_eq!(TransferCode::VALUES, documented("TransferCode"));
    assert_eq!(TransferReason::VALUES, documented("TransferReason"));
    assert_eq!(TransferCode::from("unknown"), TransferCode::GrpcUnknown);
    assert_eq!(
        TransferReason::from("checksum_mismatch"),
        TransferReason::ChecksumMismatch
    );
    assert_eq!(
        BuildReason::from("context_path_outside"),
        BuildReason::ContextPathOutside
    );
    assert_eq!(BuildReason::from("new_reason").as_str(), "new_reason");

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
