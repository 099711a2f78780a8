//! The caps variants through the local backend: the emulator seeds
//! `rayito-base-caps` and `rayito-base-caps-efs` beside `rayito-base`, a
//! sandbox starts on each by name (as a local user picks them for S3
//! mounts and EFS volumes), a caps publish sends `additionalOsCapabilities:
//! ["ALL"]`, and the refusals of a publish whose name or artifact is
//! another variant's come before any upload or submission.

use crate::sdk_support;

use sdk_support::images::{
    AARCH64, client, elf, microvms as raw, publish_options as options, submissions,
};
use sdk_support::skip as skip_support;

use rayito::Sandbox;
use rayito::template::{Arch, Variant, pack_base_image, pack_base_image_variant};
use rayito_emulator::Operation;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_starts_on_each_seeded_caps_image_by_name() {
    let sbx_caps = Sandbox::builder()
        .local()
        .template("rayito-base-caps")
        .create()
        .await
        .expect("a sandbox on rayito-base-caps");
    let info = sbx_caps.get_info().await.unwrap();
    assert!(
        info.image_arn.ends_with(":microvm-image:rayito-base-caps"),
        "{}",
        info.image_arn
    );
    let out = sbx_caps.commands().run("echo caps").await.unwrap();
    assert_eq!(out.stdout, "caps\n");
    sbx_caps.kill().await.unwrap();

    let sbx_efs = Sandbox::builder()
        .local()
        .template("rayito-base-caps-efs")
        .create()
        .await
        .expect("a sandbox on rayito-base-caps-efs");
    let info = sbx_efs.get_info().await.unwrap();
    assert!(
        info.image_arn
            .ends_with(":microvm-image:rayito-base-caps-efs"),
        "{}",
        info.image_arn
    );
    sbx_efs.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_of_another_variants_name_or_artifact_is_refused_before_any_write() {
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    let full = pack_base_image(dir.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap();

    // The caps image's name, published as the full variant.
    let err = client
        .images()
        .publish(&full, "rayito-base-caps", options(&emu))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid name: rayito-base-caps is the official name of the caps variant, but this publish is the full variant; publish under rayito-base or another name"
    );
    // The caps-efs variant from an artifact without the efs marker.
    let mut efs = options(&emu);
    efs.variant = Variant::CapsEfs;
    let err = client
        .images()
        .publish(&full, "rayito-base-caps-efs", efs)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid variant: the caps-efs variant needs an artifact with the efs marker (kernel-sidecar/efs_variant); pack it with rayito image zip --with-efs"
    );
    // The efs artifact published as the plain caps image.
    let efs_artifact = pack_base_image_variant(
        dir.path(),
        Some(&elf(AARCH64)),
        Arch::Arm64,
        Some(Variant::CapsEfs),
    )
    .unwrap();
    let mut caps = options(&emu);
    caps.variant = Variant::Caps;
    let err = client
        .images()
        .publish(&efs_artifact, "my-caps", caps)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid variant: the artifact carries the efs marker"),
        "{err}"
    );
    assert_eq!(submissions(&emu), 0);
    assert_eq!(emu.calls(Operation::GetMicrovmImage), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caps_publish_sends_all_os_capabilities() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let client = client(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    // Host-safe steps: the local build runs them over this host.
    std::fs::write(
        dir.path().join("Dockerfile"),
        "COPY rayd /opt/rayito-caps/rayd\nRUN echo caps > /opt/rayito-caps/marker\nCMD [\"/opt/rayito-caps/rayd\", \"serve\"]\n",
    )
    .unwrap();
    let artifact = pack_base_image(dir.path(), Some(&elf(AARCH64)), Arch::Arm64).unwrap();
    let mut caps = options(&emu);
    caps.variant = Variant::Caps;
    let info = client
        .images()
        .publish(&artifact, "caps-variant", caps)
        .await
        .expect("the caps image publishes");
    let version = raw(&emu)
        .await
        .get_microvm_image_version()
        .image_identifier("caps-variant")
        .image_version(&info.image_version)
        .send()
        .await
        .unwrap();
    assert_eq!(
        version.additional_os_capabilities(),
        [aws_sdk_lambdamicrovms::types::Capability::All]
    );
    // The same artifact as the full variant is another configuration:
    // never a reuse of the caps version.
    let plain = client
        .images()
        .publish(&artifact, "caps-variant", options(&emu))
        .await
        .expect("the full image publishes");
    assert!(!plain.reused);
    assert_ne!(plain.image_version, info.image_version);
}
