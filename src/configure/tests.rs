//! The Configure contract: table tests pinning each mapping (variant and
//! message), and seam tests through an in-memory agent (a tonic server on
//! a `tokio::io::duplex`) for the gate, each section code and PENDING
//! polling. The real agent's answer is tested in `tests/configure_local.rs`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use hyper_util::rt::TokioIo;
use rayito_agent::pb as agent_pb;
use rayito_agent::pb::configure_service_server::{ConfigureService, ConfigureServiceServer};
use rayito_agent::pb::health_service_server::HealthServiceServer;
use tonic::{Request, Response, Status};

use super::*;
use crate::error::{ErrorKind, RetryPolicy, SandboxError, TimeoutScope};
use crate::seam_tests::FakeHealth;
use crate::secret::Secret;
use crate::transport::InjectedAgent;

const ALL_NAMES: [&str; 5] = [
    "s3_mounts",
    "efs_volumes",
    "lifecycle_events",
    "telemetry_export",
    "secret_gateway",
];

fn all_on() -> pb::AgentFeatures {
    pb::AgentFeatures {
        configure: true,
        s3_mounts: true,
        efs_volumes: true,
        lifecycle_events: true,
        telemetry_export: true,
        secret_gateway: true,
        ..Default::default()
    }
}

/// A request setting exactly `section`.
fn request_for(section: Section) -> pb::ConfigureRequest {
    let mut r = pb::ConfigureRequest::default();
    match section {
        Section::S3Mounts => r.s3_mounts = Some(Default::default()),
        Section::EfsVolumes => r.efs_volumes = Some(Default::default()),
        Section::LifecycleEvents => r.lifecycle_events = Some(Default::default()),
        Section::TelemetryExport => r.telemetry_export = Some(Default::default()),
        Section::SecretGateway => r.secret_gateway = Some(Default::default()),
    }
    r
}

fn result(section: Section, code: pb::SectionCode, class: &str) -> pb::SectionResult {
    pb::SectionResult {
        section: section.wire() as i32,
        code: code as i32,
        error_class: class.to_owned(),
    }
}

fn answer(results: Vec<pb::SectionResult>) -> pb::ConfigureResponse {
    pb::ConfigureResponse {
        results,
        config_generation: 1,
    }
}

fn unimplemented_parts(err: &SandboxError) -> (&str, &str, Option<&str>) {
    match err {
        SandboxError::Unimplemented {
            feature,
            reason,
            doc,
            ..
        } => (feature, reason, doc.as_deref()),
        other => panic!("not Unimplemented: {other:?}"),
    }
}

#[test]
fn section_names_and_wire_values() {
    let names: Vec<&str> = Section::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(names, ALL_NAMES);
    let wire: Vec<i32> = Section::ALL.iter().map(|s| s.wire() as i32).collect();
    assert_eq!(wire, [1, 2, 3, 4, 5]);
    for s in Section::ALL {
        assert_eq!(asked(&request_for(s)), [s]);
    }
}

#[test]
fn gate_without_features_is_unimplemented_needing_configure_sandbox() {
    let err = gate(None, &[Section::TelemetryExport]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unimplemented);
    assert_eq!(
        unimplemented_parts(&err),
        (
            "telemetry_export",
            "the agent in this image reports no optional features (needs ConfigureSandbox); publish an image with a newer agent",
            Some("docs/configure.md"),
        )
    );
    assert_eq!(
        err.to_string(),
        "feature telemetry_export is not available: the agent in this image reports no optional features (needs ConfigureSandbox); publish an image with a newer agent; see docs/configure.md"
    );
    // Nothing asked: nothing to refuse.
    assert!(gate(None, &[]).is_ok());
}

#[test]
fn gate_with_a_section_flag_false_names_that_section() {
    for off in Section::ALL {
        let mut features = all_on();
        match off {
            Section::S3Mounts => features.s3_mounts = false,
            Section::EfsVolumes => features.efs_volumes = false,
            Section::LifecycleEvents => features.lifecycle_events = false,
            Section::TelemetryExport => features.telemetry_export = false,
            Section::SecretGateway => features.secret_gateway = false,
        }
        let err = gate(Some(&features), &Section::ALL).unwrap_err();
        let (feature, reason, doc) = unimplemented_parts(&err);
        assert_eq!(feature, off.name());
        assert_eq!(
            reason,
            "the agent in this sandbox does not offer this section (its feature flag in Health is false); use an image whose agent supports it"
        );
        assert_eq!(doc, Some("docs/configure.md"));
        // The other sections alone pass.
        let others: Vec<Section> = Section::ALL.into_iter().filter(|s| *s != off).collect();
        assert!(gate(Some(&features), &others).is_ok());
    }
    // `configure` itself is not what the gate reads (the section flags are).
    let mut features = all_on();
    features.configure = false;
    assert!(gate(Some(&features), &Section::ALL).is_ok());
    assert!(gate(Some(&pb::AgentFeatures::default()), &[Section::S3Mounts]).is_err());
}

