//! An S3 mount read by sandbox code on the local backend, against a direct
//! GET of the same object: one emulator (release build), a sandbox with
//! the prefix mounted twice (writable at `/home/user/w`, read-only at
//! `/mnt/data`), a 1 GiB object written through the writable mount by
//! `dd` in the sandbox, then read, interleaved, three rounds each way:
//!
//! - direct GET: `aws-sdk-s3` GetObject from the emulator's S3 endpoint
//!   (this process), the baseline;
//! - through the mount, timed inside the sandbox: a Python reader opens
//!   the file and reads it in 1 MiB reads (as `dd bs=1M`), time to first
//!   byte from before the open, and the whole read;
//! - `dd if=/mnt/data/big of=/dev/null bs=1M`: its own throughput, and
//!   `commands().run`'s wall time from here (the command's start and end
//!   included).
//!
//! Each read through the mount drops the pages it cached at its end
//! (`POSIX_FADV_DONTNEED`, `iflag=nocache`): otherwise the next open spends
//! its time invalidating them (the mount does not keep a file's cache
//! across opens, so a read never serves an older object's bytes).
//!
//! Needs root, /dev/fuse and overlayfs (a local image build, the FUSE mount
//! in the sandbox's namespace); prints why and exits otherwise.
//!
//! ```sh
//! cargo build --release -p rayito-tests --example mount_bench
//! target/release/examples/mount_bench        # MOUNT_BENCH_MIB=256 for a smaller object
//! ```

use std::time::{Duration, Instant};

use aws_sdk_s3 as s3;
use rayito::mounts::S3Mount;
use rayito::template::{BuildOptions, Template};
use rayito::{AwsOptions, Client, Sandbox};
use rayito_emulator::{Emulator, EmulatorConfig};

const BUCKET: &str = "mount-bench";
const KEY: &str = "bench/big";
const ROLE: &str = "arn:aws:iam::123456789012:role/rayito-sandbox";
const ROUNDS: usize = 3;

/// The reader run in the sandbox: `<bytes> <open s> <first byte s> <total s>`.
const READER: &str = r#"
import os, sys, time
buf = bytearray(1 << 20)
start = time.perf_counter()
fd = os.open(sys.argv[1], os.O_RDONLY)
opened = time.perf_counter()
first = None
total = 0
while True:
    n = os.readv(fd, [buf])
    if n == 0:
        break
    if first is None:
        first = time.perf_counter()
    total += n
end = time.perf_counter()
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
print(total, opened - start, first - start, end - start)
"#;

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

fn unavailable() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (local image builds, FUSE mounts in a namespace)");
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        return Some("needs /dev/fuse");
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems
        .lines()
        .any(|l| l.trim_end().ends_with("overlay"))
    {
        return Some("needs overlayfs (local image builds)");
    }
    None
}

fn s3_client(emu: &Emulator) -> s3::Client {
    let key = emu.access_key();
    s3::Client::from_conf(
        s3::Config::builder()
            .behavior_version(s3::config::BehaviorVersion::latest())
            .region(s3::config::Region::new("us-east-1"))
            .endpoint_url(emu.s3_endpoint_url())
            .force_path_style(true)
            .credentials_provider(s3::config::Credentials::new(
                key.id.clone(),
                key.secret.clone(),
                key.session_token.clone(),
                None,
                "bench",
            ))
            .build(),
    )
}

fn aws(emu: &Emulator) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(emu.endpoint_url())
        .s3_endpoint_url(emu.s3_endpoint_url())
        .region("us-east-1")
        .static_credentials(emu.access_key().id.clone(), emu.access_key().secret.clone())
}

/// GetObject straight from the emulator's S3: (time to first byte, total,
/// bytes). With `etag`, the request the mount sends: ranged from 0 on
/// (`Range: bytes=0-`) and conditional (`If-Match`).
async fn direct(client: &s3::Client, etag: Option<&str>) -> (Duration, Duration, u64) {
    let started = Instant::now();
    let mut get = client.get_object().bucket(BUCKET).key(KEY);
    if let Some(etag) = etag {
        get = get.range("bytes=0-").if_match(etag);
    }
    let out = get.send().await.expect("GetObject");
    let mut body = out.body;
    let mut first = None;
    let mut total = 0u64;
    while let Some(chunk) = body.try_next().await.expect("body") {
        first.get_or_insert_with(|| started.elapsed());
        total += chunk.len() as u64;
    }
    (first.unwrap_or_default(), started.elapsed(), total)
}

async fn run(sandbox: &Sandbox, cmd: &str) -> String {
    match sandbox.commands().run(cmd).await {
        Ok(out) => out.stdout,
        Err(err) => panic!("{cmd}: {err}"),
    }
}

