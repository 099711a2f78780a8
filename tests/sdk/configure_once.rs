//! One Configure per `create` (extras §0): a sandbox created with an S3
//! mount, an EFS volume and a secret gateway gets all three sections in a
//! single Configure call, counted by its agent (the emulator's
//! `agent_configure_calls`), and each feature still reads its own part of
//! the answer (the mount and the volume mounted, the gateway's port).
//!
//! Needs root, /dev/fuse, local image builds (the mount's allowlisting
//! image) and moto (the gateway's secret); prints `SKIPPED: ...` without
//! them.

use crate::sdk_support;

use rayito::mounts::{MountState, S3Mount};
use rayito::volumes::VolumeState;
use sdk_support::emulator;
use sdk_support::moto_seed::s3_client;

use crate::gateway::{cache_with_secret, gateway, moto};
use crate::mounts::{BUCKET, allowlisting_image, supported};
use crate::volumes::{volume_builder, volume_on};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_with_mounts_volumes_and_gateways_sends_one_configure() {
    if !supported() {
        return;
    }
    let Some(moto) = moto().await else { return };
    let cache = cache_with_secret(&moto).await;
    let emu = emulator().await;
    s3_client(&emu.s3_endpoint_url(), emu.access_key())
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("CreateBucket");
    let image = allowlisting_image(&emu).await;
    let volume = volume_on(&emu, "once").await;

    let sandbox = volume_builder(&emu)
        .template(&image)
        .secret_cache(cache)
        .mount("/mnt/data", S3Mount::new(BUCKET))
        .volume("/mnt/shared", volume)
        .gateway("api", gateway())
        .create()
        .await
        .expect("a sandbox with a mount, a volume and a gateway");

    assert_eq!(
        emu.agent_configure_calls(sandbox.id()),
        Some(1),
        "every section in one Configure"
    );
    let mounts = sandbox.mounts().statuses().await.expect("mounts");
    assert_eq!(mounts["/mnt/data"].state, MountState::Mounted, "{mounts:?}");
    let volumes = sandbox.volumes().statuses().await.expect("volumes");
    assert_eq!(
        volumes["/mnt/shared"].state,
        VolumeState::Mounted,
        "{volumes:?}"
    );
    let api = sandbox.gateways().get("api").expect("the gateway's status");
    assert_ne!(api.port(), 0, "the port read after the one Configure");
    // Reading statuses calls ConfigureStatus, never Configure.
    assert_eq!(emu.agent_configure_calls(sandbox.id()), Some(1));
    sandbox.kill().await.expect("kill");
}
