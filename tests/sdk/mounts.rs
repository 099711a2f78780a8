//! S3 mounts (`SandboxBuilder::mount`, `sbx.mounts()`) end to end on the
//! emulator: an image whose template environment allowlists a bucket of the
//! emulator's S3, sandboxes launched with an execution role (the emulator
//! then hands their agent one of its keys, as AWS hands a MicroVM its
//! role), the agent's FUSE server reading and writing that bucket. Objects
//! are checked with an S3 client no sandbox shares: what a writable mount
//! writes is an object at once, and another sandbox mounting the prefix
//! reads it. Each refusal is produced for real: EROFS, EPERM on unlink, a
//! bucket not allowlisted (`Mount { not_allowed }`, the sandbox
//! terminated), a bad path (nothing launched), an agent without the
//! feature (`Unimplemented`, terminated).

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::mounts::{MountState, S3Mount};
use rayito::template::{BuildOptions, Template};
use rayito::{Client, ErrorKind, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState};
use sdk_support::moto_seed::s3_client;
use sdk_support::skip::{local_builds_unavailable, skip};
use sdk_support::{aws, builder, emulator};

const ROLE: &str = "arn:aws:iam::123456789012:role/rayito-sandbox";
pub(crate) const BUCKET: &str = "mounted-data";
const OTHER: &str = "not-on-the-list";

/// Whether this host can serve mounts (root: namespaces, /dev/fuse).
pub(crate) fn supported() -> bool {
    if let Some(reason) = local_builds_unavailable() {
        skip(reason);
        return false;
    }
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/dev/fuse").exists() {
        skip("needs root and /dev/fuse (FUSE mounts in the sandbox's namespace)");
        return false;
    }
    true
}

