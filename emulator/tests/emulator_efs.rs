//! The emulator's EFS through the real `aws-sdk-efs` client (and, once,
//! through botocore): file systems and access points made once per
//! idempotency token, described with paging, deleted under EFS's rules
//! with its error codes and statuses; one available mount target per file
//! system at 127.0.0.1; the access points' directories made with
//! CreationInfo's owner and mode when an agent first resolves them; what
//! a root of the caller's keeps across emulators.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use aws_sdk_efs as efs;
use efs::error::ProvideErrorMetadata;
use efs::types::{CreationInfo, PosixUser, RootDirectory, Tag};
use rayito_agent::local_volumes::LocalVolumeError;
use rayito_emulator::{Emulator, EmulatorConfig};

use crate::skip_support;

use crate::emulator_support;

fn client_with(emu: &Emulator, secret: &str) -> efs::Client {
    emulator_support::efs_client(emu, secret)
}

fn client(emu: &Emulator) -> efs::Client {
    client_with(emu, &emu.access_key().secret)
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build().unwrap()
}

/// The error code and HTTP status of a failed call.
fn code_status<E: ProvideErrorMetadata + std::fmt::Debug>(
    err: &efs::error::SdkError<E, efs::config::http::HttpResponse>,
) -> (String, u16) {
    (
        err.code().unwrap_or("<none>").to_owned(),
        err.raw_response().map_or(0, |r| r.status().as_u16()),
    )
}

async fn new_fs(c: &efs::Client, token: &str) -> String {
    c.create_file_system()
        .creation_token(token)
        .send()
        .await
        .expect("CreateFileSystem")
        .file_system_id()
        .to_owned()
}

