//! Automatic S3 staging of large reads and writes on the emulator
//! (docs/transfers.md, "Automatic staging"): the threshold boundary (one
//! byte below it goes over gRPC, at it through S3), round trips through
//! single and multipart uploads and exports, `read_stream` and
//! `write_stream` staged, the staging prefix empty afterwards, the checks
//! of `staging` before any call, the fallback on agents without transfers,
//! and no URL, bucket or key in any error or `Debug` output.

use crate::sdk_support;

use sdk_support::plain_http::noise;

use std::time::Duration;

use aws_sdk_s3 as s3;
use bytes::Bytes;
use futures_util::StreamExt as _;
use rayito::error::{ErrorKind, PersistenceCode, TransferCode, TransferReason};
use rayito::transfer::{S3Staging, UploadUrlOptions};
use rayito::{Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig};
use sha2::{Digest as _, Sha256};

const BUCKET: &str = "sdk-staged-io";
const MIB: usize = 1 << 20;
const THRESHOLD: usize = MIB;

/// The pinned message of a staging bucket that does not exist.
const NO_SUCH_BUCKET: &str = "the bucket does not exist (NoSuchBucket); create it or name another";
/// ... and of a bucket in another region (not producible on the emulator,
/// whose S3 serves every region).
const WRONG_REGION: &str = "the bucket is in another region; pass its region";

fn s3_client(emu: &Emulator) -> s3::Client {
    sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), emu.access_key())
}

struct World {
    emu: Emulator,
    sbx: Sandbox,
    s3: s3::Client,
}

fn staging() -> S3Staging {
    S3Staging::new(BUCKET)
        .threshold_bytes(THRESHOLD as u64)
        .multipart_threshold_bytes(16 << 20)
}

async fn world_with(transfers: bool, staging: S3Staging) -> World {
    world_in(EmulatorConfig::default(), transfers, staging).await
}

async fn world_in(config: EmulatorConfig, transfers: bool, staging: S3Staging) -> World {
    let emu = Emulator::start(EmulatorConfig {
        agent_transfers: transfers,
        ..config
    })
    .await
    .expect("the emulator starts");
    let s3 = s3_client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    let sbx = sdk_support::builder(&emu)
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .staging(staging)
        .create()
        .await
        .expect("sandbox");
    World { emu, sbx, s3 }
}

async fn world() -> World {
    world_with(true, staging()).await
}

fn sha(data: &[u8]) -> Vec<u8> {
    Sha256::digest(data).to_vec()
}

/// Every object and unfinished multipart upload in the bucket.
async fn leftovers(s3: &s3::Client) -> (Vec<String>, usize) {
    let objects = s3
        .list_objects_v2()
        .bucket(BUCKET)
        .send()
        .await
        .expect("list")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect();
    let uploads = s3
        .list_multipart_uploads()
        .bucket(BUCKET)
        .send()
        .await
        .map(|o| o.uploads().len())
        .unwrap_or(0);
    (objects, uploads)
}