/// Builds on `emu` an image whose environment allowlists [`BUCKET`] and
/// returns its ARN.
pub(crate) async fn allowlisting_image(emu: &Emulator) -> String {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::builder()
        .aws(aws(emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .build()
        .await
        .expect("a client on the AWS path");
    let template = Template::new().set_envs([("RAYITO_ALLOWED_MOUNT_BUCKETS", BUCKET)]);
    client
        .templates()
        .build(
            &template,
            "mounts-allow",
            BuildOptions {
                bucket: Some(emu.artifact_bucket()),
                context_dir: Some(dir.path().to_path_buf()),
                poll_interval: Some(Duration::from_millis(50)),
                timeout: Duration::from_secs(300),
                ..BuildOptions::default()
            },
        )
        .await
        .expect("the image builds");
    emu.image_arn("mounts-allow")
}

async fn run(sandbox: &Sandbox, cmd: &str) -> rayito::CommandResult {
    match sandbox.commands().run(cmd).await {
        Ok(out) => out,
        Err(SandboxError::CommandExit {
            exit_code, stderr, ..
        }) => {
            panic!("{cmd}: exit {exit_code}: {}", stderr.as_str())
        }
        Err(e) => panic!("{cmd}: {e}"),
    }
}

/// The stderr of `cmd`, which must fail.
async fn fails(sandbox: &Sandbox, cmd: &str) -> String {
    match sandbox.commands().run(cmd).await {
        Err(SandboxError::CommandExit { stderr, .. }) => stderr.into_string(),
        other => panic!("{cmd} should fail: {other:?}"),
    }
}

async fn until_terminated(emu: &Emulator, id: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while emu.state(id) != Some(MicrovmState::Terminated) {
        assert!(Instant::now() < until, "still {:?}", emu.state(id));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn new_microvms(emu: &Emulator, before: &[String]) -> Vec<String> {
    emu.microvm_ids()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_read_and_write_the_bucket_and_refuse_what_they_must() {
    if !supported() {
        return;
    }
    let emu = emulator().await;
    let s3 = s3_client(&emu.s3_endpoint_url(), emu.access_key());
    for bucket in [BUCKET, OTHER] {
        s3.create_bucket()
            .bucket(bucket)
            .send()
            .await
            .expect("CreateBucket");
    }
    s3.put_object()
        .bucket(BUCKET)
        .key("in/hello.txt")
        .body(b"hello through the mount\n".to_vec().into())
        .send()
        .await
        .expect("PutObject");
    let image = allowlisting_image(&emu).await;
    let on_image = || builder(&emu).template(&image).execution_role_arn(ROLE);

    // A read-only mount and a writable one (no overwrite, no delete).
    let writer = on_image()
        .mount("/mnt/in", S3Mount::new(BUCKET).prefix("in/"))
        .mount(
            "/home/user/out",
            S3Mount::new(BUCKET).prefix("out/").read_only(false),
        )
        .create()
        .await
        .expect("a sandbox with two mounts");
    let statuses = writer.mounts().statuses().await.expect("statuses");
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(
        statuses.values().all(|s| s.state == MountState::Mounted),
        "{statuses:?}"
    );
    let out = run(&writer, "cat /mnt/in/hello.txt").await;
    assert_eq!(out.stdout, "hello through the mount\n");

    // Written through the mount: an object as soon as the file is closed.
    run(
        &writer,
        "echo written in a sandbox > /home/user/out/new.txt",
    )
    .await;
    let got = s3
        .get_object()
        .bucket(BUCKET)
        .key("out/new.txt")
        .send()
        .await
        .expect("the object is in the bucket");
    let body = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(&body[..], b"written in a sandbox\n");

    // The refusals, from the kernel through the FUSE server.
    let ro = fails(&writer, "echo x > /mnt/in/x").await;
    assert!(ro.contains("Read-only file system"), "{ro}");
    let rm = fails(&writer, "rm /home/user/out/new.txt").await;
    assert!(rm.contains("Operation not permitted"), "{rm}");
    assert!(
        s3.head_object()
            .bucket(BUCKET)
            .key("out/new.txt")
            .send()
            .await
            .is_ok(),
        "a refused unlink deletes nothing"
    );

    // Another sandbox on the same prefix sees the same objects.
    let reader = on_image()
        .mount("/mnt/out", S3Mount::new(BUCKET).prefix("out/"))
        .create()
        .await
        .expect("a second sandbox");
    let out = run(&reader, "cat /mnt/out/new.txt").await;
    assert_eq!(out.stdout, "written in a sandbox\n");

    // A bucket the image does not allowlist: refused, the sandbox ended.
    let before = emu.microvm_ids();
    let err = on_image()
        .mount("/mnt/other", S3Mount::new(OTHER))
        .create()
        .await
        .expect_err("not allowlisted");
    assert_eq!(err.kind(), ErrorKind::Mount, "{err:?}");
    assert_eq!(err.mount_code().map(|c| c.as_str()), Some("not_allowed"));
    assert!(
        err.to_string().starts_with(
            "mounts: the agent refused the s3_mounts section (INVALID, not_allowed); "
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("RAYITO_ALLOWED_MOUNT_BUCKETS"),
        "{err}"
    );
    let launched = new_microvms(&emu, &before);
    assert_eq!(launched.len(), 1);
    until_terminated(&emu, &launched[0]).await;

    for sandbox in [writer, reader] {
        sandbox.kill().await.expect("kill");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_mount_path_launches_nothing() {
    let emu = emulator().await;
    let before = emu.microvm_ids();
    let err = builder(&emu)
        .execution_role_arn(ROLE)
        .mount("/etc/data", S3Mount::new(BUCKET))
        .create()
        .await
        .expect_err("outside /mnt/ and /home/user/");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert!(err.to_string().contains("/etc/data"), "{err}");
    assert!(new_microvms(&emu, &before).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_mounts_is_unimplemented_and_the_sandbox_terminated() {
    let emu = Emulator::start(EmulatorConfig {
        agent_s3_mounts: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let before = emu.microvm_ids();
    let err = builder(&emu)
        .template(emu.image_arn("rayito-base-caps"))
        .execution_role_arn(ROLE)
        .mount("/mnt/data", S3Mount::new(BUCKET))
        .create()
        .await
        .expect_err("no s3_mounts in Health");
    match &err {
        SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "mounts"),
        other => panic!("{other:?}"),
    }
    let launched = new_microvms(&emu, &before);
    assert_eq!(launched.len(), 1);
    until_terminated(&emu, &launched[0]).await;
}
