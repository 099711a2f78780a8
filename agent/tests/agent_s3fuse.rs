//! The local backend's S3 mount helper (`s3fuse`), mounted for real: a
//! `/dev/fuse` descriptor mounted on a temporary directory of the host
//! (as root: `mount(2)` with `fd=`), served by the helper over a real S3
//! on loopback (`support::s3`), and used through ordinary file calls.
//! Hosts without root or `/dev/fuse` print a SKIPPED line.

use crate::skip_support;
use crate::support;

use std::ffi::CString;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use rayito_agent::persist::LocalS3;
use rayito_agent::s3fuse_for_tests::{TestDaemon, TestMountSpec, serve};
use support::s3::{TestS3, pattern};

const BUCKET: &str = "mounts";
const PREFIX: &str = "data/set1";
const UID: u32 = 1234;
const GID: u32 = 2345;

/// A mounted directory, unmounted (detached) and stopped when dropped.
struct Mounted {
    dir: tempfile::TempDir,
    daemon: Option<TestDaemon>,
}

impl Mounted {
    fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        detach(self.dir.path());
        if let Some(d) = self.daemon.take() {
            d.stop();
        }
    }
}

fn detach(dir: &Path) {
    let c = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; failure is harmless here.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
}

/// Why this host cannot mount FUSE, if it cannot.
fn cannot_mount() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("mounting FUSE needs root");
    }
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_err()
    {
        return Some("no /dev/fuse");
    }
    None
}

/// Opens /dev/fuse and mounts it on a new temporary directory, as the S3
/// mounts section does inside a sandbox.
fn mount_fuse() -> (tempfile::TempDir, OwnedFd) {
    let dir = tempfile::tempdir().expect("mount point");
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .expect("/dev/fuse");
    let fd = OwnedFd::from(dev);
    let target = CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    let data = CString::new(format!(
        "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
        fd.as_raw_fd()
    ))
    .unwrap();
    // SAFETY: valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"s3fuse".as_ptr(),
            target.as_ptr(),
            c"fuse".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    assert_eq!(rc, 0, "mount: {}", std::io::Error::last_os_error());
    (dir, fd)
}

fn spec() -> TestMountSpec {
    TestMountSpec {
        bucket: BUCKET.into(),
        prefix: PREFIX.into(),
        read_only: false,
        allow_overwrite: false,
        allow_delete: false,
        uid: UID,
        gid: GID,
    }
}

async fn mount_with(spec: TestMountSpec, s3: LocalS3) -> Result<Mounted, &'static str> {
    let (dir, fd) = mount_fuse();
    match serve(fd, spec, s3).await {
        Ok(daemon) => Ok(Mounted {
            dir,
            daemon: Some(daemon),
        }),
        Err(class) => {
            detach(dir.path());
            Err(class)
        }
    }
}

async fn mount(s3: &TestS3, spec: TestMountSpec) -> Mounted {
    mount_with(spec, s3.local_s3()).await.expect("mount serves")
}

/// A server with the test's bucket and a few objects under the prefix
/// (and one beside it, which no mount shows).
async fn seeded() -> TestS3 {
    let s3 = TestS3::start().await;
    s3.create_bucket(BUCKET).await;
    s3.put(BUCKET, "data/set1/top.txt", b"hello".to_vec()).await;
    s3.put(BUCKET, "data/set1/dir/a.txt", b"aaa".to_vec()).await;
    s3.put(BUCKET, "data/set1/dir/sub/deep.txt", b"deep".to_vec())
        .await;
    s3.put(BUCKET, "data/set10/outside.txt", b"no".to_vec())
        .await;
    s3
}

/// Runs blocking file calls off the runtime (the mount's S3 work runs on
/// it).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn errno(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    r.expect_err("refused").raw_os_error().expect("an errno")
}

macro_rules! need_fuse {
    () => {
        if let Some(reason) = cannot_mount() {
            skip_support::skip(reason);
            return;
        }
    };
}

