//! Every message template is reachable, and every message the mappers and
//! constructors produce comes from a template: the corpus below walks the
//! mapping tables' inputs, and each message must match a template (with
//! placeholders as wildcards) while each template must match some message.

use std::time::Duration;

use super::SandboxError;
use super::codes::{GrpcCode, TimeoutScope};
use super::map::agent::{CommandOutput, EndEventData, from_end_event, from_stream_error};
use super::map::aws::{AwsFailure, NoResponse, from_aws, no_credentials};
use super::map::grpc::{CallContext, GrpcFailure, Origin, from_grpc, from_proxy_status};
use super::messages::{ALL, Template};

/// Whether `message` can be `template` with some values for its placeholders.
fn matches(template: &Template, message: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template.text;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        rest = &rest[close..];
    }
    literals.push(rest);
    let (first, last) = (literals[0], literals[literals.len() - 1]);
    if literals.len() == 1 {
        return message == first;
    }
    if !message.starts_with(first) || !message.ends_with(last) {
        return false;
    }
    if message.len() < first.len() + last.len() {
        return false;
    }
    let mut middle = &message[first.len()..message.len() - last.len()];
    for lit in &literals[1..literals.len() - 1] {
        match middle.find(lit) {
            Some(at) => middle = &middle[at + lit.len()..],
            None => return false,
        }
    }
    true
}

