//! The emulator's MicroVM image API through the real
//! `aws-sdk-lambdamicrovms` client: every route, each validation row (code,
//! exact message, HTTP status), Conflict, NotFound, pagination, version
//! states through a build (today's build body answers FAILED), the build
//! quota, and RunMicrovm's choice of version.

use crate::emulator_support;

use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms as lmv;
use emulator_support::*;
use lmv::operation::create_microvm_image::builders::CreateMicrovmImageFluentBuilder;
use lmv::types::{
    Architecture, BuildState, Capability, CloudWatchLogging, CodeArtifact, CpuConfiguration,
    HookState, Hooks, Logging, MicrovmHooks, MicrovmImageHooks, MicrovmImageState,
    MicrovmImageVersionState, MicrovmImageVersionStatus, MicrovmState, Resources,
};

/// Why a build of the seeded base artifact itself fails: its Dockerfile
/// copies a `rayd` the seeded zip does not hold (templates compose over
/// it, and its own lines stand for the host there).
const FAILED_REASON: &str = "Image build failed: the Dockerfile step [1/1] did not complete successfully; see the build log";

fn role(h: &Harness) -> String {
    format!(
        "arn:aws:iam::{}:role/rayito-m0-build-us-east-1",
        h.emulator.account_id()
    )
}

/// The seeded base image's code artifact URI.
async fn base_uri(h: &Harness) -> String {
    let v = h
        .client
        .get_microvm_image_version()
        .image_identifier("rayito-base")
        .image_version("1")
        .send()
        .await
        .expect("GetMicrovmImageVersion");
    match v.code_artifact() {
        Some(CodeArtifact::Uri(u)) => u.clone(),
        other => panic!("codeArtifact {other:?}"),
    }
}

/// A Create call as `rayito image publish` makes one.
fn create(h: &Harness, name: &str, uri: &str) -> CreateMicrovmImageFluentBuilder {
    h.client
        .create_microvm_image()
        .name(name)
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .base_image_version("1")
        .build_role_arn(role(h))
        .code_artifact(CodeArtifact::Uri(uri.to_string()))
        .resources(
            Resources::builder()
                .minimum_memory_in_mib(2048)
                .build()
                .unwrap(),
        )
        .cpu_configurations(
            CpuConfiguration::builder()
                .architecture(Architecture::Arm64)
                .build()
                .unwrap(),
        )
        .hooks(
            Hooks::builder()
                .port(9000)
                .microvm_image_hooks(
                    MicrovmImageHooks::builder()
                        .ready(HookState::Enabled)
                        .ready_timeout_in_seconds(600)
                        .validate(HookState::Enabled)
                        .validate_timeout_in_seconds(600)
                        .build(),
                )
                .microvm_hooks(
                    MicrovmHooks::builder()
                        .run(HookState::Enabled)
                        .run_timeout_in_seconds(30)
                        .resume(HookState::Enabled)
                        .resume_timeout_in_seconds(30)
                        .suspend(HookState::Enabled)
                        .suspend_timeout_in_seconds(30)
                        .terminate(HookState::Enabled)
                        .terminate_timeout_in_seconds(10)
                        .build(),
                )
                .build(),
        )
        .logging(Logging::CloudWatch(
            CloudWatchLogging::builder()
                .log_group(format!("/rayito/{name}"))
                .build(),
        ))
        .description("rayito template build")
}

