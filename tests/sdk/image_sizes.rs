//! Sizes, the managed-by guard and prune through the AWS path against an
//! emulator of its own (STS, its S3 endpoint, real local builds):
//! `publish` with sizes builds `<name>-<size>` with each size's memory and
//! reuses them, `Images::sizes` compares artifacts, a sandbox of a size
//! runs the sized image, an image a stack manages is never written, and
//! prune keeps the newest, live and in-flight versions.

use crate::sdk_support;

use sdk_support::images::{
    AARCH64, client, elf, microvms as raw, publish_options as options, submissions,
};
use sdk_support::skip as skip_support;

use std::time::Duration;

use aws_sdk_lambdamicrovms as lmv;
use rayito::template::{Arch, Artifact, KeepReason, PruneOptions, RefusedReason, pack_base_image};
use rayito::{ErrorKind, Sandbox, Size, SizeRequest};
use rayito_emulator::Operation;

/// A cheap, host-safe base artifact (`tag` makes its bytes differ).
fn artifact(tag: &str) -> Artifact {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "COPY rayd /opt/rayito-size/rayd\nRUN echo {tag} > /opt/rayito-size/marker\nCMD [\"/opt/rayito-size/rayd\", \"serve\"]\n"
        ),
    )
    .unwrap();
    pack_base_image(dir.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap()
}