fn corpus() -> Vec<SandboxError> {
    let mut out = Vec::new();
    let codes = [
        "ResourceNotFoundException",
        "ValidationException",
        "AccessDeniedException",
        "ThrottlingException",
        "ConflictException",
        "ServiceQuotaExceededException",
        "InsufficientCapacityException",
        "InternalServerException",
        "SomethingElse",
    ];
    for op in ["RunMicrovm", "GetMicrovm"] {
        for code in codes {
            for status in [400, 503] {
                for retry in [None, Some(Duration::from_secs(1))] {
                    let mut f = AwsFailure::new(op);
                    f.code = Some(code.into());
                    f.http_status = Some(status);
                    f.retry_after = retry;
                    out.push(from_aws(f));
                }
            }
        }
        for nr in [NoResponse::Timeout, NoResponse::Connect, NoResponse::Other] {
            let mut f = AwsFailure::new(op);
            f.no_response = Some(nr);
            out.push(from_aws(f));
        }
    }
    out.push(no_credentials("x"));
    out.push(super::map::aws::profile_not_found("dev"));

    let texts = [
        "",
        "x",
        "suspending",
        "terminating",
        "kernel not ready: starting",
        "sandbox_timeout",
        "disk_reserve",
        "disk_full",
        "RST_STREAM",
        "grpc-status header missing, mapped from HTTP status code 502",
        "grpc-status header missing, mapped from HTTP status code 429",
        "grpc-status header missing, mapped from HTTP status code 500",
    ];
    let calls = [
        CallContext::new("commands.run"),
        CallContext::filesystem("files.read"),
        CallContext::new("commands.run").cancelled_by_caller(),
        CallContext::new("connect"),
    ];
    for code in GrpcCode::ALL {
        for text in texts {
            for origin in [Origin::Agent, Origin::Reset, Origin::NotEstablished] {
                for call in calls {
                    out.push(from_grpc(GrpcFailure::new(*code, text, origin, call)));
                }
            }
        }
    }
    for status in [403, 429, 502, 500] {
        out.push(from_proxy_status(status, calls[0]));
        out.push(from_grpc(GrpcFailure::http_without_grpc_status(
            status, calls[0],
        )));
    }
    let stream_codes = [
        "not_found",
        "permission_denied",
        "deadline_exceeded",
        "sandbox_timeout",
        "invalid_argument",
        "unimplemented",
        "resource_exhausted",
        "suspending",
        "output_truncated",
        "cancelled",
        "other",
    ];
    for code in stream_codes {
        for text in texts {
            for call in calls {
                out.push(from_stream_error(code, text, call));
            }
        }
    }
    for status in [
        "exited",
        "signaled",
        "timeout",
        "sandbox_timeout",
        "output_truncated",
        "suspending",
        "odd",
    ] {
        for (exit_code, signal) in [(0, None), (1, None), (152, Some(24))] {
            for error in [
                None,
                Some(("deadline_exceeded".to_owned(), String::new())),
                Some(("resource_exhausted".to_owned(), String::new())),
            ] {
                let end = EndEventData {
                    status: status.into(),
                    exit_code,
                    signal,
                    error,
                };
                if let Err(e) = from_end_event(end, CommandOutput::default(), "ls") {
                    out.push(e);
                }
            }
        }
    }
    let d = Some(Duration::from_secs(1));
    out.extend([
        SandboxError::invalid_argument("timeout", "x"),
        SandboxError::closed(),
        SandboxError::cancelled("f"),
        SandboxError::protocol_violation("f", "x"),
        SandboxError::internal("f", "x"),
        SandboxError::connection_lost("f", None),
        SandboxError::agent_vm_lost("f"),
        SandboxError::not_ready(None, None, Duration::from_secs(1)),
        SandboxError::sandbox_lifetime("timeout", Duration::from_secs(2), Duration::from_secs(1)),
        SandboxError::sandbox_not_found("m"),
        SandboxError::lifetime_reached("m"),
        SandboxError::reconnect_gave_up("f", Duration::from_secs(60), 9),
        SandboxError::sandbox_state("suspended", "call resume()"),
        SandboxError::timeout(TimeoutScope::Request, "f", d),
        SandboxError::timeout(TimeoutScope::Command, "f", d),
        SandboxError::timeout(TimeoutScope::Execution, "f", d),
        SandboxError::timeout(TimeoutScope::Sandbox, "f", d),
        SandboxError::timeout(TimeoutScope::StateWait, "f", d),
        SandboxError::unimplemented("f", "r", None),
        SandboxError::lifecycle_unsupported("f", "r"),
        SandboxError::lifecycle_unmanaged(),
        SandboxError::kernel_failed("python3 was not found on the sandbox's PATH"),
        SandboxError::closed().kill_failed("m"),
        SandboxError::closed().kept_on_failure("m"),
        from_grpc(GrpcFailure::agent(GrpcCode::NotFound, "x", calls[0])).reattach_failed(),
        from_grpc(GrpcFailure::agent(GrpcCode::OutOfRange, "x", calls[0])).reattach_failed(),
        SandboxError::build_step_failed(3, Some("RUN exit 3"), Some(3), "exit code: 3"),
        SandboxError::build_step_failed(2, None, None, ""),
        SandboxError::build_failed(None, ""),
        SandboxError::build_quota(10),
        SandboxError::build_rejected("ValidationException"),
        SandboxError::base_image_no_version(),
        SandboxError::template_not_found(),
        SandboxError::no_logs("vm-1", "/rayito/py"),
        SandboxError::pool_not_started(),
        SandboxError::pool_closed(),
        SandboxError::secret_deletion_pending(Duration::from_secs(60)),
        SandboxError::secret_not_string(Some("API_KEY")),
        SandboxError::secret_not_found("DescribeSecret", None),
        SandboxError::git_auth("clone", false),
        SandboxError::git_auth("push", true),
        SandboxError::git_auth_rewrite("pull"),
        SandboxError::git_auth_transport("push"),
        SandboxError::git_auth_moved("pull"),
        SandboxError::git_upstream("push"),
        SandboxError::configure_invalid("s3_mounts", "BadMountPath"),
        SandboxError::configure_failed("efs_volumes", ""),
        SandboxError::configure_unimplemented(
            "telemetry_export",
            super::map::configure::NotAvailable::NoFeatures,
        ),
        SandboxError::configure_unimplemented(
            "secret_gateway",
            super::map::configure::NotAvailable::SectionOff,
        ),
        SandboxError::configure_unimplemented(
            "lifecycle_events",
            super::map::configure::NotAvailable::Unsupported,
        ),
        SandboxError::sandbox_index("BatchGetItem", Some("ResourceNotFoundException")),
        SandboxError::sandbox_index("PutItem", None),
        SandboxError::index_unprocessed("BatchGetItem", 6),
        SandboxError::index_write("vm-1", Some("AccessDeniedException"), false),
        SandboxError::index_write("vm-1", None, true),
        SandboxError::index_write_with(
            "vm-1",
            Some("InternalServerError"),
            super::map::index::WriteOutcome::TerminateFailed,
        ),
        SandboxError::build_ready_failed(true),
        SandboxError::build_ready_failed(false),
        SandboxError::build_timeout(Duration::from_secs(1_800)),
        SandboxError::base_image_missing_entrypoint(),
        SandboxError::base_image_not_s3(),
        SandboxError::base_image_missing_artifact(),
        SandboxError::context_path_outside(1),
        SandboxError::context_path_missing(2),
        SandboxError::template_name("it holds a :tag"),
        SandboxError::template_too_old(),
        SandboxError::stack_failed("rayito-m0-iam", "BuildRole", "CREATE_FAILED"),
        SandboxError::stack_refused("rayito-m0-iam", "CreateStack", "AlreadyExistsException"),
        SandboxError::stack_blocked("rayito-m0-iam", "ROLLBACK_COMPLETE"),
        SandboxError::stack_in_progress("rayito-m0-iam", "UPDATE_IN_PROGRESS"),
        SandboxError::stack_not_found("rayito-m0-iam"),
        SandboxError::stack_output_missing("rayito-m0-iam", "BuildRoleArn"),
        super::map::grpc::proxy_rejected_without_remint(GrpcFailure::http_without_grpc_status(
            403, calls[0],
        )),
    ]);
    out.extend(persistence_and_transfers());
    out.extend(secrets());
    out
}

/// The Secrets Manager table's inputs.
fn secrets() -> Vec<SandboxError> {
    use super::map::aws::AwsFailure;
    use super::map::secrets::from_secrets_manager;
    let mut out = Vec::new();
    for op in ["CreateSecret", "PutSecretValue", "GetSecretValue"] {
        for code in [
            "ResourceNotFoundException",
            "AccessDeniedException",
            "ResourceExistsException",
            "LimitExceededException",
            "InvalidRequestException",
        ] {
            for variable in [None, Some("API_KEY")] {
                let mut f = AwsFailure::new(op);
                f.code = Some(code.to_owned());
                f.http_status = Some(400);
                out.push(from_secrets_manager(f, variable));
            }
        }
    }
    out
}

