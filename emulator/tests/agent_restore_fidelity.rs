//! A restore is a faithful copy (issue 41, section 5): a home with unicode
//! names, a 20-level tree, modes, a hard-link pair, symlinks, a FIFO, a
//! 1990 mtime on files, directories and symlinks and a 1 GiB sparse file,
//! checkpointed by a real agent into the emulator's S3 and restored into
//! a fresh sandbox, compares entry by entry: kind, mode, mtime, content or
//! target, hard links as one inode, the sparse file's holes as holes (and
//! the checkpoint reads its data ranges, not a gigabyte of zeros). What
//! is not kept (the FIFO) is absent and counted as skipped.

use crate::emulator_support;
use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use emulator_support::s3::persistence_access;
use rayito_agent::pb;
use rayito_agent::sandbox::GUEST_HOME;
use rayito_agent::{AgentConfig, persist::PersistenceAccess};
use rayito_emulator::{Emulator, EmulatorConfig};
use support::{TestAgent, payload};

const BUCKET: &str = "rayito-fidelity";
/// 1990-01-01T00:00:00Z.
const Y1990: i64 = 631_152_000;
const GIB: u64 = 1 << 30;

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

fn loc() -> Option<pb::S3Location> {
    Some(pb::S3Location {
        bucket: BUCKET.into(),
        key_prefix: "fidelity/home".into(),
        region: None,
    })
}

/// Sets the access and modification times of `path` (not following a
/// symlink) to `secs`.
fn set_mtime(path: &Path, secs: i64) {
    let t = rustix::fs::Timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &rustix::fs::Timestamps {
            last_access: t,
            last_modification: t,
        },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// Builds the home of the attempt under `home`; returns every
/// path made, parents first.
fn build(home: &Path) -> Vec<PathBuf> {
    let mut made = Vec::new();
    let dir = |rel: &str, mode: u32, made: &mut Vec<PathBuf>| {
        let p = home.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        made.push(PathBuf::from(rel));
    };
    dir("données", 0o750, &mut made);
    dir("données/日本語", 0o755, &mut made);
    dir("private", 0o700, &mut made);
    dir("links", 0o755, &mut made);
    let mut deep = String::from("deep");
    dir(&deep, 0o755, &mut made);
    for level in 1..=20 {
        deep = format!("{deep}/level-{level:02}");
        dir(&deep, 0o755, &mut made);
    }
    let file = |rel: &str, body: &[u8], mode: u32, made: &mut Vec<PathBuf>| {
        let p = home.join(rel);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        made.push(PathBuf::from(rel));
    };
    file(
        "données/日本語/ñandú 🦀.txt",
        "unicode ✓\n".as_bytes(),
        0o644,
        &mut made,
    );
    file("private/key", b"secret", 0o600, &mut made);
    file("run.sh", b"#!/bin/sh\necho hi\n", 0o755, &mut made);
    file("read-only.txt", b"ro", 0o444, &mut made);
    file(
        &format!("{deep}/leaf.txt"),
        b"twenty levels down",
        0o640,
        &mut made,
    );
    file("links/first", b"one inode, two names", 0o644, &mut made);
    std::fs::hard_link(home.join("links/first"), home.join("links/second")).unwrap();
    made.push(PathBuf::from("links/second"));
    std::os::unix::fs::symlink("first", home.join("links/soft")).unwrap();
    made.push(PathBuf::from("links/soft"));
    std::os::unix::fs::symlink("../run.sh", home.join("données/run-link")).unwrap();
    made.push(PathBuf::from("données/run-link"));
    // 1 GiB of holes with two small data ranges.
    let sparse = std::fs::File::create(home.join("sparse.img")).unwrap();
    use std::os::unix::fs::FileExt as _;
    sparse.write_all_at(b"head of the disk image", 0).unwrap();
    sparse.write_all_at(&[0xab; 4096], GIB / 2).unwrap();
    sparse.set_len(GIB).unwrap();
    sparse.sync_all().unwrap();
    made.push(PathBuf::from("sparse.img"));
    // Not kept: skipped at checkpoint.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        home.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    made
}

/// One entry as compared: kind, mode, mtime, content (a digest for the
/// sparse file) or target, and its inode's link count.
type Snapshot = BTreeMap<String, (char, u32, i64, Vec<u8>, u64)>;

fn snapshot(root: &Path) -> Snapshot {
    fn walk(root: &Path, rel: &Path, out: &mut Snapshot) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let r = rel.join(e.unwrap().file_name());
            let p = root.join(&r);
            let md = std::fs::symlink_metadata(&p).unwrap();
            let key = r.to_string_lossy().into_owned();
            let (mode, mtime, nlink) = (md.mode() & 0o7777, md.mtime(), md.nlink());
            if md.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                let target = target.to_string_lossy().as_bytes().to_vec();
                out.insert(key, ('l', 0, mtime, target, nlink));
            } else if md.is_dir() {
                out.insert(key, ('d', mode, mtime, Vec::new(), nlink));
                walk(root, &r, out);
            } else if md.is_file() {
                let body = if md.len() > 1 << 20 {
                    data_ranges(&p)
                } else {
                    std::fs::read(&p).unwrap()
                };
                out.insert(key, ('f', mode, mtime, body, nlink));
            } else {
                out.insert(key, ('p', mode, mtime, Vec::new(), nlink));
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// A large file's content as its data ranges (offset, then bytes): what
/// is not in them reads as zeros (reading a gigabyte in a debug build
/// would take the test's time).
fn data_ranges(path: &Path) -> Vec<u8> {
    use rustix::fs::SeekFrom;
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(data) = rustix::fs::seek(&f, SeekFrom::Data(at)) {
        let hole = rustix::fs::seek(&f, SeekFrom::Hole(data)).unwrap().min(len);
        out.extend_from_slice(&data.to_le_bytes());
        if hole - data > 1 << 20 {
            // Allocated where the original has holes: named, not read.
            out.extend_from_slice(format!("<{} allocated bytes>", hole - data).as_bytes());
            at = hole;
            continue;
        }
        let mut bytes = vec![0u8; usize::try_from(hole - data).unwrap()];
        f.read_exact_at(&mut bytes, data).unwrap();
        // Trailing zeros of a block are the hole's, wherever it starts.
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        out.extend_from_slice(&bytes);
        at = hole;
    }
    out
}

fn chown_all(home: &Path, uid: u32, gid: u32) {
    for e in walk_paths(home) {
        std::os::unix::fs::lchown(&e, Some(uid), Some(gid)).unwrap();
    }
}

fn walk_paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walk_paths(&p));
        }
        out.push(p);
    }
    out
}