/// A version's memory and environment, as GetMicrovmImageVersion echoes.
async fn memory_and_env(raw: &lmv::Client, image: &str, version: &str) -> (i32, Option<String>) {
    let v = raw
        .get_microvm_image_version()
        .image_identifier(image)
        .image_version(version)
        .send()
        .await
        .unwrap();
    let memory = v.resources.unwrap()[0].minimum_memory_in_mib;
    let env = v
        .environment_variables
        .and_then(|e| e.get("RAYITO_BASELINE_MEMORY_MIB").cloned());
    (memory, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_build_with_their_memory_are_reused_compared_and_launched_by_size() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let art = artifact("sized");
    let mut opts = options(&emu);
    opts.sizes = vec![Size::Mb512, Size::Gb4];
    let info = client
        .images()
        .publish(&art, "sz", opts.clone())
        .await
        .expect("the publish succeeds");
    assert!(info.all_launchable(), "{info:?}");
    assert_eq!(info.image_arn, emu.image_arn("sz"));
    let sizes: Vec<(Size, &str, &str, Option<&str>, bool)> = info
        .sizes
        .iter()
        .map(|s| {
            (
                s.size,
                s.image_name.as_str(),
                s.image_arn.as_str(),
                s.image_version.as_deref(),
                s.reused,
            )
        })
        .collect();
    let arn_512 = emu.image_arn("sz-512mb");
    let arn_4 = emu.image_arn("sz-4gb");
    assert_eq!(
        sizes,
        [
            (Size::Mb512, "sz-512mb", arn_512.as_str(), Some("1"), false),
            (Size::Gb4, "sz-4gb", arn_4.as_str(), Some("1"), false),
        ]
    );
    assert_eq!(submissions(&emu), 3, "the baseline and two sizes");

    // Each image as the service keeps it: its memory, and the baseline's
    // memory in the sizes' environment only.
    let raw = raw(&emu).await;
    assert_eq!(memory_and_env(&raw, "sz", "1").await, (2048, None));
    assert_eq!(
        memory_and_env(&raw, "sz-512mb", "1").await,
        (512, Some("2048".into()))
    );
    assert_eq!(
        memory_and_env(&raw, "sz-4gb", "1").await,
        (4096, Some("2048".into()))
    );

    // Again: every image reused, nothing submitted.
    let again = client.images().publish(&art, "sz", opts).await.unwrap();
    assert!(again.reused && again.sizes.iter().all(|s| s.reused && s.launchable()));
    assert_eq!(submissions(&emu), 3);

    // Where each size stands: published ones share the baseline's artifact.
    let rows = client.images().sizes("sz").await.unwrap();
    let table: Vec<(&str, bool, Option<&str>, Option<bool>)> = rows
        .iter()
        .map(|r| {
            (
                r.size.name(),
                r.published,
                r.latest_version.as_deref(),
                r.same_artifact,
            )
        })
        .collect();
    assert_eq!(
        table,
        [
            ("512mb", true, Some("1"), Some(true)),
            ("1gb", false, None, None),
            ("2gb", true, Some("1"), None),
            ("4gb", true, Some("1"), Some(true)),
            ("8gb", false, None, None),
        ]
    );
    // A size published from another artifact no longer matches.
    let mut other = options(&emu);
    other.memory_mib = 4096;
    client
        .images()
        .publish(&artifact("other"), "sz-4gb", other)
        .await
        .unwrap();
    let rows = client.images().sizes("sz").await.unwrap();
    assert_eq!(rows[3].same_artifact, Some(false));

    // A sandbox of a size runs the sized image; by memory it rounds up.
    let sandbox = Sandbox::builder()
        .aws(sdk_support::aws(&emu))
        .template("sz")
        .size(SizeRequest::MemoryMib(300))
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("a sandbox of size 512mb");
    assert_eq!(sandbox.get_info().await.unwrap().image_arn, arn_512);
    sandbox.kill().await.unwrap();

    // An ARN with a size is refused before any call.
    let runs = emu.calls(Operation::RunMicrovm);
    let err = Sandbox::builder()
        .aws(sdk_support::aws(&emu))
        .template(emu.image_arn("sz"))
        .size(Size::Gb4)
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().starts_with("invalid size: "), "{err}");
    assert_eq!(emu.calls(Operation::RunMicrovm), runs);

    // A size the service refuses: the baseline is still published (here
    // reused), the size carries its error, and not all are launchable.
    emu.faults().throttle(Operation::CreateMicrovmImage, 20, 0);
    let mut eight = options(&emu);
    eight.sizes = vec![Size::Gb8];
    let partial = client.images().publish(&art, "sz", eight).await.unwrap();
    emu.faults().clear();
    assert!(partial.reused);
    assert!(!partial.all_launchable());
    let failed = &partial.sizes[0];
    assert_eq!(
        (failed.size, failed.image_version.as_deref()),
        (Size::Gb8, None)
    );
    assert!(!failed.launchable());
    assert!(failed.error.is_some(), "{failed:?}");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_a_stack_manages_is_never_written() {
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let raw = raw(&emu).await;
    // The stack's image, tagged as the reference's stack tags it (its
    // build fails: its artifact does not exist, which does not matter).
    raw.create_microvm_image()
        .name("managed-4gb")
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .build_role_arn(format!(
            "arn:aws:iam::{}:role/rayito-m0-build-us-east-1",
            emu.account_id()
        ))
        .code_artifact(lmv::types::CodeArtifact::Uri(format!(
            "s3://{}/rayito/images/absent.zip",
            emu.artifact_bucket()
        )))
        .tags("rayito:managed-by", "rayito-cdk")
        .send()
        .await
        .expect("the emulator takes tags");
    let echoed = raw
        .get_microvm_image()
        .image_identifier("managed-4gb")
        .send()
        .await
        .unwrap();
    assert_eq!(
        echoed
            .tags
            .unwrap_or_default()
            .get("rayito:managed-by")
            .map(String::as_str),
        Some("rayito-cdk")
    );

    let art = artifact("managed");
    let before = submissions(&emu);
    for (name, sizes) in [("managed-4gb", vec![]), ("managed", vec![Size::Gb4])] {
        let mut opts = options(&emu);
        opts.sizes = sizes;
        let err = client.images().publish(&art, name, opts).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid name: the image is tagged rayito:managed-by=rayito-cdk: its stack publishes it, not image publish; update the stack, or publish under another name"
        );
    }
    assert_eq!(submissions(&emu), before, "no version");
    assert_eq!(
        emu.get_object_directly(&emu.artifact_bucket(), &art.image_key())
            .await
            .unwrap(),
        None,
        "no upload"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_keeps_the_newest_and_live_versions_and_deletes_the_rest() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let art = artifact("prune");
    let mut opts = options(&emu);
    opts.force = true;
    for _ in 0..4 {
        client
            .images()
            .publish(&art, "pr", opts.clone())
            .await
            .unwrap();
    }
    // A sandbox on version 1 keeps it.
    let sandbox = Sandbox::builder()
        .aws(sdk_support::aws(&emu))
        .template(emu.image_arn("pr"))
        .template_version(1)
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .unwrap();

    // The service refuses to delete a version MicroVMs run on.
    let raw = raw(&emu).await;
    raw.update_microvm_image_version()
        .image_identifier("pr")
        .image_version("1")
        .status(lmv::types::MicrovmImageVersionStatus::Inactive)
        .send()
        .await
        .unwrap();
    let conflict = raw
        .delete_microvm_image_version()
        .image_identifier("pr")
        .image_version("1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        lmv::error::ProvideErrorMetadata::code(&conflict),
        Some("ConflictException")
    );

    let mut prune = PruneOptions::default();
    prune.keep = 2;
    prune.dry_run = true;
    prune.poll_interval = Duration::from_millis(50);
    prune.conflict_backoff = vec![Duration::from_millis(50); 2];
    let dry = client.images().prune("pr", prune.clone()).await.unwrap();
    assert!(dry.dry_run);
    assert_eq!(
        dry.kept,
        [
            ("4".to_owned(), KeepReason::Newest),
            ("3".to_owned(), KeepReason::Newest),
            ("1".to_owned(), KeepReason::LiveMicrovms),
        ]
    );
    assert_eq!(dry.deleted, ["2"]);
    assert_eq!(
        emu.calls(Operation::DeleteMicrovmImageVersion),
        1,
        "only the raw one"
    );
    assert_eq!(client.images().versions("pr").await.unwrap().len(), 4);

    // For real: version 2 conflicts twice (the backoff waits), is
    // refused while ACTIVE, set INACTIVE, deleted.
    prune.dry_run = false;
    emu.faults()
        .conflict(Operation::DeleteMicrovmImageVersion, 2);
    let patches = emu.calls(Operation::UpdateMicrovmImageVersion);
    let report = client.images().prune("pr", prune.clone()).await.unwrap();
    assert_eq!(report.deleted, ["2"]);
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(emu.calls(Operation::UpdateMicrovmImageVersion), patches + 1);
    assert_eq!(
        emu.calls(Operation::DeleteMicrovmImageVersion),
        1 + 2 + 1 + 1,
        "the raw one, two conflicts, the ACTIVE refusal, the delete"
    );
    let left: Vec<String> = client
        .images()
        .versions("pr")
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(left, ["4", "3", "1"]);

    // Once its sandbox is gone, version 1 goes too; conflicts past the
    // backoff leave it refused first.
    let id = sandbox.id().to_owned();
    sandbox.kill().await.unwrap();
    // Its MicroVM may be TERMINATING for a moment: still live.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let vm = raw
            .get_microvm()
            .microvm_identifier(&id)
            .send()
            .await
            .unwrap();
        if vm.state.as_str() == "TERMINATED" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the MicroVM never terminated"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    emu.faults()
        .conflict(Operation::DeleteMicrovmImageVersion, 3);
    let report = client.images().prune("pr", prune.clone()).await.unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(report.refused, [("1".to_owned(), RefusedReason::Conflict)]);
    let report = client.images().prune("pr", prune).await.unwrap();
    assert_eq!(report.deleted, ["1"]);
    emu.shutdown().await;
}