/// The staging objects are deleted once a read or write ended.
async fn assert_prefix_empty(s3: &s3::Client) {
    // A read's deletion runs as it ends; give a background one a moment.
    for _ in 0..50 {
        if leftovers(s3).await == (Vec::new(), 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("staging leftovers: {:?}", leftovers(s3).await);
}

/// No URL, bucket or staging key in a text the caller may log.
fn assert_clean(text: &str) {
    for secret in [
        BUCKET,
        "no-such-staging",
        "rayito-transfer/",
        "X-Amz",
        "http://",
        "https://",
    ] {
        assert!(!text.contains(secret), "{text:?} holds {secret:?}");
    }
}

fn assert_error_clean(e: &SandboxError) {
    assert_clean(&format!("{e} {e:?} {}", e.to_wire()));
}

fn argument(e: &SandboxError) -> Option<&str> {
    match e {
        SandboxError::InvalidArgument { argument, .. } => argument.as_deref(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_below_the_threshold_goes_over_grpc_and_the_threshold_through_s3() {
    // A staging bucket that does not exist: only the S3 path can fail.
    let w = world_with(
        true,
        S3Staging::new("no-such-staging")
            .threshold_bytes(THRESHOLD as u64)
            .multipart_threshold_bytes(16 << 20),
    )
    .await;
    let files = w.sbx.files();
    assert!(w.sbx.staging().is_some());
    assert_clean(&format!("{:?} {:?}", w.sbx, w.sbx.staging()));

    // Writes: threshold - 1 bytes over gRPC, threshold bytes through S3.
    let below = noise(THRESHOLD - 1, 1);
    let entry = files.write("below.bin", below.clone()).await.expect("gRPC");
    assert_eq!(entry.size, (THRESHOLD - 1) as u64);
    let err = files
        .write("at.bin", noise(THRESHOLD, 2))
        .await
        .expect_err("through S3");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(argument(&err), Some("bucket"));
    assert_eq!(err.to_string(), format!("invalid bucket: {NO_SUCH_BUCKET}"));
    assert_error_clean(&err);
    assert!(!files.exists("at.bin").await.unwrap());

    // A stream always goes through S3, even a short one.
    let err = files
        .write_stream(
            "s.bin",
            futures_util::stream::iter([Bytes::from_static(b"abc")]),
        )
        .await
        .expect_err("through S3");
    assert_eq!(argument(&err), Some("bucket"), "{err}");
    assert_error_clean(&err);

    // Reads: the file at the threshold is exported to the missing bucket,
    // which the agent's PUT finds unavailable.
    files
        .write_files(vec![rayito::WriteEntry::new("at.bin", noise(THRESHOLD, 3))])
        .await
        .expect("write_files stays on gRPC");
    assert_eq!(files.read("below.bin").await.expect("gRPC"), below);
    let err = files.read("at.bin").await.expect_err("through S3");
    match &err {
        SandboxError::Transfer { code, reason, .. } => {
            assert_eq!(*code, TransferCode::Unavailable, "{err}");
            assert_eq!(*reason, TransferReason::S3Unavailable, "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert_error_clean(&err);
    let err = files.read_stream("at.bin").await.expect_err("through S3");
    assert_eq!(err.kind(), ErrorKind::Transfer, "{err}");
    assert_error_clean(&err);

    // At the multipart threshold the SDK creates the multipart upload of
    // the export itself: its own S3 call finds the bucket missing.
    files
        .write_files(vec![rayito::WriteEntry::new("mp.bin", noise(16 * MIB, 9))])
        .await
        .expect("write_files");
    let err = files.read("mp.bin").await.expect_err("multipart export");
    assert_eq!(argument(&err), Some("bucket"), "{err}");
    assert_eq!(err.to_string(), format!("invalid bucket: {NO_SUCH_BUCKET}"));
    assert_error_clean(&err);
    drop(w.emu);
}

/// docs/transfers.md transcribes the pinned message.
#[test]
fn the_docs_transcribe_the_staging_messages() {
    let doc = include_str!("../../docs/transfers.md");
    assert!(doc.contains(NO_SUCH_BUCKET));
    assert!(doc.contains(WRONG_REGION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_reads_round_trip_through_s3_and_leave_nothing_behind() {
    let w = world().await;
    let files = w.sbx.files();
    // At the threshold: one PutObject, one PUT export.
    let at = noise(THRESHOLD, 4);
    let entry = files.write("io/at.bin", at.clone()).await.expect("write");
    assert_eq!(entry.path, "/home/user/io/at.bin");
    assert_eq!(entry.size, THRESHOLD as u64);
    assert_eq!(entry.mode, 0o644);
    assert_eq!(files.read("io/at.bin").await.expect("read"), at);
    assert_prefix_empty(&w.s3).await;

    // ~20 MiB: a multipart upload of three parts (8 + 8 + 4 MiB).
    let big = noise(20 * MIB + 12_345, 5);
    let entry = files.write("io/big.bin", big.clone()).await.expect("write");
    assert_eq!(entry.size, big.len() as u64);
    // Read back over gRPC (write_files's sibling: list + size) and staged.
    let back = files.read("io/big.bin").await.expect("read");
    assert_eq!(sha(&back), sha(&big));
    assert_prefix_empty(&w.s3).await;

    // A handle made by connect with a staging stages too.
    let again = sdk_support::builder(&w.emu)
        .aws(sdk_support::aws(&w.emu).s3_endpoint_url(w.emu.s3_endpoint_url()))
        .staging(staging())
        .connect(w.sbx.id(), w.sbx.access_token().clone())
        .await
        .expect("connect");
    assert_eq!(again.staging(), Some(&staging()));
    let back = again.files().read("io/big.bin").await.expect("read");
    assert_eq!(sha(&back), sha(&big));
    assert_prefix_empty(&w.s3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_above_the_multipart_threshold_is_exported_in_parts() {
    let w = world().await;
    let files = w.sbx.files();
    // Written over gRPC, so only the export is staged: 40 MiB in five
    // parts of 8 MiB (multipart_threshold 16 MiB).
    let data = noise(40 * MIB + 7, 6);
    files
        .write_files(vec![rayito::WriteEntry::new("big.bin", data.clone())])
        .await
        .expect("write_files");
    let back = files.read("big.bin").await.expect("read");
    assert_eq!(back.len(), data.len());
    assert_eq!(sha(&back), sha(&data));
    assert_prefix_empty(&w.s3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_stream_and_write_stream_are_staged() {
    let w = world().await;
    let files = w.sbx.files();
    // 17 MiB in 100 KiB chunks: three parts, the stream consumed as sent.
    let data = noise(17 * MIB + 3, 7);
    let chunks: Vec<Bytes> = data
        .chunks(100 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    let entry = files
        .write_stream("s/big.bin", futures_util::stream::iter(chunks))
        .await
        .expect("write_stream");
    assert_eq!(entry.size, data.len() as u64);
    // A short stream: one PutObject.
    let entry = files
        .write_stream("s/small.txt", futures_util::stream::iter(["hi ", "there"]))
        .await
        .expect("small write_stream");
    assert_eq!(entry.size, 8);
    assert_eq!(
        files.read_to_string("s/small.txt").await.unwrap(),
        "hi there"
    );
    // An empty stream: an empty file.
    let empty = futures_util::stream::iter(Vec::<Bytes>::new());
    let entry = files.write_stream("s/empty", empty).await.expect("empty");
    assert_eq!(entry.size, 0);

    let mut stream = files.read_stream("s/big.bin").await.expect("read_stream");
    let mut hash = Sha256::new();
    let (mut n, mut largest) = (0usize, 0usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        n += chunk.len();
        largest = largest.max(chunk.len());
        hash.update(&chunk);
    }
    assert_eq!(n, data.len());
    assert_eq!(hash.finalize().to_vec(), sha(&data));
    // Streamed, not held: no chunk near the file's size.
    assert!(largest < 4 * MIB, "a chunk of {largest} bytes");
    assert_prefix_empty(&w.s3).await;

    // A read_stream dropped midway still leaves no object behind.
    let mut stream = files.read_stream("s/big.bin").await.expect("read_stream");
    let _ = stream.next().await;
    drop(stream);
    assert_prefix_empty(&w.s3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_transfers_keeps_large_reads_and_writes_on_grpc() {
    let w = world_with(false, staging()).await;
    let files = w.sbx.files();
    let data = noise(3 * MIB, 8);
    let entry = files.write("old/a.bin", data.clone()).await.expect("gRPC");
    assert_eq!(entry.size, data.len() as u64);
    assert_eq!(files.read("old/a.bin").await.expect("gRPC"), data);
    let mut stream = files.read_stream("old/a.bin").await.expect("gRPC");
    let mut n = 0;
    while let Some(chunk) = stream.next().await {
        n += chunk.expect("chunk").len();
    }
    assert_eq!(n, data.len());
    let entry = files
        .write_stream(
            "old/s.bin",
            futures_util::stream::iter([Bytes::from(data.clone())]),
        )
        .await
        .expect("gRPC");
    assert_eq!(entry.size, data.len() as u64);
    assert_eq!(leftovers(&w.s3).await, (Vec::new(), 0), "nothing staged");

    // gzip and metadata need an agent from 0.3.0: the probe refuses them
    // before any byte moves (docs/files.md).
    for (options, feature) in [
        (rayito::WriteOptions::new().gzip(true), "files.write(gzip)"),
        (
            rayito::WriteOptions::new().metadata("k", "v"),
            "files.write(metadata)",
        ),
    ] {
        let err = files
            .write_with("old/g.bin", "x", options)
            .await
            .expect_err("an agent before 0.3.0");
        assert!(
            matches!(&err, SandboxError::Unimplemented { feature: f, .. } if &**f == feature),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "feature {feature} is not available: the sandbox's agent predates it (needs agent 0.3.0 or later); use an image with a newer agent; see docs/files.md"
            )
        );
        assert!(!files.exists("old/g.bin").await.unwrap());
    }

    // The URL calls and persistence answer as an old agent's.
    let err = files
        .upload_url("old/u.bin", UploadUrlOptions::new(staging()))
        .await
        .expect_err("no transfers");
    assert_eq!(err.kind(), ErrorKind::Unimplemented, "{err}");
    assert_error_clean(&err);
    let err = w
        .sbx
        .persistence()
        .checkpoint(rayito::persistence::CheckpointOptions::new(
            rayito::persistence::S3Prefix::new(BUCKET).name("old"),
        ))
        .await
        .expect_err("no persistence");
    match &err {
        SandboxError::Persistence { code, .. } => {
            assert_eq!(*code, PersistenceCode::Unimplemented, "{err}")
        }
        other => panic!("{other:?}"),
    }
    assert_error_clean(&err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_staging_is_refused_before_any_call() {
    let emu = sdk_support::emulator().await;
    for (bad, field) in [
        (S3Staging::new("Bad_Bucket"), "bucket"),
        (S3Staging::new("abc").prefix("rayito"), "prefix"),
        (S3Staging::new("abc").threshold_bytes(1), "threshold_bytes"),
    ] {
        let err = sdk_support::builder(&emu)
            .staging(bad.clone())
            .create()
            .await
            .expect_err("refused");
        assert_eq!(argument(&err), Some(field), "{err}");
        let err = sdk_support::builder(&emu)
            .staging(bad)
            .connect("mvm-0123456789abcdef", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
            .await
            .expect_err("refused");
        assert_eq!(argument(&err), Some(field), "{err}");
    }
    // Nothing was launched.
    let listed: Vec<_> = sdk_support::builder(&emu)
        .client()
        .await
        .unwrap()
        .list(rayito::ListQuery::default())
        .collect()
        .await;
    assert!(listed.is_empty(), "{listed:?}");
}

/// The staged object's file in the emulator's S3 store under `root`.
fn staged_object_file(root: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = path.to_string_lossy();
            if text.contains("/rayito-transfer/")
                && text.contains("/down/")
                && !text.ends_with(".json")
            {
                return Some(path);
            }
        }
    }
    None
}

/// A byte of the staged object flipped in S3's store while the SDK
/// downloads it (the emulator's S3 reads the object's file as the body is
/// sent, so the change reaches the SDK as corruption between the agent's
/// upload and the SDK's download would): the read ends with
/// `Transfer { failed_precondition, checksum_mismatch }`, and the staging
/// object is deleted all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_flipped_in_the_staged_object_is_a_checksum_mismatch() {
    let root = std::env::temp_dir().join(format!("rayito-staged-io-{}", std::process::id()));
    let config = EmulatorConfig {
        root: root.clone(),
        ..EmulatorConfig::default()
    };
    let w = world_in(config, true, staging()).await;
    let files = w.sbx.files();
    let data = noise(24 * MIB, 10);
    files
        .write_files(vec![rayito::WriteEntry::new("flip.bin", data.clone())])
        .await
        .expect("write_files");
    let mut stream = files.read_stream("flip.bin").await.expect("staged read");
    // The export is done and the GET answered: the object is in the store,
    // and its end has not been sent yet (24 MiB, read in 4 KiB steps as
    // the SDK takes them).
    let object = staged_object_file(&root).expect("the staged object's file");
    {
        use std::io::{Seek as _, SeekFrom, Write as _};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&object)
            .expect("open");
        f.seek(SeekFrom::End(-1)).expect("seek");
        f.write_all(&[!data[data.len() - 1]]).expect("flip");
    }
    let mut got = 0usize;
    let err = loop {
        match stream.next().await {
            Some(Ok(chunk)) => got += chunk.len(),
            Some(Err(e)) => break e,
            None => panic!("the read ended without noticing the flipped byte"),
        }
    };
    match &err {
        SandboxError::Transfer { code, reason, .. } => {
            assert_eq!(*code, TransferCode::FailedPrecondition, "{err}");
            assert_eq!(*reason, TransferReason::ChecksumMismatch, "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "checksum_mismatch: the bytes of the download do not match their sha256; start the download again"
    );
    assert_eq!(got, data.len(), "every byte arrived, one of them wrong");
    assert_error_clean(&err);
    assert!(stream.next().await.is_none());
    assert_prefix_empty(&w.s3).await;
    drop(w);
    let _ = std::fs::remove_dir_all(&root);
}

/// `data` in 1 MiB pieces; once `pause_after` bytes were handed out, the
/// stream looks at the sandbox and the bucket (`look`, its answer kept in
/// `seen`) before it hands out the rest.
fn looking_stream(
    data: Vec<u8>,
    pause_after: usize,
    look: impl FnOnce() -> futures_util::future::BoxFuture<'static, String> + Send + 'static,
    seen: std::sync::Arc<std::sync::Mutex<Option<String>>>,
) -> impl futures_util::Stream<Item = Bytes> + Send + 'static {
    let data = Bytes::from(data);
    futures_util::stream::unfold((0usize, Some(look)), move |(at, mut look)| {
        let data = data.clone();
        let seen = seen.clone();
        async move {
            if at >= data.len() {
                return None;
            }
            if at >= pause_after
                && let Some(look) = look.take()
            {
                *seen.lock().unwrap() = Some(look().await);
            }
            let end = (at + MIB).min(data.len());
            Some((data.slice(at..end), (end, look)))
        }
    })
}

/// What the target's directory holds while a write is under way: the
/// agent's temporary file, once it holds at least `min` bytes (waited for,
/// at most 20 s), and whether the bucket holds any object.
async fn look_at(sbx: Sandbox, s3: s3::Client, dir: &str, min: u64, wait: bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let temp = loop {
        let temp = sbx
            .files()
            .list(dir)
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|e| e.name.starts_with(".rayito-tmp-") && e.size >= min);
        if temp.is_some() || !wait || tokio::time::Instant::now() >= deadline {
            break temp;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The chunks are objects of their own; a multipart upload's parts are
    // not objects until it completes.
    let objects = s3
        .list_objects_v2()
        .bucket(BUCKET)
        .send()
        .await
        .expect("list")
        .contents()
        .len();
    format!("temp file: {}, objects: {}", temp.is_some(), objects > 0)
}

/// `write_stream` of `data` to `path` (in directory `dir`), looking at
/// the sandbox and the bucket once `pause_after` bytes were handed out
/// (`look_at` with `min` and `wait`); checks the entry's size and that the
/// file reads back byte for byte; what the look saw.
#[allow(clippy::too_many_arguments)]
async fn write_looking(
    w: &World,
    dir: &str,
    path: &str,
    data: &[u8],
    pause_after: usize,
    min: u64,
    wait: bool,
) -> String {
    let files = w.sbx.files();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (sbx, s3, d) = (w.sbx.clone(), w.s3.clone(), dir.to_owned());
    let look = move || -> futures_util::future::BoxFuture<'static, String> {
        Box::pin(async move { look_at(sbx, s3, &d, min, wait).await })
    };
    let stream = looking_stream(data.to_vec(), pause_after, look, seen.clone());
    let entry = files
        .write_stream(path, stream)
        .await
        .expect("write_stream");
    assert_eq!(entry.size, data.len() as u64);
    assert_eq!(sha(&files.read(path).await.expect("read")), sha(data));
    let seen = seen.lock().unwrap().clone();
    seen.expect("the stream looked")
}

/// On an agent that announces `chunked_import` (issue 44, item 4), a large
/// write goes as 16 MiB chunks the agent imports while the next one
/// uploads: with 24 MiB of a 40 MiB stream handed out, the agent's
/// temporary file already holds the first chunk. The file round-trips byte for byte, a size that is a multiple
/// of the chunk too (its last chunk empty), and the staging prefix is
/// empty afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_write_overlaps_the_agents_import_and_round_trips() {
    let w = world().await;
    let files = w.sbx.files();
    let data = noise(40 * MIB + 5, 21);
    let seen = write_looking(&w, "c", "c/big.bin", &data, 24 * MIB, 16 * MIB as u64, true).await;
    assert_eq!(
        seen.split(',').next(),
        Some("temp file: true"),
        "the import runs while the stream still feeds the write"
    );
    // Two whole chunks: the last one is empty and names the sha256.
    let exact = noise(32 * MIB, 22);
    let entry = files
        .write("c/exact.bin", exact.clone())
        .await
        .expect("write");
    assert_eq!(entry.size, exact.len() as u64);
    assert_eq!(
        sha(&files.read("c/exact.bin").await.expect("read")),
        sha(&exact)
    );
    let names: Vec<String> = files
        .list("c")
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    assert_prefix_empty(&w.s3).await;
}

/// Past 318 chunks a chunked write goes on as one more object (the
/// overflow, a multipart upload of the rest) and an empty last chunk:
/// with 64 KiB chunks, writes of 319 chunks and 5 bytes (an overflow of
/// one PutObject) and of 30 MiB (a multipart overflow, while the agent
/// already holds the 318 chunks) round-trip; without the overflow the
/// second would not fit its 320 chunk URLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_write_past_its_chunks_goes_on_as_one_overflow_object() {
    const CHUNK: usize = 64 << 10;
    let w = world_with(true, staging().chunk_bytes(CHUNK as u64)).await;
    let files = w.sbx.files();
    for (name, len) in [("one.bin", 319 * CHUNK + 5)] {
        let data = noise(len, len as u64);
        let stream = futures_util::stream::iter(
            data.chunks(MIB)
                .map(Bytes::copy_from_slice)
                .collect::<Vec<_>>(),
        );
        let entry = files
            .write_stream(&format!("v/{name}"), stream)
            .await
            .expect(name);
        assert_eq!(entry.size, len as u64, "{name}");
        assert_eq!(
            sha(&files.read(&format!("v/{name}")).await.expect("read")),
            sha(&data),
            "{name}"
        );
    }
    let data = noise(30 * MIB + 7, 31);
    let min = (318 * CHUNK) as u64;
    let seen = write_looking(&w, "v", "v/big.bin", &data, 29 * MIB, min, true).await;
    assert_eq!(
        seen.split(',').next(),
        Some("temp file: true"),
        "the agent holds the chunks before the overflow while it uploads"
    );
    let names = files.list("v").await.expect("list").len();
    assert_eq!(names, 2, "no temporary file left");
    assert_prefix_empty(&w.s3).await;
}

/// An agent that does not announce `chunked_import` (as the reference's)
/// gets today's single object: a multipart upload (no object while it is
/// under way), and the import only after it (no temporary file while the
/// stream still feeds the write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_chunked_import_gets_one_staged_object() {
    let config = EmulatorConfig {
        agent_chunked_import: false,
        ..EmulatorConfig::default()
    };
    let w = world_in(config, true, staging()).await;
    let data = noise(40 * MIB + 5, 23);
    let seen = write_looking(&w, "o", "o/big.bin", &data, 24 * MIB, 0, false).await;
    assert_eq!(seen, "temp file: false, objects: false");
    assert_prefix_empty(&w.s3).await;
}