/// An access point like the SDK's VolumeStore makes: uid/gid 1000, root
/// `/rayito-volumes/<name>` made 0750.
async fn new_ap(c: &efs::Client, fs: &str, name: &str) -> String {
    c.create_access_point()
        .client_token(format!("token-{fs}-{name}"))
        .file_system_id(fs)
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
        .tags(tag("rayito:volume", name))
        .send()
        .await
        .expect("CreateAccessPoint")
        .access_point_id()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_token_makes_one_file_system_and_describe_pages_through_them() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let made = c
        .create_file_system()
        .creation_token("volumes-a")
        .encrypted(true)
        .throughput_mode(efs::types::ThroughputMode::Elastic)
        .tags(tag("Name", "data"))
        .tags(tag("rayito", "efs-volumes"))
        .send()
        .await
        .expect("CreateFileSystem");
    let id = made.file_system_id().to_owned();
    assert!(id.starts_with("fs-") && id.len() == 20, "{id}");
    assert_eq!(
        made.life_cycle_state(),
        &efs::types::LifeCycleState::Available
    );
    assert_eq!(made.name(), Some("data"));
    assert_eq!(made.number_of_mount_targets(), 1);
    assert_eq!(made.owner_id(), emu.account_id());
    assert_eq!(
        made.file_system_arn(),
        Some(
            format!(
                "arn:aws:elasticfilesystem:us-east-1:{}:file-system/{id}",
                emu.account_id()
            )
            .as_str()
        )
    );
    assert_eq!(
        emu.efs().dir().join(&id).metadata().unwrap().mode() & 0o7777,
        0o755
    );

    // The same token again: no second file system; the error names the first.
    let err = c
        .create_file_system()
        .creation_token("volumes-a")
        .send()
        .await
        .expect_err("a used creation token");
    assert_eq!(code_status(&err), ("FileSystemAlreadyExists".into(), 409));
    match err.into_service_error() {
        efs::operation::create_file_system::CreateFileSystemError::FileSystemAlreadyExists(e) => {
            assert_eq!(e.file_system_id(), id)
        }
        other => panic!("{other:?}"),
    }

    let mut ids = vec![id.clone()];
    for t in ["volumes-b", "volumes-c", "volumes-d", "volumes-e"] {
        ids.push(new_fs(&c, t).await);
    }
    // Pages of two, in creation order, each page's marker from the last.
    let mut seen = Vec::new();
    let mut marker: Option<String> = None;
    let mut pages = 0;
    loop {
        let out = c
            .describe_file_systems()
            .max_items(2)
            .set_marker(marker.clone())
            .send()
            .await
            .expect("DescribeFileSystems");
        pages += 1;
        assert!(out.file_systems().len() <= 2);
        seen.extend(
            out.file_systems()
                .iter()
                .map(|f| f.file_system_id().to_owned()),
        );
        marker = out.next_marker().map(str::to_owned);
        if marker.is_none() {
            break;
        }
    }
    assert_eq!((seen, pages), (ids.clone(), 3));

    let by_token = c
        .describe_file_systems()
        .creation_token("volumes-c")
        .send()
        .await
        .unwrap();
    assert_eq!(by_token.file_systems()[0].file_system_id(), ids[2]);
    let by_arn = c
        .describe_file_systems()
        .file_system_id(made.file_system_arn().unwrap())
        .send()
        .await
        .unwrap();
    let described = &by_arn.file_systems()[0];
    assert_eq!(described.file_system_id(), id);
    assert_eq!(described.encrypted(), Some(true));
    assert_eq!(described.tags().len(), 2);

    let err = c
        .describe_file_systems()
        .file_system_id("fs-0123456789abcdef0")
        .send()
        .await
        .expect_err("an unknown file system");
    assert_eq!(code_status(&err), ("FileSystemNotFound".into(), 404));
    let err = c
        .describe_file_systems()
        .file_system_id("not-an-id")
        .send()
        .await
        .expect_err("a malformed id");
    assert_eq!(code_status(&err), ("BadRequest".into(), 400));
    assert_eq!(emu.efs().calls("CreateFileSystem"), 6);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_token_makes_one_access_point_and_describe_pages_by_file_system() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "aps").await;
    let other_fs = new_fs(&c, "aps-other").await;
    let first = new_ap(&c, &fs, "v0").await;
    let described = c
        .describe_access_points()
        .access_point_id(&first)
        .send()
        .await
        .unwrap();
    let ap = &described.access_points()[0];
    assert_eq!(ap.file_system_id(), Some(fs.as_str()));
    assert_eq!(
        ap.posix_user().map(|u| (u.uid(), u.gid())),
        Some((1000, 1000))
    );
    let root = ap.root_directory().unwrap();
    assert_eq!(root.path(), Some("/rayito-volumes/v0"));
    assert_eq!(root.creation_info().unwrap().permissions(), "0750");
    assert_eq!(ap.tags()[0].value(), "v0");
    assert_eq!(
        ap.access_point_arn(),
        Some(
            format!(
                "arn:aws:elasticfilesystem:us-east-1:{}:access-point/{first}",
                emu.account_id()
            )
            .as_str()
        )
    );
    assert_eq!(
        ap.life_cycle_state(),
        Some(&efs::types::LifeCycleState::Available)
    );

    // The same client token: AccessPointAlreadyExists naming the first.
    let err = c
        .create_access_point()
        .client_token(format!("token-{fs}-v0"))
        .file_system_id(&fs)
        .send()
        .await
        .expect_err("a used client token");
    assert_eq!(code_status(&err), ("AccessPointAlreadyExists".into(), 409));
    match err.into_service_error() {
        efs::operation::create_access_point::CreateAccessPointError::AccessPointAlreadyExists(
            e,
        ) => {
            assert_eq!(e.access_point_id(), first)
        }
        other => panic!("{other:?}"),
    }

    let mut made = vec![first.clone()];
    for i in 1..5 {
        made.push(new_ap(&c, &fs, &format!("v{i}")).await);
    }
    new_ap(&c, &other_fs, "elsewhere").await;
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = c
            .describe_access_points()
            .file_system_id(&fs)
            .max_results(2)
            .set_next_token(token.clone())
            .send()
            .await
            .expect("DescribeAccessPoints");
        seen.extend(
            out.access_points()
                .iter()
                .map(|a| a.access_point_id().unwrap().to_owned()),
        );
        token = out.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    assert_eq!(seen, made);
    let all = c.describe_access_points().send().await.unwrap();
    assert_eq!(all.access_points().len(), 6);

    for (call, expected) in [
        (
            c.describe_access_points()
                .access_point_id("fsap-0123456789abcdef0"),
            ("AccessPointNotFound", 404),
        ),
        (
            c.describe_access_points()
                .file_system_id("fs-0123456789abcdef0"),
            ("FileSystemNotFound", 404),
        ),
        (
            c.describe_access_points()
                .file_system_id(&fs)
                .access_point_id(&first),
            ("BadRequest", 400),
        ),
        (
            c.describe_access_points()
                .file_system_id(&fs)
                .next_token("garbage"),
            ("BadRequest", 400),
        ),
    ] {
        let err = call.send().await.expect_err("refused");
        assert_eq!(code_status(&err), (expected.0.to_owned(), expected.1));
    }
    // The model's path and permission rules.
    for (path, permissions) in [("/a/../b", "0750"), ("/a/b/c/d/e", "0750"), ("/ok", "0758")] {
        let err = c
            .create_access_point()
            .client_token(format!("bad-{path}-{permissions}"))
            .file_system_id(&fs)
            .root_directory(
                RootDirectory::builder()
                    .path(path)
                    .creation_info(
                        CreationInfo::builder()
                            .owner_uid(1)
                            .owner_gid(1)
                            .permissions(permissions)
                            .build()
                            .unwrap(),
                    )
                    .build(),
            )
            .send()
            .await
            .expect_err("an invalid root directory");
        assert_eq!(
            code_status(&err),
            ("BadRequest".into(), 400),
            "{path} {permissions}"
        );
    }
    let err = c
        .create_access_point()
        .client_token("no-such-fs")
        .file_system_id("fs-0123456789abcdef0")
        .send()
        .await
        .expect_err("an unknown file system");
    assert_eq!(code_status(&err), ("FileSystemNotFound".into(), 404));
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_points_directory_is_made_with_its_creation_info_when_first_resolved() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "dirs").await;
    let ap = new_ap(&c, &fs, "data").await;
    let expected_dir = emu.efs().dir().join(&fs).join("rayito-volumes/data");
    // As EFS: made when a client first connects, not at CreateAccessPoint.
    assert!(!expected_dir.exists());
    let volumes = emu.efs().volumes();
    let vol = volumes.resolve(&fs, &ap).expect("resolves");
    assert_eq!(
        (vol.dir.clone(), vol.uid, vol.gid),
        (expected_dir.clone(), 1000, 1000)
    );
    let meta = std::fs::metadata(&vol.dir).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o750);
    if rustix::process::geteuid().is_root() {
        assert_eq!((meta.uid(), meta.gid()), (1000, 1000));
    } else {
        skip_support::skip(
            "the owner check: the emulator is not root, so its directories stay its own",
        );
    }
    std::fs::write(vol.dir.join("kept.txt"), b"data").unwrap();

    // A second access point on the same path shares the files.
    let same = c
        .create_access_point()
        .client_token("same-path")
        .file_system_id(&fs)
        .root_directory(
            RootDirectory::builder()
                .path("/rayito-volumes/data")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let twin = volumes
        .resolve(&fs, same.access_point_id().unwrap())
        .expect("an existing directory needs no CreationInfo");
    assert_eq!(twin.dir, expected_dir);
    // Without a POSIX user the directory's owner stands in.
    assert_eq!((twin.uid, twin.gid), (meta.uid(), meta.gid()));

    // No CreationInfo and no directory: the mount would fail, as on EFS.
    let bare = c
        .create_access_point()
        .client_token("bare")
        .file_system_id(&fs)
        .root_directory(RootDirectory::builder().path("/missing").build())
        .send()
        .await
        .unwrap();
    assert_eq!(
        volumes.resolve(&fs, bare.access_point_id().unwrap()),
        Err(LocalVolumeError::AccessPointNotFound)
    );
    // A pair that does not belong together, and unknown ids.
    let other_fs = new_fs(&c, "dirs-other").await;
    assert_eq!(
        volumes.resolve(&other_fs, &ap),
        Err(LocalVolumeError::AccessPointNotFound)
    );
    assert_eq!(
        volumes.resolve("fs-0123456789abcdef0", &ap),
        Err(LocalVolumeError::FileSystemNotFound)
    );
    assert_eq!(
        volumes.resolve(&fs, "fsap-0123456789abcdef0"),
        Err(LocalVolumeError::AccessPointNotFound)
    );
    // A link planted where an access point's path goes is never followed.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), emu.efs().dir().join(&fs).join("escape")).unwrap();
    let planted = c
        .create_access_point()
        .client_token("planted")
        .file_system_id(&fs)
        .root_directory(
            RootDirectory::builder()
                .path("/escape/in")
                .creation_info(
                    CreationInfo::builder()
                        .owner_uid(1000)
                        .owner_gid(1000)
                        .permissions("755")
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        volumes.resolve(&fs, planted.access_point_id().unwrap()),
        Err(LocalVolumeError::AccessPointNotFound)
    );
    assert!(!outside.path().join("in").exists());

    // DeleteAccessPoint keeps the data; the access point no longer resolves.
    c.delete_access_point()
        .access_point_id(&ap)
        .send()
        .await
        .unwrap();
    assert_eq!(
        volumes.resolve(&fs, &ap),
        Err(LocalVolumeError::AccessPointNotFound)
    );
    assert_eq!(
        std::fs::read(expected_dir.join("kept.txt")).unwrap(),
        b"data"
    );
    let described = c
        .describe_file_systems()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    let size = described.file_systems()[0].size_in_bytes().unwrap().value();
    assert_eq!(size, 4);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_system_is_deleted_only_without_access_points_and_mount_targets() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "deletes").await;
    let ap = new_ap(&c, &fs, "v").await;
    emu.efs().volumes().resolve(&fs, &ap).unwrap();
    let hex = fs.strip_prefix("fs-").unwrap();

    let targets = c
        .describe_mount_targets()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    let [mt] = targets.mount_targets() else {
        panic!("one mount target: {targets:?}")
    };
    assert_eq!(mt.mount_target_id(), format!("fsmt-{hex}"));
    assert_eq!(
        mt.life_cycle_state(),
        &efs::types::LifeCycleState::Available
    );
    assert_eq!(mt.ip_address(), Some("127.0.0.1"));
    assert_eq!(mt.file_system_id(), fs);
    assert_eq!(mt.availability_zone_name(), Some("us-east-1a"));
    assert!(mt.subnet_id().starts_with("subnet-"));
    // The same, asked again and by the other keys.
    let again = c
        .describe_mount_targets()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert_eq!(again.mount_targets(), targets.mount_targets());
    let by_ap = c
        .describe_mount_targets()
        .access_point_id(&ap)
        .send()
        .await
        .unwrap();
    assert_eq!(by_ap.mount_targets(), targets.mount_targets());
    let by_id = c
        .describe_mount_targets()
        .mount_target_id(mt.mount_target_id())
        .send()
        .await
        .unwrap();
    assert_eq!(by_id.mount_targets(), targets.mount_targets());
    let err = c.describe_mount_targets().send().await.expect_err("no key");
    assert_eq!(code_status(&err), ("BadRequest".into(), 400));
    let err = c
        .describe_mount_targets()
        .file_system_id("fs-0123456789abcdef0")
        .send()
        .await
        .expect_err("an unknown file system");
    assert_eq!(code_status(&err), ("FileSystemNotFound".into(), 404));

    let in_use = |err: &efs::error::SdkError<_, _>| code_status(err);
    let err = c
        .delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .expect_err("in use");
    assert_eq!(in_use(&err), ("FileSystemInUse".into(), 409));
    c.delete_access_point()
        .access_point_id(&ap)
        .send()
        .await
        .unwrap();
    let err = c
        .delete_access_point()
        .access_point_id(&ap)
        .send()
        .await
        .expect_err("deleted twice");
    assert_eq!(code_status(&err), ("AccessPointNotFound".into(), 404));
    let err = c
        .delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .expect_err("a mount target");
    assert_eq!(code_status(&err), ("FileSystemInUse".into(), 409));
    c.delete_mount_target()
        .mount_target_id(mt.mount_target_id())
        .send()
        .await
        .unwrap();
    let none = c
        .describe_mount_targets()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert!(none.mount_targets().is_empty());
    let err = c
        .delete_mount_target()
        .mount_target_id(mt.mount_target_id())
        .send()
        .await
        .expect_err("deleted twice");
    assert_eq!(code_status(&err), ("MountTargetNotFound".into(), 404));
    let described = c
        .describe_file_systems()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert_eq!(described.file_systems()[0].number_of_mount_targets(), 0);

    c.delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .expect("deleted");
    assert!(!emu.efs().dir().join(&fs).exists(), "the data goes with it");
    let err = c
        .delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .expect_err("gone");
    assert_eq!(code_status(&err), ("FileSystemNotFound".into(), 404));
    // A token of a deleted file system makes a new one.
    let again = new_fs(&c, "deletes").await;
    assert_ne!(again, fs);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_are_set_listed_and_removed_on_both_kinds_of_resource() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "tags").await;
    let ap = new_ap(&c, &fs, "t").await;
    for id in [fs.clone(), ap.clone()] {
        c.tag_resource()
            .resource_id(&id)
            .tags(tag("Name", "first"))
            .tags(tag("team", "data"))
            .send()
            .await
            .expect("TagResource");
        c.tag_resource()
            .resource_id(&id)
            .tags(tag("Name", "second"))
            .send()
            .await
            .unwrap();
        c.untag_resource()
            .resource_id(&id)
            .tag_keys("team")
            .send()
            .await
            .expect("UntagResource");
        let listed = c
            .list_tags_for_resource()
            .resource_id(&id)
            .send()
            .await
            .unwrap();
        let names: Vec<(&str, &str)> = listed.tags().iter().map(|t| (t.key(), t.value())).collect();
        assert!(names.contains(&("Name", "second")), "{names:?}");
        assert!(!names.iter().any(|(k, _)| *k == "team"), "{names:?}");
    }
    let described = c
        .describe_file_systems()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert_eq!(described.file_systems()[0].name(), Some("second"));
    let err = c
        .tag_resource()
        .resource_id(&fs)
        .tags(tag("aws:reserved", "x"))
        .send()
        .await
        .expect_err("a reserved key");
    assert_eq!(code_status(&err), ("BadRequest".into(), 400));
    let err = c
        .list_tags_for_resource()
        .resource_id("fsap-0123456789abcdef0")
        .send()
        .await
        .expect_err("an unknown access point");
    assert_eq!(code_status(&err), ("AccessPointNotFound".into(), 404));
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_signed_counted_and_can_be_throttled() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let err = client_with(&emu, "not-the-secret")
        .describe_file_systems()
        .send()
        .await
        .expect_err("a wrong signature");
    assert_eq!(code_status(&err), ("InvalidSignatureException".into(), 403));
    emu.efs().throttle("DescribeMountTargets", 1);
    let c = client(&emu);
    let fs = new_fs(&c, "throttled").await;
    let err = c
        .describe_mount_targets()
        .file_system_id(&fs)
        .send()
        .await
        .expect_err("throttled once");
    assert_eq!(code_status(&err), ("ThrottlingException".into(), 429));
    c.describe_mount_targets()
        .file_system_id(&fs)
        .send()
        .await
        .expect("then served");
    assert_eq!(emu.efs().calls("DescribeMountTargets"), 2);
    assert_eq!(emu.efs().calls("DescribeFileSystems"), 1);
    assert_eq!(emu.efs().total_calls(), 4);
    emu.shutdown().await;
}

