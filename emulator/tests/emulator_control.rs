//! The control plane through the real `aws-sdk-lambdamicrovms` client: every
//! operation, every error row (code, exact message, HTTP status as decoded by
//! the SDK), timestamps, idempotency, pagination and the control-plane faults.

use crate::emulator_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_lambdamicrovms::types::{
    IdlePolicy, Logging, LoggingDisabled, MicrovmState, PortRange, PortSpecification,
};
use emulator_support::*;
use rayito_emulator::{EmulatorConfig, Operation};

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test]
async fn lifecycle_run_get_list_suspend_resume_terminate() {
    let h = Harness::start().await;
    let before = now_secs();
    let out = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .run_hook_payload(payload(serde_json::json!({})))
        .maximum_duration_in_seconds(600)
        .logging(Logging::Disabled(LoggingDisabled::builder().build()))
        .send()
        .await
        .expect("RunMicrovm");
    assert_eq!(*out.state(), MicrovmState::Pending);
    assert!(out.microvm_id().starts_with("microvm-"));
    assert!(
        out.endpoint().starts_with("127.0.0.1:"),
        "{}",
        out.endpoint()
    );
    assert_eq!(out.image_arn(), h.image());
    assert_eq!(out.image_version(), "1.0");
    assert_eq!(out.maximum_duration_in_seconds(), 600);
    let started = out.started_at().as_secs_f64();
    assert!(
        started >= before - 1.0 && started <= now_secs() + 1.0,
        "startedAt {started}"
    );
    let id = out.microvm_id().to_string();

    let got = wait_state(&h.client, &id, MicrovmState::Running).await;
    assert_eq!(got.endpoint(), out.endpoint());
    assert!(got.terminated_at().is_none());

    let list = h.client.list_microvms().send().await.expect("ListMicrovms");
    assert_eq!(list.items().len(), 1);
    assert_eq!(list.items()[0].microvm_id(), id);
    assert_eq!(*list.items()[0].state(), MicrovmState::Running);
    assert_eq!(list.items()[0].started_at().as_secs_f64(), started);
    assert!(list.next_token().is_none());

    h.client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("SuspendMicrovm");
    wait_state(&h.client, &id, MicrovmState::Suspended).await;
    // As measured on AWS: suspending a suspended MicroVM answers 200.
    h.client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("second SuspendMicrovm");
    h.client
        .resume_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("ResumeMicrovm");
    wait_state(&h.client, &id, MicrovmState::Running).await;
    // Resuming a running MicroVM answers 200 too.
    h.client
        .resume_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("second ResumeMicrovm");

    h.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("TerminateMicrovm");
    let end = wait_state(&h.client, &id, MicrovmState::Terminated).await;
    assert_eq!(end.state_reason(), Some("Success."));
    let t = end.terminated_at().expect("terminatedAt").as_secs_f64();
    assert!(t >= started && t <= now_secs() + 1.0);
    // Idempotent: 200 on a terminated MicroVM.
    h.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("second TerminateMicrovm");
    let list = h.client.list_microvms().send().await.expect("ListMicrovms");
    assert_eq!(*list.items()[0].state(), MicrovmState::Terminated);

    // Each call above is counted once (the AWS client retried none).
    for (op, sent) in [
        (Operation::RunMicrovm, 1),
        (Operation::SuspendMicrovm, 2),
        (Operation::ResumeMicrovm, 2),
        (Operation::TerminateMicrovm, 2),
        (Operation::ListMicrovms, 2),
    ] {
        assert_eq!(h.emulator.calls(op), sent, "{op:?}");
    }
}