/// Polls GetMicrovmImageVersion until `state` (10 s at most).
async fn wait_version(
    h: &Harness,
    name: &str,
    version: &str,
    state: MicrovmImageVersionState,
) -> lmv::operation::get_microvm_image_version::GetMicrovmImageVersionOutput {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = h
            .client
            .get_microvm_image_version()
            .image_identifier(name)
            .image_version(version)
            .send()
            .await
            .expect("GetMicrovmImageVersion");
        if *v.state() == state {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{name} v{version} stayed {:?}",
            v.state()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn image_state(h: &Harness, name: &str) -> MicrovmImageState {
    h.client
        .get_microvm_image()
        .image_identifier(name)
        .send()
        .await
        .expect("GetMicrovmImage")
        .state()
        .clone()
}

#[tokio::test]
async fn the_caps_images_are_seeded_beside_the_base_with_all_os_capabilities() {
    let h = Harness::start().await;
    let version = |name: &'static str| {
        h.client
            .get_microvm_image_version()
            .image_identifier(name)
            .image_version("1")
            .send()
    };
    let base = version("rayito-base").await.expect("rayito-base");
    assert!(base.additional_os_capabilities().is_empty());
    let uri = |v: &lmv::operation::get_microvm_image_version::GetMicrovmImageVersionOutput| match v
        .code_artifact()
    {
        Some(CodeArtifact::Uri(u)) => u.clone(),
        other => panic!("codeArtifact {other:?}"),
    };
    let mut efs_uri = None;
    for name in ["rayito-base-caps", "rayito-base-caps-efs"] {
        let v = version(name).await.expect(name);
        assert_eq!(*v.state(), MicrovmImageVersionState::Successful, "{name}");
        assert_eq!(*v.status(), MicrovmImageVersionStatus::Active, "{name}");
        assert_eq!(
            v.additional_os_capabilities(),
            [lmv::types::Capability::All],
            "{name}"
        );
        if name == "rayito-base-caps" {
            // The caps image is the full artifact.
            assert_eq!(uri(&v), uri(&base));
        } else {
            efs_uri = Some(uri(&v));
        }
    }
    // The caps-efs artifact is its own (it carries the efs marker).
    assert_ne!(efs_uri.unwrap(), uri(&base));
}

#[tokio::test]
async fn the_base_image_is_seeded_with_its_artifact_build_and_managed_base() {
    let h = Harness::start().await;
    let bucket = h.emulator.artifact_bucket();
    assert_eq!(bucket, "rayito-artifacts-000000000000-us-east-1");

    let image = h
        .client
        .get_microvm_image()
        .image_identifier(h.image())
        .send()
        .await
        .expect("GetMicrovmImage by ARN");
    assert_eq!(image.name(), "rayito-base");
    assert_eq!(image.image_arn(), h.image());
    assert_eq!(*image.state(), MicrovmImageState::Created);
    assert_eq!(image.latest_active_image_version(), Some("1"));
    assert_eq!(image.latest_failed_image_version(), None);

    let v = h
        .client
        .get_microvm_image_version()
        .image_identifier("rayito-base")
        .image_version("1")
        .send()
        .await
        .expect("GetMicrovmImageVersion");
    assert_eq!(*v.state(), MicrovmImageVersionState::Successful);
    assert_eq!(*v.status(), MicrovmImageVersionStatus::Active);
    assert_eq!(
        v.base_image_arn(),
        "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1"
    );
    assert_eq!(v.base_image_version(), Some("1.0"));
    assert_eq!(
        v.build_role_arn(),
        "arn:aws:iam::000000000000:role/rayito-m0-build-us-east-1"
    );
    let uri = base_uri(&h).await;
    let key = uri
        .strip_prefix(&format!("s3://{bucket}/rayito/images/rayd-"))
        .expect("artifact in the bucket");
    assert!(
        key.len() == 16
            && key.ends_with(".zip")
            && key[..12].bytes().all(|b| b.is_ascii_hexdigit()),
        "{uri}"
    );
    match v.logging() {
        Some(Logging::CloudWatch(cw)) => assert_eq!(cw.log_group(), Some("/rayito/rayito-base")),
        other => panic!("logging {other:?}"),
    }
    let hooks = v.hooks().expect("hooks");
    assert_eq!(hooks.port(), Some(9000));
    let image_hooks = hooks.microvm_image_hooks().expect("image hooks");
    assert_eq!(image_hooks.ready_timeout_in_seconds(), 600);
    assert_eq!(
        hooks
            .microvm_hooks()
            .expect("runtime hooks")
            .terminate_timeout_in_seconds(),
        10
    );
    assert_eq!(v.resources()[0].minimum_memory_in_mib(), 2048);

    let builds = h
        .client
        .list_microvm_image_builds()
        .image_identifier("rayito-base")
        .image_version("1")
        .send()
        .await
        .expect("ListMicrovmImageBuilds");
    assert_eq!(builds.items().len(), 1);
    let b = &builds.items()[0];
    assert_eq!(*b.build_state(), BuildState::Successful);
    assert_eq!(b.chipset_generation(), "local");
    let got = h
        .client
        .get_microvm_image_build()
        .image_identifier("rayito-base")
        .image_version("1")
        .build_id(b.build_id())
        .send()
        .await
        .expect("GetMicrovmImageBuild");
    assert_eq!(got.build_id(), b.build_id());
    assert_eq!(*got.build_state(), BuildState::Successful);
    let e = h
        .client
        .get_microvm_image_build()
        .image_identifier("rayito-base")
        .image_version("1")
        .build_id("nope")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            404,
            "ResourceNotFoundException".into(),
            "MicroVM image build not found: nope".into()
        )
    );

    let managed = h
        .client
        .list_managed_microvm_image_versions()
        .image_identifier("al2023-1")
        .send()
        .await
        .expect("ListManagedMicrovmImageVersions");
    assert_eq!(managed.items().len(), 1);
    assert_eq!(managed.items()[0].image_version(), "1");
    assert_eq!(
        managed.items()[0].image_arn(),
        "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1"
    );
    let e = h
        .client
        .list_managed_microvm_image_versions()
        .image_identifier("al2022")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ResourceNotFoundException");
}

