//! `Images::publish` end to end through the AWS path against an emulator
//! of its own (STS, its S3 endpoint, a real local build): the base
//! artifact's request fields read back with GetMicrovmImageVersion, a
//! sandbox from the published image, reuse, `force`, a failing step, and
//! the architecture check before any upload.

use crate::sdk_support;

use sdk_support::images::{
    AARCH64, client, elf, microvms as raw, publish_options as options, submissions,
};
use sdk_support::skip as skip_support;

use std::collections::BTreeMap;
use std::time::Duration;

use rayito::error::BuildReason;
use rayito::template::{Arch, pack_base_image};
use rayito::{Sandbox, SandboxError};
use rayito_emulator::Operation;

/// A base directory whose Dockerfile is cheap and host-safe: it copies
/// the agent and the sidecar into the image layer and ends with rayd.
fn base_dir(extra_run: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let dockerfile = format!(
        "COPY rayd /opt/rayito-img/rayd\n\
         COPY kernel-sidecar/ /opt/rayito-img/kernel-sidecar/\n\
         RUN echo published > /opt/rayito-img/marker\n\
         {extra_run}\
         CMD [\"/opt/rayito-img/rayd\", \"serve\"]\n"
    );
    std::fs::write(dir.path().join("Dockerfile"), dockerfile).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_base_image_has_the_spec_fields_starts_sandboxes_and_is_reused() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let dir = base_dir("");
    let artifact = pack_base_image(dir.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap();
    let mut opts = options(&emu);
    opts.env = BTreeMap::from([("RAYITO_IMAGE_FLAVOUR".to_owned(), "test".to_owned())]);
    let info = client
        .images()
        .publish(&artifact, "pub-base", opts.clone())
        .await
        .expect("the publish succeeds");
    assert_eq!(info.image_arn, emu.image_arn("pub-base"));
    assert_eq!(info.image_version, "1");
    assert_eq!(info.base_image_version, "1", "latest resolved");
    assert!(info.artifact_uploaded && !info.reused);
    let key = artifact.image_key();
    assert_eq!(
        info.artifact,
        format!("s3://{}/{key}", emu.artifact_bucket())
    );
    assert_eq!(
        emu.get_object_directly(&emu.artifact_bucket(), &key)
            .await
            .unwrap()
            .as_deref(),
        Some(artifact.bytes())
    );
    assert_eq!(emu.calls(Operation::ListManagedMicrovmImageVersions), 1);

    // What Create sent, as the service echoes it (spec table 1.2, 2.2).
    let raw = raw(&emu).await;
    let v = raw
        .get_microvm_image_version()
        .image_identifier("pub-base")
        .image_version("1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        v.base_image_arn,
        "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1"
    );
    assert_eq!(v.base_image_version.as_deref(), Some("1.0"));
    assert_eq!(
        v.build_role_arn,
        format!(
            "arn:aws:iam::{}:role/rayito-m0-build-us-east-1",
            emu.account_id()
        )
    );
    assert_eq!(
        v.code_artifact.as_ref().and_then(|a| a.as_uri().ok()),
        Some(&info.artifact)
    );
    let resources = v.resources.clone().unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].minimum_memory_in_mib, 2048);
    let cpus = v.cpu_configurations.clone().unwrap();
    assert_eq!(cpus.len(), 1);
    assert_eq!(cpus[0].architecture.as_str(), "ARM_64");
    let hooks = v.hooks.clone().unwrap();
    assert_eq!(hooks.port, Some(9000));
    let image_hooks = hooks.microvm_image_hooks.unwrap();
    assert_eq!(image_hooks.ready.as_str(), "ENABLED");
    assert_eq!(image_hooks.ready_timeout_in_seconds, 600);
    assert_eq!(image_hooks.validate.as_str(), "ENABLED");
    assert_eq!(image_hooks.validate_timeout_in_seconds, 600);
    let runtime = hooks.microvm_hooks.unwrap();
    for (state, seconds, want) in [
        (&runtime.run, runtime.run_timeout_in_seconds, 30),
        (&runtime.resume, runtime.resume_timeout_in_seconds, 30),
        (&runtime.suspend, runtime.suspend_timeout_in_seconds, 30),
        (&runtime.terminate, runtime.terminate_timeout_in_seconds, 10),
    ] {
        assert_eq!(state.as_str(), "ENABLED");
        assert_eq!(seconds, want);
    }
    assert_eq!(
        v.logging
            .as_ref()
            .and_then(|l| l.as_cloud_watch().ok())
            .and_then(|c| c.log_group.as_deref()),
        Some("/rayito/pub-base")
    );
    assert_eq!(
        v.environment_variables
            .as_ref()
            .and_then(|e| e.get("RAYITO_IMAGE_FLAVOUR"))
            .map(String::as_str),
        Some("test")
    );
    assert!(v.additional_os_capabilities.is_none_or(|c| c.is_empty()));
    assert!(v.egress_network_connectors.is_none_or(|c| c.is_empty()));
    let description = v.description.unwrap_or_default();
    assert!(
        description.starts_with("rayd 20") && description.ends_with('Z'),
        "{description}"
    );

    // A sandbox of the published image sees what its Dockerfile did.
    let sandbox = Sandbox::builder()
        .aws(sdk_support::aws(&emu))
        .template(info.image_arn.clone())
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("a sandbox of the published image");
    let out = sandbox
        .commands()
        .run("cat /opt/rayito-img/marker; test -f /opt/rayito-img/rayd && echo agent-in-place")
        .await
        .unwrap();
    assert_eq!(out.stdout, "published\nagent-in-place\n");
    sandbox.kill().await.unwrap();

    // Again: the identical version is reused; nothing uploaded or built.
    let before = submissions(&emu);
    let again = client
        .images()
        .publish(&artifact, "pub-base", opts.clone())
        .await
        .unwrap();
    assert!(again.reused && !again.artifact_uploaded, "{again:?}");
    assert_eq!(again.image_version, "1");
    assert_eq!(submissions(&emu), before, "no Create or Update");

    // Another environment is another configuration: a new version.
    let mut other_env = opts.clone();
    other_env
        .env
        .insert("RAYITO_IMAGE_FLAVOUR".into(), "other".into());
    let changed = client
        .images()
        .publish(&artifact, "pub-base", other_env)
        .await
        .unwrap();
    assert!(!changed.reused);
    assert_eq!(changed.image_version, "2");

    // --force builds a new version even when one is identical.
    let mut forced = opts.clone();
    forced.force = true;
    let forced = client
        .images()
        .publish(&artifact, "pub-base", forced)
        .await
        .unwrap();
    assert!(!forced.reused && !forced.artifact_uploaded);
    assert_eq!(forced.image_version, "3");
    assert_eq!(emu.calls(Operation::UpdateMicrovmImage), 2);

    let versions = client.images().versions("pub-base").await.unwrap();
    let numbers: Vec<&str> = versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(numbers, ["3", "2", "1"], "newest first");
    assert!(versions.iter().all(|v| v.state == "SUCCESSFUL"
        && v.memory_mib == Some(2048)
        && v.artifact.as_deref() == Some(info.artifact.as_str())));
    let images = client.images().list(Some("pub-base")).await.unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].name, "pub-base");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_gives_the_build_error_and_a_wrong_arch_is_refused_before_upload() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;

    // An agent for another architecture: refused before any AWS call.
    let dir = base_dir("");
    let artifact = pack_base_image(dir.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap();
    let mut x86 = options(&emu);
    x86.arch = Arch::X86_64;
    let err = client
        .images()
        .publish(&artifact, "pub-arch", x86)
        .await
        .expect_err("an ARM_64 agent in an X86_64 image");
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "agent_binary"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid agent_binary: the agent binary is built for ARM_64 but the image's \
         architecture is X86_64; pass a rayito-agent built for X86_64 (cargo build --release \
         -p rayito-agent --target x86_64-unknown-linux-gnu) or choose the architecture it is \
         built for"
    );
    assert_eq!(
        emu.get_object_directly(&emu.artifact_bucket(), &artifact.image_key())
            .await
            .unwrap(),
        None,
        "nothing uploaded"
    );
    assert_eq!(submissions(&emu), 0);

    // A step that exits 3: the version fails and the error names the step.
    let failing = base_dir("RUN echo about to fail && exit 3\n");
    let artifact = pack_base_image(failing.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap();
    let mut opts = options(&emu);
    opts.base_image_version = Some(1);
    let err = client
        .images()
        .publish(&artifact, "pub-fail", opts)
        .await
        .expect_err("the failing step");
    match &err {
        SandboxError::Build {
            reason,
            step,
            command,
            exit_code,
            ..
        } => {
            assert_eq!(*reason, None::<BuildReason>, "{err:?}");
            assert_eq!(*exit_code, Some(3), "{err:?}");
            assert!(step.is_some(), "{err:?}");
            assert!(
                command
                    .as_deref()
                    .is_some_and(|c| c.contains("echo about to fail && exit 3")),
                "{err:?}"
            );
        }
        other => panic!("not a build error: {other:?}"),
    }
    assert_eq!(emu.calls(Operation::ListManagedMicrovmImageVersions), 0);
    emu.shutdown().await;
}