#[tokio::test]
async fn run_microvm_validation_errors() {
    let h = Harness::start().await;
    let run = || h.client.run_microvm().image_identifier(h.image());

    let e = h
        .client
        .run_microvm()
        .image_identifier("rayito-base")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "Invalid ARN format".into()
        )
    );

    let unknown = h.emulator.image_arn("no-such-image");
    let e = h
        .client
        .run_microvm()
        .image_identifier(&unknown)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            404,
            "ResourceNotFoundException".into(),
            format!("MicroVM image not found: {unknown}")
        )
    );
    assert!(e.into_service_error().is_resource_not_found_exception());

    let other_account = "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base";
    let e = h
        .client
        .run_microvm()
        .image_identifier(other_account)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ResourceNotFoundException");

    let e = run()
        .run_hook_payload("x".repeat(4097))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "1 validation error detected: Value at 'runHookPayload' failed to satisfy constraint: Member must have length less than or equal to 4096".into()
        )
    );
    // The payload is never echoed.
    assert!(!format!("{e:?}").contains("xxxxxxxx"));

    for (secs, rule) in [
        (0, "Member must have value greater than or equal to 1"),
        (28_801, "Member must have value less than or equal to 28800"),
    ] {
        let e = run()
            .maximum_duration_in_seconds(secs)
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            err_parts(&e),
            (
                400,
                "ValidationException".into(),
                format!(
                    "1 validation error detected: Value at 'maximumDurationInSeconds' failed to satisfy constraint: {rule}"
                )
            )
        );
    }

    let policy = IdlePolicy::builder()
        .max_idle_duration_seconds(59)
        .suspended_duration_seconds(-1)
        .auto_resume_enabled(true)
        .build()
        .unwrap();
    let e = run().idle_policy(policy).send().await.unwrap_err();
    assert_eq!(
        err_parts(&e).2,
        "2 validation errors detected: Value at 'idlePolicy.maxIdleDurationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60; Value at 'idlePolicy.suspendedDurationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 0"
    );

    let e = run()
        .set_ingress_network_connectors(Some(vec!["arn:x".to_string(); 11]))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e).2,
        "1 validation error detected: Value at 'ingressNetworkConnectors' failed to satisfy constraint: Member must have length less than or equal to 10"
    );

    // A 4,096-character payload is fine (the limit is inclusive) — checked
    // without starting a MicroVM: the capacity fault answers after validation.
    h.emulator.faults().insufficient_capacity(1);
    let e = run()
        .run_hook_payload("é".repeat(4096))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "InsufficientCapacityException");
}

#[tokio::test]
async fn unknown_microvm_is_resource_not_found_everywhere() {
    let h = Harness::start().await;
    let id = "microvm-00000000-0000-4000-8000-000000000000";
    let expected = (
        404,
        "ResourceNotFoundException".to_string(),
        format!("MicroVM not found: {id}"),
    );
    let e = h
        .client
        .get_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e), expected);
    let e = h
        .client
        .terminate_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e), expected);
    let e = h
        .client
        .suspend_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e), expected);
    let e = h
        .client
        .resume_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e), expected);
    let e = h
        .client
        .create_microvm_auth_token()
        .microvm_identifier(id)
        .expiration_in_minutes(5)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e), expected);
    let long = "m".repeat(257);
    let e = h
        .client
        .get_microvm()
        .microvm_identifier(&long)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "1 validation error detected: Value at 'microvmIdentifier' failed to satisfy constraint: Member must have length less than or equal to 256".into()
        )
    );
}

#[tokio::test]
async fn auth_token_validation_and_shape() {
    let h = Harness::start().await;
    let (id, _) = h.run_ready().await;
    let mint = || h.client.create_microvm_auth_token().microvm_identifier(&id);

    let e = mint()
        .expiration_in_minutes(61)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "ExpirationMinutes 61 exceeded max allowed of 60.".into()
        )
    );
    let e = mint()
        .expiration_in_minutes(0)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e).2,
        "1 validation error detected: Value at 'expirationInMinutes' failed to satisfy constraint: Member must have value greater than or equal to 1"
    );
    let e = mint()
        .expiration_in_minutes(5)
        .set_allowed_ports(Some(vec![]))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "1 validation error detected: Value at 'allowedPorts' failed to satisfy constraint: Member must have length greater than or equal to 1".into()
        )
    );
    let bad_range = PortSpecification::Range(
        PortRange::builder()
            .start_port(9)
            .end_port(3)
            .build()
            .unwrap(),
    );
    let e = mint()
        .expiration_in_minutes(5)
        .allowed_ports(bad_range)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e).2,
        "1 validation error detected: Value at 'allowedPorts.1' failed to satisfy constraint: Member must be a port (1-65535), a range with startPort <= endPort, or allPorts"
    );

    let out = mint()
        .expiration_in_minutes(60)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await
        .expect("mint");
    assert_eq!(out.auth_token().len(), 1);
    let token = out
        .auth_token()
        .get("X-aws-proxy-auth")
        .expect("X-aws-proxy-auth key");
    assert_eq!(token.len(), 43);
    let again = h.mint(&id, &[8080]).await;
    assert_ne!(&again, token, "every token is fresh");

    h.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &id, MicrovmState::Terminated).await;
    let e = mint()
        .expiration_in_minutes(5)
        .allowed_ports(PortSpecification::Port(8080))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            format!("Cannot create an auth token for MicroVM {id} in state TERMINATED.")
        )
    );
    let e = h
        .client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            format!("Cannot suspend MicroVM {id} in state TERMINATED.")
        )
    );
    let e = h
        .client
        .resume_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            format!("Cannot resume MicroVM {id} in state TERMINATED.")
        )
    );
}