#[tokio::test]
async fn a_build_goes_pending_in_progress_failed_with_its_reason_and_logs() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    h.emulator.faults().hold_builds(true);
    let out = create(&h, "tpl", &uri)
        .environment_variables("SECRET_NAME", "s3cr3t-value")
        .send()
        .await
        .expect("CreateMicrovmImage");
    assert_eq!(out.name(), "tpl");
    assert_eq!(out.image_arn(), h.emulator.image_arn("tpl"));
    assert_eq!(out.image_version(), "1");
    assert_eq!(*out.state(), MicrovmImageState::Creating);
    assert_eq!(out.base_image_version(), Some("1.0"));
    // Held: the build started and waits.
    let v = wait_version(&h, "tpl", "1", MicrovmImageVersionState::InProgress).await;
    assert_eq!(v.state_reason(), None);
    assert_eq!(
        v.environment_variables()
            .and_then(|e| e.get("SECRET_NAME"))
            .map(String::as_str),
        Some("s3cr3t-value")
    );
    assert_eq!(image_state(&h, "tpl").await, MicrovmImageState::Creating);
    let builds = h
        .client
        .list_microvm_image_builds()
        .image_identifier("tpl")
        .image_version("1")
        .send()
        .await
        .unwrap();
    assert_eq!(*builds.items()[0].build_state(), BuildState::InProgress);
    let build_id = builds.items()[0].build_id().to_string();

    h.emulator.faults().hold_builds(false);
    let v = wait_version(&h, "tpl", "1", MicrovmImageVersionState::Failed).await;
    assert_eq!(v.state_reason(), Some(FAILED_REASON));
    let image = h
        .client
        .get_microvm_image()
        .image_identifier("tpl")
        .send()
        .await
        .unwrap();
    assert_eq!(*image.state(), MicrovmImageState::CreateFailed);
    assert_eq!(image.latest_failed_image_version(), Some("1"));
    assert_eq!(image.latest_active_image_version(), None);
    let build = h
        .client
        .get_microvm_image_build()
        .image_identifier("tpl")
        .image_version("1")
        .build_id(&build_id)
        .send()
        .await
        .unwrap();
    assert_eq!(*build.build_state(), BuildState::Failed);
    assert_eq!(build.state_reason(), Some(FAILED_REASON));

    let logs = h.emulator.build_log_lines("tpl");
    assert_eq!(logs.len(), 1, "{logs:?}");
    let (stream, lines) = &logs[0];
    assert!(
        stream.ends_with(&format!("[1]build-{build_id}"))
            && stream.len() == 10 + 3 + 6 + build_id.len(),
        "{stream}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!("rayito emulator: build FAILED: {FAILED_REASON}").as_str())
    );
    assert!(lines[0].contains("started"), "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.contains("s3cr3t")),
        "no environment value in the logs"
    );

    // An update gets version 2; the image goes UPDATING, then UPDATE_FAILED.
    let out = h
        .client
        .update_microvm_image()
        .image_identifier(h.emulator.image_arn("tpl"))
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .build_role_arn(role(&h))
        .code_artifact(CodeArtifact::Uri(uri.clone()))
        .send()
        .await
        .expect("UpdateMicrovmImage");
    assert_eq!(out.image_version(), "2");
    assert!(matches!(*out.state(), MicrovmImageState::Updating));
    wait_version(&h, "tpl", "2", MicrovmImageVersionState::Failed).await;
    assert_eq!(
        image_state(&h, "tpl").await,
        MicrovmImageState::UpdateFailed
    );
}