/// The ids DescribeAccessPoints lists for file system `fs`.
async fn listed(c: &efs::Client, fs: &str) -> Vec<String> {
    c.describe_access_points()
        .file_system_id(fs)
        .send()
        .await
        .expect("DescribeAccessPoints")
        .access_points()
        .iter()
        .filter_map(|a| a.access_point_id().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_can_be_made_stale_as_efss_is_eventually_consistent() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "stale").await;
    let old = new_ap(&c, &fs, "old").await;
    let gone = new_ap(&c, &fs, "gone").await;
    emu.efs().stale_listings(2);
    let new = new_ap(&c, &fs, "new").await;
    c.delete_access_point()
        .access_point_id(&gone)
        .send()
        .await
        .unwrap();

    // A lookup by id is current, and uses up no stale answer.
    let by_id = c
        .describe_access_points()
        .access_point_id(&new)
        .send()
        .await
        .unwrap();
    assert_eq!(by_id.access_points().len(), 1);
    // Two listings as before the fault: the new one missing, the deleted
    // one still there; then the current state.
    assert_eq!(listed(&c, &fs).await, [old.clone(), gone.clone()]);
    assert_eq!(listed(&c, &fs).await, [old.clone(), gone.clone()]);
    assert_eq!(listed(&c, &fs).await, [old.clone(), new.clone()]);

    // The file system a listing names is checked against the current
    // state, stale or not.
    emu.efs().stale_listings(3);
    let err = c
        .describe_access_points()
        .file_system_id("fs-00000000deadbeef")
        .send()
        .await
        .expect_err("an unknown file system");
    assert_eq!(code_status(&err), ("FileSystemNotFound".into(), 404));
    assert_eq!(listed(&c, &fs).await, [old.clone(), new.clone()]);
    let newest = new_ap(&c, &fs, "newest").await;
    assert_eq!(listed(&c, &fs).await, [old.clone(), new.clone()]);
    // Faults::clear forgets it.
    emu.faults().clear();
    assert_eq!(listed(&c, &fs).await, [old, new, newest]);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_of_the_callers_keeps_volumes_for_the_next_emulator() {
    let root = tempfile::tempdir().unwrap();
    let config = || EmulatorConfig {
        root: root.path().to_path_buf(),
        ..EmulatorConfig::default()
    };
    let emu = Emulator::start(config()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "kept").await;
    let ap = new_ap(&c, &fs, "kept").await;
    let vol = emu.efs().volumes().resolve(&fs, &ap).unwrap();
    std::fs::write(vol.dir.join("state.txt"), b"survives").unwrap();
    emu.shutdown().await;

    let emu = Emulator::start(config()).await.unwrap();
    let c = client(&emu);
    let described = c
        .describe_access_points()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert_eq!(
        described.access_points()[0].access_point_id(),
        Some(ap.as_str())
    );
    let err = c
        .create_file_system()
        .creation_token("kept")
        .send()
        .await
        .expect_err("the token is remembered");
    assert_eq!(code_status(&err), ("FileSystemAlreadyExists".into(), 409));
    let again = emu.efs().volumes().resolve(&fs, &ap).unwrap();
    assert_eq!(
        std::fs::read(again.dir.join("state.txt")).unwrap(),
        b"survives"
    );
    emu.shutdown().await;
}

/// The venv `.ci/install-test-deps` fills (boto3 and botocore with it).
fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-deps/venv/bin/python3")
}

