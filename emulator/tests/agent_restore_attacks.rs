//! Hostile checkpoints against a real agent and the emulator's real S3,
//! each put where a checkpoint goes by someone who may write the prefix:
//! a GNU long-name header of 1 GiB, a pax header of 1 GiB, a million
//! empty entries, a file claiming a terabyte, a truncated gzip, a digest
//! mismatch and a manifest claiming an archive no checkpoint writes. Each
//! is refused with its pinned error, writes nothing into HOME and leaves
//! the process's peak memory where it was (VmHWM, reset before each).
//!
//! Its own test binary: the peak memory is the whole process's, so no
//! other test may run beside this one.

use crate::emulator_support;
use crate::support;

use std::collections::BTreeSet;
use std::io::Write as _;

use aws_sdk_s3 as s3;
use aws_sdk_s3::primitives::ByteStream;
use emulator_support::s3::persistence_access;
use rayito_agent::persist::messages;
use rayito_agent::{AgentConfig, pb, sandbox::GUEST_HOME};
use rayito_emulator::{Emulator, EmulatorConfig};
use support::{TestAgent, payload};

const BUCKET: &str = "rayito-attacks";
const GIB: u64 = 1 << 30;
/// How much the peak RSS may grow during one refused restore.
const MAX_GROWTH_KIB: u64 = 96 * 1024;

/// A raw deflate piece of `data`, ended by a sync flush: byte-aligned and
/// not final, so pieces (and repeats of one) concatenate into one stream.
fn piece(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.flush().unwrap();
    enc.get_ref().clone()
}

/// One gzip member whose content is each `(data, times)` repeated: a
/// gigabyte of content costs about a megabyte here.
fn gzip_of(parts: &[(&[u8], u64)]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut crc = flate2::Crc::new();
    for (data, times) in parts {
        let z = piece(data);
        let mut one = flate2::Crc::new();
        one.update(data);
        for _ in 0..*times {
            out.extend_from_slice(&z);
            crc.combine(&one);
        }
    }
    // The final, empty block.
    let end = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast())
        .finish()
        .unwrap();
    out.extend_from_slice(&end);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    out
}