#[tokio::test]
async fn a_build_unpacks_its_artifact_under_the_version_directory() {
    let root = tempfile::tempdir().unwrap();
    let h = Harness::start_with(rayito_emulator::EmulatorConfig {
        root: root.path().join("emu"),
        ..Default::default()
    })
    .await;
    let uri = base_uri(&h).await;
    create(&h, "unpacked", &uri).send().await.unwrap();
    // The build fails (no rayd to copy) after the artifact was unpacked.
    let v = wait_version(&h, "unpacked", "1", MicrovmImageVersionState::Failed).await;
    assert_eq!(v.state_reason(), Some(FAILED_REASON));
    let dockerfile = root
        .path()
        .join("emu/images/unpacked/1/artifact/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile).expect("the unpacked Dockerfile");
    assert!(
        text.trim_end().ends_with("CMD [\"/opt/rayito/rayd\"]"),
        "{text}"
    );
    // Deleting the image removes its files.
    h.client
        .delete_microvm_image()
        .image_identifier("unpacked")
        .send()
        .await
        .unwrap();
    assert!(!root.path().join("emu/images/unpacked").exists());
}

#[tokio::test]
async fn artifacts_that_are_not_in_the_store_fail_the_build_with_a_plain_reason() {
    let h = Harness::start().await;
    let bucket = h.emulator.artifact_bucket();
    for (name, uri, reason) in [
        (
            "missing",
            format!("s3://{bucket}/rayito/templates/absent.zip"),
            "The code artifact could not be read from S3: no such object.",
        ),
        (
            "not-s3",
            "https://example.com/a.zip".to_string(),
            "The code artifact URI must be an s3:// URI.",
        ),
    ] {
        create(&h, name, &uri)
            .send()
            .await
            .expect("CreateMicrovmImage");
        let v = wait_version(&h, name, "1", MicrovmImageVersionState::Failed).await;
        assert_eq!(v.state_reason(), Some(reason), "{name}");
        let (_, lines) = &h.emulator.build_log_lines(name)[0];
        assert!(!lines.iter().any(|l| l.contains(&bucket)), "{lines:?}");
    }
}

#[tokio::test]
async fn create_and_update_bodies_are_validated_like_the_model() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    let one = |member: &str, rule: &str| {
        format!(
            "1 validation error detected: Value at '{member}' failed to satisfy constraint: {rule}"
        )
    };
    type Tweak = Box<dyn Fn(CreateMicrovmImageFluentBuilder) -> CreateMicrovmImageFluentBuilder>;
    let rows: Vec<(&str, Tweak, String)> = vec![
        (
            "name pattern",
            Box::new(|b| b.name("bad name")),
            one("name", "Member must satisfy regular expression pattern: [a-zA-Z0-9-_]+"),
        ),
        (
            "name length",
            Box::new(|b| b.name("n".repeat(65))),
            one("name", "Member must have length less than or equal to 64"),
        ),
        (
            "no name",
            Box::new(|b| b.set_name(None)),
            one("name", "Member must not be null"),
        ),
        (
            "no base image",
            Box::new(|b| b.set_base_image_arn(None)),
            one("baseImageArn", "Member must not be null"),
        ),
        (
            "no role",
            Box::new(|b| b.set_build_role_arn(None)),
            one("buildRoleArn", "Member must not be null"),
        ),
        (
            "role shape",
            Box::new(|b| b.build_role_arn("arn:aws:iam::123:user/x")),
            one(
                "buildRoleArn",
                "Member must satisfy regular expression pattern: arn:aws[a-zA-Z-]*:iam::\\d{12}:role/[\\w+=,.@/-]+",
            ),
        ),
        (
            "no artifact",
            Box::new(|b| b.set_code_artifact(None)),
            one("codeArtifact", "Member must not be null"),
        ),
        (
            "artifact uri length",
            Box::new(|b| b.code_artifact(CodeArtifact::Uri(format!("s3://b/{}", "k".repeat(2048))))),
            one("codeArtifact.uri", "Member must have length less than or equal to 2048"),
        ),
        (
            "two resources",
            Box::new(|b| {
                b.resources(Resources::builder().minimum_memory_in_mib(512).build().unwrap())
            }),
            one("resources", "Member must have length less than or equal to 1"),
        ),
        (
            "memory off the catalog",
            Box::new(|b| {
                b.set_resources(Some(vec![
                    Resources::builder().minimum_memory_in_mib(3000).build().unwrap(),
                ]))
            }),
            "minimumMemoryInMiB must be one of 512, 1024, 2048, 4096, 8192.".into(),
        ),
        (
            "ready timeout",
            Box::new(|b| {
                b.hooks(
                    Hooks::builder()
                        .microvm_image_hooks(
                            MicrovmImageHooks::builder()
                                .ready(HookState::Enabled)
                                .ready_timeout_in_seconds(3601)
                                .validate(HookState::Enabled)
                                .validate_timeout_in_seconds(600)
                                .build(),
                        )
                        .build(),
                )
            }),
            one(
                "hooks.microvmImageHooks.readyTimeoutInSeconds",
                "Member must have value less than or equal to 3600",
            ),
        ),
        (
            "run timeout",
            Box::new(|b| {
                b.hooks(
                    Hooks::builder()
                        .microvm_hooks(
                            MicrovmHooks::builder()
                                .run(HookState::Enabled)
                                .run_timeout_in_seconds(0)
                                .resume(HookState::Enabled)
                                .resume_timeout_in_seconds(30)
                                .suspend(HookState::Enabled)
                                .suspend_timeout_in_seconds(61)
                                .terminate(HookState::Enabled)
                                .terminate_timeout_in_seconds(10)
                                .build(),
                        )
                        .build(),
                )
            }),
            "2 validation errors detected: Value at 'hooks.microvmHooks.runTimeoutInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 1; Value at 'hooks.microvmHooks.suspendTimeoutInSeconds' failed to satisfy constraint: Member must have value less than or equal to 60".into(),
        ),
        (
            "log group pattern",
            Box::new(|b| {
                b.logging(Logging::CloudWatch(
                    CloudWatchLogging::builder().log_group("/rayito/a b").build(),
                ))
            }),
            one(
                "logging.cloudWatch.logGroup",
                "Member must satisfy regular expression pattern: [a-zA-Z0-9_\\-/.#]+",
            ),
        ),
        (
            "101 env vars",
            Box::new(|b| {
                (0..101).fold(b, |b, i| b.environment_variables(format!("K{i}"), "v"))
            }),
            one("environmentVariables", "Member must have length less than or equal to 100"),
        ),
        (
            "env key with a space",
            Box::new(|b| b.environment_variables("A B", "v")),
            one(
                "environmentVariables",
                "Map keys must satisfy constraint: [Member must satisfy regular expression pattern: [^\\s]+]",
            ),
        ),
        (
            "env key too long",
            Box::new(|b| b.environment_variables("K".repeat(257), "v")),
            one(
                "environmentVariables",
                "Map keys must satisfy constraint: [Member must have length between 1 and 256]",
            ),
        ),
        (
            "env value too long",
            Box::new(|b| b.environment_variables("K", "v".repeat(4097))),
            one(
                "environmentVariables",
                "Map value must satisfy constraint: [Member must have length less than or equal to 4096]",
            ),
        ),
        (
            "capability",
            Box::new(|b| b.additional_os_capabilities(Capability::from("SYS_ADMIN"))),
            one("additionalOsCapabilities.1", "Member must satisfy enum value set: [ALL]"),
        ),
        (
            "two egress connectors",
            Box::new(|b| b.egress_network_connectors("a").egress_network_connectors("b")),
            one("egressNetworkConnectors", "Member must have length less than or equal to 1"),
        ),
        (
            "base version 1.0",
            Box::new(|b| b.base_image_version("1.0")),
            "Expected a single major version number".into(),
        ),
        (
            "base version latest",
            Box::new(|b| b.base_image_version("latest")),
            "Expected a single major version number".into(),
        ),
    ];
    for (row, tweak, message) in rows {
        let e = tweak(create(&h, "valid-name", &uri))
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            err_parts(&e),
            (400, "ValidationException".to_string(), message),
            "{row}"
        );
    }
    // Nothing was created by a refused call.
    let e = h
        .client
        .get_microvm_image()
        .image_identifier("valid-name")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ResourceNotFoundException");
    // The capability that exists passes, and so does an Update body.
    create(&h, "caps", &uri)
        .additional_os_capabilities(Capability::from("ALL"))
        .send()
        .await
        .expect("ALL is accepted");
    let e = h
        .client
        .update_microvm_image()
        .image_identifier("rayito-base")
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .build_role_arn(role(&h))
        .code_artifact(CodeArtifact::Uri(uri.clone()))
        .base_image_version("2.5")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "Expected a single major version number".into()
        )
    );
}

