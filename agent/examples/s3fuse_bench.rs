//! The local S3 mount helper (`s3fuse`) against a direct GET: a 1 GiB
//! object written through the mount, then read through it (1 MiB reads,
//! as `dd bs=1M` does) and
//! straight from the same S3 (s3s + s3s-fs on loopback) with aws-sdk-s3,
//! interleaved, three rounds each: time to first byte and throughput, and
//! the process's peak resident memory at the end (the mount streams: its
//! buffers are a few MiB whatever the object's size).
//!
//! Needs root and /dev/fuse (it mounts a temporary directory).
//!
//! Run: `cargo run --release -p rayito-agent --example s3fuse_bench`
//! (`S3FUSE_BENCH_MIB` changes the object's size).

#[path = "../tests/support/s3.rs"]
#[allow(dead_code)]
mod s3;

use std::ffi::CString;
use std::io::Read as _;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::time::{Duration, Instant};

use rayito_agent::s3fuse_for_tests::{TestMountSpec, serve};

const ROUNDS: usize = 3;
const READ: usize = 1 << 20;

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        / 1024
}

fn mount_fuse(dir: &std::path::Path) -> OwnedFd {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .expect("/dev/fuse");
    let fd = OwnedFd::from(dev);
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
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
    fd
}

/// Reads `path` through the mount: (time to first byte, total, bytes).
fn through_mount(path: std::path::PathBuf) -> (Duration, Duration, u64) {
    let started = Instant::now();
    let _ = std::fs::metadata(&path).expect("stat through the mount");
    let looked_up = started.elapsed();
    let mut f = std::fs::File::open(path).expect("open through the mount");
    let opened = started.elapsed();
    let mut buf = vec![0u8; READ];
    let mut first = None;
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).expect("read through the mount");
        if n == 0 {
            break;
        }
        first.get_or_insert_with(|| started.elapsed());
        total += n as u64;
    }
    // Drop the pages this round cached: the next open would otherwise
    // spend its time invalidating them (the kernel does on every open of a
    // file the mount does not mark cache-keeping), not in the helper.
    // SAFETY: a valid open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let first = first.unwrap_or_default();
    eprintln!(
        "  (mount: lookup {:.1} ms, open {:.1} ms, first read {:.1} ms)",
        looked_up.as_secs_f64() * 1e3,
        (opened - looked_up).as_secs_f64() * 1e3,
        (first - opened).as_secs_f64() * 1e3
    );
    (first, started.elapsed(), total)
}

/// GetObject straight from S3: (time to first byte, total, bytes).
async fn direct(client: &aws_sdk_s3::Client) -> (Duration, Duration, u64) {
    let started = Instant::now();
    let out = client
        .get_object()
        .bucket("bench")
        .key("big.bin")
        .send()
        .await
        .expect("GetObject");
    let mut body = out.body;
    let mut first = None;
    let mut total = 0u64;
    while let Some(chunk) = body.try_next().await.expect("body") {
        first.get_or_insert_with(|| started.elapsed());
        total += chunk.len() as u64;
    }
    (first.unwrap_or_default(), started.elapsed(), total)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/dev/fuse").exists() {
        println!("s3fuse_bench: needs root and /dev/fuse; skipped");
        return;
    }
    let mib: u64 = std::env::var("S3FUSE_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let len = mib << 20;
    let server = s3::TestS3::start().await;
    server.create_bucket("bench").await;
    let dir = tempfile::tempdir().expect("mount point");
    let fd = mount_fuse(dir.path());
    let spec = TestMountSpec {
        bucket: "bench".into(),
        ..TestMountSpec::default()
    };
    let daemon = serve(fd, spec, server.local_s3()).await.expect("serve");
    let client = server.client();
    // The object is written through the mount (a multipart upload), which
    // also leaves s3s-fs its ETag: an object put straight into its
    // directory has none, and s3s-fs would hash the whole GiB before every
    // HEAD and GET's first byte.
    let path = dir.path().join("big.bin");
    let took = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let started = Instant::now();
        let mut f = std::fs::File::create(path).expect("create through the mount");
        let mut buf = vec![0u8; READ];
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(READ as u64) as usize;
            s3::pattern(at, &mut buf[..n]);
            f.write_all(&buf[..n]).expect("write through the mount");
            at += n as u64;
        }
        drop(f);
        started.elapsed()
    })
    .await
    .expect("writer");
    println!(
        "written through the mount (1 MiB writes, close included): {:.2} s, {:.0} MiB/s",
        took.as_secs_f64(),
        mib_per_s(len, took)
    );
    println!("object: {mib} MiB; {ROUNDS} rounds, interleaved; 1 MiB reads through the mount");
    println!(
        "{:<22} {:>10} {:>10} {:>10}",
        "path", "ttfb ms", "total s", "MiB/s"
    );
    for _ in 0..ROUNDS {
        let (ttfb, total, n) = direct(&client).await;
        assert_eq!(n, len);
        println!(
            "{:<22} {:>10.2} {:>10.2} {:>10.0}",
            "direct GET (sdk)",
            ttfb.as_secs_f64() * 1e3,
            total.as_secs_f64(),
            mib_per_s(n, total)
        );
        let path = dir.path().join("big.bin");
        let (ttfb, total, n) = tokio::task::spawn_blocking(move || through_mount(path))
            .await
            .expect("reader");
        assert_eq!(n, len);
        println!(
            "{:<22} {:>10.2} {:>10.2} {:>10.0}",
            "through the mount",
            ttfb.as_secs_f64() * 1e3,
            total.as_secs_f64(),
            mib_per_s(n, total)
        );
    }
    println!(
        "peak resident memory of the process (server + client + mount): {} MiB",
        peak_rss_mib()
    );
    let c = CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    daemon.stop();
}