/// Whether the filesystem under `dir` keeps holes and reports them.
fn keeps_holes(dir: &Path) -> bool {
    let md = std::fs::metadata(dir.join("sparse.img")).unwrap();
    md.blocks() * 512 < 1 << 20
}

async fn checkpoint(t: &TestAgent) -> pb::CheckpointDone {
    let req = pb::CheckpointRequest {
        target: loc(),
        user: None,
        exclude: Vec::new(),
    };
    let mut stream = t.files().checkpoint(req).await.unwrap().into_inner();
    let mut last = None;
    while let Some(ev) = stream.message().await.unwrap() {
        last = ev.event;
    }
    match last {
        Some(pb::checkpoint_event::Event::Done(d)) => d,
        other => panic!("no done: {other:?}"),
    }
}

async fn restore(t: &TestAgent) -> pb::RestoreDone {
    let req = pb::RestoreRequest {
        source: loc(),
        user: None,
    };
    let mut stream = t.files().restore(req).await.unwrap().into_inner();
    let mut last = None;
    while let Some(ev) = stream.message().await.unwrap() {
        last = ev.event;
    }
    match last {
        Some(pb::restore_event::Event::Done(d)) => d,
        other => panic!("no done: {other:?}"),
    }
}

#[tokio::test]
async fn a_restore_keeps_times_modes_hard_links_and_holes_entry_by_entry() {
    let emu = Emulator::start(EmulatorConfig {
        warm_spare: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    let s3 = emulator_support::s3::client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");

    let a = agent(persistence_access(&emu)).await;
    let home_a = a.host_path(GUEST_HOME);
    let owner = std::fs::metadata(&home_a).unwrap();
    let made = build(&home_a);
    if !keeps_holes(&home_a) {
        println!(
            "SKIPPED: a_restore_keeps_times_modes_hard_links_and_holes_entry_by_entry: the filesystem under the sandbox's home does not keep holes"
        );
        return;
    }
    chown_all(&home_a, owner.uid(), owner.gid());
    // Every entry in 1990, deepest first (setting a child's time touches
    // no parent's), each a second apart.
    for (i, rel) in made.iter().enumerate().rev() {
        set_mtime(&home_a.join(rel), Y1990 + i as i64);
    }
    let before = snapshot(&home_a);
    assert_eq!(before["pipe"].0, 'p');

    let started = std::time::Instant::now();
    let done = checkpoint(&a).await;
    let took = started.elapsed();
    assert_eq!(done.skipped, 1, "the FIFO: {done:?}");
    println!("checkpoint of a home with a 1 GiB sparse file: {took:?}, {done:?}");

    let b = agent(persistence_access(&emu)).await;
    let home_b = b.host_path(GUEST_HOME);
    let restored = restore(&b).await;

    let after = snapshot(&home_b);
    let mut expected = before.clone();
    expected.remove("pipe");
    let mut differences = Vec::new();
    let keys: std::collections::BTreeSet<&String> = expected.keys().chain(after.keys()).collect();
    for key in keys {
        if expected.get(key) != after.get(key) {
            differences.push(format!(
                "{key}: before {:?}, after {:?}",
                expected.get(key).map(|e| (e.0, e.1, e.2, e.4)),
                after.get(key).map(|e| (e.0, e.1, e.2, e.4))
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert_eq!(restored.skipped, 0, "{restored:?}");
    assert_eq!(restored.files, done.files);
    // The holes are not read: only the two data ranges (a block each).
    assert!(
        done.bytes_read < 1 << 20,
        "the checkpoint read {} bytes",
        done.bytes_read
    );
    assert!(done.archive_bytes < 1 << 20, "{done:?}");
    // One inode, two names.
    let first = std::fs::metadata(home_b.join("links/first")).unwrap();
    let second = std::fs::metadata(home_b.join("links/second")).unwrap();
    assert_eq!((first.ino(), first.nlink()), (second.ino(), 2));
    // The holes stay holes.
    let sparse = std::fs::metadata(home_b.join("sparse.img")).unwrap();
    assert_eq!(sparse.len(), GIB);
    assert!(
        sparse.blocks() * 512 < 1 << 20,
        "{} bytes allocated after the restore",
        sparse.blocks() * 512
    );
    // Everything restored belongs to the sandbox's user.
    let uid_b = std::fs::metadata(&home_b).unwrap().uid();
    for p in walk_paths(&home_b) {
        assert_eq!(std::fs::symlink_metadata(&p).unwrap().uid(), uid_b, "{p:?}");
    }
}
