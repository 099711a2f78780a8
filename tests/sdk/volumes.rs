//! EFS volumes (`SandboxBuilder::volume`, `sbx.volumes()`) end to end on
//! the emulator: its EFS (file systems, access points, one available mount
//! target each) looked up through the AWS path, its agents mounting each
//! volume as an idmapped bind of the access point's directory. Two
//! sandboxes share a volume; the files outlive both; a read-only volume
//! refuses writes; an unknown access point fails `VolumeMount { not_found }`
//! and terminates the sandbox; an agent without the feature fails
//! `Unimplemented` and terminates it; refusals launch nothing.

use crate::sdk_support;

use std::time::{Duration, Instant};

use aws_sdk_efs as efs;
use efs::config::retry::RetryConfig;
use efs::config::{BehaviorVersion, Credentials, Region};
use efs::types::{CreationInfo, PosixUser, RootDirectory};
use rayito::volumes::{EfsVolume, VolumeState};
use rayito::{ErrorKind, Sandbox, SandboxBuilder, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState};
use sdk_support::skip::skip;
use sdk_support::{builder, emulator};

/// The connector and role a volume needs (recorded, not enforced, by the
/// emulator).
const CONNECTOR: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:efs-volumes";
const ROLE: &str = "arn:aws:iam::123456789012:role/rayito-sandbox";

/// An EFS client on `emu`'s endpoint.
fn efs_client(emu: &Emulator) -> efs::Client {
    let conf = efs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            &emu.access_key().id,
            &emu.access_key().secret,
            None,
            None,
            "test",
        ))
        .endpoint_url(emu.endpoint_url())
        .retry_config(RetryConfig::disabled())
        .build();
    efs::Client::from_conf(conf)
}