fn header(name: &[u8], kind: tar::EntryType, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_mtime(1_700_000_000);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// An extension header of `kind` claiming (and holding) a GiB of `a`,
/// then a file `after.txt` and the end of the archive.
fn giant_extension(kind: tar::EntryType) -> Vec<u8> {
    let mib = vec![b'a'; 1 << 20];
    let mut tail = header(b"after.txt", tar::EntryType::Regular, 0);
    tail.extend([0u8; 1024]);
    gzip_of(&[
        (&header(b"././@LongLink", kind, GIB), 1),
        (&mib, GIB >> 20),
        (&tail, 1),
    ])
}

/// A million empty files, all named `e`.
fn million_entries() -> Vec<u8> {
    let one = header(b"e", tar::EntryType::Regular, 0);
    let thousand: Vec<u8> = one.repeat(1000);
    gzip_of(&[(&thousand, 1000), (&[0u8; 1024], 1)])
}

/// A file whose header claims a terabyte, with a MiB of it present.
fn terabyte_file() -> Vec<u8> {
    gzip_of(&[
        (&header(b"huge", tar::EntryType::Regular, 1 << 40), 1),
        (&vec![0u8; 1 << 20], 1),
    ])
}

/// A real archive of a few files, as a checkpoint writes it.
fn ordinary() -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for i in 0..8 {
        let body: Vec<u8> = (0..64 * 1024u32)
            .map(|x| (x.wrapping_mul(2_654_435_761) >> (i + 3)) as u8)
            .collect();
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, format!("file{i}.bin"), &body[..])
            .unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn plant(s3: &s3::Client, prefix: &str, archive: Vec<u8>, sha256: &str, archive_bytes: u64) {
    let manifest = serde_json::json!({
        "schema": "rayito.checkpoint/1",
        "sha256": sha256,
        "archive_bytes": archive_bytes,
        "files": 1,
        "bytes": 0,
        "excludes": [],
        "created_at": "2026-12-01T00:00:00Z",
    });
    for (key, body) in [
        ("home.tar.gz", archive),
        ("manifest.json", serde_json::to_vec(&manifest).unwrap()),
    ] {
        s3.put_object()
            .bucket(BUCKET)
            .key(format!("{prefix}/{key}"))
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap();
    }
}

/// A `VmHWM:` or `VmRSS:` line of this process, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// How a restore ended: the stream's (code, message), or the status's.
async fn restore(t: &TestAgent, prefix: &str) -> (String, String) {
    let req = pb::RestoreRequest {
        source: Some(pb::S3Location {
            bucket: BUCKET.into(),
            key_prefix: prefix.into(),
            region: None,
        }),
        user: None,
    };
    let mut stream = match t.files().restore(req).await {
        Ok(s) => s.into_inner(),
        Err(s) => return (format!("{:?}", s.code()), s.message().to_owned()),
    };
    let mut last = None;
    loop {
        match stream.message().await {
            Ok(Some(ev)) => last = ev.event,
            Ok(None) => break,
            Err(s) => return (format!("{:?}", s.code()), s.message().to_owned()),
        }
    }
    match last {
        Some(pb::restore_event::Event::Error(e)) => (e.code, e.message),
        other => ("not refused".into(), format!("{other:?}")),
    }
}

/// A name, the archive, the sha256 and `archive_bytes` its manifest
/// claims (else the archive's own), and the (code, message) it must end
/// with.
type Case = (
    &'static str,
    Vec<u8>,
    Option<String>,
    Option<u64>,
    (&'static str, &'static str),
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_checkpoints_are_refused_in_bounded_memory_and_write_nothing() {
    let emu = Emulator::start(EmulatorConfig {
        warm_spare: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    let s3 = emulator_support::s3::client(&emu);
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    let t = TestAgent::start_config(AgentConfig {
        persistence: persistence_access(&emu),
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let home = t.host_path(GUEST_HOME);

    let valid = ordinary();
    let truncated = valid[..valid.len() / 2].to_vec();
    // More than 10,000 parts of 8 MiB.
    let huge_manifest = 90_000 * (1 << 20);
    let cases: Vec<Case> = vec![
        (
            "long-name",
            giant_extension(tar::EntryType::GNULongName),
            None,
            None,
            ("internal", messages::HEADER_TOO_LONG),
        ),
        (
            "pax",
            giant_extension(tar::EntryType::XHeader),
            None,
            None,
            ("internal", messages::HEADER_TOO_LONG),
        ),
        (
            "million",
            million_entries(),
            None,
            None,
            ("resource_exhausted", messages::TOO_MANY_ENTRIES),
        ),
        (
            "terabyte",
            terabyte_file(),
            None,
            None,
            ("resource_exhausted", messages::NO_ROOM),
        ),
        (
            "truncated",
            truncated,
            None,
            None,
            ("internal", messages::EXTRACT_FAILED),
        ),
        (
            "mismatch",
            valid.clone(),
            Some("0".repeat(64)),
            None,
            ("internal", messages::CHECKSUM),
        ),
        (
            "huge-manifest",
            valid,
            None,
            Some(huge_manifest),
            ("ResourceExhausted", messages::TOO_LARGE),
        ),
    ];
    // Every case runs; the failures are reported together.
    let mut failures = Vec::new();
    for (name, archive, sha, claimed, want) in cases {
        let sha = sha.unwrap_or_else(|| sha256_hex(&archive));
        let len = claimed.unwrap_or(archive.len() as u64);
        plant(&s3, name, archive, &sha, len).await;
        let before = names(&home);
        // Resets the peak to the current size (Linux 4.0 and later).
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let rss = status_kib("VmRSS:");
        let got = restore(&t, name).await;
        let growth = status_kib("VmHWM:").saturating_sub(rss);
        if (got.0.as_str(), got.1.as_str()) != want {
            failures.push(format!("{name}: ended {got:?}, not {want:?}"));
        }
        if growth >= MAX_GROWTH_KIB {
            failures.push(format!("{name}: the peak grew by {growth} KiB"));
        }
        let after = names(&home);
        if after != before {
            failures.push(format!("{name}: HOME went from {before:?} to {after:?}"));
            for n in after.difference(&before) {
                let p = home.join(n);
                let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// docs/persistence.md's table of restore limits transcribes each refusal's
/// message as the agent sends it.
#[test]
fn the_docs_transcribe_every_restore_refusal() {
    let doc = include_str!("../../docs/persistence.md");
    for message in [
        messages::TOO_LARGE,
        messages::CHECKSUM,
        messages::HEADER_TOO_LONG,
        messages::TOO_MANY_ENTRIES,
        messages::NO_ROOM,
        messages::EXTRACT_FAILED,
    ] {
        assert!(
            doc.contains(&format!("`{message}`")),
            "docs/persistence.md lacks `{message}`"
        );
    }
}