/// botocore, a client no one here wrote, agrees with the emulator on the
/// shapes: it parses each description and error, and pages with its own
/// paginator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn botocore_agrees_with_the_emulators_efs() {
    let python = venv_python();
    let has_boto3 = std::process::Command::new(&python)
        .args(["-c", "import boto3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_boto3 {
        skip_support::skip(format!(
            "no boto3 in {} (.ci/install-test-deps installs it)",
            python.display()
        ));
        return;
    }
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let script = r#"
import boto3, botocore.exceptions as ex, os
efs = boto3.client("efs", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1")
fs = efs.create_file_system(CreationToken="boto", Tags=[{"Key": "Name", "Value": "boto"}])
fid = fs["FileSystemId"]
assert fs["LifeCycleState"] == "available" and fs["Name"] == "boto", fs
try:
    efs.create_file_system(CreationToken="boto")
    raise SystemExit("no FileSystemAlreadyExists")
except efs.exceptions.FileSystemAlreadyExists as e:
    assert e.response["FileSystemId"] == fid, e.response
    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 409
made = []
for i in range(5):
    ap = efs.create_access_point(
        ClientToken=f"boto-{i}", FileSystemId=fid,
        PosixUser={"Uid": 1000, "Gid": 1000},
        RootDirectory={"Path": f"/rayito-volumes/b{i}",
                       "CreationInfo": {"OwnerUid": 1000, "OwnerGid": 1000, "Permissions": "0750"}},
        Tags=[{"Key": "rayito:volume", "Value": f"b{i}"}])
    made.append(ap["AccessPointId"])
assert ap["RootDirectory"]["CreationInfo"]["Permissions"] == "0750", ap
try:
    efs.create_access_point(ClientToken="boto-0", FileSystemId=fid)
    raise SystemExit("no AccessPointAlreadyExists")
except efs.exceptions.AccessPointAlreadyExists as e:
    assert e.response["AccessPointId"] == made[0], e.response
seen = []
for page in efs.get_paginator("describe_access_points").paginate(
        FileSystemId=fid, PaginationConfig={"PageSize": 2}):
    assert len(page["AccessPoints"]) <= 2
    seen += [a["AccessPointId"] for a in page["AccessPoints"]]
assert seen == made, (seen, made)
mts = efs.describe_mount_targets(FileSystemId=fid)["MountTargets"]
assert [m["IpAddress"] for m in mts] == ["127.0.0.1"] and mts[0]["LifeCycleState"] == "available", mts
try:
    efs.delete_file_system(FileSystemId=fid)
    raise SystemExit("no FileSystemInUse")
except efs.exceptions.FileSystemInUse:
    pass
try:
    efs.describe_file_systems(FileSystemId="fs-0123456789abcdef0")
    raise SystemExit("no FileSystemNotFound")
except efs.exceptions.FileSystemNotFound as e:
    assert e.response["Error"]["Code"] == "FileSystemNotFound", e.response
    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404
try:
    efs.describe_access_points(AccessPointId="fsap-0123456789abcdef0")
    raise SystemExit("no AccessPointNotFound")
except efs.exceptions.AccessPointNotFound:
    pass
try:
    efs.describe_access_points(FileSystemId=fid, AccessPointId=made[0])
    raise SystemExit("no BadRequest")
except efs.exceptions.BadRequest as e:
    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400
for a in made:
    efs.delete_access_point(AccessPointId=a)
efs.delete_mount_target(MountTargetId=mts[0]["MountTargetId"])
efs.delete_file_system(FileSystemId=fid)
print("botocore ok")
"#;
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(&python)
        .args(["-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("AWS_CONFIG_FILE", home.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("no-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", &emu.access_key().id)
        .env("AWS_SECRET_ACCESS_KEY", &emu.access_key().secret)
        .env("ENDPOINT", emu.endpoint_url())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("botocore ok"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(emu.efs().calls("DeleteFileSystem"), 2);
    emu.shutdown().await;
}

/// The error messages docs/local.md ("EFS") transcribes are the ones the
/// emulator sends, ids written `<id>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_docs_local_md_transcribes_are_the_emulators() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/local.md"))
            .unwrap();
    let start = doc.find("\n### EFS\n").expect("the EFS section");
    let end = start
        + doc[start..]
            .find("\n### Not emulated")
            .expect("the next section");
    let doc = &doc[start..end];
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "doc").await;
    let ap = new_ap(&c, &fs, "doc").await;
    let unknown_fs = "fs-0123456789abcdef0";
    let unknown_ap = "fsap-0123456789abcdef0";
    let unknown_mt = "fsmt-0123456789abcdef0";
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut note = |err: &dyn ProvideErrorMetadata, id: &str| {
        let message = err.message().unwrap_or_default();
        let message = if id.is_empty() {
            message.to_owned()
        } else {
            message.replace(id, "<id>")
        };
        seen.push((err.code().unwrap_or_default().to_owned(), message));
    };
    let e = c
        .create_file_system()
        .creation_token("doc")
        .send()
        .await
        .unwrap_err();
    note(&e, &fs);
    let e = c
        .create_access_point()
        .client_token(format!("token-{fs}-doc"))
        .file_system_id(&fs)
        .send()
        .await
        .unwrap_err();
    note(&e, &ap);
    let e = c
        .describe_file_systems()
        .file_system_id(unknown_fs)
        .send()
        .await
        .unwrap_err();
    note(&e, unknown_fs);
    let e = c
        .describe_access_points()
        .access_point_id(unknown_ap)
        .send()
        .await
        .unwrap_err();
    note(&e, unknown_ap);
    let e = c
        .delete_mount_target()
        .mount_target_id(unknown_mt)
        .send()
        .await
        .unwrap_err();
    note(&e, unknown_mt);
    let e = c
        .delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap_err();
    note(&e, &fs);
    let mt = format!("fsmt-{}", fs.strip_prefix("fs-").unwrap());
    c.delete_mount_target()
        .mount_target_id(&mt)
        .send()
        .await
        .unwrap();
    let e = c
        .delete_file_system()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap_err();
    note(&e, &fs);
    emu.efs().throttle("ListTagsForResource", 1);
    let e = c
        .list_tags_for_resource()
        .resource_id(&fs)
        .send()
        .await
        .unwrap_err();
    note(&e, "");
    assert_eq!(seen.len(), 8);
    for (code, message) in &seen {
        let row = doc
            .lines()
            .find(|l| l.contains(&format!("`{message}`")))
            .unwrap_or_else(|| panic!("docs/local.md does not transcribe {code}: `{message}`"));
        assert!(row.contains(code.as_str()), "{row}");
    }
    emu.shutdown().await;
}

/// Simultaneous calls with one token make one resource: every other call
/// learns its id from the conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_calls_with_one_token_make_one_resource() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let calls = (0..8).map(|_| {
        let c = c.clone();
        tokio::spawn(async move { c.create_file_system().creation_token("race").send().await })
    });
    let mut made = Vec::new();
    let mut named = Vec::new();
    for call in calls {
        match call.await.unwrap() {
            Ok(out) => made.push(out.file_system_id().to_owned()),
            Err(err) => match err.into_service_error() {
                efs::operation::create_file_system::CreateFileSystemError::FileSystemAlreadyExists(e) => {
                    named.push(e.file_system_id().to_owned())
                }
                other => panic!("{other:?}"),
            },
        }
    }
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(named.iter().all(|id| *id == made[0]), "{named:?}");
    let fs = made.remove(0);
    let calls = (0..8).map(|_| {
        let c = c.clone();
        let fs = fs.clone();
        tokio::spawn(async move {
            c.create_access_point()
                .client_token("race")
                .file_system_id(fs)
                .send()
                .await
                .is_ok()
        })
    });
    let mut ok = 0;
    for call in calls {
        ok += usize::from(call.await.unwrap());
    }
    assert_eq!(ok, 1);
    let all = c
        .describe_access_points()
        .file_system_id(&fs)
        .send()
        .await
        .unwrap();
    assert_eq!(all.access_points().len(), 1);
    emu.shutdown().await;
}

