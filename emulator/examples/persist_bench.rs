//! Checkpoint and restore benchmark (issue 26): a home of 10,000 small files
//! and a few large ones, 1 GiB of file content in all, checkpointed by a real
//! agent to the emulator's S3 endpoint on 127.0.0.1 and restored into a
//! second sandbox; in the same run, `tar czf` of the same tree to a local
//! file and `tar xzf` of that file into an empty directory, for comparison.
//!
//! The tree: 10,000 text files of 1 to 8 KiB (compressible), two files of
//! incompressible deterministic bytes (xorshift) and two of compressible
//! text, the four sized so the whole tree is exactly 1 GiB. Both sides use
//! gzip level 6 (`tar -z` runs `gzip`, whose default is 6; the agent uses
//! flate2's default, 6). The page cache is warm for every timing.
//!
//! Peak RSS: the emulator, both agents and this client run in this one
//! process, so the figure is the whole process's `VmHWM` from
//! `/proc/self/status`, reset through `/proc/self/clear_refs` (`5`) before
//! each operation: the peak during that operation, not the agent's alone.
//!
//! Run: `cargo run --release -p rayito-emulator --example persist_bench [ROUNDS]`
//! (as root, like the agent's tests; ROUNDS defaults to 3).

#[path = "../tests/emulator_support/s3.rs"]
mod s3_support;
#[path = "../../agent/tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rayito_agent::pb;
use rayito_agent::persist::PersistenceAccess;
use rayito_agent::{AgentConfig, sandbox::GUEST_HOME};
use rayito_emulator::{Emulator, EmulatorConfig};
use s3_support::persistence_access;
use support::{TestAgent, payload};

const BUCKET: &str = "rayito-bench";
const TOTAL_BYTES: u64 = 1 << 30;
const SMALL_FILES: usize = 10_000;
const SMALL_PER_DIR: usize = 100;
const MIB: f64 = 1024.0 * 1024.0;

async fn create_bucket(emu: &Emulator) {
    s3_support::client(emu)
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
}

async fn agent(access: PersistenceAccess) -> TestAgent {
    let t = TestAgent::start_config(AgentConfig {
        persistence: access,
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

/// Deterministic incompressible bytes: xorshift64, 8 bytes a step.
struct Noise(u64);

impl Noise {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            chunk.copy_from_slice(&self.0.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// Deterministic compressible text: numbered log-like lines, `len` bytes.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    let mut i = seed;
    while out.len() < len {
        let _ = writeln!(
            out,
            "{i:08} INFO worker-{} processed batch {} in {} ms, status=ok path=/srv/data/{}",
            i % 7,
            i.wrapping_mul(31) % 10_000,
            i % 997,
            i % 113
        );
        i += 1;
    }
    out.truncate(len);
    out
}

/// Writes a file of `len` bytes in 1 MiB steps, from `fill`.
fn write_big(path: &Path, len: u64, mut fill: impl FnMut(&mut [u8])) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        fill(&mut buf[..n]);
        f.write_all(&buf[..n]).expect("write");
        left -= n as u64;
    }
    f.flush().expect("flush");
}

/// Builds the tree under `home`, owned by `uid:gid`; the bytes written.
fn build_tree(home: &Path, uid: u32, gid: u32) -> u64 {
    let mut total = 0u64;
    let root = home.join("project");
    std::fs::create_dir_all(&root).expect("mkdir");
    for i in 0..SMALL_FILES {
        let dir = root.join(format!("d{:03}", i / SMALL_PER_DIR));
        if i % SMALL_PER_DIR == 0 {
            std::fs::create_dir_all(&dir).expect("mkdir");
        }
        let len = 1024 + (i * 7919) % (7 * 1024);
        std::fs::write(dir.join(format!("f{i:05}.txt")), text(len, i as u64)).expect("write");
        total += len as u64;
    }
    // The rest in four large files: two incompressible, two text.
    let rest = TOTAL_BYTES - total;
    let quarter = rest / 4;
    let sizes = [quarter, quarter, quarter, rest - 3 * quarter];
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    write_big(&root.join("blob-0.bin"), sizes[0], |b| noise.fill(b));
    write_big(&root.join("blob-1.bin"), sizes[1], |b| noise.fill(b));
    let line = text(1 << 20, 42);
    write_big(&root.join("log-0.txt"), sizes[2], |b| {
        b.copy_from_slice(&line[..b.len()])
    });
    write_big(&root.join("log-1.txt"), sizes[3], |b| {
        b.copy_from_slice(&line[..b.len()])
    });
    total += sizes.iter().sum::<u64>();
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(&root)
        .status()
        .expect("chown");
    assert!(status.success());
    total
}

/// Removes everything under `dir`, keeping `dir`.
fn empty_dir(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if std::fs::symlink_metadata(&p).expect("md").is_dir() {
            std::fs::remove_dir_all(&p).expect("rm");
        } else {
            std::fs::remove_file(&p).expect("rm");
        }
    }
}

/// Resets the process's peak RSS (`VmHWM`), where the kernel allows it.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak RSS in MiB, if readable.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn mibps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / MIB / d.as_secs_f64()
}

async fn checkpoint(t: &TestAgent, prefix: &str) -> pb::CheckpointDone {
    let req = pb::CheckpointRequest {
        target: Some(pb::S3Location {
            bucket: BUCKET.into(),
            key_prefix: prefix.into(),
            region: None,
        }),
        user: None,
        exclude: Vec::new(),
    };
    let mut stream = t
        .files()
        .checkpoint(req)
        .await
        .expect("Checkpoint")
        .into_inner();
    let mut done = None;
    while let Some(ev) = stream.message().await.expect("checkpoint stream") {
        if let Some(pb::checkpoint_event::Event::Done(d)) = ev.event {
            done = Some(d);
        }
    }
    done.expect("CheckpointDone")
}