#[tokio::test]
async fn conflicts_and_missing_resources_have_their_codes() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    let base = h.image();
    let e = create(&h, "rayito-base", &uri).send().await.unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            format!("MicroVM image already exists: {base}")
        )
    );

    h.emulator.faults().hold_builds(true);
    let update = || {
        h.client
            .update_microvm_image()
            .image_identifier("rayito-base")
            .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
            .build_role_arn(role(&h))
            .code_artifact(CodeArtifact::Uri(uri.clone()))
    };
    assert_eq!(
        update().send().await.expect("first update").image_version(),
        "2"
    );
    let e = update().send().await.unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            409,
            "ConflictException".into(),
            "MicroVM image rayito-base has a version build in progress; update it when the build ends.".into()
        )
    );
    // A version in flight cannot be deleted either, nor its image.
    let e = h
        .client
        .delete_microvm_image_version()
        .image_identifier("rayito-base")
        .image_version("2")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).0, 409);
    let e = h
        .client
        .delete_microvm_image()
        .image_identifier("rayito-base")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).0, 409);
    h.emulator.faults().hold_builds(false);
    wait_version(&h, "rayito-base", "2", MicrovmImageVersionState::Failed).await;

    let unknown = h.emulator.image_arn("nope");
    let e = h
        .client
        .get_microvm_image()
        .image_identifier("nope")
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
    let e = update().image_identifier("nope").send().await.unwrap_err();
    assert_eq!(err_parts(&e).1, "ResourceNotFoundException");
    let e = h
        .client
        .get_microvm_image_version()
        .image_identifier("rayito-base")
        .image_version("9")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            404,
            "ResourceNotFoundException".into(),
            format!("MicroVM image version not found: {base}:9")
        )
    );
    let e = h
        .client
        .get_microvm_image()
        .image_identifier("arn:aws:lambda:eu-west-1:000000000000:microvm-image:rayito-base")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ResourceNotFoundException");
    let e = h
        .client
        .get_microvm_image()
        .image_identifier("bad:name")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ValidationException");
}