/// The reference SDK's `VolumeStore` (0.17.1, in the same venv) runs
/// against the emulator unchanged: create (idempotent by its own client
/// token), get, list, destroy (data kept); and the directory it asks for
/// is made with its CreationInfo when an agent resolves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_volume_store_runs_against_the_emulator() {
    let python = venv_python();
    let has_reference = std::process::Command::new(&python)
        .args(["-c", "from rayito import VolumeStore"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_reference {
        skip_support::skip(format!(
            "the reference rayito is not installed in {} (.ci/install-test-deps installs it)",
            python.display()
        ));
        return;
    }
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let c = client(&emu);
    let fs = new_fs(&c, "reference").await;
    let script = r#"
import os
from rayito import VolumeStore
store = VolumeStore(file_system_id=os.environ["FS"])
a = store.create("alpha")
again = store.create("alpha")
assert again.access_point_id == a.access_point_id, (a, again)
store.create("beta")
assert store.get("alpha").access_point_id == a.access_point_id
names = sorted(v.name for v in store.list())
assert names == ["alpha", "beta"], names
assert store.destroy("beta") is True
assert store.destroy("beta") is False
print(a.access_point_id)
"#;
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(&python)
        .args(["-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("AWS_CONFIG_FILE", home.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("no-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", &emu.access_key().id)
        .env("AWS_SECRET_ACCESS_KEY", &emu.access_key().secret)
        .env("AWS_ENDPOINT_URL", emu.endpoint_url())
        .env("FS", &fs)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ap = stdout.trim();
    let vol = emu.efs().volumes().resolve(&fs, ap).expect("resolves");
    assert_eq!((vol.uid, vol.gid), (1000, 1000));
    assert_eq!(
        vol.dir,
        emu.efs().dir().join(&fs).join("rayito-volumes/alpha")
    );
    assert_eq!(std::fs::metadata(&vol.dir).unwrap().mode() & 0o7777, 0o750);
    assert_eq!(emu.efs().calls("DeleteAccessPoint"), 1);
    emu.shutdown().await;
}
