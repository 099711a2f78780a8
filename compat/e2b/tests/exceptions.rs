//! The class table of docs/e2b-compat.md, row by row: each SDK error is an
//! instance of exactly the E2B classes a Python user would have caught.

use std::time::Duration;

use rayito::error::{GrpcCode, TransferCode, TransferReason};
use rayito::test_util::{AwsError, Call, CommandOutput, EndEvent, agent_status, end_event};
use rayito_e2b::exceptions::{E2bClass, class_of, class_of_kind, is_instance};
use rayito_e2b::{Missing, SandboxError};

/// One error of each kind, built as the SDK builds it.
fn samples() -> Vec<(&'static str, SandboxError)> {
    let file = Call::filesystem("files.read");
    let cmd = Call::new("commands.run");
    vec![
        ("sandbox", agent_status(GrpcCode::Internal, "boom", cmd)),
        (
            "timeout",
            agent_status(GrpcCode::DeadlineExceeded, "deadline", cmd),
        ),
        (
            "invalid_argument",
            SandboxError::invalid_argument("timeout", "pass a smaller timeout"),
        ),
        (
            "not_found",
            agent_status(GrpcCode::NotFound, "no such process", cmd),
        ),
        (
            "file_not_found",
            agent_status(GrpcCode::NotFound, "no such file", file),
        ),
        (
            "sandbox_not_found",
            SandboxError::sandbox_not_found("microvm-1"),
        ),
        (
            "disk_full",
            agent_status(GrpcCode::ResourceExhausted, "disk_full", file),
        ),
        (
            "rate_limit",
            agent_status(GrpcCode::ResourceExhausted, "busy", cmd),
        ),
        (
            "command_exit",
            end_event(
                EndEvent::new("exited", 2),
                CommandOutput::new("", "oops", false),
                "commands.run",
            )
            .expect_err("a non-zero exit is an error"),
        ),
        (
            "authentication",
            agent_status(GrpcCode::Unauthenticated, "bad token", cmd),
        ),
        (
            "capacity",
            AwsError::new("RunMicrovm")
                .code("InsufficientCapacityException")
                .http_status(429)
                .message("no capacity")
                .build(),
        ),
        (
            "quota_exceeded",
            AwsError::new("RunMicrovm")
                .code("ServiceQuotaExceededException")
                .http_status(402)
                .message("quota")
                .build(),
        ),
        (
            "sandbox_state",
            SandboxError::sandbox_state("SUSPENDING", "wait for it"),
        ),
        (
            "sandbox_not_ready",
            SandboxError::not_ready(None, None, Duration::from_secs(30)),
        ),
        ("build", SandboxError::build_failed(None, "")),
        ("template", SandboxError::template_too_old()),
        (
            "file_upload",
            SandboxError::file_upload(TransferCode::from("failed"), TransferReason::from("x")),
        ),
        ("secret", SandboxError::secret_not_string(None)),
        (
            "secret_not_found",
            SandboxError::secret_not_found("secrets.get", None),
        ),
        ("git_auth", SandboxError::git_auth("push", false)),
        ("git_upstream", SandboxError::git_upstream("push")),
        ("unimplemented", Missing::Fork.error()),
        (
            "lifecycle_unsupported",
            SandboxError::lifecycle_unsupported("pause", "this image cannot"),
        ),
    ]
}

/// The expected classes of each kind: the kind's own class and its ancestors.
fn expected(kind: &str) -> Vec<E2bClass> {
    use E2bClass::*;
    match kind {
        "sandbox" => vec![SandboxException],
        "timeout" => vec![SandboxException, TimeoutException],
        "invalid_argument" => vec![SandboxException, InvalidArgumentException],
        "not_found" => vec![SandboxException, NotFoundException],
        "file_not_found" => vec![SandboxException, NotFoundException, FileNotFoundException],
        "sandbox_not_found" => {
            vec![
                SandboxException,
                NotFoundException,
                SandboxNotFoundException,
            ]
        }
        "disk_full" => vec![SandboxException, NotEnoughSpaceException],
        "rate_limit" => vec![SandboxException, RateLimitException],
        "command_exit" => vec![SandboxException, CommandExitException],
        "authentication" => vec![AuthenticationException],
        "capacity" => vec![ServiceBusyException],
        "quota_exceeded" => vec![QuotaExceededException],
        "sandbox_state" => vec![
            SandboxException,
            TimeoutException,
            SandboxNotRunningException,
        ],
        "sandbox_not_ready" => vec![
            SandboxException,
            TimeoutException,
            SandboxUnreachableException,
        ],
        "build" => vec![SandboxException, BuildException],
        "template" => vec![SandboxException, TemplateException],
        "file_upload" => vec![SandboxException, BuildException, FileUploadException],
        "secret" => vec![SandboxException, SecretException],
        "secret_not_found" => vec![
            SandboxException,
            NotFoundException,
            SecretException,
            SecretNotFoundException,
        ],
        "git_auth" => vec![AuthenticationException, GitAuthException],
        "git_upstream" => vec![SandboxException, GitUpstreamException],
        "unimplemented" | "lifecycle_unsupported" => vec![UnimplementedError],
        other => panic!("no row for {other}"),
    }
}