#[tokio::test]
async fn lists_page_and_version_items_never_carry_environment_variables() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    for name in ["page-a", "page-b", "other"] {
        create(&h, name, &uri)
            .environment_variables("SECRET", "s3cr3t")
            .send()
            .await
            .unwrap();
        wait_version(&h, name, "1", MicrovmImageVersionState::Failed).await;
    }
    create(&h, "x", &uri).send().await.unwrap();
    for _ in 0..2 {
        let out = h
            .client
            .update_microvm_image()
            .image_identifier("page-a")
            .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
            .build_role_arn(role(&h))
            .code_artifact(CodeArtifact::Uri(uri.clone()))
            .environment_variables("SECRET", "s3cr3t")
            .send()
            .await
            .expect("UpdateMicrovmImage");
        wait_version(
            &h,
            "page-a",
            out.image_version(),
            MicrovmImageVersionState::Failed,
        )
        .await;
    }

    let first = h
        .client
        .list_microvm_images()
        .name_filter("page-")
        .max_results(1)
        .send()
        .await
        .expect("ListMicrovmImages");
    assert_eq!(first.items().len(), 1);
    assert_eq!(first.items()[0].name(), "page-a");
    let second = h
        .client
        .list_microvm_images()
        .name_filter("page-")
        .max_results(1)
        .next_token(first.next_token().expect("a next page"))
        .send()
        .await
        .unwrap();
    assert_eq!(second.items()[0].name(), "page-b");
    assert!(second.next_token().is_none());
    let all = h.client.list_microvm_images().send().await.unwrap();
    let names: Vec<&str> = all.items().iter().map(|i| i.name()).collect();
    assert_eq!(
        names,
        [
            "other",
            "page-a",
            "page-b",
            "rayito-base",
            "rayito-base-caps",
            "rayito-base-caps-efs",
            "x"
        ]
    );

    let mut versions = Vec::new();
    let mut token = None;
    loop {
        let page = h
            .client
            .list_microvm_image_versions()
            .image_identifier("page-a")
            .max_results(2)
            .set_next_token(token)
            .send()
            .await
            .expect("ListMicrovmImageVersions");
        assert!(page.items().len() <= 2);
        versions.extend(page.items().iter().cloned());
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    let numbers: Vec<&str> = versions.iter().map(|v| v.image_version()).collect();
    assert_eq!(numbers, ["1", "2", "3"]);
    for v in &versions {
        assert_eq!(v.environment_variables(), None, "list items carry no env");
        assert_eq!(*v.state(), MicrovmImageVersionState::Failed);
    }
    let full = wait_version(&h, "page-a", "3", MicrovmImageVersionState::Failed).await;
    assert!(full.environment_variables().is_some());

    let e = h
        .client
        .list_microvm_image_versions()
        .image_identifier("page-a")
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
        .list_microvm_images()
        .next_token("garbage")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).2, "Invalid pagination token.");
}