#[tokio::test]
async fn client_token_makes_run_idempotent() {
    let h = Harness::start().await;
    let run = |payload_text: &str| {
        h.client
            .run_microvm()
            .image_identifier(h.image())
            .client_token("same-token-1")
            .run_hook_payload(payload_text)
            .maximum_duration_in_seconds(600)
    };
    let p = payload(serde_json::json!({}));
    let first = run(&p).send().await.expect("first");
    let second = run(&p).send().await.expect("replay");
    assert_eq!(first.microvm_id(), second.microvm_id());
    let list = h.client.list_microvms().send().await.unwrap();
    assert_eq!(list.items().len(), 1);
    let e = run("{}").send().await.unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            "The clientToken was already used with different parameters.".into()
        )
    );
    assert_eq!(
        h.emulator.run_client_tokens(),
        vec![Some("same-token-1".to_string()); 3]
    );
}

#[tokio::test]
async fn list_paginates_and_validates() {
    let h = Harness::start().await;
    let a = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .send()
        .await
        .unwrap();
    let b = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .send()
        .await
        .unwrap();
    let p1 = h
        .client
        .list_microvms()
        .max_results(1)
        .send()
        .await
        .unwrap();
    assert_eq!(p1.items().len(), 1);
    assert_eq!(p1.items()[0].microvm_id(), a.microvm_id());
    let token = p1.next_token().expect("nextToken").to_string();
    let p2 = h
        .client
        .list_microvms()
        .max_results(1)
        .next_token(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(p2.items()[0].microvm_id(), b.microvm_id());
    assert!(p2.next_token().is_none());
    let filtered = h
        .client
        .list_microvms()
        .image_identifier("no-such-image")
        .send()
        .await
        .unwrap();
    assert!(filtered.items().is_empty());

    let e = h
        .client
        .list_microvms()
        .max_results(51)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "1 validation error detected: Value at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 50".into()
        )
    );
    let e = h
        .client
        .list_microvms()
        .next_token("garbage")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "Invalid pagination token.".into()
        )
    );
}

#[tokio::test]
async fn capacity_quota_and_throttling_faults() {
    let h = Harness::start().await;
    h.emulator.faults().insufficient_capacity(2);
    for _ in 0..2 {
        let e = h
            .client
            .run_microvm()
            .image_identifier(h.image())
            .client_token("retry-1")
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            err_parts(&e),
            (
                500,
                "InsufficientCapacityException".into(),
                "Insufficient capacity to run the MicroVM. Retry later.".into()
            )
        );
        assert!(e.into_service_error().is_insufficient_capacity_exception());
    }
    let ok = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .client_token("retry-1")
        .send()
        .await
        .expect("third attempt");
    assert_eq!(
        h.emulator.run_client_tokens(),
        vec![Some("retry-1".to_string()); 3]
    );
    assert_eq!(
        h.client.list_microvms().send().await.unwrap().items().len(),
        1
    );

    h.emulator.faults().quota_exceeded(1);
    let e = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            402,
            "ServiceQuotaExceededException".into(),
            "Concurrent MicroVMs quota exceeded.".into()
        )
    );
    match e.into_service_error() {
        aws_sdk_lambdamicrovms::operation::run_microvm::RunMicrovmError::ServiceQuotaExceededException(q) => {
            assert_eq!(q.quota_code(), Some("L-MICROVMS"));
        }
        other => panic!("not a quota error: {other:?}"),
    }

    h.emulator.faults().throttle(Operation::GetMicrovm, 1, 7);
    let e = h
        .client
        .get_microvm()
        .microvm_identifier(ok.microvm_id())
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (429, "ThrottlingException".into(), "Rate exceeded".into())
    );
    assert_eq!(err_header(&e, "retry-after").as_deref(), Some("7"));
    match e.into_service_error() {
        aws_sdk_lambdamicrovms::operation::get_microvm::GetMicrovmError::ThrottlingException(t) => {
            assert_eq!(t.retry_after_seconds(), Some(7));
        }
        other => panic!("not throttling: {other:?}"),
    }
    // Only the next call was throttled, and only that operation.
    h.client
        .get_microvm()
        .microvm_identifier(ok.microvm_id())
        .send()
        .await
        .expect("not throttled");
    h.emulator.faults().throttle(Operation::ListMicrovms, 1, 1);
    h.client
        .get_microvm()
        .microvm_identifier(ok.microvm_id())
        .send()
        .await
        .expect("other op not throttled");
    let e = h.client.list_microvms().send().await.unwrap_err();
    assert_eq!(err_parts(&e).1, "ThrottlingException");
}