async fn restore(t: &TestAgent, prefix: &str) -> pb::RestoreDone {
    let req = pb::RestoreRequest {
        source: Some(pb::S3Location {
            bucket: BUCKET.into(),
            key_prefix: prefix.into(),
            region: None,
        }),
        user: None,
    };
    let mut stream = t.files().restore(req).await.expect("Restore").into_inner();
    let mut done = None;
    while let Some(ev) = stream.message().await.expect("restore stream") {
        if let Some(pb::restore_event::Event::Done(d)) = ev.event {
            done = Some(d);
        }
    }
    done.expect("RestoreDone")
}

fn run_tar(args: &[&str], dir: &Path) {
    let status = Command::new("tar")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("tar runs");
    assert!(status.success(), "tar {args:?}");
}

#[derive(Default)]
struct Series {
    ckpt: Vec<f64>,
    restore: Vec<f64>,
    tar_c: Vec<f64>,
    tar_x: Vec<f64>,
    ckpt_rss: Vec<f64>,
    restore_rss: Vec<f64>,
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);

    let emu = Emulator::start(EmulatorConfig {
        warm_spare: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    create_bucket(&emu).await;
    let a = agent(persistence_access(&emu)).await;
    let b = agent(persistence_access(&emu)).await;
    let home_a = a.host_path(GUEST_HOME);
    let home_b = b.host_path(GUEST_HOME);
    let md = std::fs::metadata(&home_a).expect("home");

    let t0 = Instant::now();
    let tree_bytes = build_tree(&home_a, md.uid(), md.gid());
    println!(
        "tree: {SMALL_FILES} small text files + 4 large (2 incompressible, 2 text), {:.1} MiB, built in {:.1} s",
        tree_bytes as f64 / MIB,
        t0.elapsed().as_secs_f64()
    );

    let scratch = tempfile::tempdir().expect("scratch dir");
    let tarball: PathBuf = scratch.path().join("home.tar.gz");
    let untar = scratch.path().join("x");
    let mut s = Series::default();
    for round in 0..rounds {
        let prefix = format!("bench/{round}");

        reset_peak_rss();
        let t = Instant::now();
        let done = checkpoint(&a, &prefix).await;
        let d_ckpt = t.elapsed();
        let rss_c = peak_rss_mib();

        empty_dir(&home_b);
        reset_peak_rss();
        let t = Instant::now();
        let done_r = restore(&b, &prefix).await;
        let d_rest = t.elapsed();
        let rss_r = peak_rss_mib();
        assert_eq!(done_r.bytes_written, done.bytes_read);
        assert_eq!(done_r.files, done.files);

        let _ = std::fs::remove_file(&tarball);
        let t = Instant::now();
        run_tar(&["czf", tarball.to_str().unwrap(), "."], &home_a);
        let d_tar_c = t.elapsed();
        let tar_bytes = std::fs::metadata(&tarball).expect("tarball").len();

        let _ = std::fs::remove_dir_all(&untar);
        std::fs::create_dir(&untar).expect("mkdir");
        let t = Instant::now();
        run_tar(&["xzf", tarball.to_str().unwrap()], &untar);
        let d_tar_x = t.elapsed();

        let bytes = done.bytes_read;
        println!(
            "round {round}: checkpoint {:.2} s ({:.1} MiB/s, {} files, archive {:.1} MiB, peak RSS {:?} MiB) | \
             restore {:.2} s ({:.1} MiB/s, peak RSS {:?} MiB) | tar czf {:.2} s ({:.1} MiB/s, {:.1} MiB) | \
             tar xzf {:.2} s ({:.1} MiB/s)",
            d_ckpt.as_secs_f64(),
            mibps(bytes, d_ckpt),
            done.files,
            done.archive_bytes as f64 / MIB,
            rss_c.map(|v| v.round()),
            d_rest.as_secs_f64(),
            mibps(bytes, d_rest),
            rss_r.map(|v| v.round()),
            d_tar_c.as_secs_f64(),
            mibps(bytes, d_tar_c),
            tar_bytes as f64 / MIB,
            d_tar_x.as_secs_f64(),
            mibps(bytes, d_tar_x),
        );
        s.ckpt.push(mibps(bytes, d_ckpt));
        s.restore.push(mibps(bytes, d_rest));
        s.tar_c.push(mibps(bytes, d_tar_c));
        s.tar_x.push(mibps(bytes, d_tar_x));
        s.ckpt_rss.extend(rss_c);
        s.restore_rss.extend(rss_r);
    }

    let (c, r, tc, tx) = (
        median(s.ckpt),
        median(s.restore),
        median(s.tar_c),
        median(s.tar_x),
    );
    println!("median of {rounds} (MiB/s of file content):");
    println!(
        "  checkpoint {c:.1} vs tar czf {tc:.1}: ratio {:.2}",
        c / tc
    );
    println!(
        "  restore    {r:.1} vs tar xzf {tx:.1}: ratio {:.2}",
        r / tx
    );
    if !s.ckpt_rss.is_empty() && !s.restore_rss.is_empty() {
        println!(
            "  peak RSS of the whole process (emulator + agents + client): checkpoint {:.0} MiB, restore {:.0} MiB",
            median(s.ckpt_rss),
            median(s.restore_rss)
        );
    }
}