#[tokio::test]
async fn the_eleventh_build_in_flight_is_over_the_quota_until_builds_end() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    h.emulator.faults().hold_builds(true);
    for i in 0..10 {
        create(&h, &format!("q{i}"), &uri)
            .send()
            .await
            .expect("within the quota");
    }
    let e = create(&h, "q10", &uri).send().await.unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            402,
            "ServiceQuotaExceededException".into(),
            "Concurrent MicroVM image builds quota exceeded.".into()
        )
    );
    let e = h
        .client
        .update_microvm_image()
        .image_identifier("rayito-base")
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .build_role_arn(role(&h))
        .code_artifact(CodeArtifact::Uri(uri.clone()))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "ServiceQuotaExceededException");
    for i in 0..10 {
        wait_version(
            &h,
            &format!("q{i}"),
            "1",
            MicrovmImageVersionState::InProgress,
        )
        .await;
    }
    h.emulator.faults().hold_builds(false);
    for i in 0..10 {
        wait_version(&h, &format!("q{i}"), "1", MicrovmImageVersionState::Failed).await;
    }
    create(&h, "q10", &uri)
        .send()
        .await
        .expect("the quota is free again");
}

#[tokio::test]
async fn versions_are_deactivated_deleted_and_images_deleted() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    create(&h, "gone", &uri).send().await.unwrap();
    wait_version(&h, "gone", "1", MicrovmImageVersionState::Failed).await;
    let e = h
        .client
        .delete_microvm_image_version()
        .image_identifier("gone")
        .image_version("1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "MicroVM image version 1 is ACTIVE; set its status to INACTIVE before deleting it."
                .into()
        )
    );
    let v = h
        .client
        .update_microvm_image_version()
        .image_identifier("gone")
        .image_version("1")
        .status(MicrovmImageVersionStatus::Inactive)
        .send()
        .await
        .expect("UpdateMicrovmImageVersion");
    assert_eq!(*v.status(), MicrovmImageVersionStatus::Inactive);
    let e = h
        .client
        .update_microvm_image_version()
        .image_identifier("gone")
        .image_version("1")
        .status(MicrovmImageVersionStatus::from("PAUSED"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e).2,
        "1 validation error detected: Value at 'status' failed to satisfy constraint: Member must satisfy enum value set: [ACTIVE, INACTIVE]"
    );
    let d = h
        .client
        .delete_microvm_image_version()
        .image_identifier("gone")
        .image_version("1")
        .send()
        .await
        .expect("DeleteMicrovmImageVersion");
    assert_eq!(d.image_version(), "1");
    let e = h
        .client
        .get_microvm_image_version()
        .image_identifier("gone")
        .image_version("1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).0, 404);
    h.client
        .delete_microvm_image()
        .image_identifier("gone")
        .send()
        .await
        .expect("DeleteMicrovmImage");
    let e = h
        .client
        .get_microvm_image()
        .image_identifier("gone")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).0, 404);
    // The name is free again.
    create(&h, "gone", &uri)
        .send()
        .await
        .expect("created again");
}

