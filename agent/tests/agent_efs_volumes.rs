//! The EFS volumes section on the local backend, through real gRPC and real
//! sandbox commands: each volume is a directory of a `LocalVolumes` kept by
//! the test (as the emulator keeps its access points), attached in the
//! sandbox's mount namespace as an idmapped bind. What a sandbox writes is
//! on disk with the access point's uid and gid; another sandbox sees and
//! edits it; the files outlive both agents. Needs root (mount namespaces,
//! idmapped mounts); elsewhere each test skips.

use crate::skip_support;
use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito_agent::local_volumes::{LocalVolume, LocalVolumeError, LocalVolumes};
use rayito_agent::{AgentConfig, pb};
use support::TestAgent;

const FS: &str = "fs-0123456789abcdef0";
const AP: &str = "fsap-0123456789abcdef0";
const AP2: &str = "fsap-00000000000000002";
const UNKNOWN_AP: &str = "fsap-ffffffffffffffff";
/// The access point's POSIX user, as files are stored on disk.
const AP_UID: u32 = 4242;
const AP_GID: u32 = 4343;

/// The test's EFS: access points and their directories.
#[derive(Debug, Default)]
struct TestVolumes {
    points: Mutex<HashMap<(String, String), LocalVolume>>,
}

impl LocalVolumes for TestVolumes {
    fn resolve(&self, fs: &str, ap: &str) -> Result<LocalVolume, LocalVolumeError> {
        let points = self.points.lock().unwrap();
        if !points.keys().any(|(f, _)| f == fs) {
            return Err(LocalVolumeError::FileSystemNotFound);
        }
        points
            .get(&(fs.to_owned(), ap.to_owned()))
            .cloned()
            .ok_or(LocalVolumeError::AccessPointNotFound)
    }
}

/// A temporary EFS with access points `AP` and `AP2`, each a directory
/// owned by the access point's user (0750, as EFS creates it).
struct Efs {
    volumes: Arc<TestVolumes>,
    base: tempfile::TempDir,
}

impl Efs {
    fn new() -> Self {
        let base = tempfile::Builder::new()
            .prefix("rayito-efs-test-")
            .tempdir()
            .unwrap();
        let efs = Efs {
            volumes: Arc::default(),
            base,
        };
        efs.add(AP);
        efs.add(AP2);
        efs
    }

    fn add(&self, ap: &str) -> PathBuf {
        let dir = self.base.path().join(ap);
        make_owned_dir(&dir);
        self.volumes.points.lock().unwrap().insert(
            (FS.to_owned(), ap.to_owned()),
            LocalVolume {
                dir: dir.clone(),
                uid: AP_UID,
                gid: AP_GID,
            },
        );
        dir
    }

    fn dir(&self, ap: &str) -> PathBuf {
        self.base.path().join(ap)
    }

    async fn agent(&self) -> TestAgent {
        self.agent_with(true).await
    }

    async fn agent_with(&self, enabled: bool) -> TestAgent {
        let local: Arc<dyn LocalVolumes> = self.volumes.clone();
        let t = TestAgent::start_config(AgentConfig {
            local_volumes: Some(local),
            efs_volumes: enabled,
            ..AgentConfig::default()
        })
        .await;
        let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        t
    }
}

fn make_owned_dir(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir).unwrap();
    std::os::unix::fs::chown(dir, Some(AP_UID), Some(AP_GID)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750)).unwrap();
}

/// Skips (and says so) where the agent cannot mount volumes.
async fn supported(t: &TestAgent) -> bool {
    if !rustix::process::geteuid().is_root() {
        skip_support::skip("needs root (mount namespaces and idmapped mounts)");
        return false;
    }
    if !features(t).await.efs_volumes {
        skip_support::skip("the agent offers no EFS volumes here (no mount namespace)");
        return false;
    }
    true
}

/// A fresh EFS and an agent on it, where the agent can mount volumes.
async fn ready() -> Option<(Efs, TestAgent)> {
    let efs = Efs::new();
    let t = efs.agent().await;
    supported(&t).await.then_some((efs, t))
}

async fn features(t: &TestAgent) -> pb::AgentFeatures {
    t.health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
        .features
        .unwrap()
}