#[test]
fn each_section_code_maps_to_its_variant_and_message() {
    for s in Section::ALL {
        let asked = [s];
        let map = |code, class: &str| map_results(&asked, &answer(vec![result(s, code, class)]));
        assert_eq!(map(pb::SectionCode::Applied, "").unwrap(), []);
        assert_eq!(map(pb::SectionCode::Pending, "").unwrap(), [s]);

        let err = map(pb::SectionCode::Unsupported, "").unwrap_err();
        let (feature, reason, doc) = unimplemented_parts(&err);
        assert_eq!(
            (feature, reason, doc),
            (
                s.name(),
                "the agent in this sandbox answered that it does not support this section (UNSUPPORTED); use an image whose agent supports it",
                Some("docs/configure.md"),
            )
        );

        let err = map(pb::SectionCode::Invalid, "BadMountPath").unwrap_err();
        assert!(
            matches!(err, SandboxError::Sandbox { code: None, .. }),
            "{err:?}"
        );
        assert_eq!(err.kind(), ErrorKind::Sandbox);
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            format!(
                "{}: BadMountPath; the agent refused the section's settings and applied nothing of it, fix them and apply the section again",
                s.name()
            )
        );

        let err = map(pb::SectionCode::Failed, "S3AccessDenied").unwrap_err();
        assert!(
            matches!(err, SandboxError::Sandbox { code: None, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{}: S3AccessDenied; the agent could not apply the section, apply it again or check the sandbox",
                s.name()
            )
        );
    }
}

#[test]
fn error_class_is_kept_only_when_class_like() {
    use crate::error::map::configure::error_class;
    assert_eq!(error_class(""), "unspecified");
    assert_eq!(error_class("mount.timeout:EFS-1"), "mount.timeout:EFS-1");
    assert_eq!(error_class(&"A".repeat(64)), "A".repeat(64));
    for hostile in [
        "A".repeat(65),
        "no such bucket s3://secret-bucket/key".to_owned(),
        "token=abc\nsecond line".to_owned(),
        "ünïcode".to_owned(),
    ] {
        assert_eq!(
            error_class(&hostile),
            "unrecognized_error_class",
            "{hostile}"
        );
    }
    let err = SandboxError::configure_failed("s3_mounts", "reached s3://b/k with token xyz");
    assert!(!err.to_string().contains("s3://"), "{err}");
    assert!(
        err.to_string()
            .starts_with("s3_mounts: unrecognized_error_class; ")
    );
}

#[test]
fn results_that_break_the_protocol_are_refused() {
    let asked = [Section::S3Mounts];
    let cases = [
        ("missing", answer(vec![])),
        (
            "not asked",
            answer(vec![
                result(Section::S3Mounts, pb::SectionCode::Applied, ""),
                result(Section::EfsVolumes, pb::SectionCode::Applied, ""),
            ]),
        ),
        (
            "twice",
            answer(vec![
                result(Section::S3Mounts, pb::SectionCode::Applied, ""),
                result(Section::S3Mounts, pb::SectionCode::Applied, ""),
            ]),
        ),
        (
            "unspecified code",
            answer(vec![result(
                Section::S3Mounts,
                pb::SectionCode::Unspecified,
                "",
            )]),
        ),
        (
            "unknown code",
            answer(vec![pb::SectionResult {
                section: 1,
                code: 99,
                error_class: String::new(),
            }]),
        ),
        (
            "unknown section",
            answer(vec![pb::SectionResult {
                section: 42,
                code: 1,
                error_class: String::new(),
            }]),
        ),
    ];
    for (what, response) in cases {
        let err = map_results(&asked, &response).unwrap_err();
        assert_eq!(
            err.sandbox_code(),
            Some(&crate::error::SandboxCode::ProtocolViolation),
            "{what}: {err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("the agent broke the protocol during configure: "),
            "{what}: {err}"
        );
    }
}

