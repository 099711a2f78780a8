//! Writes and imports against sandbox code that plays with the path (issue
//! 41, sections 5 and 6), on the local backend: a symlink on the way that
//! leads out of the view is `path not allowed` (as docs/local.md says),
//! and a directory swapped for a symlink to a host directory while Writes
//! and S3 imports run lands nothing outside the sandbox.

use crate::sdk_support;

use std::time::{Duration, Instant};

use aws_sdk_s3 as s3;
use rayito::error::SandboxCode;
use rayito::transfer::S3Staging;
use rayito::{CommandOptions, Sandbox};
use rayito_emulator::Emulator;

/// What the SDK says of a write whose path leads out of the view.
const NOT_ALLOWED: &str = "the sandbox's user may not use the path given to files.write: path not allowed; pass a path that user may use (its home is /home/user)";
/// ... and of one with a file on the way.
const NOT_A_DIRECTORY: &str =
    "the agent refused an argument of files.write: not a directory; fix the value before retrying";

const BUCKET: &str = "sdk-path-races";
/// Writes from this size on go through S3 (an import).
const THRESHOLD: usize = 1 << 20;

async fn staged_sandbox(emu: &Emulator) -> Sandbox {
    let s3 = sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), emu.access_key());
    let _: s3::operation::create_bucket::CreateBucketOutput = s3
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    sdk_support::builder(emu)
        .aws(sdk_support::aws(emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .staging(S3Staging::new(BUCKET).threshold_bytes(THRESHOLD as u64))
        .create()
        .await
        .expect("sandbox")
}

/// A symlink on the way that leads out of the view, existing or not, is
/// PERMISSION_DENIED `path not allowed` (the SDK's message names the
/// path); a file on the way is `not a directory`. docs/local.md says both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_out_of_the_view_is_path_not_allowed() {
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    sbx.commands()
        .run(
            "ln -s ../../../../tmp ~/escape && ln -s /no-such-dir-rayito ~/dangling \
             && ln -s /tmp ~/host-tmp && echo x > ~/file",
        )
        .await
        .expect("the links");
    for path in [
        "/home/user/escape/x",
        "/home/user/dangling/x",
        "/home/user/dangling/a/b/x",
        "/home/user/host-tmp/x",
    ] {
        let err = sbx.files().write(path, "x").await.unwrap_err();
        assert_eq!(
            err.sandbox_code(),
            Some(&SandboxCode::PermissionDenied),
            "{path}: {err:?}"
        );
        assert_eq!(err.to_string(), NOT_ALLOWED, "{path}");
    }
    let err = sbx
        .files()
        .write("/home/user/file/x", "x")
        .await
        .unwrap_err();
    assert!(
        matches!(err, rayito::SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), NOT_A_DIRECTORY);
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/local.md")).unwrap();
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    for text in [
        "PERMISSION_DENIED `path not allowed`",
        "symlink on the way of a write or an import that does not lead to a directory of the view (one leading out of it, a dangling one) is `path not allowed`",
        "a file on the way is INVALID_ARGUMENT `not a directory`",
    ] {
        assert!(doc.contains(text), "docs/local.md does not say {text:?}");
    }
    sbx.kill().await.unwrap();
}