/// The persistence (B4) and transfer (C4) tables' inputs.
fn persistence_and_transfers() -> Vec<SandboxError> {
    use super::codes::{PersistenceOp, TransferDirection};
    use super::map::persistence as p;
    use super::map::transfer::from_transfer_error;
    let mut out = Vec::new();
    for op in [PersistenceOp::Checkpoint, PersistenceOp::Restore] {
        let call = CallContext::new(op.feature());
        for code in GrpcCode::ALL {
            for msg in ["", "suspending", "sandbox_timeout"] {
                let f = GrpcFailure::new(*code, msg, Origin::Agent, call);
                out.push(p::before_first_message(op, &f, None));
                out.push(p::mid_stream(op, &f, None));
            }
        }
        let f = GrpcFailure::new(GrpcCode::DeadlineExceeded, "", Origin::Deadline, call);
        out.push(p::before_first_message(
            op,
            &f,
            Some(Duration::from_secs(600)),
        ));
        out.push(p::before_first_message(
            op,
            &GrpcFailure::http_without_grpc_status(403, call),
            None,
        ));
        for code in [
            "not_found",
            "invalid_argument",
            "deadline_exceeded",
            "sandbox_timeout",
            "suspending",
            "unimplemented",
            "permission_denied",
            "failed_precondition",
            "resource_exhausted",
            "internal",
            "interrupted",
            "",
            "newer_code",
        ] {
            out.push(p::stream_error(op, code));
        }
        out.push(p::ended_without_done(op));
        out.push(p::not_started(op));
    }
    for direction in [TransferDirection::Import, TransferDirection::Export] {
        for code in [
            "deadline_exceeded",
            "invalid_argument",
            "not_found",
            "resource_exhausted",
            "permission_denied",
            "failed_precondition",
            "unavailable",
            "cancelled",
            "internal",
            "unknown",
            "",
        ] {
            for reason in [
                "",
                "expired: x",
                "too_large: x",
                "file_shrank: x",
                "checksum_mismatch: x",
                "s3_denied: x",
                "s3_unavailable: x",
                "disk_reserve: x",
                "disk_full: x",
                "cancelled",
                "newer_reason: x",
                "/a/path: x",
            ] {
                out.push(from_transfer_error(direction, code, reason));
            }
        }
    }
    out
}

#[test]
fn every_message_comes_from_a_template_and_every_template_is_used() {
    let messages: Vec<String> = corpus().iter().map(ToString::to_string).collect();
    for m in &messages {
        assert!(
            ALL.iter().any(|t| matches(t, m)),
            "no template produces {m:?}"
        );
        assert!(!m.contains('{'), "unfilled placeholder in {m:?}");
    }
    // The unimplemented reason is a fragment used inside sdk.unimplemented.
    let fragments = [
        "grpc.unimplemented_reason",
        "sdk.lifecycle_unmanaged_reason",
        "configure.no_features_reason",
        "configure.section_off_reason",
        "configure.unsupported_reason",
    ];
    // The network, gateway, mount path, mount and volume texts are reasons
    // and fragments too (rendered and pinned in src/sandbox/network/,
    // tests/sdk/network.rs, src/gateway/tests.rs, src/mount_path.rs,
    // src/mounts/ and src/volumes/tests.rs).
    // The events texts are pinned in src/events/tests.rs.
    // Telemetry's are pinned in src/telemetry/tests.rs and
    // tests/sdk/telemetry.rs.
    let pinned_elsewhere = [
        "network.",
        "gateway.",
        "mount_path.",
        "mount.",
        "volume.",
        "events.",
        "telemetry.",
        // The agent's are pinned in src/agent/tests.rs.
        "agent.",
        // The fleet's in src/fleet/plan.rs and tests/sdk/fleet.rs.
        "fleet.",
    ];
    for t in ALL.iter().filter(|t| {
        !fragments.contains(&t.id) && !pinned_elsewhere.iter().any(|p| t.id.starts_with(p))
    }) {
        assert!(
            messages.iter().any(|m| matches(t, m)),
            "template {} is never produced",
            t.id
        );
    }
}

/// `from_wire` cleans what it reads like a mapper: the SDK's own errors are
/// already clean, so each comes back unchanged.
#[test]
fn every_error_the_sdk_makes_survives_the_wire_unchanged() {
    for e in corpus() {
        let back = SandboxError::from_wire(&e.to_wire()).expect("own wire form parses");
        // The redacted cause travels too.
        assert_eq!(back, e, "{e:?}");
    }
}

#[test]
fn the_matcher_is_strict() {
    let t = Template {
        id: "t",
        text: "a {x} b{y}; c",
    };
    assert!(matches(&t, "a 1 b; c"));
    assert!(matches(&t, "a 1 b: 2; c"));
    assert!(!matches(&t, "a 1 c; c"));
    assert!(!matches(&t, "a 1 b; d"));
}
