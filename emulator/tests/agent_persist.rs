//! Checkpoint and Restore against the emulator's real S3 endpoint (s3s),
//! with real agents: round trips between two sandboxes' homes (content,
//! modes, symlinks), excludes and the always-skipped directories, the
//! statuses before the first event, one operation at a time, a suspend
//! mid-stream, hostile archives, a checksum mismatch, the progress rate,
//! the emulator giving credentials only to a sandbox with an execution
//! role, and no bucket or key in any log line.

use crate::emulator_support;
use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use aws_sdk_s3 as s3;
use aws_sdk_s3::primitives::ByteStream;
use emulator_support::s3::persistence_access;
use rayito_agent::pb;
use rayito_agent::persist::{PersistenceAccess, messages};
use rayito_agent::{AgentConfig, sandbox::GUEST_HOME};
use rayito_emulator::{Emulator, EmulatorConfig};
use support::{TestAgent, assert_status, payload};

const BUCKET: &str = "rayito-ckpt";

async fn emulator() -> (Emulator, s3::Client) {
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
    (emu, s3)
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

fn loc(prefix: &str) -> Option<pb::S3Location> {
    Some(pb::S3Location {
        bucket: BUCKET.into(),
        key_prefix: prefix.into(),
        region: None,
    })
}

/// Deterministic bytes that do not compress.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// The sandbox user's home on the host, and its owner.
fn home(t: &TestAgent) -> (PathBuf, u32, u32) {
    let home = t.host_path(GUEST_HOME);
    let md = std::fs::metadata(&home).expect("home exists");
    (home, md.uid(), md.gid())
}

/// Writes `rel` under the home with `mode`, owned by the home's owner.
fn put(t: &TestAgent, rel: &str, body: &[u8], mode: u32) {
    let (home, uid, gid) = home(t);
    let path = home.join(rel);
    let mut dir = home.clone();
    for c in Path::new(rel).parent().unwrap().components() {
        dir.push(c);
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
    }
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
}

fn link(t: &TestAgent, rel: &str, target: &str) {
    let (home, uid, gid) = home(t);
    std::os::unix::fs::symlink(target, home.join(rel)).unwrap();
    std::os::unix::fs::lchown(home.join(rel), Some(uid), Some(gid)).unwrap();
}

/// What a tree holds: per relative path, (kind, mode, content or target).
fn snapshot(root: &Path) -> BTreeMap<String, (char, u32, Vec<u8>)> {
    fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<String, (char, u32, Vec<u8>)>) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let md = std::fs::symlink_metadata(root.join(&r)).unwrap();
            let key = r.to_string_lossy().into_owned();
            let mode = md.mode() & 0o777;
            if md.file_type().is_symlink() {
                let target = std::fs::read_link(root.join(&r)).unwrap();
                out.insert(key, ('l', 0, target.to_string_lossy().as_bytes().to_vec()));
            } else if md.is_dir() {
                out.insert(key, ('d', mode, Vec::new()));
                walk(root, &r, out);
            } else {
                out.insert(key, ('f', mode, std::fs::read(root.join(&r)).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Every event of a checkpoint, with when it came.
async fn checkpoint_events(
    t: &TestAgent,
    req: pb::CheckpointRequest,
) -> Result<Vec<(Instant, pb::checkpoint_event::Event)>, tonic::Status> {
    let mut stream = t.files().checkpoint(req).await?.into_inner();
    let mut out = Vec::new();
    while let Some(ev) = stream.message().await? {
        out.push((Instant::now(), ev.event.expect("an event")));
    }
    Ok(out)
}

async fn restore_events(
    t: &TestAgent,
    req: pb::RestoreRequest,
) -> Result<Vec<pb::restore_event::Event>, tonic::Status> {
    let mut stream = t.files().restore(req).await?.into_inner();
    let mut out = Vec::new();
    while let Some(ev) = stream.message().await? {
        out.push(ev.event.expect("an event"));
    }
    Ok(out)
}

fn checkpoint_done(events: &[(Instant, pb::checkpoint_event::Event)]) -> pb::CheckpointDone {
    assert!(
        matches!(
            events.first(),
            Some((_, pb::checkpoint_event::Event::Started(_)))
        ),
        "started first: {events:?}"
    );
    match events.last() {
        Some((_, pb::checkpoint_event::Event::Done(d))) => d.clone(),
        other => panic!("no done: {other:?}"),
    }
}

fn restore_done(events: &[pb::restore_event::Event]) -> pb::RestoreDone {
    assert!(
        matches!(events.first(), Some(pb::restore_event::Event::Started(_))),
        "started first: {events:?}"
    );
    match events.last() {
        Some(pb::restore_event::Event::Done(d)) => d.clone(),
        other => panic!("no done: {other:?}"),
    }
}

fn ckpt(prefix: &str, exclude: &[&str]) -> pb::CheckpointRequest {
    pb::CheckpointRequest {
        target: loc(prefix),
        user: None,
        exclude: exclude.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn rest(prefix: &str) -> pb::RestoreRequest {
    pb::RestoreRequest {
        source: loc(prefix),
        user: None,
    }
}

async fn object(s3: &s3::Client, key: &str) -> Option<Vec<u8>> {
    let got = s3.get_object().bucket(BUCKET).key(key).send().await.ok()?;
    Some(got.body.collect().await.unwrap().into_bytes().to_vec())
}

#[tokio::test]
async fn a_checkpoint_restores_into_another_sandbox_with_content_modes_and_symlinks() {
    let (emu, s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    put(&a, "notes.txt", b"hello from the first life\n", 0o644);
    put(&a, "bin/run.sh", b"#!/bin/sh\necho hi\n", 0o755);
    put(&a, "secret/key", b"private", 0o600);
    put(&a, "deep/a/b/c/d.bin", &noise(300_000, 3), 0o640);
    put(&a, "overwritten.txt", b"new content", 0o644);
    link(&a, "notes-link", "notes.txt");
    link(&a, "abs-link", "/etc/hostname");
    link(&a, "dangling", "does/not/exist");
    let (home_a, _, _) = home(&a);
    let before = snapshot(&home_a);

    let events = checkpoint_events(&a, ckpt("rayito-home/first", &[]))
        .await
        .unwrap();
    let done = checkpoint_done(&events);
    let files = before.values().filter(|v| v.0 != 'd').count() as u64;
    assert_eq!(done.files, files, "{done:?}");
    assert_eq!(
        done.bytes_read,
        before
            .values()
            .filter(|v| v.0 == 'f')
            .map(|v| v.2.len() as u64)
            .sum::<u64>()
    );
    assert_eq!(done.sha256.len(), 64);
    let pb::checkpoint_event::Event::Started(started) = &events[0].1 else {
        unreachable!()
    };
    assert_eq!(
        (started.files, started.bytes),
        (done.files, done.bytes_read)
    );

    // The archive and the manifest, as S3 holds them.
    let archive = object(&s3, "rayito-home/first/home.tar.gz")
        .await
        .expect("archive");
    assert_eq!(archive.len() as u64, done.archive_bytes);
    let digest = {
        use sha2::Digest as _;
        sha2::Sha256::digest(&archive)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(digest, done.sha256);
    let manifest: serde_json::Value = serde_json::from_slice(
        &object(&s3, "rayito-home/first/manifest.json")
            .await
            .expect("manifest"),
    )
    .unwrap();
    assert_eq!(manifest["schema"], "rayito.checkpoint/1");
    assert_eq!(manifest["sha256"], done.sha256.as_str());
    assert_eq!(manifest["archive_bytes"], done.archive_bytes);
    assert_eq!(manifest["files"], done.files);
    assert_eq!(manifest["bytes"], done.bytes_read);
    assert_eq!(manifest["excludes"], serde_json::json!([]));
    assert!(manifest["created_at"].as_str().unwrap().ends_with('Z'));

    // Another sandbox, with files of its own: overwritten or kept.
    let b = agent(persistence_access(&emu)).await;
    put(&b, "overwritten.txt", b"old content that is longer", 0o600);
    put(&b, "deep/kept.txt", b"kept", 0o644);
    put(&b, "only-in-b.txt", b"b", 0o644);
    let events = restore_events(&b, rest("rayito-home/first")).await.unwrap();
    let done_r = restore_done(&events);
    let pb::restore_event::Event::Started(st) = &events[0] else {
        unreachable!()
    };
    assert_eq!(
        (st.archive_bytes, st.files),
        (done.archive_bytes, done.files)
    );
    assert_eq!(done_r.files, done.files);
    assert_eq!(done_r.bytes_written, done.bytes_read);
    assert_eq!(done_r.archive_bytes, done.archive_bytes);
    assert_eq!(done_r.sha256, done.sha256);
    assert_eq!(done_r.skipped, 0);

    let (home_b, uid_b, _) = home(&b);
    let mut after = snapshot(&home_b);
    assert_eq!(
        after.remove("deep/kept.txt").map(|v| v.2),
        Some(b"kept".to_vec())
    );
    assert_eq!(
        after.remove("only-in-b.txt").map(|v| v.2),
        Some(b"b".to_vec())
    );
    assert_eq!(after, before, "same tree, modes and symlinks");
    // Everything restored belongs to the sandbox's user.
    for rel in ["notes.txt", "deep/a/b/c/d.bin", "deep/a", "notes-link"] {
        let md = std::fs::symlink_metadata(home_b.join(rel)).unwrap();
        assert_eq!(md.uid(), uid_b, "{rel}");
    }
}

#[tokio::test]
async fn excludes_and_the_always_skipped_directories_stay_out() {
    let (emu, s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    put(&a, ".cache/pip/x", b"cache", 0o644);
    put(&a, "proj/__pycache__/m.pyc", b"pyc", 0o644);
    put(&a, "nb/.ipynb_checkpoints/n.ipynb", b"ck", 0o644);
    put(
        &a,
        ".local/share/jupyter/runtime/kernel-1.json",
        b"{}",
        0o644,
    );
    put(&a, ".local/share/jupyter/kept.json", b"{}", 0o644);
    put(&a, "data/big/blob", b"big", 0o644);
    put(&a, "data/keep", b"keep", 0o644);
    put(&a, "proj/m.py", b"print(1)", 0o644);
    put(&a, "x/.cache/kept", b"not the top one", 0o644);
    let events = checkpoint_events(&a, ckpt("p/ex", &["data/big/", "./nothing-there"]))
        .await
        .unwrap();
    let done = checkpoint_done(&events);
    assert_eq!(done.skipped, 5, "{done:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&object(&s3, "p/ex/manifest.json").await.unwrap()).unwrap();
    assert_eq!(
        manifest["excludes"],
        serde_json::json!(["data/big", "nothing-there"])
    );

    let b = agent(persistence_access(&emu)).await;
    restore_done(&restore_events(&b, rest("p/ex")).await.unwrap());
    let (home_b, _, _) = home(&b);
    let got: Vec<String> = snapshot(&home_b)
        .into_iter()
        .filter(|(_, v)| v.0 == 'f')
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        got,
        [
            ".local/share/jupyter/kept.json",
            "data/keep",
            "proj/m.py",
            "x/.cache/kept"
        ]
    );
}

#[tokio::test]
async fn bad_arguments_are_named_before_anything_happens() {
    let (emu, s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    let cases: Vec<(pb::CheckpointRequest, &str)> = vec![
        (
            pb::CheckpointRequest {
                target: None,
                ..ckpt("p", &[])
            },
            "target is required",
        ),
        (
            pb::CheckpointRequest {
                target: Some(pb::S3Location {
                    bucket: "Bad_Bucket".into(),
                    key_prefix: "p".into(),
                    region: None,
                }),
                ..ckpt("p", &[])
            },
            "target.bucket is not a valid S3 bucket name",
        ),
        (
            ckpt("/p", &[]),
            "target.key_prefix is not a valid key prefix",
        ),
        (
            ckpt("p", &["ok", "../etc"]),
            "exclude[1] is not a directory relative to the home directory",
        ),
        (
            ckpt("p", &["/abs"]),
            "exclude[0] is not a directory relative to the home directory",
        ),
        (
            ckpt("p", &[""]),
            "exclude[0] is not a directory relative to the home directory",
        ),
        (
            pb::CheckpointRequest {
                user: Some(pb::User {
                    username: "root".into(),
                }),
                ..ckpt("p", &[])
            },
            "user is unknown",
        ),
    ];
    for (req, message) in cases {
        let err = checkpoint_events(&a, req).await.expect_err(message);
        assert_status(&err, tonic::Code::InvalidArgument, message);
    }
    let many: Vec<String> = (0..65).map(|i| format!("d{i}")).collect();
    let err = checkpoint_events(
        &a,
        pb::CheckpointRequest {
            exclude: many,
            ..ckpt("p", &[])
        },
    )
    .await
    .unwrap_err();
    assert_status(
        &err,
        tonic::Code::InvalidArgument,
        "exclude has more than 64 entries",
    );
    let err = restore_events(
        &a,
        pb::RestoreRequest {
            source: None,
            user: None,
        },
    )
    .await
    .unwrap_err();
    assert_status(&err, tonic::Code::InvalidArgument, "source is required");
    // Nothing was written.
    let listed = s3.list_objects_v2().bucket(BUCKET).send().await.unwrap();
    assert_eq!(listed.key_count(), Some(0));
}

#[tokio::test]
async fn restore_without_a_checkpoint_is_not_found_before_the_first_event() {
    let (emu, _s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    let err = restore_events(&a, rest("rayito-home/never"))
        .await
        .unwrap_err();
    assert_status(&err, tonic::Code::NotFound, messages::NO_CHECKPOINT);
    assert_eq!(messages::NO_CHECKPOINT, "no checkpoint at this location");
    // A missing bucket too.
    let err = restore_events(
        &a,
        pb::RestoreRequest {
            source: Some(pb::S3Location {
                bucket: "no-such-bucket".into(),
                key_prefix: "p".into(),
                region: None,
            }),
            user: None,
        },
    )
    .await
    .unwrap_err();
    assert_status(&err, tonic::Code::NotFound, messages::NO_CHECKPOINT);
    // And a checkpoint into a missing bucket: not_found inside the stream.
    let events = checkpoint_events(
        &a,
        pb::CheckpointRequest {
            target: Some(pb::S3Location {
                bucket: "no-such-bucket".into(),
                key_prefix: "p".into(),
                region: None,
            }),
            ..ckpt("p", &[])
        },
    )
    .await
    .unwrap();
    match &events.last().unwrap().1 {
        pb::checkpoint_event::Event::Error(e) => {
            assert_eq!(
                (e.code.as_str(), e.message.as_str()),
                ("not_found", "the S3 bucket does not exist")
            );
        }
        other => panic!("{other:?}"),
    }
    // The guard was released each time: a real checkpoint still runs.
    checkpoint_done(&checkpoint_events(&a, ckpt("p/ok", &[])).await.unwrap());
    // Files that would not fit and leave the disk reserve: before the
    // first event, as a Write.
    a.agent.set_disk_reserve(u64::MAX / 4);
    let err = restore_events(&a, rest("p/ok")).await.unwrap_err();
    assert_status(&err, tonic::Code::ResourceExhausted, "disk_reserve");
    a.agent.set_disk_reserve(0);
    restore_done(&restore_events(&a, rest("p/ok")).await.unwrap());
}

#[tokio::test]
async fn without_credentials_or_with_refused_ones_it_is_permission_denied() {
    let (emu, s3) = emulator().await;
    let a = agent(PersistenceAccess::Local(None)).await;
    let err = checkpoint_events(&a, ckpt("p", &[])).await.unwrap_err();
    assert_status(
        &err,
        tonic::Code::PermissionDenied,
        messages::NO_CREDENTIALS,
    );
    assert_eq!(
        messages::NO_CREDENTIALS,
        "the sandbox has no credentials for S3: launch it with an execution role"
    );
    let err = restore_events(&a, rest("p")).await.unwrap_err();
    assert_status(
        &err,
        tonic::Code::PermissionDenied,
        messages::NO_CREDENTIALS,
    );

    // A key S3 does not know: refused by S3 itself.
    let PersistenceAccess::Local(Some(mut wrong)) = persistence_access(&emu) else {
        unreachable!()
    };
    wrong.secret_access_key = "not-the-secret".into();
    let b = agent(PersistenceAccess::Local(Some(wrong))).await;
    let events = checkpoint_events(&b, ckpt("p", &[])).await.unwrap();
    match &events.last().unwrap().1 {
        pb::checkpoint_event::Event::Error(e) => assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            (
                "permission_denied",
                "S3 refused the request with the execution role's credentials"
            )
        ),
        other => panic!("{other:?}"),
    }
    let err = restore_events(&b, rest("p")).await.unwrap_err();
    assert_status(&err, tonic::Code::PermissionDenied, messages::DENIED);
    assert_eq!(
        s3.list_objects_v2()
            .bucket(BUCKET)
            .send()
            .await
            .unwrap()
            .key_count(),
        Some(0)
    );
}

#[tokio::test]
async fn one_operation_at_a_time_and_progress_at_most_once_a_second() {
    let (emu, _s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    for i in 0..3 {
        put(&a, &format!("big/{i}.bin"), &noise(8 << 20, i + 10), 0o644);
    }
    let mut first = a
        .files()
        .checkpoint(ckpt("p/big", &[]))
        .await
        .unwrap()
        .into_inner();
    let err = checkpoint_events(&a, ckpt("p/other", &[]))
        .await
        .unwrap_err();
    assert_status(&err, tonic::Code::FailedPrecondition, messages::BUSY);
    assert_eq!(
        messages::BUSY,
        "a checkpoint or restore is already running in this sandbox"
    );
    let err = restore_events(&a, rest("p/other")).await.unwrap_err();
    assert_status(&err, tonic::Code::FailedPrecondition, messages::BUSY);

    let mut events = Vec::new();
    while let Some(ev) = first.message().await.unwrap() {
        events.push((Instant::now(), ev.event.unwrap()));
    }
    let done = checkpoint_done(&events);
    assert!(done.archive_bytes > 24 << 20, "{done:?}");
    let progress: Vec<Instant> = events
        .iter()
        .filter(|(_, e)| matches!(e, pb::checkpoint_event::Event::Progress(_)))
        .map(|(at, _)| *at)
        .collect();
    // Sent at least a second apart (received with the jitter of a loaded
    // machine: counted, not timed).
    assert!(
        progress.len() as u64 <= u64::from(done.duration_ms) / 1000 + 1,
        "{} progress events in {} ms",
        progress.len(),
        done.duration_ms
    );
    if done.duration_ms > 2_500 {
        assert!(!progress.is_empty(), "a long checkpoint reports progress");
    } else {
        eprintln!(
            "(the checkpoint took {} ms: no progress expected)",
            done.duration_ms
        );
    }
    // Progress only grows.
    let mut last = (0, 0, 0);
    for (_, e) in &events {
        if let pb::checkpoint_event::Event::Progress(p) = e {
            let now = (p.files_done, p.bytes_read, p.bytes_uploaded);
            assert!(
                now.0 >= last.0 && now.1 >= last.1 && now.2 >= last.2,
                "{now:?} after {last:?}"
            );
            last = now;
        }
    }
    // Free again.
    checkpoint_done(&checkpoint_events(&a, ckpt("p/after", &[])).await.unwrap());
}

#[tokio::test]
async fn a_suspend_mid_checkpoint_ends_it_with_suspending_and_no_manifest() {
    let (emu, s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    for i in 0..4 {
        put(&a, &format!("big/{i}.bin"), &noise(8 << 20, i + 20), 0o644);
    }
    let mut stream = a
        .files()
        .checkpoint(ckpt("p/susp", &[]))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap().event.unwrap();
    assert!(
        matches!(first, pb::checkpoint_event::Event::Started(_)),
        "{first:?}"
    );
    let (status, _) = a.hook("suspend", None).await;
    assert_eq!(status, 200);
    let mut last = None;
    loop {
        match stream.message().await {
            Ok(Some(ev)) => last = ev.event,
            Ok(None) => break,
            Err(s) => panic!("a status instead of a StreamError: {s:?}"),
        }
    }
    match last {
        Some(pb::checkpoint_event::Event::Error(e)) => assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("suspending", "the sandbox is suspending")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        object(&s3, "p/susp/manifest.json").await,
        None,
        "no manifest"
    );
    assert_eq!(object(&s3, "p/susp/home.tar.gz").await, None, "no archive");
    let (status, _) = a.hook("resume", None).await;
    assert_eq!(status, 200);
    // The guard is free after the resume.
    checkpoint_done(
        &checkpoint_events(&a, ckpt("p/after", &["big"]))
            .await
            .unwrap(),
    );
}

/// One raw tar entry: name bytes, type, link name, body.
type RawEntry<'a> = (&'a [u8], tar::EntryType, &'a [u8], &'a [u8]);

/// A gzipped tar of raw entries.
fn hostile_archive(entries: &[RawEntry<'_>]) -> Vec<u8> {
    use std::io::Write as _;
    let mut raw = Vec::new();
    for (name, kind, link, body) in entries {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        h.set_size(body.len() as u64);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        raw.extend_from_slice(h.as_bytes());
        raw.extend_from_slice(body);
        let pad = (512 - body.len() % 512) % 512;
        raw.extend(std::iter::repeat_n(0u8, pad));
    }
    raw.extend(std::iter::repeat_n(0u8, 1024));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn plant(s3: &s3::Client, prefix: &str, archive: Vec<u8>, sha256: &str, files: u64) {
    let manifest = serde_json::json!({
        "schema": "rayito.checkpoint/1",
        "sha256": sha256,
        "archive_bytes": archive.len(),
        "files": files,
        "bytes": 0,
        "excludes": [],
        "created_at": "2026-12-01T00:00:00Z",
    });
    s3.put_object()
        .bucket(BUCKET)
        .key(format!("{prefix}/home.tar.gz"))
        .body(ByteStream::from(archive))
        .send()
        .await
        .unwrap();
    s3.put_object()
        .bucket(BUCKET)
        .key(format!("{prefix}/manifest.json"))
        .body(ByteStream::from(serde_json::to_vec(&manifest).unwrap()))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_hostile_archive_restores_nothing_outside_home() {
    let (emu, s3) = emulator().await;
    let b = agent(persistence_access(&emu)).await;
    let (home_b, _, _) = home(&b);
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = outside.path().to_string_lossy().into_owned();
    let abs_target = format!("{out}/abs.txt");
    let escape = "../escape.txt".to_owned();
    let archive = hostile_archive(&[
        (b"ok.txt", tar::EntryType::Regular, b"", b"fine"),
        (escape.as_bytes(), tar::EntryType::Regular, b"", b"escaped"),
        (
            b"a/../../escape2.txt",
            tar::EntryType::Regular,
            b"",
            b"escaped",
        ),
        (
            abs_target.as_bytes(),
            tar::EntryType::Regular,
            b"",
            b"absolute",
        ),
        (b"link", tar::EntryType::Symlink, out.as_bytes(), b""),
        (
            b"link/through.txt",
            tar::EntryType::Regular,
            b"",
            b"through the symlink",
        ),
        (b"hard", tar::EntryType::Link, b"/etc/passwd", b""),
        (b"dev", tar::EntryType::Char, b"", b""),
        (b"fifo", tar::EntryType::Fifo, b"", b""),
        (b"ok.txt/under-a-file", tar::EntryType::Regular, b"", b"x"),
    ]);
    let sha = sha256_hex(&archive);
    plant(&s3, "p/hostile", archive, &sha, 3).await;
    let events = restore_events(&b, rest("p/hostile")).await.unwrap();
    let done = restore_done(&events);
    assert_eq!(done.files, 2, "ok.txt and the symlink itself: {done:?}");
    assert_eq!(done.skipped, 8, "{done:?}");
    assert_eq!(std::fs::read(home_b.join("ok.txt")).unwrap(), b"fine");
    assert_eq!(
        std::fs::read_link(home_b.join("link")).unwrap(),
        outside.path()
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing outside"
    );
    let parent = home_b.parent().unwrap();
    assert!(!parent.join("escape.txt").exists());
    assert!(!parent.parent().unwrap().join("escape2.txt").exists());
    assert!(
        !home_b.join("hard").exists()
            && !home_b.join("dev").exists()
            && !home_b.join("fifo").exists()
    );
}

#[tokio::test]
async fn an_archive_that_does_not_match_its_manifest_is_internal() {
    let (emu, s3) = emulator().await;
    let b = agent(persistence_access(&emu)).await;
    let archive = hostile_archive(&[(b"f.txt", tar::EntryType::Regular, b"", b"content")]);
    plant(&s3, "p/sum", archive.clone(), &"0".repeat(64), 1).await;
    let events = restore_events(&b, rest("p/sum")).await.unwrap();
    assert!(matches!(
        events.first(),
        Some(pb::restore_event::Event::Started(_))
    ));
    match events.last() {
        Some(pb::restore_event::Event::Error(e)) => assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            (
                "internal",
                "the archive does not match the sha256 in its manifest"
            )
        ),
        other => panic!("{other:?}"),
    }
    // Checked before extracting: nothing of it lands in HOME.
    assert!(!home(&b).0.join("f.txt").exists());
    // Not gzip at all, with its true sha256: internal, extraction failed.
    let junk = noise(10_000, 9);
    plant(&s3, "p/junk", junk.clone(), &sha256_hex(&junk), 1).await;
    match restore_events(&b, rest("p/junk")).await.unwrap().last() {
        Some(pb::restore_event::Event::Error(e)) => assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("internal", "the archive could not be extracted")
        ),
        other => panic!("{other:?}"),
    }
    // A manifest of another schema: INTERNAL before the first event.
    s3.put_object()
        .bucket(BUCKET)
        .key("p/bad/manifest.json")
        .body(ByteStream::from_static(b"{\"schema\":\"other\"}"))
        .send()
        .await
        .unwrap();
    let err = restore_events(&b, rest("p/bad")).await.unwrap_err();
    assert_status(&err, tonic::Code::Internal, messages::BAD_MANIFEST);
}

#[tokio::test]
async fn the_emulator_gives_s3_access_only_to_a_sandbox_with_an_execution_role() {
    let h = emulator_support::Harness::start().await;
    let s3 = emulator_support::s3::client(&h.emulator);
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();

    let (with_role, endpoint) = h
        .run_ready_with(|r| r.execution_role_arn("arn:aws:iam::000000000000:role/rayito-sandbox"))
        .await;
    let token = h.mint(&with_role, &[8080]).await;
    let ch = emulator_support::channel(&endpoint).await;
    emulator_support::wait_ready(&ch, &token).await;
    let mut files = emulator_support::files(&ch, emulator_support::ProxyHeaders::sdk(&token));
    let mut stream = files
        .checkpoint(ckpt("rayito-home/role", &[]))
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(ev) = stream.message().await.unwrap() {
        last = ev.event;
    }
    assert!(
        matches!(last, Some(pb::checkpoint_event::Event::Done(_))),
        "{last:?}"
    );
    assert!(
        object(&s3, "rayito-home/role/manifest.json")
            .await
            .is_some()
    );
    // The key stays with the agent: sandbox code sees none of it.
    let mut process = emulator_support::process(&ch, emulator_support::ProxyHeaders::sdk(&token));
    let stream = process
        .start(support::bash("env; cat /proc/self/environ"))
        .await
        .unwrap()
        .into_inner();
    let out = support::outcome(&support::collect_events(stream).await);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("HOME="), "{text}");
    let key = h.emulator.access_key();
    for secret in [
        key.id.as_str(),
        key.secret.as_str(),
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
    ] {
        assert!(
            !text.contains(secret),
            "{secret} in the sandbox's environment"
        );
    }

    let (without, endpoint) = h.run_ready().await;
    let token = h.mint(&without, &[8080]).await;
    let ch = emulator_support::channel(&endpoint).await;
    emulator_support::wait_ready(&ch, &token).await;
    let mut files = emulator_support::files(&ch, emulator_support::ProxyHeaders::sdk(&token));
    let err = files
        .checkpoint(ckpt("rayito-home/none", &[]))
        .await
        .unwrap_err();
    assert_status(
        &err,
        tonic::Code::PermissionDenied,
        messages::NO_CREDENTIALS,
    );
    let err = files.restore(rest("rayito-home/role")).await.unwrap_err();
    assert_status(
        &err,
        tonic::Code::PermissionDenied,
        messages::NO_CREDENTIALS,
    );
}

/// Every event and span field recorded by any thread, as text.
static CAPTURED: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

struct Capture;

struct Fields;

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut out = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
        out.push_str(&format!("{}={value:?}\n", field.name()));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        attrs.record(&mut Fields);
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields);
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut Fields);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn no_bucket_key_or_secret_reaches_the_log_even_at_debug_level() {
    const CANARY_BUCKET: &str = "canary-bucket-7f3a";
    const CANARY_PREFIX: &str = "canary-prefix-91c2";
    let (emu, s3) = emulator().await;
    s3.create_bucket()
        .bucket(CANARY_BUCKET)
        .send()
        .await
        .unwrap();
    // From here on the whole test binary logs everything; only the agent
    // uses the canary names.
    let _ = tracing::subscriber::set_global_default(Capture);
    tracing::debug!(marker = "the capture works");
    let a = agent(persistence_access(&emu)).await;
    put(&a, "canary-file.txt", b"canary-content-55aa", 0o644);
    let target = |prefix: &str| {
        Some(pb::S3Location {
            bucket: CANARY_BUCKET.into(),
            key_prefix: prefix.into(),
            region: Some("us-east-1".into()),
        })
    };
    let events = checkpoint_events(
        &a,
        pb::CheckpointRequest {
            target: target(CANARY_PREFIX),
            user: None,
            exclude: vec![],
        },
    )
    .await
    .unwrap();
    checkpoint_done(&events);
    let b = agent(persistence_access(&emu)).await;
    restore_done(
        &restore_events(
            &b,
            pb::RestoreRequest {
                source: target(CANARY_PREFIX),
                user: None,
            },
        )
        .await
        .unwrap(),
    );
    let _ = restore_events(
        &b,
        pb::RestoreRequest {
            source: target("canary-prefix-missing"),
            user: None,
        },
    )
    .await;
    let PersistenceAccess::Local(Some(mut wrong)) = persistence_access(&emu) else {
        unreachable!()
    };
    wrong.secret_access_key = "canary-wrong-secret".into();
    let c = agent(PersistenceAccess::Local(Some(wrong))).await;
    let _ = checkpoint_events(
        &c,
        pb::CheckpointRequest {
            target: target(CANARY_PREFIX),
            user: None,
            exclude: vec![],
        },
    )
    .await;
    let captured = CAPTURED.lock().unwrap().clone();
    assert!(captured.contains("the capture works"), "{captured}");
    assert!(captured.contains("checkpoint done"), "{captured}");
    assert!(
        captured.contains("persistence operation failed"),
        "{captured}"
    );
    for secret in [
        CANARY_BUCKET,
        // (Other tests of this binary log their own keys through the
        // AWS SDK: only names the agent alone uses are canaries.)
        "canary-prefix",
        "canary-file",
        "canary-content",
        "canary-wrong-secret",
        emu.access_key().secret.as_str(),
        "Signature=",
        "uploadId",
    ] {
        assert!(!captured.contains(secret), "{secret} logged:\n{captured}");
    }
}

/// Whether the gzipped tar `archive` holds `needle` anywhere.
fn archive_holds(archive: &[u8], needle: &[u8]) -> bool {
    use std::io::Read as _;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(archive)
        .read_to_end(&mut raw)
        .unwrap();
    raw.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_checkpoint_archives_nothing_outside_home() {
    let (emu, s3) = emulator().await;
    let a = agent(persistence_access(&emu)).await;
    let (home_a, _, _) = home(&a);
    // A file outside HOME that the sandbox's user may read.
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = b"SECRET-OUTSIDE-HOME-0123456789";
    std::fs::write(outside.path().join("secret.txt"), secret).unwrap();
    std::fs::set_permissions(
        outside.path().join("secret.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // `d` a directory and `s` a symlink out of HOME, swapped atomically
    // over and over (as sandbox code can) while checkpoints walk HOME; the
    // files after `d` give the walk time between listing `d` and opening it.
    put(&a, "d/inside.txt", b"inside", 0o644);
    for i in 0..40 {
        put(&a, &format!("e{i:02}.bin"), &noise(64 * 1024, i), 0o644);
    }
    link(&a, "s", &outside.path().to_string_lossy());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, d, s) = (stop.clone(), home_a.join("d"), home_a.join("s"));
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &d,
                    rustix::fs::CWD,
                    &s,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let mut leaked = 0;
    for round in 0..12 {
        let prefix = format!("p/swap{round}");
        let events = checkpoint_events(&a, ckpt(&prefix, &[])).await.unwrap();
        checkpoint_done(&events);
        let archive = object(&s3, &format!("{prefix}/home.tar.gz")).await.unwrap();
        if archive_holds(&archive, secret) {
            leaked += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the swapper ran: {swaps}");
    assert_eq!(leaked, 0, "checkpoints holding a file from outside HOME");
}