#[tokio::test(flavor = "multi_thread")]
async fn prefixes_list_as_directories_with_fixed_owner_and_modes() {
    need_fuse!();
    let s3 = seeded().await;
    let m = mount(&s3, spec()).await;
    let root = m.path();
    blocking(move || {
        assert_eq!(names(&root), ["dir", "top.txt"]);
        assert_eq!(names(&root.join("dir")), ["a.txt", "sub"]);
        assert_eq!(names(&root.join("dir/sub")), ["deep.txt"]);
        let f = std::fs::metadata(root.join("top.txt")).unwrap();
        assert_eq!(
            (f.len(), f.mode(), f.uid(), f.gid()),
            (5, 0o100644, UID, GID)
        );
        let d = std::fs::metadata(root.join("dir")).unwrap();
        assert_eq!((d.mode(), d.uid(), d.gid()), (0o40755, UID, GID));
        assert_eq!(errno(std::fs::metadata(root.join("missing"))), libc::ENOENT);
        assert_eq!(
            std::fs::read(root.join("dir/sub/deep.txt")).unwrap(),
            b"deep"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn listings_longer_than_a_page_are_whole() {
    need_fuse!();
    let s3 = seeded().await;
    // (A directory shadowing a file of its name is `listing`'s unit
    // test: s3s-fs cannot hold both.)
    // More keys than one listing page (1,000).
    let many = s3.root().join(BUCKET).join("data/set1/many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..1205 {
        std::fs::write(many.join(format!("f{i:04}")), b"x").unwrap();
    }
    let m = mount(&s3, spec()).await;
    let root = m.path();
    blocking(move || {
        assert_eq!(names(&root), ["dir", "many", "top.txt"]);
        let listed = names(&root.join("many"));
        assert_eq!(listed.len(), 1205);
        assert_eq!(listed[0], "f0000");
        assert_eq!(listed[1204], "f1204");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_whole_ranged_and_sequential() {
    need_fuse!();
    let s3 = seeded().await;
    const LEN: u64 = 40 * 1024 * 1024 + 123;
    s3.put_pattern_file(BUCKET, "data/set1/big.bin", LEN);
    let m = mount(&s3, spec()).await;
    let root = m.path();
    blocking(move || {
        assert_eq!(std::fs::read(root.join("top.txt")).unwrap(), b"hello");
        let path = root.join("big.bin");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), LEN);
        // Ranged: preads far apart, then a seek and a read.
        let f = std::fs::File::open(&path).unwrap();
        for at in [LEN - 10, 17, 30_000_000, 5_000_000, LEN / 2] {
            let mut got = vec![0u8; 4096];
            let n = f.read_at(&mut got, at).unwrap();
            let want_len = 4096.min((LEN - at) as usize);
            assert_eq!(n, want_len, "at {at}");
            let mut want = vec![0u8; want_len];
            pattern(at, &mut want);
            assert_eq!(&got[..n], &want[..], "at {at}");
        }
        // Sequential: the whole object, in 1 MiB reads.
        let mut f = std::fs::File::open(&path).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut want = vec![0u8; 1 << 20];
        let mut at = 0u64;
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            pattern(at, &mut want[..n]);
            assert!(buf[..n] == want[..n], "bytes differ near {at}");
            at += n as u64;
        }
        assert_eq!(at, LEN);
        // A seek back restarts cleanly.
        f.seek(SeekFrom::Start(1000)).unwrap();
        let mut got = [0u8; 100];
        f.read_exact(&mut got).unwrap();
        let mut want = [0u8; 100];
        pattern(1000, &mut want);
        assert_eq!(got, want);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn new_files_become_objects_when_closed() {
    need_fuse!();
    let s3 = seeded().await;
    let m = mount(&s3, spec()).await;
    let root = m.path();
    const BIG: u64 = 20 * 1024 * 1024 + 7; // three parts
    blocking({
        let root = root.clone();
        move || {
            std::fs::write(root.join("small.txt"), b"written through the mount").unwrap();
            let mut f = std::fs::File::create(root.join("big.out")).unwrap();
            let mut chunk = vec![0u8; 1 << 20];
            let mut at = 0u64;
            while at < BIG {
                let n = (BIG - at).min(chunk.len() as u64) as usize;
                pattern(at, &mut chunk[..n]);
                f.write_all(&chunk[..n]).unwrap();
                at += n as u64;
            }
            drop(f);
            // Closed by another thread of the opening process: still the
            // opener's close, so the object is there when it returns.
            let mut f = std::fs::File::create(root.join("threads.txt")).unwrap();
            f.write_all(b"closed elsewhere").unwrap();
            std::thread::spawn(move || drop(f)).join().unwrap();
            // mkdir is local until a file is written in it.
            std::fs::create_dir(root.join("newdir")).unwrap();
            assert!(names(&root).contains(&"newdir".to_owned()));
            std::fs::write(root.join("newdir/inside.txt"), b"in").unwrap();
            std::fs::create_dir(root.join("emptydir")).unwrap();
            std::fs::remove_dir(root.join("emptydir")).unwrap();
            // Sequential only: a write behind the end is EINVAL.
            let f = std::fs::File::create(root.join("seq.txt")).unwrap();
            f.write_at(b"0123456789", 0).unwrap();
            assert_eq!(errno(f.write_at(b"x", 2)), libc::EINVAL);
            assert_eq!(errno(f.write_at(b"x", 20)), libc::EINVAL);
            drop(f);
            // rename: what mount-s3 answers.
            assert_eq!(
                errno(std::fs::rename(
                    root.join("small.txt"),
                    root.join("moved.txt")
                )),
                libc::ENOSYS
            );
            // chmod is refused.
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                errno(std::fs::set_permissions(
                    root.join("top.txt"),
                    std::fs::Permissions::from_mode(0o600)
                )),
                libc::EPERM
            );
        }
    })
    .await;
    assert_eq!(
        s3.get(BUCKET, "data/set1/small.txt").await.as_deref(),
        Some(&b"written through the mount"[..])
    );
    assert_eq!(
        s3.get(BUCKET, "data/set1/threads.txt").await.as_deref(),
        Some(&b"closed elsewhere"[..])
    );
    let big = s3.get(BUCKET, "data/set1/big.out").await.expect("big.out");
    let mut want = vec![0u8; BIG as usize];
    pattern(0, &mut want);
    assert!(big == want, "big.out differs");
    assert_eq!(
        s3.get(BUCKET, "data/set1/newdir/inside.txt")
            .await
            .as_deref(),
        Some(&b"in"[..])
    );
    assert_eq!(
        s3.get(BUCKET, "data/set1/seq.txt").await.as_deref(),
        Some(&b"0123456789"[..])
    );
    assert_eq!(s3.get(BUCKET, "data/set1/emptydir").await, None);
    // Read back through the mount.
    blocking(move || {
        assert_eq!(
            std::fs::read(root.join("small.txt")).unwrap(),
            b"written through the mount"
        );
        assert_eq!(std::fs::metadata(root.join("big.out")).unwrap().len(), BIG);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_mount_refuses_every_write_with_erofs() {
    need_fuse!();
    let s3 = seeded().await;
    let m = mount(
        &s3,
        TestMountSpec {
            read_only: true,
            allow_delete: true,
            allow_overwrite: true,
            ..spec()
        },
    )
    .await;
    let root = m.path();
    blocking(move || {
        assert_eq!(
            errno(std::fs::write(root.join("new.txt"), b"x")),
            libc::EROFS
        );
        assert_eq!(
            errno(std::fs::remove_file(root.join("top.txt"))),
            libc::EROFS
        );
        assert_eq!(errno(std::fs::create_dir(root.join("d2"))), libc::EROFS);
        assert_eq!(
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(root.join("top.txt"))
            ),
            libc::EROFS
        );
        assert_eq!(std::fs::read(root.join("top.txt")).unwrap(), b"hello");
    })
    .await;
    assert!(s3.get(BUCKET, "data/set1/new.txt").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn unlink_and_overwrite_are_refused_unless_allowed() {
    need_fuse!();
    let s3 = seeded().await;
    let strict = mount(&s3, spec()).await;
    let root = strict.path();
    blocking(move || {
        assert_eq!(
            errno(std::fs::remove_file(root.join("top.txt"))),
            libc::EPERM
        );
        assert_eq!(
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(root.join("top.txt"))
            ),
            libc::EPERM
        );
        // Without O_TRUNC, never (even where overwrites are allowed).
        assert_eq!(
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(root.join("top.txt"))
            ),
            libc::EPERM
        );
    })
    .await;
    assert_eq!(
        s3.get(BUCKET, "data/set1/top.txt").await.as_deref(),
        Some(&b"hello"[..])
    );
    drop(strict);

    let open = mount(
        &s3,
        TestMountSpec {
            allow_delete: true,
            allow_overwrite: true,
            ..spec()
        },
    )
    .await;
    let root = open.path();
    blocking(move || {
        std::fs::write(root.join("top.txt"), b"replaced").unwrap();
        assert_eq!(std::fs::read(root.join("top.txt")).unwrap(), b"replaced");
        std::fs::remove_file(root.join("dir/a.txt")).unwrap();
        assert_eq!(names(&root.join("dir")), ["sub"]);
        assert_eq!(errno(std::fs::remove_file(root.join("dir"))), libc::EISDIR);
    })
    .await;
    assert_eq!(
        s3.get(BUCKET, "data/set1/top.txt").await.as_deref(),
        Some(&b"replaced"[..])
    );
    assert_eq!(s3.get(BUCKET, "data/set1/dir/a.txt").await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_mounts_of_one_prefix_see_the_same_objects() {
    need_fuse!();
    let s3 = seeded().await;
    let a = mount(
        &s3,
        TestMountSpec {
            allow_delete: true,
            ..spec()
        },
    )
    .await;
    let b = mount(
        &s3,
        TestMountSpec {
            prefix: "data/set1/".into(),
            ..spec()
        },
    )
    .await;
    let (ra, rb) = (a.path(), b.path());
    blocking(move || {
        std::fs::write(ra.join("shared.txt"), b"from a").unwrap();
        assert_eq!(std::fs::read(rb.join("shared.txt")).unwrap(), b"from a");
        assert!(names(&rb).contains(&"shared.txt".to_owned()));
        std::fs::remove_file(ra.join("shared.txt")).unwrap();
        assert!(!names(&rb).contains(&"shared.txt".to_owned()));
    })
    .await;
    assert!(a.daemon.as_ref().unwrap().is_alive() && b.daemon.as_ref().unwrap().is_alive());
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_keys_missing_buckets_and_dead_endpoints_have_their_classes() {
    need_fuse!();
    let s3 = seeded().await;
    assert_eq!(
        mount_with(spec(), s3.local_s3_unknown_key()).await.err(),
        Some("iam_denied")
    );
    let wrong_secret = LocalS3 {
        secret_access_key: "not-the-secret".into(),
        ..s3.local_s3()
    };
    assert_eq!(
        mount_with(spec(), wrong_secret).await.err(),
        Some("iam_denied")
    );
    assert_eq!(
        mount_with(
            TestMountSpec {
                bucket: "no-such-bucket".into(),
                ..spec()
            },
            s3.local_s3()
        )
        .await
        .err(),
        Some("not_found")
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dead = LocalS3 {
        endpoint_url: format!("http://{closed}"),
        ..s3.local_s3()
    };
    assert_eq!(mount_with(spec(), dead).await.err(), Some("network"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_mount_is_no_longer_alive() {
    need_fuse!();
    let s3 = seeded().await;
    let mut m = mount(&s3, spec()).await;
    let root = m.path();
    assert_eq!(blocking(move || names(&root)).await, ["dir", "top.txt"]);
    let daemon = m.daemon.take().unwrap();
    assert!(daemon.is_alive());
    // Detached with no file open: the kernel ends the session.
    detach(m.dir.path());
    let mut polls = 0;
    while daemon.is_alive() && polls < 500 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        polls += 1;
    }
    assert!(!daemon.is_alive(), "the session outlived its mount");
    daemon.stop();
}