fn client(t: &TestAgent) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

fn volume(path: &str, ap: &str, read_only: bool) -> pb::EfsVolumeMount {
    pb::EfsVolumeMount {
        mount_path: path.to_owned(),
        file_system_id: FS.to_owned(),
        access_point_id: ap.to_owned(),
        read_only,
        mount_target_ip: String::new(),
    }
}

/// Applies an `efs_volumes` section: its code and error class.
async fn apply(t: &TestAgent, mounts: Vec<pb::EfsVolumeMount>) -> (pb::SectionCode, String) {
    let response = client(t)
        .configure(pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            efs_volumes: Some(pb::EfsVolumesConfig { mounts }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.results.len(), 1);
    let result = &response.results[0];
    assert_eq!(result.section(), pb::ConfigSection::EfsVolumes);
    (result.code(), result.error_class.clone())
}

/// `(path, state, class)` of each volume ConfigureStatus reports.
async fn status(t: &TestAgent) -> Vec<(String, pb::EfsVolumeState, String)> {
    client(t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .efs_volumes
        .map(|s| {
            s.volumes
                .into_iter()
                .map(|v| (v.mount_path.clone(), v.state(), v.last_error_class))
                .collect()
        })
        .unwrap_or_default()
}

fn row(path: &str, state: pb::EfsVolumeState, class: &str) -> (String, pb::EfsVolumeState, String) {
    (path.to_owned(), state, class.to_owned())
}

/// Runs `script` in the sandbox: stdout, then stderr.
async fn sh(t: &TestAgent, script: &str) -> (String, String) {
    let out = support::run_bash(t, script).await;
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const APPLIED: (pb::SectionCode, String) = (pb::SectionCode::Applied, String::new());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_stored_as_the_access_point_and_shared_between_sandboxes() {
    let efs = Efs::new();
    let a = efs.agent().await;
    if !supported(&a).await {
        return;
    }
    assert_eq!(
        apply(&a, vec![volume("/mnt/data", AP, false)]).await,
        APPLIED
    );
    assert_eq!(
        status(&a).await,
        [row("/mnt/data", pb::EfsVolumeState::Mounted, "")]
    );
    let (out, err) = sh(
        &a,
        "id -u; stat -c %u:%g /mnt/data; echo hello > /mnt/data/f; mkdir /mnt/data/d; \
         stat -c %u:%g /mnt/data/f /mnt/data/d",
    )
    .await;
    assert_eq!(out, "1000\n1000:1000\n1000:1000\n1000:1000\n", "{err}");
    // On disk, as the access point's user, whoever the sandbox's host uid.
    let file = efs.dir(AP).join("f");
    let md = std::fs::metadata(&file).unwrap();
    assert_eq!((md.uid(), md.gid()), (AP_UID, AP_GID));
    let md = std::fs::metadata(efs.dir(AP).join("d")).unwrap();
    assert_eq!((md.uid(), md.gid()), (AP_UID, AP_GID));

    // A second sandbox (another host uid) on the same access point, at a
    // path of its home.
    let b = efs.agent().await;
    assert_eq!(
        apply(&b, vec![volume("/home/user/shared", AP, false)]).await,
        APPLIED
    );
    let (out, err) = sh(
        &b,
        "cat /home/user/shared/f; echo more >> /home/user/shared/f; stat -c %u /home/user/shared/f",
    )
    .await;
    assert_eq!(out, "hello\n1000\n", "{err}");
    let (out, _) = sh(&a, "cat /mnt/data/f").await;
    assert_eq!(out, "hello\nmore\n");
    assert_ne!(
        a.agent.env().containment().unprivileged_uid,
        b.agent.env().containment().unprivileged_uid
    );

    // The files outlive both agents.
    a.agent.shutdown().await;
    b.agent.shutdown().await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nmore\n");
    let md = std::fs::metadata(&file).unwrap();
    assert_eq!((md.uid(), md.gid()), (AP_UID, AP_GID));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_volume_refuses_writes() {
    let efs = Efs::new();
    std::fs::write(efs.dir(AP).join("given"), "data\n").unwrap();
    let t = efs.agent().await;
    if !supported(&t).await {
        return;
    }
    assert_eq!(apply(&t, vec![volume("/mnt/ro", AP, true)]).await, APPLIED);
    let (out, err) = sh(
        &t,
        "cat /mnt/ro/given; touch /mnt/ro/new 2>&1 | grep -c 'Read-only file system'; \
         rm -f /mnt/ro/given 2>&1 | grep -c 'Read-only file system'",
    )
    .await;
    assert_eq!(out, "data\n1\n1\n", "{err}");
    assert!(!efs.dir(AP).join("new").exists());
    assert!(efs.dir(AP).join("given").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_access_point_fails_not_found_and_stops_there() {
    let Some((_efs, t)) = ready().await else {
        return;
    };
    assert_eq!(
        apply(
            &t,
            vec![
                volume("/mnt/a", AP, false),
                volume("/mnt/b", UNKNOWN_AP, false),
                volume("/mnt/c", AP2, false),
            ]
        )
        .await,
        (pb::SectionCode::Failed, "not_found".to_owned())
    );
    assert_eq!(
        status(&t).await,
        [
            row("/mnt/a", pb::EfsVolumeState::Mounted, ""),
            row("/mnt/b", pb::EfsVolumeState::Failed, "not_found"),
            row("/mnt/c", pb::EfsVolumeState::Unmounted, ""),
        ]
    );
    // An unknown file system too.
    let mut other = volume("/mnt/z", AP, false);
    other.file_system_id = "fs-fedcba9876543210".into();
    assert_eq!(
        apply(&t, vec![other]).await,
        (pb::SectionCode::Failed, "not_found".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feature_off_is_unsupported_and_health_says_so() {
    let efs = Efs::new();
    let t = efs.agent_with(false).await;
    assert!(!features(&t).await.efs_volumes);
    assert_eq!(
        apply(&t, vec![volume("/mnt/data", AP, false)]).await,
        (pb::SectionCode::Unsupported, String::new())
    );
    assert_eq!(status(&t).await, []);
    // A MicroVM's agent (no local stand-in) without mount.efs offers none.
    let plain = TestAgent::start().await;
    let helper = ["/sbin", "/usr/sbin", "/usr/local/sbin", "/usr/bin"]
        .iter()
        .any(|d| Path::new(d).join("mount.efs").exists());
    if !helper {
        assert!(!features(&plain).await.efs_volumes);
        assert_eq!(
            apply(&plain, vec![volume("/mnt/data", AP, false)]).await,
            (pb::SectionCode::Unsupported, String::new())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_sections_are_refused_whole_and_change_nothing() {
    let Some((_efs, t)) = ready().await else {
        return;
    };
    assert_eq!(
        apply(&t, vec![volume("/mnt/keep", AP, false)]).await,
        APPLIED
    );
    let invalid = |class: &str| (pb::SectionCode::Invalid, class.to_owned());
    for path in ["mnt/x", "/etc/x", "/mnt", "/mnt/../etc", "/home/user/x/"] {
        let got = apply(&t, vec![volume(path, AP2, false)]).await;
        assert_eq!(got, invalid("invalid_path"), "{path}");
    }
    let overlap = vec![volume("/mnt/x", AP, false), volume("/mnt/x/y", AP2, false)];
    assert_eq!(apply(&t, overlap).await, invalid("invalid_path"));
    let five = (0..5).map(|i| volume(&format!("/mnt/v{i}"), AP, false));
    assert_eq!(apply(&t, five.collect()).await, invalid("too_many_volumes"));
    for (fs, ap) in [("fs-XYZ", AP), (FS, FS), (AP, AP)] {
        let mut v = volume("/mnt/new", ap, false);
        v.file_system_id = fs.into();
        assert_eq!(apply(&t, vec![v]).await, invalid("invalid_id"), "{fs} {ap}");
    }
    for ip in ["fe80::1", "mt.example", "10.0.0"] {
        let mut v = volume("/mnt/new", AP2, false);
        v.mount_target_ip = ip.into();
        assert_eq!(apply(&t, vec![v]).await, invalid("invalid_ip"), "{ip}");
    }
    assert_eq!(
        status(&t).await,
        [row("/mnt/keep", pb::EfsVolumeState::Mounted, "")]
    );
    let (out, err) = sh(&t, "echo still > /mnt/keep/x && cat /mnt/keep/x").await;
    assert_eq!(out, "still\n", "{err}");
}

/// `grep` of the sandbox's own mount table: the mount ids at `path`.
async fn mount_ids(t: &TestAgent, path: &str) -> String {
    sh(
        t,
        &format!("awk '$5==\"{path}\"{{print $1}}' /proc/self/mountinfo"),
    )
    .await
    .0
}

/// The never-reused id (`STATX_MNT_ID_UNIQUE`, Linux 6.8) of the mount
/// the agent holds for `path` (its descriptor is in this process), where
/// the kernel has it.
fn unique_mount_id(path: &str) -> Option<u64> {
    const STATX_MNT_ID_UNIQUE: u32 = 0x4000;
    let fd = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let link = e.ok()?.path();
            (std::fs::read_link(&link).ok()? == Path::new(path)).then_some(link)
        })
        .next()?;
    let stat = rustix::fs::statx(
        rustix::fs::CWD,
        &fd,
        rustix::fs::AtFlags::empty(),
        rustix::fs::StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE),
    )
    .ok()?;
    (stat.stx_mask & STATX_MNT_ID_UNIQUE != 0).then_some(stat.stx_mnt_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_section_unmounts_what_it_dropped_and_keeps_the_rest() {
    let Some((_efs, t)) = ready().await else {
        return;
    };
    assert_eq!(
        apply(
            &t,
            vec![
                volume("/mnt/a", AP, false),
                volume("/home/user/b", AP2, false)
            ]
        )
        .await,
        APPLIED
    );
    let a_before = mount_ids(&t, "/mnt/a").await;
    let b_before = mount_ids(&t, "/home/user/b").await;
    assert_eq!(a_before.lines().count(), 1, "{a_before:?}");
    assert_eq!(b_before.lines().count(), 1, "{b_before:?}");
    let b_unique = unique_mount_id("/home/user/b");
    if b_unique.is_none() {
        skip_support::skip(
            "the kernel has no STATX_MNT_ID_UNIQUE (Linux 6.8): mount identity unchecked",
        );
    }

    assert_eq!(
        apply(&t, vec![volume("/home/user/b", AP2, false)]).await,
        APPLIED
    );
    assert_eq!(mount_ids(&t, "/mnt/a").await, "");
    // Identical and live: the same mount, not a new one.
    assert_eq!(mount_ids(&t, "/home/user/b").await, b_before);
    assert_eq!(unique_mount_id("/home/user/b"), b_unique);
    assert_eq!(
        status(&t).await,
        [row("/home/user/b", pb::EfsVolumeState::Mounted, "")]
    );
    // Read-only now: another volume at the same path.
    assert_eq!(
        apply(&t, vec![volume("/home/user/b", AP2, true)]).await,
        APPLIED
    );
    let b_after = mount_ids(&t, "/home/user/b").await;
    assert_eq!(b_after.lines().count(), 1, "{b_after:?}");
    if b_unique.is_some() {
        assert_ne!(unique_mount_id("/home/user/b"), b_unique);
    }
    let (out, _) = sh(
        &t,
        "touch /home/user/b/x 2>&1 | grep -c 'Read-only file system'",
    )
    .await;
    assert_eq!(out, "1\n");

    // The empty section clears them all.
    assert_eq!(apply(&t, vec![]).await, APPLIED);
    assert_eq!(mount_ids(&t, "/home/user/b").await, "");
    assert_eq!(status(&t).await, []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_on_the_path_is_refused() {
    let Some((_efs, t)) = ready().await else {
        return;
    };
    let (_, err) = sh(
        &t,
        "mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere /home/user/link",
    )
    .await;
    assert_eq!(err, "");
    assert_eq!(
        apply(&t, vec![volume("/home/user/link/v", AP, false)]).await,
        (pb::SectionCode::Failed, "invalid_path".to_owned())
    );
    let (out, _) = sh(&t, "ls -A /tmp/elsewhere; echo end").await;
    assert_eq!(out, "end\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_point_directory_swapped_for_a_link_is_not_followed() {
    let Some((efs, t)) = ready().await else {
        return;
    };
    // A directory of the host the link points at, with a file in it.
    let outside = efs.base.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("host-secret"), "not for the sandbox").unwrap();
    // The access point's directory replaced by a link after the emulator
    // resolved it (what a sandbox writing in a parent volume could do).
    let dir = efs.dir(AP2);
    std::fs::remove_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    assert_eq!(
        apply(&t, vec![volume("/mnt/swapped", AP2, false)]).await,
        (pb::SectionCode::Failed, "invalid_path".to_owned())
    );
    let (out, _) = sh(&t, "ls -A /mnt/swapped 2>/dev/null; echo end").await;
    assert_eq!(out, "end\n");
}

/// Polls ConfigureStatus until the volume at `path` is no longer
/// REMOUNTING (the re-probe runs in the background after `/resume`).
async fn settled(t: &TestAgent, path: &str) -> (String, pb::EfsVolumeState, String) {
    for _ in 0..200 {
        let rows = status(t).await;
        let found = rows.into_iter().find(|r| r.0 == path).unwrap();
        if found.1 != pb::EfsVolumeState::Remounting {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} still remounting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_reprobes_and_remounts_a_volume_that_went_away() {
    let Some((efs, t)) = ready().await else {
        return;
    };
    assert_eq!(
        apply(&t, vec![volume("/mnt/data", AP, false)]).await,
        APPLIED
    );
    let (out, _) = sh(&t, "echo one > /mnt/data/f && cat /mnt/data/f").await;
    assert_eq!(out, "one\n");

    // Healthy: suspend flushes, resume finds it well and keeps it.
    let before = mount_ids(&t, "/mnt/data").await;
    assert_eq!(t.hook("suspend", None).await, (200, "ok".to_owned()));
    assert_eq!(t.hook("resume", None).await, (200, "ok".to_owned()));
    assert_eq!(
        settled(&t, "/mnt/data").await,
        row("/mnt/data", pb::EfsVolumeState::Mounted, "")
    );
    assert_eq!(mount_ids(&t, "/mnt/data").await, before);

    // The directory replaced underneath (a new root): the probe finds the
    // old one gone and the volume is mounted again.
    std::fs::remove_dir_all(efs.dir(AP)).unwrap();
    make_owned_dir(&efs.dir(AP));
    std::fs::write(efs.dir(AP).join("fresh"), "two\n").unwrap();
    assert_eq!(t.hook("suspend", None).await, (200, "ok".to_owned()));
    assert_eq!(t.hook("resume", None).await, (200, "ok".to_owned()));
    assert_eq!(
        settled(&t, "/mnt/data").await,
        row("/mnt/data", pb::EfsVolumeState::Mounted, "")
    );
    let (out, err) = sh(&t, "cat /mnt/data/fresh; ls /mnt/data").await;
    assert_eq!(out, "two\nfresh\n", "{err}");

    // Gone for good: DEGRADED with what the probe found.
    std::fs::remove_dir_all(efs.dir(AP)).unwrap();
    assert_eq!(t.hook("suspend", None).await, (200, "ok".to_owned()));
    assert_eq!(t.hook("resume", None).await, (200, "ok".to_owned()));
    assert_eq!(
        settled(&t, "/mnt/data").await,
        row("/mnt/data", pb::EfsVolumeState::Degraded, "gone")
    );
}

/// The descriptors of this process that lead to `path` (the agent keeps
/// one per attached volume).
fn held(path: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target == Path::new(path))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_detaches_every_volume() {
    let Some((efs, t)) = ready().await else {
        return;
    };
    let path = "/mnt/terminate-detaches-every-volume";
    assert_eq!(apply(&t, vec![volume(path, AP, false)]).await, APPLIED);
    assert_eq!(held(path), 1);
    assert_eq!(t.hook("terminate", None).await, (200, "ok".to_owned()));
    t.agent.terminated().await;
    assert_eq!(held(path), 0);
    assert!(efs.dir(AP).exists());
}