#[test]
fn the_first_refusal_in_field_order_wins() {
    let asked = [Section::S3Mounts, Section::TelemetryExport];
    let response = answer(vec![
        result(
            Section::TelemetryExport,
            pb::SectionCode::Invalid,
            "BadInterval",
        ),
        result(Section::S3Mounts, pb::SectionCode::Unsupported, ""),
    ]);
    let err = map_results(&asked, &response).unwrap_err();
    assert_eq!(unimplemented_parts(&err).0, "s3_mounts");
}

#[test]
fn progress_of_each_section_in_a_status() {
    let empty = pb::ConfigureStatusResponse::default();
    for s in Section::ALL {
        assert_eq!(s.progress(&empty), Progress::Pending, "{s:?}");
    }
    let mounts = |phases: &[pb::S3MountPhase]| pb::ConfigureStatusResponse {
        s3_mounts: Some(pb::S3MountsStatus {
            mounts: phases
                .iter()
                .map(|p| pb::S3MountState {
                    mount_path: "/mnt".into(),
                    phase: *p as i32,
                    error_class: "S3AccessDenied".into(),
                })
                .collect(),
        }),
        ..Default::default()
    };
    use pb::S3MountPhase as P;
    assert_eq!(
        Section::S3Mounts.progress(&mounts(&[P::Mounted, P::Mounted])),
        Progress::Done
    );
    assert_eq!(
        Section::S3Mounts.progress(&mounts(&[P::Mounted, P::Pending])),
        Progress::Pending
    );
    assert_eq!(
        Section::S3Mounts.progress(&mounts(&[P::Pending, P::Failed])),
        Progress::Failed("S3AccessDenied".into())
    );
    let efs = |state: pb::EfsVolumeState| pb::ConfigureStatusResponse {
        efs_volumes: Some(pb::EfsVolumesStatus {
            volumes: vec![pb::EfsVolumeStatus {
                mount_path: "/efs".into(),
                state: state as i32,
                last_error_class: "NfsTimeout".into(),
            }],
        }),
        ..Default::default()
    };
    use pb::EfsVolumeState as E;
    for (state, want) in [
        (E::Requested, Progress::Pending),
        (E::Mounting, Progress::Pending),
        (E::Remounting, Progress::Pending),
        (E::Mounted, Progress::Done),
        (E::Degraded, Progress::Done),
        (E::Unmounted, Progress::Done),
        (E::Failed, Progress::Failed("NfsTimeout".into())),
    ] {
        assert_eq!(Section::EfsVolumes.progress(&efs(state)), want, "{state:?}");
    }
    let routes = |state: pb::SecretGatewayRouteState| pb::ConfigureStatusResponse {
        secret_gateway: Some(pb::SecretGatewayStatus {
            routes: vec![pb::SecretGatewayRouteStatus {
                name: "r".into(),
                port: 1,
                state: state as i32,
                last_error_class: "BindFailed".into(),
            }],
        }),
        ..Default::default()
    };
    use pb::SecretGatewayRouteState as R;
    assert_eq!(
        Section::SecretGateway.progress(&routes(R::Unspecified)),
        Progress::Pending
    );
    assert_eq!(
        Section::SecretGateway.progress(&routes(R::Listening)),
        Progress::Done
    );
    assert_eq!(
        Section::SecretGateway.progress(&routes(R::Failed)),
        Progress::Failed("BindFailed".into())
    );
    let counters = pb::ConfigureStatusResponse {
        lifecycle_events: Some(Default::default()),
        telemetry_export: Some(pb::TelemetryExportStatus {
            last_error_class: "ExportThrottled".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(Section::LifecycleEvents.progress(&counters), Progress::Done);
    assert_eq!(Section::TelemetryExport.progress(&counters), Progress::Done);
}

// ---- seam tests: an in-memory agent ----

/// Health answering ready with the given features.
fn health(features: Option<agent_pb::AgentFeatures>) -> FakeHealth {
    FakeHealth {
        answer: Ok(agent_pb::HealthResponse {
            agent_ready: true,
            features,
            ..Default::default()
        }),
    }
}

/// ConfigureService answering every section asked with `code`; its status
/// shows `pending_polls` unsettled answers, then `settled`.
#[derive(Clone)]
struct Configure {
    code: pb::SectionCode,
    class: &'static str,
    pending_polls: u32,
    settled: agent_pb::ConfigureStatusResponse,
    calls: Arc<AtomicU32>,
    polls: Arc<AtomicU32>,
    request_ids: Arc<Mutex<Vec<String>>>,
}

impl Configure {
    fn answering(code: pb::SectionCode, class: &'static str) -> Self {
        Self {
            code,
            class,
            pending_polls: 0,
            settled: agent_pb::ConfigureStatusResponse::default(),
            calls: Arc::default(),
            polls: Arc::default(),
            request_ids: Arc::default(),
        }
    }
}

#[tonic::async_trait]
impl ConfigureService for Configure {
    async fn configure(
        &self,
        request: Request<agent_pb::ConfigureRequest>,
    ) -> Result<Response<agent_pb::ConfigureResponse>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let request = request.into_inner();
        self.request_ids
            .lock()
            .unwrap()
            .push(request.request_id.clone());
        let results = asked(&request)
            .into_iter()
            .map(|s| result(s, self.code, self.class))
            .collect();
        Ok(Response::new(answer(results)))
    }

    async fn configure_status(
        &self,
        _request: Request<agent_pb::ConfigureStatusRequest>,
    ) -> Result<Response<agent_pb::ConfigureStatusResponse>, Status> {
        let poll = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        if poll <= self.pending_polls {
            return Ok(Response::new(Default::default()));
        }
        Ok(Response::new(self.settled.clone()))
    }
}

fn conn_to(health: FakeHealth, configure: Configure) -> AgentConn {
    let connector = tower::service_fn(move |_uri| {
        let health = health.clone();
        let configure = configure.clone();
        async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let router = tonic::transport::Server::builder()
                .add_service(HealthServiceServer::new(health))
                .add_service(ConfigureServiceServer::new(configure));
            tokio::spawn(
                router.serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server))),
            );
            Ok::<_, std::io::Error>(TokioIo::new(client))
        }
    });
    AgentConn::injected(
        &InjectedAgent::with_connector(connector),
        Secret::new("p"),
        Secret::new("a"),
        Arc::new(|| async { Ok(Secret::new("p")) }.boxed()),
        RetryPolicy::default(),
    )
}