#[tokio::test]
async fn run_microvm_needs_a_launchable_version() {
    let h = Harness::start().await;
    let uri = base_uri(&h).await;
    create(&h, "broken", &uri).send().await.unwrap();
    wait_version(&h, "broken", "1", MicrovmImageVersionState::Failed).await;
    let run = |image: String| {
        h.client
            .run_microvm()
            .image_identifier(image)
            .run_hook_payload(payload(serde_json::json!({})))
            .maximum_duration_in_seconds(600)
    };
    let e = run(h.emulator.image_arn("broken"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "MicroVM image broken has no launchable version (image CREATE_FAILED).".into()
        )
    );
    let e = run(h.emulator.image_arn("broken"))
        .image_version("1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            400,
            "ValidationException".into(),
            "MicroVM image version 1 is not launchable (image CREATE_FAILED, version FAILED, status ACTIVE).".into()
        )
    );
    let e = run(h.image()).image_version("7").send().await.unwrap_err();
    assert_eq!(
        err_parts(&e),
        (
            404,
            "ResourceNotFoundException".into(),
            format!("MicroVM image version not found: {}:7", h.image())
        )
    );
    assert!(h.emulator.microvm_ids().is_empty(), "nothing was created");

    // rayito-base runs as before, its version named in the answer.
    let out = run(h.image())
        .image_version("1")
        .send()
        .await
        .expect("RunMicrovm");
    assert_eq!(out.image_version(), "1.0");
    wait_state(&h.client, out.microvm_id(), MicrovmState::Running).await;
    let out = run(h.image())
        .send()
        .await
        .expect("RunMicrovm, newest version");
    assert_eq!(out.image_version(), "1.0");
    wait_state(&h.client, out.microvm_id(), MicrovmState::Running).await;
    // ListMicrovms takes the version as `1` or `1.0`.
    for (version, count) in [("1", 2), ("1.0", 2), ("2", 0)] {
        let list = h
            .client
            .list_microvms()
            .image_version(version)
            .send()
            .await
            .expect("ListMicrovms");
        assert_eq!(list.items().len(), count, "{version}");
    }
}