#[tokio::test]
async fn maximum_duration_is_enforced() {
    let h = Harness::start().await;
    let out = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .run_hook_payload(payload(serde_json::json!({})))
        .maximum_duration_in_seconds(1)
        .send()
        .await
        .unwrap();
    let end = wait_state(&h.client, out.microvm_id(), MicrovmState::Terminated).await;
    assert_eq!(
        end.state_reason(),
        Some("MicroVM reached its maximum duration.")
    );
    let lived = end.terminated_at().unwrap().as_secs_f64() - end.started_at().as_secs_f64();
    assert!((0.9..8.0).contains(&lived), "lived {lived} s");
}

#[tokio::test]
async fn microvm_roots_are_created_and_removed() {
    let root = std::env::temp_dir().join(format!("rayito-emulator-test-{}", std::process::id()));
    let h = Harness::start_with(EmulatorConfig {
        root: root.clone(),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, _) = h.run_ready().await;
    assert!(
        root.join(&id).is_dir(),
        "each MicroVM has its own root directory"
    );
    h.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &id, MicrovmState::Terminated).await;
    assert!(
        !root.join(&id).exists(),
        "a terminated MicroVM's root is removed"
    );
    drop(h);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while root.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !root.exists(),
        "the emulator removes its empty root on drop"
    );
}

#[tokio::test]
async fn suspended_duration_of_the_idle_policy_is_enforced() {
    let h = Harness::start().await;
    let policy = |suspended: i32| {
        IdlePolicy::builder()
            .max_idle_duration_seconds(300)
            .suspended_duration_seconds(suspended)
            .auto_resume_enabled(false)
            .build()
            .unwrap()
    };
    // 0 = terminate on suspend.
    let (id, _) = h.run_ready_with(|r| r.idle_policy(policy(0))).await;
    h.client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    let end = wait_state(&h.client, &id, MicrovmState::Terminated).await;
    assert_eq!(
        end.state_reason(),
        Some("MicroVM stayed suspended for its suspendedDurationSeconds.")
    );
    // A resume before the limit disarms it.
    let (id, _) = h.run_ready_with(|r| r.idle_policy(policy(3))).await;
    h.client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &id, MicrovmState::Suspended).await;
    h.client
        .resume_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let got = h
        .client
        .get_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    assert_eq!(*got.state(), MicrovmState::Running);
}

/// Whether sandbox processes run under their own uid here (the agent is
/// root); prints a skip otherwise.
fn switches_uids(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("SKIPPED: {test}: needs root (sandboxes get their own uid)");
    }
    root
}

/// `--root $(mktemp -d)`: a 0700 directory of root's. The emulator opens it
/// to 0711 (traversed, not listed), so that the sandbox's uid reaches its
/// home and file writes work as commands do; before, every write failed
/// with `permission denied`, blamed on the caller's path.
#[tokio::test]
async fn a_root_made_by_mktemp_serves_file_writes() {
    use std::os::unix::fs::PermissionsExt as _;
    if !switches_uids("a_root_made_by_mktemp_serves_file_writes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // What `mktemp -d` makes.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let h = Harness::start_with(EmulatorConfig {
        root: dir.path().to_path_buf(),
        ..EmulatorConfig::default()
    })
    .await;
    assert_eq!(
        std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o7777,
        0o711
    );
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let written = files(&ch, ProxyHeaders::sdk(&token))
        .write(tokio_stream::iter(vec![rayito_agent::pb::WriteRequest {
            path: Some("/home/user/written".to_owned()),
            chunk: b"hello".to_vec().into(),
            ..Default::default()
        }]))
        .await
        .expect("a file write as the sandbox's user")
        .into_inner();
    assert_eq!(written.entries[0].path, "/home/user/written");
    assert_eq!(
        std::fs::read(dir.path().join(&id).join("home/user/written")).unwrap(),
        b"hello"
    );
}

/// A root below a directory sandbox uids cannot traverse (and which is not
/// the emulator's to open) is refused at start, naming that directory.
#[tokio::test]
async fn a_root_below_a_closed_directory_is_refused_at_start() {
    if !switches_uids("a_root_below_a_closed_directory_is_refused_at_start") {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let root = closed.path().join("emulator");
    let err = rayito_emulator::Emulator::start(EmulatorConfig {
        root: root.clone(),
        ..EmulatorConfig::default()
    })
    .await
    .expect_err("a root sandboxes cannot reach");
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        err.to_string(),
        format!(
            "sandbox processes and file calls run as an unprivileged uid, which cannot \
             traverse {} (mode 0700) on the way to {}; let every user traverse it (chmod \
             o+x) or choose a root below directories every user may traverse, such as /tmp",
            closed.path().display(),
            root.display()
        )
    );
}