fn fast() -> ApplyOptions {
    ApplyOptions {
        pending_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

#[tokio::test]
async fn applied_sections_succeed_with_one_call_and_a_fresh_request_id() {
    let configure = Configure::answering(pb::SectionCode::Applied, "");
    let conn = conn_to(health(Some(all_on())), configure.clone());
    for s in Section::ALL {
        apply(&conn, request_for(s), fast()).await.unwrap();
    }
    assert_eq!(configure.calls.load(Ordering::SeqCst), 5);
    assert_eq!(configure.polls.load(Ordering::SeqCst), 0);
    let ids = configure.request_ids.lock().unwrap().clone();
    for id in &ids {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}

#[tokio::test]
async fn the_gate_refuses_before_calling_configure() {
    let configure = Configure::answering(pb::SectionCode::Applied, "");
    let conn = conn_to(health(None), configure.clone());
    let err = apply(&conn, request_for(Section::SecretGateway), fast())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "feature secret_gateway is not available: the agent in this image reports no optional features (needs ConfigureSandbox); publish an image with a newer agent; see docs/configure.md"
    );

    let conn = conn_to(health(Some(Default::default())), configure.clone());
    let err = apply(&conn, request_for(Section::S3Mounts), fast())
        .await
        .unwrap_err();
    assert_eq!(unimplemented_parts(&err).0, "s3_mounts");
    assert_eq!(configure.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn each_refusing_code_comes_back_from_a_real_call() {
    for (code, class, want) in [
        (
            pb::SectionCode::Unsupported,
            "",
            "feature efs_volumes is not available: the agent in this sandbox answered that it does not support this section (UNSUPPORTED); use an image whose agent supports it; see docs/configure.md",
        ),
        (
            pb::SectionCode::Invalid,
            "BadMountPath",
            "efs_volumes: BadMountPath; the agent refused the section's settings and applied nothing of it, fix them and apply the section again",
        ),
        (
            pb::SectionCode::Failed,
            "NfsTimeout",
            "efs_volumes: NfsTimeout; the agent could not apply the section, apply it again or check the sandbox",
        ),
    ] {
        let configure = Configure::answering(code, class);
        let conn = conn_to(health(Some(all_on())), configure.clone());
        let err = apply(&conn, request_for(Section::EfsVolumes), fast())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), want);
        let kind = if code == pb::SectionCode::Unsupported {
            ErrorKind::Unimplemented
        } else {
            ErrorKind::Sandbox
        };
        assert_eq!(err.kind(), kind);
        assert_eq!(configure.calls.load(Ordering::SeqCst), 1);
        assert_eq!(configure.polls.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn pending_polls_status_every_quarter_second_until_settled() {
    let mut configure = Configure::answering(pb::SectionCode::Pending, "");
    configure.pending_polls = 2;
    configure.settled = agent_pb::ConfigureStatusResponse {
        telemetry_export: Some(Default::default()),
        ..Default::default()
    };
    let conn = conn_to(health(Some(all_on())), configure.clone());
    let began = std::time::Instant::now();
    apply(&conn, request_for(Section::TelemetryExport), fast())
        .await
        .unwrap();
    let took = began.elapsed();
    assert_eq!(configure.polls.load(Ordering::SeqCst), 3);
    // Three waits of 0.25 s before the three polls.
    assert!(took >= Duration::from_millis(750), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[tokio::test]
async fn pending_then_failed_in_status_is_the_failed_error() {
    let mut configure = Configure::answering(pb::SectionCode::Pending, "");
    configure.pending_polls = 1;
    configure.settled = agent_pb::ConfigureStatusResponse {
        s3_mounts: Some(agent_pb::S3MountsStatus {
            mounts: vec![agent_pb::S3MountState {
                mount_path: "/mnt/data".into(),
                phase: agent_pb::S3MountPhase::Failed as i32,
                error_class: "S3AccessDenied".into(),
            }],
        }),
        ..Default::default()
    };
    let conn = conn_to(health(Some(all_on())), configure.clone());
    let err = apply(&conn, request_for(Section::S3Mounts), fast())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "s3_mounts: S3AccessDenied; the agent could not apply the section, apply it again or check the sandbox"
    );
    assert_eq!(configure.polls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn pending_that_never_settles_times_out_within_its_bound() {
    let mut configure = Configure::answering(pb::SectionCode::Pending, "");
    configure.pending_polls = u32::MAX;
    let conn = conn_to(health(Some(all_on())), configure.clone());
    let options = ApplyOptions {
        pending_timeout: Duration::from_millis(600),
        ..Default::default()
    };
    let began = std::time::Instant::now();
    let err = apply(&conn, request_for(Section::SecretGateway), options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::StateWait,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox did not finish configuring secret_gateway within 600 ms; check its state, then retry"
    );
    let polls = configure.polls.load(Ordering::SeqCst);
    assert!((2..=4).contains(&polls), "{polls}");
    assert!(began.elapsed() < Duration::from_secs(3));
}

// ---- the real agent, on the local backend ----

/// Our agent serves every section on the local backend (the secret
/// gateway, S3 mounts, EFS volumes, lifecycle events, telemetry export:
/// each has its own tests). An agent without a section (here the
/// emulator's switches for S3 mounts and EFS volumes, as agents built
/// before them): Configure answers it UNSUPPORTED (mapped to
/// `Unimplemented` naming it), ConfigureStatus shows nothing applied, and
/// Health's flag for it is false, so `apply` refuses locally before
/// calling Configure.
#[cfg(feature = "local")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_a_section_answers_it_unsupported() {
    use rayito_emulator::{Emulator, EmulatorConfig};
    let emulator = Emulator::start(EmulatorConfig {
        agent_s3_mounts: false,
        agent_efs_volumes: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("an emulator");
    let sandbox = crate::Sandbox::builder()
        .aws(
            crate::AwsOptions::new()
                .endpoint_url(emulator.endpoint_url())
                .region("us-east-1")
                .static_credentials(
                    emulator.access_key().id.clone(),
                    emulator.access_key().secret.clone(),
                ),
        )
        .template(emulator.image_arn("rayito-base"))
        .create()
        .await
        .expect("a sandbox");
    let conn = sandbox.conn();
    for s in [Section::S3Mounts, Section::EfsVolumes] {
        let response = conn
            .configure(request_for(s), Duration::from_secs(30))
            .await
            .expect("Configure answers");
        assert_eq!(
            response.results,
            [result(s, pb::SectionCode::Unsupported, "")],
            "{s:?}"
        );
        let err = map_results(&[s], &response).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "feature {} is not available: the agent in this sandbox answered that it does not support this section (UNSUPPORTED); use an image whose agent supports it; see docs/configure.md",
                s.name()
            )
        );

        let err = apply(conn, request_for(s), ApplyOptions::default())
            .await
            .unwrap_err();
        let (feature, reason, _) = unimplemented_parts(&err);
        assert_eq!(feature, s.name());
        assert!(
            reason.contains("feature flag in Health is false"),
            "{reason}"
        );
    }
    let status = conn
        .configure_status(Duration::from_secs(30))
        .await
        .expect("ConfigureStatus answers");
    assert_eq!(status, pb::ConfigureStatusResponse::default());
    sandbox.kill().await.expect("kill");
}