/// A file system on `emu` and an access point `name` of it (uid/gid 1000,
/// root `/rayito-volumes/<name>` made 0750, as `VolumeStore` makes them).
pub(crate) async fn volume_on(emu: &Emulator, name: &str) -> EfsVolume {
    let c = efs_client(emu);
    let fs = c
        .create_file_system()
        .creation_token(format!("fs-{name}"))
        .send()
        .await
        .expect("CreateFileSystem")
        .file_system_id()
        .to_owned();
    let ap = c
        .create_access_point()
        .client_token(format!("ap-{name}"))
        .file_system_id(&fs)
        .posix_user(PosixUser::builder().uid(1000).gid(1000).build().unwrap())
        .root_directory(
            RootDirectory::builder()
                .path(format!("/rayito-volumes/{name}"))
                .creation_info(
                    CreationInfo::builder()
                        .owner_uid(1000)
                        .owner_gid(1000)
                        .permissions("0750")
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .expect("CreateAccessPoint")
        .access_point_id()
        .unwrap()
        .to_owned();
    EfsVolume::new(fs, ap).name(name)
}

/// A builder on `emu` with the egress and role volumes need.
pub(crate) fn volume_builder(emu: &Emulator) -> SandboxBuilder {
    builder(emu).egress([CONNECTOR]).execution_role_arn(ROLE)
}

/// Whether this host can mount volumes (root: mount namespaces and
/// idmapped mounts); skips (and says so) when not.
fn supported() -> bool {
    if !rustix::process::geteuid().is_root() {
        skip("needs root (mount namespaces and idmapped mounts)");
        return false;
    }
    true
}

/// `b` created, or `None` (and a skip) when the local agent offers no
/// volumes on this host.
async fn mounted(b: SandboxBuilder) -> Option<Sandbox> {
    match b.create().await {
        Ok(sandbox) => Some(sandbox),
        Err(err) if err.kind() == ErrorKind::Unimplemented => {
            skip(format!("the local agent offers no EFS volumes here: {err}"));
            None
        }
        Err(err) => panic!("create: {err}"),
    }
}

async fn run(sandbox: &Sandbox, cmd: &str) -> rayito::CommandResult {
    sandbox.commands().run(cmd).await.expect(cmd)
}

async fn until_terminated(emu: &Emulator, id: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while emu.state(id) != Some(MicrovmState::Terminated) {
        assert!(Instant::now() < until, "still {:?}", emu.state(id));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The MicroVMs started on `emu` since `before`.
fn new_microvms(emu: &Emulator, before: &[String]) -> Vec<String> {
    emu.microvm_ids()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandboxes_share_a_volume_that_outlives_them() {
    if !supported() {
        return;
    }
    let emu = emulator().await;
    let volume = volume_on(&emu, "shared").await;
    let lookups = emu.efs().calls("DescribeMountTargets");

    let Some(writer) = mounted(volume_builder(&emu).volume("/mnt/shared", volume.clone())).await
    else {
        return;
    };
    // One lookup (the volume carried no mount target).
    assert_eq!(emu.efs().calls("DescribeMountTargets"), lookups + 1);
    let statuses = writer.volumes().statuses().await.unwrap();
    assert_eq!(statuses["/mnt/shared"].state, VolumeState::Mounted);
    assert_eq!(statuses["/mnt/shared"].last_error_class, None);
    let wrote = run(&writer, "echo from-the-writer > /mnt/shared/note && id -u").await;
    assert_eq!(wrote.exit_code, 0, "{}", wrote.stderr);

    let reader = volume_builder(&emu)
        .volume(
            "/home/user/data",
            volume.clone().mount_target_ip("127.0.0.1".parse().unwrap()),
        )
        .create()
        .await
        .expect("the reader");
    // The reader's volume carried its mount target: no lookup.
    assert_eq!(emu.efs().calls("DescribeMountTargets"), lookups + 1);
    let read = run(&reader, "cat /home/user/data/note").await;
    assert_eq!(read.stdout, "from-the-writer\n");
    // Both see the file as their own user's.
    let owner = run(&reader, "stat -c %u /home/user/data/note; id -u").await;
    let ids: Vec<&str> = owner.stdout.lines().collect();
    assert_eq!(ids.len(), 2, "{}", owner.stdout);
    assert_eq!(ids[0], ids[1]);
    let edited = run(&reader, "echo from-the-reader >> /home/user/data/note").await;
    assert_eq!(edited.exit_code, 0, "{}", edited.stderr);
    assert_eq!(
        run(&writer, "cat /mnt/shared/note").await.stdout,
        "from-the-writer\nfrom-the-reader\n"
    );

    writer.kill().await.unwrap();
    reader.kill().await.unwrap();
    let third = volume_builder(&emu)
        .volume("/mnt/later", volume)
        .create()
        .await
        .expect("a third sandbox");
    assert_eq!(
        run(&third, "cat /mnt/later/note").await.stdout,
        "from-the-writer\nfrom-the-reader\n"
    );
    third.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_volume_refuses_writes() {
    if !supported() {
        return;
    }
    let emu = emulator().await;
    let volume = volume_on(&emu, "readonly").await;
    let Some(writer) = mounted(volume_builder(&emu).volume("/mnt/rw", volume.clone())).await else {
        return;
    };
    assert_eq!(run(&writer, "echo kept > /mnt/rw/file").await.exit_code, 0);
    let sandbox = volume_builder(&emu)
        .volume("/mnt/ro", volume.read_only(true))
        .create()
        .await
        .unwrap();
    assert_eq!(run(&sandbox, "cat /mnt/ro/file").await.stdout, "kept\n");
    let refused = run(
        &sandbox,
        "echo x > /mnt/ro/other; echo $?; touch /mnt/ro/file 2>&1; true",
    )
    .await;
    assert!(refused.stdout.starts_with("1\n"), "{}", refused.stdout);
    assert!(
        refused.stdout.contains("Read-only file system"),
        "{}",
        refused.stdout
    );
    writer.kill().await.unwrap();
    sandbox.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_access_point_fails_not_found_and_terminates_the_sandbox() {
    if !supported() {
        return;
    }
    let emu = emulator().await;
    let known = volume_on(&emu, "known").await;
    let unknown = EfsVolume::new(known.file_system_id.clone(), "fsap-0000000000000000f");
    let before = emu.microvm_ids();
    let err = volume_builder(&emu)
        .volume("/mnt/gone", unknown)
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VolumeMount);
    assert_eq!(
        err.volume_mount_code().map(|c| c.as_str()),
        Some("not_found")
    );
    assert_eq!(
        err.to_string(),
        "volumes: the volumes could not be mounted (not_found); see docs/volumes.md for what the code means"
    );
    let launched = new_microvms(&emu, &before);
    assert_eq!(launched.len(), 1);
    until_terminated(&emu, &launched[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_system_that_does_not_exist_launches_nothing() {
    let emu = emulator().await;
    let before = emu.microvm_ids();
    let err = volume_builder(&emu)
        .volume(
            "/mnt/data",
            EfsVolume::new("fs-0000000000000000f", "fsap-0000000000000000f"),
        )
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VolumeNotFound);
    assert_eq!(
        err.to_string(),
        "volumes: no such file system in the region looked in; check the file system's id and region"
    );
    assert_eq!(new_microvms(&emu, &before), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_volumes_and_launch_nothing() {
    let emu = emulator().await;
    let volume = EfsVolume::new("fs-0123456789abcdef0", "fsap-0123456789abcdef0");
    let before = emu.microvm_ids();
    let cases: Vec<(SandboxBuilder, &str)> = vec![
        (
            builder(&emu)
                .execution_role_arn(ROLE)
                .volume("/mnt/a", volume.clone()),
            "invalid volumes: volumes need egress with the one connector of your VPC",
        ),
        (
            builder(&emu)
                .egress([CONNECTOR])
                .volume("/mnt/a", volume.clone()),
            "invalid volumes: volumes need an execution role",
        ),
        (
            volume_builder(&emu)
                .template("rayito-base")
                .volume("/mnt/a", volume.clone()),
            "feature volumes is not available: volumes need an image of the variant base-caps-efs",
        ),
        (
            volume_builder(&emu).volume("/mnt/a", EfsVolume::new("fs-1", "fsap-1")),
            "invalid volumes: the volume at /mnt/a has a file_system_id that is not fs-",
        ),
    ];
    for (b, start) in cases {
        let err: SandboxError = b.create().await.unwrap_err();
        assert!(err.to_string().starts_with(start), "{err}");
    }
    let err = volume_builder(&emu)
        .volume("/mnt/a", volume)
        .pool(rayito::PoolConfig::new(1))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid volumes: a pool's warm sandboxes never carry volumes; drop volume() from the pool's builder and create a sandbox with volumes with Sandbox::builder()"
    );
    assert_eq!(new_microvms(&emu, &before), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_reads_the_volumes_of_the_sandbox() {
    if !supported() {
        return;
    }
    let emu = emulator().await;
    let volume = volume_on(&emu, "reconnect").await;
    let token = "AAAAAAAAAAAAAAAAAAAAAA";
    let Some(sandbox) = mounted(
        volume_builder(&emu)
            .access_token(token)
            .volume("/mnt/data", volume),
    )
    .await
    else {
        return;
    };
    let again = builder(&emu).connect(sandbox.id(), token).await.unwrap();
    let statuses = again.volumes().statuses().await.unwrap();
    assert_eq!(statuses.keys().collect::<Vec<_>>(), ["/mnt/data"]);
    assert_eq!(statuses["/mnt/data"].state, VolumeState::Mounted);
    sandbox.kill().await.unwrap();
}

const IMAGE_REASON: &str = "feature volumes is not available: this image has no amazon-efs-utils (or does not run with additionalOsCapabilities ALL); publish the optional image rayito-base-caps-efs with `rayito image publish --with-efs --os-capabilities ALL` and create the sandbox from it; see docs/volumes.md";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_volumes_is_unimplemented_and_the_sandbox_terminated_or_kept() {
    let emu = Emulator::start(EmulatorConfig {
        agent_efs_volumes: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let volume = volume_on(&emu, "nofeature").await;
    for keep in [false, true] {
        let before = emu.microvm_ids();
        let err = volume_builder(&emu)
            .volume("/mnt/data", volume.clone())
            .keep_on_failure(keep)
            .create()
            .await
            .unwrap_err();
        match &err {
            SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "volumes"),
            other => panic!("{other:?}"),
        }
        let launched = new_microvms(&emu, &before);
        assert_eq!(launched.len(), 1);
        if keep {
            assert_eq!(err.meta().kept_sandbox_id(), Some(launched[0].as_str()));
            assert!(err.to_string().starts_with(IMAGE_REASON), "{err}");
            assert_eq!(emu.state(&launched[0]), Some(MicrovmState::Running));
        } else {
            assert_eq!(err.to_string(), IMAGE_REASON);
            until_terminated(&emu, &launched[0]).await;
        }
    }
}