#[test]
fn every_row_of_the_class_table() {
    for (kind, err) in samples() {
        assert_eq!(
            err.kind().as_str(),
            kind,
            "sample for {kind} has kind {}",
            err.kind().as_str()
        );
        let caught: Vec<E2bClass> = E2bClass::ALL
            .iter()
            .copied()
            .filter(|class| is_instance(&err, *class))
            .collect();
        assert_eq!(caught, expected(kind), "classes of {kind}");
    }
}

#[test]
fn class_of_names_the_most_specific_class() {
    let names: Vec<(&str, &str)> = samples()
        .iter()
        .map(|(kind, err)| (*kind, class_of(err).name()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("sandbox", "SandboxException"),
            ("timeout", "TimeoutException"),
            ("invalid_argument", "InvalidArgumentException"),
            ("not_found", "NotFoundException"),
            ("file_not_found", "FileNotFoundException"),
            ("sandbox_not_found", "SandboxNotFoundException"),
            ("disk_full", "NotEnoughSpaceException"),
            ("rate_limit", "RateLimitException"),
            ("command_exit", "CommandExitException"),
            ("authentication", "AuthenticationException"),
            ("capacity", "ServiceBusyException"),
            ("quota_exceeded", "QuotaExceededException"),
            ("sandbox_state", "SandboxNotRunningException"),
            ("sandbox_not_ready", "SandboxUnreachableException"),
            ("build", "BuildException"),
            ("template", "TemplateException"),
            ("file_upload", "FileUploadException"),
            ("secret", "SecretException"),
            ("secret_not_found", "SecretNotFoundException"),
            ("git_auth", "GitAuthException"),
            ("git_upstream", "GitUpstreamException"),
            ("unimplemented", "UnimplementedError"),
            ("lifecycle_unsupported", "UnimplementedError"),
        ]
    );
}

#[test]
fn a_missing_feature_is_never_a_sandbox_exception() {
    for missing in Missing::ALL {
        let err = missing.error();
        assert!(
            !is_instance(&err, E2bClass::SandboxException),
            "{missing:?}"
        );
        assert!(
            is_instance(&err, E2bClass::UnimplementedError),
            "{missing:?}"
        );
        assert!(!err.classify().retryable);
    }
}

#[test]
fn a_timeout_sample_is_not_retryable_but_larger_limits_may_help() {
    let err = SandboxError::timeout(
        rayito::error::TimeoutScope::Command,
        "commands.run",
        Some(Duration::from_secs(60)),
    );
    assert!(is_instance(&err, E2bClass::TimeoutException));
    assert!(err.classify().retry_with_larger_limits);
}

/// The last column of docs/errors.md's kind table is `class_of` (with
/// rayito's own classes marked), so the doc cannot name a class E2B lacks
/// as if it were E2B's.
#[test]
fn the_errors_doc_names_the_class_of_each_kind() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md"))
        .expect("docs/errors.md");
    let header =
        "| kind | parents | retryable | larger limits | variant | raised for | E2B class |";
    let table: Vec<Vec<String>> = doc
        .split(header)
        .nth(1)
        .expect("the kind table")
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(|c| c.trim().to_owned()).collect())
        .collect();
    assert_eq!(
        table.len(),
        rayito::ErrorKind::ALL.len(),
        "one row per kind"
    );
    for (row, kind) in table.iter().zip(rayito::ErrorKind::ALL) {
        assert_eq!(row[1], format!("`{}`", kind.as_str()));
        let class = class_of_kind(*kind);
        let expected = if class.is_e2b() {
            class.name().to_owned()
        } else {
            format!("{} (rayito's)", class.name())
        };
        assert_eq!(row[7], expected, "the class of {}", kind.as_str());
    }
}