/// Reads the object through the mount in the sandbox: (open, time to first
/// byte, total, bytes), as timed there.
async fn through_mount(sandbox: &Sandbox) -> (Duration, Duration, Duration, u64) {
    let out = run(sandbox, "python3 /home/user/reader.py /mnt/data/big").await;
    let f: Vec<&str> = out.split_whitespace().collect();
    let secs = |s: &str| Duration::from_secs_f64(s.parse().expect("seconds"));
    (
        secs(f[1]),
        secs(f[2]),
        secs(f[3]),
        f[0].parse().expect("bytes"),
    )
}

/// `dd` through the mount: (its own summary line, the command's wall time
/// from here).
async fn dd(sandbox: &Sandbox) -> (String, Duration) {
    let started = Instant::now();
    let out = run(
        sandbox,
        "dd if=/mnt/data/big of=/dev/null bs=1M iflag=nocache 2>&1 | tail -n 1",
    )
    .await;
    (out.trim().to_owned(), started.elapsed())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if let Some(why) = unavailable() {
        println!("mount_bench: {why}; skipped");
        return;
    }
    let mib: u64 = std::env::var("MOUNT_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let len = mib << 20;
    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("the emulator starts");
    let s3 = s3_client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("CreateBucket");

    // An image whose environment allowlists the bucket.
    let client = Client::builder()
        .aws(aws(&emu))
        .build()
        .await
        .expect("a client");
    let context = tempfile::tempdir().expect("a build context");
    let template = Template::new().set_envs([("RAYITO_ALLOWED_MOUNT_BUCKETS", BUCKET)]);
    client
        .templates()
        .build(
            &template,
            "mount-bench",
            BuildOptions {
                bucket: Some(emu.artifact_bucket()),
                context_dir: Some(context.path().to_path_buf()),
                poll_interval: Some(Duration::from_millis(50)),
                timeout: Duration::from_secs(300),
                ..BuildOptions::default()
            },
        )
        .await
        .expect("the image builds");

    let started = Instant::now();
    let sandbox = client
        .sandbox()
        .template(emu.image_arn("mount-bench"))
        .execution_role_arn(ROLE)
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(600))
        .mount(
            "/home/user/w",
            S3Mount::new(BUCKET).prefix("bench/").read_only(false),
        )
        .mount("/mnt/data", S3Mount::new(BUCKET).prefix("bench/"))
        .create()
        .await
        .expect("a sandbox with the mounts");
    println!(
        "sandbox with two mounts ready in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    sandbox
        .files()
        .write("/home/user/reader.py", READER)
        .await
        .expect("the reader");

    // The object, written by sandbox code through the writable mount (a
    // multipart upload of 8 MiB parts: s3s-fs then knows its ETag).
    let started = Instant::now();
    let wrote = run(
        &sandbox,
        &format!("dd if=/dev/zero of=/home/user/w/big bs=1M count={mib} 2>&1 | tail -n 1"),
    )
    .await;
    let took = started.elapsed();
    let head = s3
        .head_object()
        .bucket(BUCKET)
        .key(KEY)
        .send()
        .await
        .expect("the object is in the bucket");
    assert_eq!(head.content_length(), Some(len as i64));
    println!(
        "written through the writable mount by dd (close included): {:.2} s, {:.0} MiB/s (dd: {})",
        took.as_secs_f64(),
        mib_per_s(len, took),
        wrote.trim()
    );

    println!("object: {mib} MiB; {ROUNDS} rounds, interleaved");
    println!(
        "{:<34} {:>9} {:>9} {:>8} {:>7}",
        "path", "open ms", "ttfb ms", "total s", "MiB/s"
    );
    for _ in 0..ROUNDS {
        for (name, etag) in [
            ("direct GET (aws-sdk-s3, host)", None),
            ("ranged GET, If-Match (as the mount)", head.e_tag()),
        ] {
            let (ttfb, total, n) = direct(&s3, etag).await;
            assert_eq!(n, len);
            println!(
                "{:<34} {:>9} {:>9.2} {:>8.2} {:>7.0}",
                name,
                "-",
                ttfb.as_secs_f64() * 1e3,
                total.as_secs_f64(),
                mib_per_s(n, total)
            );
        }
        let (open, ttfb, total, n) = through_mount(&sandbox).await;
        assert_eq!(n, len);
        println!(
            "{:<34} {:>9.2} {:>9.2} {:>8.2} {:>7.0}",
            "mount, 1 MiB reads (in sandbox)",
            open.as_secs_f64() * 1e3,
            ttfb.as_secs_f64() * 1e3,
            total.as_secs_f64(),
            mib_per_s(n, total)
        );
        let (summary, wall) = dd(&sandbox).await;
        println!(
            "{:<34} {:>9} {:>9} {:>8.2} {:>7.0}   dd: {summary}",
            "mount, dd bs=1M (run's wall time)",
            "-",
            "-",
            wall.as_secs_f64(),
            mib_per_s(len, wall)
        );
    }
    sandbox.kill().await.expect("kill");
    emu.shutdown().await;
}