/// Guest code swaps `~/race/d` between a directory and a symlink to a
/// host directory the sandbox's user may write, as fast as it can, while
/// Writes (over gRPC) and imports (through S3) target `~/race/d/f<i>`:
/// some are refused, the others land inside the sandbox, and nothing
/// (file or temporary) appears in the host directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_write_leads_nothing_out() {
    use std::os::unix::fs::PermissionsExt as _;
    let outside = tempfile::Builder::new()
        .prefix("rayito-race-outside-")
        .tempdir()
        .expect("a host directory");
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let emu = sdk_support::emulator().await;
    let sbx = staged_sandbox(&emu).await;
    let handle = start_swapper(&sbx, outside.path()).await;
    let (mut written, mut refused) = (0u32, 0u32);
    let small = vec![b's'; 1000];
    let large = vec![b'l'; THRESHOLD];
    let started = Instant::now();
    let mut i = 0;
    while i < 60 || (refused == 0 || written == 0) && started.elapsed() < Duration::from_secs(60) {
        i += 1;
        let data = if i % 2 == 0 { &small } else { &large };
        match sbx
            .files()
            .write(&format!("/home/user/race/d/f{i}"), data.clone())
            .await
        {
            Ok(_) => written += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(handle.kill().await.expect("kill"));
    let mut landed = Vec::new();
    for entry in walkdir(outside.path()) {
        landed.push(entry);
    }
    assert!(
        landed.is_empty(),
        "{} paths leaked out of the sandbox in {i} writes: {landed:?}",
        landed.len()
    );
    assert!(refused > 0, "the race was never seen ({written} written)");
    assert!(written > 0, "every write was refused ({refused})");
    // Every write that succeeded is inside, and no temporary is left.
    let found = sbx
        .commands()
        .run("find ~/race -type f -name 'f*' | wc -l; find ~/race -name '.rayito-tmp-*' | wc -l")
        .await
        .expect("find");
    assert_eq!(found.stdout, format!("{written}\n0\n"));
    sbx.kill().await.unwrap();
}

/// Starts guest code that swaps `~/race/d` between a directory and a
/// symlink to `outside` (a host path) every millisecond, and waits until
/// it runs.
async fn start_swapper(sbx: &Sandbox, outside: &std::path::Path) -> rayito::CommandHandle {
    let swapper = format!(
        r#"
import os, time
os.makedirs(os.path.expanduser("~/race/d"), exist_ok=True)
os.chdir(os.path.expanduser("~/race"))
open("ready", "w").close()
i = 0
while True:
    i += 1
    try:
        os.rename("d", "d.%d" % i)
        os.symlink({outside:?}, "d")
        time.sleep(0.0005)
        os.unlink("d")
        os.rename("d.%d" % i, "d")
    except OSError:
        pass
    time.sleep(0.0005)
"#,
        outside = outside.to_str().unwrap(),
    );
    let handle = sbx
        .commands()
        .spawn(
            &format!("python3 -c '{}'", swapper.replace('\'', "'\\''")),
            CommandOptions::new().no_timeout(),
        )
        .await
        .expect("the swapper starts");
    let started = Instant::now();
    while !sbx.files().exists("race/ready").await.unwrap() {
        assert!(started.elapsed() < Duration::from_secs(30), "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle
}

/// Every path under `dir`, recursively.
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walkdir(&path));
        }
        out.push(path);
    }
    out
}

/// Guest code swaps `~/race/d` between a directory and a symlink to a host
/// directory holding a file the sandbox's user may read, while the host
/// program reads `~/race/d/secret`: a read gets the sandbox's own file or
/// a refusal, never the host's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_read_reads_nothing_outside() {
    use std::os::unix::fs::PermissionsExt as _;
    const CANARY: &str = "host-canary-3b9d71";
    let outside = tempfile::Builder::new()
        .prefix("rayito-race-read-")
        .tempdir()
        .expect("a host directory");
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, CANARY).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    sbx.files()
        .write("/home/user/race/d/secret", "inside")
        .await
        .expect("the sandbox's own file");
    let handle = start_swapper(&sbx, outside.path()).await;
    let (mut read, mut refused) = (0u32, 0u32);
    for _ in 0..400 {
        match sbx.files().read("/home/user/race/d/secret").await {
            Ok(bytes) => {
                assert_eq!(bytes, b"inside", "a read reached the host's file");
                read += 1;
            }
            Err(_) => refused += 1,
        }
    }
    assert!(handle.kill().await.expect("kill"));
    assert!(refused > 0, "the race was never seen ({read} read)");
    assert!(read > 0, "every read was refused ({refused})");
    sbx.kill().await.unwrap();
}
