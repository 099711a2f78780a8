//! Sandboxes on an image layer (`AgentConfig::image_layer`, what the local
//! backend's built templates run on): the sandbox's mount namespace shows
//! the host's root with the layer over it, read-only. Real kernel mounts
//! throughout (overlayfs, binds, `pivot_root`); a hand-made layer in the
//! shape overlayfs leaves an upper directory (whiteouts are character
//! devices 0:0).
//!
//! The tests need root with mount namespaces; elsewhere they print
//! `SKIPPED: <test>: <reason>` (a failure under `RAYITO_TEST_STRICT=1`).

use crate::skip_support;
use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rayito_agent::{Agent, AgentConfig};
use support::{TestAgent, payload, run_bash};

/// Whether the host can run these tests; records the skip otherwise.
fn supported() -> bool {
    let root = rustix_is_root();
    let overlay = std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|fs| fs.lines().any(|l| l.ends_with("\toverlay")));
    if root && overlay {
        return true;
    }
    let reason = if root {
        "needs overlayfs"
    } else {
        "needs root (mount namespaces, overlayfs)"
    };
    skip_support::skip(reason);
    false
}

fn rustix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A host directory under `/opt` holding `kept` and `gone`, removed on drop.
struct HostDir(PathBuf);

impl HostDir {
    fn new() -> Self {
        let dir = PathBuf::from(format!(
            "/opt/rayito-layer-test-{}-{:08x}",
            std::process::id(),
            rand_u32()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("kept"), "host kept\n").unwrap();
        std::fs::write(dir.join("gone"), "host gone\n").unwrap();
        Self(dir)
    }

    fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_u32() -> u32 {
    rand::random()
}

/// A layer with `/opt/x/file` (in a directory everyone may write, so that
/// only read-only-ness can refuse a write), an executable
/// `/usr/local/bin/rayito-layer-tool`, a new top-level `/app/file`, a file
/// in the home, and a whiteout of the host's `<host>/gone`.
fn make_layer(host: &HostDir) -> tempfile::TempDir {
    make_layer_in(host, &std::env::temp_dir())
}

/// [`make_layer`] in a directory of `parent`.
fn make_layer_in(host: &HostDir, parent: &Path) -> tempfile::TempDir {
    let layer = tempfile::tempdir_in(parent).unwrap();
    let l = layer.path();
    std::fs::create_dir_all(l.join("opt/x")).unwrap();
    std::fs::write(l.join("opt/x/file"), "from the layer\n").unwrap();
    std::fs::set_permissions(l.join("opt/x"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir_all(l.join("usr/local/bin")).unwrap();
    let tool = l.join("usr/local/bin/rayito-layer-tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool ran as $(id -u)\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(l.join("app")).unwrap();
    std::fs::write(l.join("app/file"), "app file\n").unwrap();
    std::fs::create_dir_all(l.join("home/user/sub")).unwrap();
    std::fs::write(l.join("home/user/sub/welcome.txt"), "welcome\n").unwrap();
    let hidden = l.join("opt").join(host.name());
    std::fs::create_dir_all(&hidden).unwrap();
    let whiteout =
        std::ffi::CString::new(hidden.join("gone").to_string_lossy().as_bytes()).unwrap();
    // SAFETY: mknod on a NUL-terminated path we own.
    let rc = unsafe { libc::mknod(whiteout.as_ptr(), libc::S_IFCHR, 0) };
    assert_eq!(
        rc,
        0,
        "mknod a whiteout: {}",
        std::io::Error::last_os_error()
    );
    // The layer's directories must be traversable by the sandbox's uid.
    std::fs::set_permissions(l, std::fs::Permissions::from_mode(0o755)).unwrap();
    layer
}

async fn start_on(layer: &Path) -> TestAgent {
    let t = TestAgent::start_config(AgentConfig {
        image_layer: Some(layer.to_path_buf()),
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

async fn sh(t: &TestAgent, script: &str) -> String {
    let outcome = run_bash(t, script).await;
    let text = String::from_utf8_lossy(&outcome.stdout).into_owned();
    let end = outcome.end.expect("the command ended");
    assert_eq!(
        end.exit_code,
        0,
        "{script}: {text} {}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_sees_the_layer_over_the_host_read_only() {
    if !supported() {
        return;
    }
    let host = HostDir::new();
    let layer = make_layer(&host);
    let t = start_on(layer.path()).await;
    assert_eq!(run_bash(&t, "true").await.end.unwrap().exit_code, 0);
    let hidden = format!("/opt/{}", host.name());
    let out = sh(
        &t,
        &format!(
            "cat /opt/x/file /app/file; rayito-layer-tool; /usr/local/bin/rayito-layer-tool; \
             cat {hidden}/kept; test -e {hidden}/gone && echo gone-present || echo gone-absent; \
             cat /home/user/sub/welcome.txt; stat -c %u /home/user/sub/welcome.txt; \
             test -x /bin/sh && echo host-shell; cat /etc/hostname >/dev/null && echo host-etc"
        ),
    )
    .await;
    assert_eq!(
        out,
        format!(
            "from the layer\napp file\ntool ran as 1000\ntool ran as 1000\nhost kept\n\
             gone-absent\nwelcome\n1000\nhost-shell\nhost-etc\n"
        ),
    );
    // The code service's look-up of programs sees the layer too.
    assert!(t.agent.env().finds_program("rayito-layer-tool"));
    // Read-only: /opt/x is 0777 in the layer, so only the mount refuses.
    for target in ["/opt/x/new", "/app/new", "/usr/local/bin/new"] {
        let outcome = run_bash(&t, &format!("echo x > {target}")).await;
        let err = String::from_utf8_lossy(&outcome.stderr).into_owned();
        assert_ne!(outcome.end.unwrap().exit_code, 0, "{target}");
        assert!(err.contains("Read-only file system"), "{target}: {err}");
    }
    // The home and /tmp stay the sandbox's own and writable.
    sh(&t, "echo mine > /home/user/sub/mine && echo t > /tmp/t").await;
    assert!(t.host_path("/home/user/sub/mine").exists());
    // The host's root is untouched.
    assert!(host.0.join("gone").exists());
    assert!(!Path::new("/app/file").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandboxes_share_one_layer() {
    if !supported() {
        return;
    }
    let host = HostDir::new();
    let layer = make_layer(&host);
    let a = start_on(layer.path()).await;
    let b = start_on(layer.path()).await;
    sh(&a, "echo a > /home/user/sub/welcome.txt").await;
    assert_eq!(
        sh(&a, "cat /opt/x/file /home/user/sub/welcome.txt").await,
        "from the layer\na\n"
    );
    assert_eq!(
        sh(&b, "cat /opt/x/file /home/user/sub/welcome.txt").await,
        "from the layer\nwelcome\n"
    );
    drop(a);
    assert_eq!(sh(&b, "cat /app/file").await, "app file\n");
    // The layer's own home is a template, never written.
    assert_eq!(
        std::fs::read_to_string(layer.path().join("home/user/sub/welcome.txt")).unwrap(),
        "welcome\n"
    );
}

/// A layer kept below a host directory it also changes (an emulator
/// root under `/opt`, say): that directory cannot be a lower layer beside
/// the layer (ELOOP), so it is rebuilt entry by entry, and the layer's
/// files there still show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_below_a_directory_it_changes_still_shows_there() {
    if !supported() {
        return;
    }
    let host = HostDir::new();
    let store = HostDir::new();
    let layer = make_layer_in(&host, &store.0);
    std::fs::set_permissions(&store.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = start_on(layer.path()).await;
    let hidden = format!("/opt/{}", host.name());
    let out = sh(
        &t,
        &format!(
            "cat /opt/x/file {hidden}/kept; test -e {hidden}/gone || echo gone-absent; \
             cat {}/kept; stat -c %a /opt",
            store.0.display()
        ),
    )
    .await;
    let mode = std::fs::metadata("/opt").unwrap().permissions().mode() & 0o7777;
    assert_eq!(
        out,
        format!("from the layer\nhost kept\ngone-absent\nhost kept\n{mode:o}\n")
    );
    let outcome = run_bash(&t, "echo x > /opt/x/new").await;
    assert!(String::from_utf8_lossy(&outcome.stderr).contains("Read-only file system"));
}

/// Top-level host directories, removed on drop.
struct TopLevel(Vec<PathBuf>);

impl Drop for TopLevel {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A top-level whiteout hides a host directory; a top-level opaque
/// directory replaces the host's; a top-level file and symlink of the
/// layer show as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_level_whiteouts_and_opaque_directories_hide_the_host() {
    if !supported() {
        return;
    }
    let tag = format!("{}-{:08x}", std::process::id(), rand_u32());
    let gone = PathBuf::from(format!("/rayito-layer-gone-{tag}"));
    let opaque = PathBuf::from(format!("/rayito-layer-opaque-{tag}"));
    let _cleanup = TopLevel(vec![gone.clone(), opaque.clone()]);
    for dir in [&gone, &opaque] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("host"), "host\n").unwrap();
    }
    let layer = tempfile::tempdir().unwrap();
    let l = layer.path();
    std::fs::set_permissions(l, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c = |p: &Path| std::ffi::CString::new(p.to_string_lossy().as_bytes()).unwrap();
    let whiteout = c(&l.join(gone.strip_prefix("/").unwrap()));
    // SAFETY: mknod and lsetxattr on NUL-terminated paths we own.
    unsafe {
        assert_eq!(libc::mknod(whiteout.as_ptr(), libc::S_IFCHR, 0), 0);
    }
    let layer_opaque = l.join(opaque.strip_prefix("/").unwrap());
    std::fs::create_dir(&layer_opaque).unwrap();
    std::fs::write(layer_opaque.join("new"), "new\n").unwrap();
    let opaque_c = c(&layer_opaque);
    // SAFETY: as above; the value is a 1-byte buffer we own.
    let rc = unsafe {
        libc::lsetxattr(
            opaque_c.as_ptr(),
            c"trusted.overlay.opaque".as_ptr(),
            b"y".as_ptr().cast(),
            1,
            0,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    std::fs::write(l.join(format!("rayito-layer-file-{tag}")), "file\n").unwrap();
    std::os::unix::fs::symlink(
        opaque.strip_prefix("/").unwrap(),
        l.join(format!("rayito-layer-link-{tag}")),
    )
    .unwrap();
    let t = start_on(l).await;
    let out = sh(
        &t,
        &format!(
            "test -e {gone} && echo gone-present || echo gone-absent; ls {opaque}; \
             cat /rayito-layer-file-{tag} /rayito-layer-link-{tag}/new",
            gone = gone.display(),
            opaque = opaque.display(),
        ),
    )
    .await;
    assert_eq!(out, "gone-absent\nnew\nfile\nnew\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_layer_fails_the_start() {
    if !supported() {
        return;
    }
    let err = Agent::start(AgentConfig {
        image_layer: Some(PathBuf::from("/nonexistent/rayito-layer")),
        ..AgentConfig::default()
    })
    .await
    .expect_err("no layer, no sandbox");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
}
