//! The emulator's S3 endpoint, through the real `aws-sdk-s3` client
//! (path-style, the emulator's key): the operations a template build and
//! its upload use, the failures S3 answers with, and one store behind both
//! the endpoint and the emulator's own reads and writes.

use crate::emulator_support;

use std::time::Duration;

use aws_sdk_s3 as s3;
use aws_sdk_s3::error::ProvideErrorMetadata as _;
use aws_sdk_s3::primitives::ByteStream;
use emulator_support::s3::{client, client_with};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const ACCOUNT: &str = "000000000000";

async fn start() -> Emulator {
    Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts")
}

/// The HTTP status, code and message of an SDK error.
fn parts<E: s3::error::ProvideErrorMetadata>(
    e: &s3::error::SdkError<E, s3::config::http::HttpResponse>,
) -> (u16, String, String) {
    let status = e.raw_response().map_or(0, |r| r.status().as_u16());
    (
        status,
        e.code().unwrap_or("").to_owned(),
        e.message().unwrap_or("").to_owned(),
    )
}

/// Deterministic bytes that no run of a pattern repeats.
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

const KEY: &str =
    "rayito/templates/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.zip";

#[tokio::test]
async fn the_artifact_bucket_exists_at_start_and_objects_round_trip() {
    let emu = start().await;
    let bucket = emu.artifact_bucket();
    assert_eq!(bucket, "rayito-artifacts-000000000000-us-east-1");
    let s3 = client(&emu);
    s3.head_bucket()
        .bucket(&bucket)
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect("the artifact bucket was created at start");
    // What the emulator seeded there: the base image's code artifact (also
    // rayito-base-caps's) and rayito-base-caps-efs's (its efs marker makes
    // it another zip).
    let seeded = stored_keys(&s3, &bucket).await;
    assert_eq!(seeded.len(), 2, "{seeded:?}");
    assert!(
        seeded.iter().all(|k| k.starts_with("rayito/images/rayd-")),
        "{seeded:?}"
    );

    // Absent first (what a build's upload checks).
    let err = s3
        .head_object()
        .bucket(&bucket)
        .key(KEY)
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect_err("nothing there yet");
    assert_eq!(parts(&err).0, 404);
    assert!(err.as_service_error().is_some_and(|e| e.is_not_found()));

    let body = noise(70_000, 1);
    let put = s3
        .put_object()
        .bucket(&bucket)
        .key(KEY)
        .expected_bucket_owner(ACCOUNT)
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .expect("put");
    let etag = put.e_tag().expect("an ETag").to_owned();
    assert!(
        etag.starts_with('"') && etag.len() == 34,
        "{etag}: a quoted MD5"
    );

    let head = s3
        .head_object()
        .bucket(&bucket)
        .key(KEY)
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect("head");
    assert_eq!(head.content_length(), Some(70_000));
    assert_eq!(head.e_tag(), Some(etag.as_str()));

    let got = s3
        .get_object()
        .bucket(&bucket)
        .key(KEY)
        .send()
        .await
        .expect("get");
    assert_eq!(got.e_tag(), Some(etag.as_str()));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(bytes.as_ref(), body.as_slice());

    s3.put_object()
        .bucket(&bucket)
        .key("rayito/images/rayd-0123456789ab.zip")
        .body(ByteStream::from_static(b"zip"))
        .send()
        .await
        .unwrap();
    s3.put_object()
        .bucket(&bucket)
        .key("elsewhere/x")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    let listed = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("rayito/")
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect("list");
    let keys: Vec<&str> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter(|k| !seeded.iter().any(|s| s == k))
        .collect();
    assert_eq!(keys, ["rayito/images/rayd-0123456789ab.zip", KEY]);
    // The two put here and the two seeded.
    assert_eq!(listed.key_count(), Some(4));

    s3.delete_object()
        .bucket(&bucket)
        .key(KEY)
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect("delete");
    let err = s3
        .head_object()
        .bucket(&bucket)
        .key(KEY)
        .send()
        .await
        .expect_err("deleted");
    assert_eq!(parts(&err).0, 404);
    // Deleting what is not there succeeds, as on S3.
    s3.delete_object()
        .bucket(&bucket)
        .key(KEY)
        .send()
        .await
        .expect("idempotent delete");
}

#[tokio::test]
async fn a_20_mib_object_streamed_with_aws_chunked_comes_back_byte_identical() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let body = noise(20 << 20, 7);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("artifact.zip");
    std::fs::write(&file, &body).unwrap();
    // A streaming body: the SDK sends it aws-chunked, each chunk signed,
    // with its CRC32 in a trailer.
    let put = s3
        .put_object()
        .bucket(&bucket)
        .key("big/artifact.zip")
        .body(ByteStream::from_path(&file).await.unwrap())
        .send()
        .await
        .expect("an aws-chunked put");
    let crc = put
        .checksum_crc32()
        .expect("the trailer's CRC32 was read and kept")
        .to_owned();
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("big/artifact.zip")
        .checksum_mode(s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .expect("get");
    assert_eq!(got.content_length(), Some(20 << 20));
    assert_eq!(got.checksum_crc32(), Some(crc.as_str()));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert!(bytes.as_ref() == body.as_slice(), "byte-identical");
    assert_eq!(
        emu.get_object_directly(&bucket, "big/artifact.zip")
            .await
            .unwrap()
            .map(|b| b.len()),
        Some(20 << 20)
    );
}

#[tokio::test]
async fn another_expected_bucket_owner_is_refused_with_403_before_anything_happens() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    emu.put_object_directly(&bucket, "present", b"p".to_vec())
        .await
        .unwrap();
    let other = "111111111111";

    let err = s3
        .put_object()
        .bucket(&bucket)
        .key("new")
        .expected_bucket_owner(other)
        .body(ByteStream::from_static(b"n"))
        .send()
        .await
        .expect_err("put refused");
    assert_eq!(
        parts(&err),
        (403, "AccessDenied".to_owned(), "Access Denied".to_owned())
    );
    assert_eq!(emu.get_object_directly(&bucket, "new").await.unwrap(), None);

    let err = s3
        .get_object()
        .bucket(&bucket)
        .key("present")
        .expected_bucket_owner(other)
        .send()
        .await
        .expect_err("get refused");
    assert_eq!(parts(&err).0, 403);
    assert_eq!(parts(&err).1, "AccessDenied");
    // HEAD answers without a body: the status is all there is.
    let err = s3
        .head_object()
        .bucket(&bucket)
        .key("present")
        .expected_bucket_owner(other)
        .send()
        .await
        .expect_err("head refused");
    assert_eq!(parts(&err).0, 403);
    let err = s3
        .list_objects_v2()
        .bucket(&bucket)
        .expected_bucket_owner(other)
        .send()
        .await
        .expect_err("list refused");
    assert_eq!(parts(&err).1, "AccessDenied");
    let err = s3
        .delete_object()
        .bucket(&bucket)
        .key("present")
        .expected_bucket_owner(other)
        .send()
        .await
        .expect_err("delete refused");
    assert_eq!(parts(&err).1, "AccessDenied");
    assert!(
        emu.get_object_directly(&bucket, "present")
            .await
            .unwrap()
            .is_some(),
        "not deleted"
    );
    let err = s3
        .head_bucket()
        .bucket(&bucket)
        .expected_bucket_owner(other)
        .send()
        .await
        .expect_err("head bucket refused");
    assert_eq!(parts(&err).0, 403);
}

#[tokio::test]
async fn missing_objects_and_buckets_are_404() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let err = s3
        .get_object()
        .bucket(&bucket)
        .key("nope")
        .send()
        .await
        .expect_err("missing");
    assert_eq!(
        parts(&err),
        (
            404,
            "NoSuchKey".to_owned(),
            "The specified key does not exist.".to_owned()
        )
    );
    assert!(err.as_service_error().is_some_and(|e| e.is_no_such_key()));

    let err = s3
        .head_object()
        .bucket(&bucket)
        .key("nope")
        .send()
        .await
        .expect_err("missing");
    assert_eq!(parts(&err).0, 404);
    let raw = err.raw_response().expect("a response");
    assert!(
        raw.body().bytes().is_none_or(<[u8]>::is_empty),
        "HeadObject's 404 has no body"
    );

    // A prefix of other keys is a directory on disk, not an object.
    emu.put_object_directly(&bucket, "dir/file", b"f".to_vec())
        .await
        .unwrap();
    let err = s3
        .head_object()
        .bucket(&bucket)
        .key("dir")
        .send()
        .await
        .expect_err("a prefix");
    assert_eq!(parts(&err).0, 404);
    let err = s3
        .get_object()
        .bucket(&bucket)
        .key("dir")
        .send()
        .await
        .expect_err("a prefix");
    assert_eq!(parts(&err).1, "NoSuchKey");

    let err = s3
        .get_object()
        .bucket("no-such-bucket")
        .key("k")
        .send()
        .await
        .expect_err("no bucket");
    assert_eq!(
        parts(&err),
        (
            404,
            "NoSuchBucket".to_owned(),
            "The specified bucket does not exist".to_owned()
        )
    );
    let err = s3
        .head_bucket()
        .bucket("no-such-bucket")
        .send()
        .await
        .expect_err("no bucket");
    assert_eq!(parts(&err).0, 404);
    // A put does not create the bucket.
    let err = s3
        .put_object()
        .bucket("no-such-bucket")
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("no bucket");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (404, "NoSuchBucket")
    );
    s3.head_bucket()
        .bucket("no-such-bucket")
        .send()
        .await
        .expect_err("still no bucket");
}

#[tokio::test]
async fn requests_not_signed_with_the_emulators_key_are_refused_with_403() {
    let emu = start().await;
    let bucket = emu.artifact_bucket();
    emu.put_object_directly(&bucket, "secret", b"s".to_vec())
        .await
        .unwrap();
    let key = emu.access_key();

    let wrong_secret = client_with(&emu, &AccessKey::new(key.id.clone(), "not-the-secret"));
    let err = wrong_secret
        .get_object()
        .bucket(&bucket)
        .key("secret")
        .send()
        .await
        .expect_err("a wrong secret");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (403, "SignatureDoesNotMatch")
    );
    let err = wrong_secret
        .put_object()
        .bucket(&bucket)
        .key("planted")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("a wrong secret");
    assert_eq!(parts(&err).0, 403);
    assert_eq!(
        emu.get_object_directly(&bucket, "planted").await.unwrap(),
        None
    );

    let unknown = client_with(&emu, &AccessKey::generate());
    let err = unknown
        .head_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect_err("an unknown key");
    assert_eq!(parts(&err).0, 403);
    let err = unknown
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .expect_err("an unknown key");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (403, "InvalidAccessKeyId")
    );

    // No signature at all: what sandbox code on this host could send.
    let (status, body) = raw(
        &emu,
        &format!("GET /{bucket}/secret HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("<Code>AccessDenied</Code>"), "{body}");
    assert!(!body.contains("s</"), "no object bytes: {body}");
}

/// Sends `request` as is to the S3 port; the status and the body.
async fn raw(emu: &Emulator, request: &str) -> (u16, String) {
    let addr = emu
        .s3_endpoint_url()
        .trim_start_matches("http://")
        .to_owned();
    let request = request.replace("Host: 127.0.0.1\r\n", &format!("Host: {addr}\r\n"));
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut out))
        .await
        .expect("an answer")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test]
async fn a_foreign_host_is_refused_before_the_signature_is_looked_at() {
    let emu = start().await;
    let addr = emu
        .s3_endpoint_url()
        .trim_start_matches("http://")
        .to_owned();
    let (status, body) = raw(
        &emu,
        "GET / HTTP/1.1\r\nHost: rebound.example:80\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!(
            "<Message>The Host header must name this emulator ({addr}).</Message>"
        )),
        "{body}"
    );
}

#[tokio::test]
async fn a_key_with_a_session_token_requires_it() {
    let key = AccessKey::generate().with_session_token("session-token-1");
    let emu = Emulator::start(EmulatorConfig {
        access_keys: vec![key.clone()],
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let bucket = emu.artifact_bucket();
    client_with(&emu, &key)
        .head_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("with the token");
    let mut without = key.clone();
    without.session_token = None;
    let err = client_with(&emu, &without)
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .expect_err("without the token");
    assert_eq!(
        parts(&err),
        (
            400,
            "InvalidToken".to_owned(),
            "The provided token is malformed or otherwise invalid.".to_owned()
        )
    );
    let err = client_with(&emu, &key.clone().with_session_token("session-token-2"))
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .expect_err("another token");
    assert_eq!(parts(&err).1, "InvalidToken");
}

#[tokio::test]
async fn the_endpoint_and_the_emulator_read_and_write_one_store() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();

    // Through S3, read directly.
    s3.put_object()
        .bucket(&bucket)
        .key("a/through-s3")
        .body(ByteStream::from_static(b"from the endpoint"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        emu.get_object_directly(&bucket, "a/through-s3")
            .await
            .unwrap(),
        Some(b"from the endpoint".to_vec())
    );

    // Directly, read through S3 (and listed).
    let body = noise(5_000, 3);
    emu.put_object_directly(&bucket, "a/direct", body.clone())
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("a/direct")
        .send()
        .await
        .expect("an object the emulator wrote");
    let etag = got.e_tag().map(str::to_owned);
    assert_eq!(
        got.body.collect().await.unwrap().into_bytes().as_ref(),
        body
    );
    let same = s3
        .put_object()
        .bucket(&bucket)
        .key("a/same-bytes")
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(etag.as_deref(), same.e_tag(), "the ETag is the bytes' MD5");
    let keys = stored_keys(&s3, &bucket).await;
    // Besides the base image's artifact the emulator seeded.
    let keys: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .filter(|k| !k.starts_with("rayito/images/rayd-"))
        .collect();
    assert_eq!(keys, ["a/direct", "a/same-bytes", "a/through-s3"]);

    // The emulator overwrites an object put through S3: S3 then serves the
    // new bytes with their own ETag, not the old object's ETag and
    // checksum (which the SDK would check against the new bytes).
    let replacement = noise(6_000, 4);
    emu.put_object_directly(&bucket, "a/through-s3", replacement.clone())
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("a/through-s3")
        .checksum_mode(s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .expect("the replaced object");
    assert_eq!(got.checksum_crc32(), None, "no stale checksum");
    let etag = got.e_tag().map(str::to_owned);
    assert_eq!(
        got.body.collect().await.unwrap().into_bytes().as_ref(),
        replacement
    );
    let same = s3
        .put_object()
        .bucket(&bucket)
        .key("b/replacement-bytes")
        .body(ByteStream::from(replacement))
        .send()
        .await
        .unwrap();
    assert_eq!(etag.as_deref(), same.e_tag());
}

#[tokio::test]
async fn keys_a_file_system_cannot_hold_are_refused_and_other_operations_are_not_served() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let before = stored_keys(&s3, &bucket).await;
    for key in ["a//b", "dir/"] {
        let err = s3
            .put_object()
            .bucket(&bucket)
            .key(key)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await
            .expect_err(key);
        assert_eq!(
            parts(&err),
            (
                400,
                "InvalidArgument".to_owned(),
                "the emulator stores objects as files: a key with an empty, \".\" or \"..\" segment cannot be stored; use another key".to_owned()
            ),
            "{key}"
        );
    }
    assert_eq!(stored_keys(&s3, &bucket).await, before, "nothing stored");

    // CreateBucket: new, then again.
    s3.create_bucket()
        .bucket("rayito-other")
        .send()
        .await
        .expect("create");
    let err = s3
        .create_bucket()
        .bucket("rayito-other")
        .send()
        .await
        .expect_err("exists");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (409, "BucketAlreadyOwnedByYou")
    );
    let err = s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect_err("the artifact bucket exists");
    assert_eq!(parts(&err).1, "BucketAlreadyOwnedByYou");

    // Not served: CopyObject.
    emu.put_object_directly(&bucket, "src", b"s".to_vec())
        .await
        .unwrap();
    let err = s3
        .copy_object()
        .bucket(&bucket)
        .key("dst")
        .copy_source(format!("{bucket}/src"))
        .send()
        .await
        .expect_err("not served");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (501, "NotImplemented")
    );
}

#[tokio::test]
async fn the_endpoint_stops_with_the_emulator_and_objects_stay_in_a_root_of_the_callers() {
    let root = tempfile::tempdir().unwrap();
    let emu = Emulator::start(EmulatorConfig {
        root: root.path().to_path_buf(),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let bucket = emu.artifact_bucket();
    client(&emu)
        .put_object()
        .bucket(&bucket)
        .key("kept/object")
        .body(ByteStream::from_static(b"kept"))
        .send()
        .await
        .unwrap();
    let addr = emu
        .s3_endpoint_url()
        .trim_start_matches("http://")
        .to_owned();
    drop(emu);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(&addr).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the S3 port still accepts after drop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Closed to other users (sandboxes run as other uids).
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(root.path().join("s3"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    // The caller's root keeps its objects, where a later emulator finds them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let path = root.path().join("s3").join(&bucket).join("kept/object");
    assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    let again = Emulator::start(EmulatorConfig {
        root: root.path().to_path_buf(),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(
        again
            .get_object_directly(&bucket, "kept/object")
            .await
            .unwrap(),
        Some(b"kept".to_vec())
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
async fn no_signature_token_or_secret_reaches_the_log_even_at_debug_level() {
    // The whole test binary logs everything from here on.
    let _ = tracing::subscriber::set_global_default(Capture);
    tracing::debug!(marker = "the capture works");
    let key = AccessKey::generate().with_session_token("canary-session-token-7f3a");
    let emu = Emulator::start(EmulatorConfig {
        access_keys: vec![key.clone()],
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let s3 = client_with(&emu, &key);
    let bucket = emu.artifact_bucket();
    s3.put_object()
        .bucket(&bucket)
        .key("canary")
        .body(ByteStream::from_static(b"canary-object-bytes"))
        .send()
        .await
        .unwrap();
    s3.get_object()
        .bucket(&bucket)
        .key("canary")
        .send()
        .await
        .unwrap();
    let mut wrong = key.clone();
    wrong.secret = "canary-wrong-secret".to_owned();
    client_with(&emu, &wrong)
        .get_object()
        .bucket(&bucket)
        .key("canary")
        .send()
        .await
        .expect_err("a wrong secret");
    let captured = CAPTURED.lock().unwrap().clone();
    assert!(captured.contains("the capture works"), "{captured}");
    for secret in [
        "canary-session-token-7f3a",
        key.secret.as_str(),
        "canary-wrong-secret",
        "Signature=",
        "canary-object-bytes",
    ] {
        assert!(!captured.contains(secret), "{secret} logged:\n{captured}");
    }
}

/// Every key of `bucket`, in order.
async fn stored_keys(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    s3.list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("list")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// Uploads `body` as part `n` of `upload`; its ETag.
async fn put_part(
    s3: &s3::Client,
    bucket: &str,
    key: &str,
    upload: &str,
    n: i32,
    body: &[u8],
) -> String {
    s3.upload_part()
        .bucket(bucket)
        .key(key)
        .upload_id(upload)
        .part_number(n)
        .expected_bucket_owner(ACCOUNT)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("part {n}: {e:?}"))
        .e_tag()
        .expect("a part ETag")
        .to_owned()
}

#[tokio::test]
async fn a_multipart_upload_round_trips_and_its_parts_are_listed() {
    use s3::types::{CompletedMultipartUpload, CompletedPart};
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let key = "rayito-home/sbx/home.tar.gz";
    // An older object under the key: its checksum must not outlive it.
    s3.put_object()
        .bucket(&bucket)
        .key(key)
        .body(ByteStream::from_static(b"old"))
        .checksum_algorithm(s3::types::ChecksumAlgorithm::Crc32)
        .send()
        .await
        .unwrap();
    let created = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .expected_bucket_owner(ACCOUNT)
        .content_type("application/gzip")
        .send()
        .await
        .expect("create");
    let upload = created.upload_id().expect("an upload id").to_owned();
    let sizes = [5 << 20, 5 << 20, 123_457];
    let bodies: Vec<Vec<u8>> = sizes
        .iter()
        .zip(11..)
        .map(|(&n, seed)| noise(n, seed))
        .collect();
    // Out of order, as parallel parts arrive.
    let mut etags = vec![String::new(); 3];
    for i in [2usize, 0, 1] {
        let n = i32::try_from(i).unwrap() + 1;
        etags[i] = put_part(&s3, &bucket, key, &upload, n, &bodies[i]).await;
    }
    let listed = s3
        .list_parts()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .send()
        .await
        .expect("list parts");
    let listed_etags: Vec<String> = listed
        .parts()
        .iter()
        .map(|p| p.e_tag().expect("a listed part's ETag").to_owned())
        .collect();
    assert_eq!(listed_etags, etags, "ListParts shows UploadPart's ETags");
    let listed: Vec<(i32, i64)> = listed
        .parts()
        .iter()
        .map(|p| (p.part_number().unwrap(), p.size().unwrap()))
        .collect();
    assert_eq!(listed, [(1, 5 << 20), (2, 5 << 20), (3, 123_457)]);
    // Not yet an object.
    let err = s3
        .head_object()
        .bucket(&bucket)
        .key(key)
        .send()
        .await
        .map(|h| h.content_length());
    assert_eq!(err.ok().flatten(), Some(3), "still the old object");

    let completed: Vec<CompletedPart> = etags
        .iter()
        .zip(1..)
        .map(|(e, n)| CompletedPart::builder().part_number(n).e_tag(e).build())
        .collect();
    let done = s3
        .complete_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .expected_bucket_owner(ACCOUNT)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(completed))
                .build(),
        )
        .send()
        .await
        .expect("complete");
    let etag = done.e_tag().expect("an ETag").to_owned();
    assert!(etag.ends_with("-3\""), "{etag}: a multipart ETag");
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key(key)
        .checksum_mode(s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .expect("get");
    assert_eq!(got.e_tag(), Some(etag.as_str()));
    assert_eq!(got.checksum_crc32(), None, "no stale checksum");
    assert_eq!(got.content_type(), Some("application/gzip"));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert!(
        bytes.as_ref() == bodies.concat().as_slice(),
        "byte-identical"
    );

    // The upload is over: its id names nothing any more.
    let err = s3
        .upload_part()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .part_number(4)
        .body(ByteStream::from_static(b"late"))
        .send()
        .await
        .expect_err("completed");
    assert_eq!(
        parts(&err),
        (
            404,
            "NoSuchUpload".to_owned(),
            "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.".to_owned()
        )
    );
}

#[tokio::test]
async fn an_aborted_upload_leaves_nothing_and_upload_ids_are_tied_to_their_key() {
    use s3::types::{CompletedMultipartUpload, CompletedPart};
    let root = tempfile::tempdir().unwrap();
    let emu = Emulator::start(EmulatorConfig {
        root: root.path().to_path_buf(),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let before = stored_keys(&s3, &bucket).await;
    let key = "p/home.tar.gz";
    let upload = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .send()
        .await
        .expect("create")
        .upload_id()
        .unwrap()
        .to_owned();
    put_part(&s3, &bucket, key, &upload, 1, &noise(1000, 5)).await;

    // Another key, a made-up id, a malformed one: no such upload.
    for (k, id) in [
        ("p/other", upload.as_str()),
        (key, "00000000-0000-4000-8000-000000000000"),
        (key, "../../etc"),
        (key, &upload.to_uppercase()),
    ] {
        let err = s3
            .upload_part()
            .bucket(&bucket)
            .key(k)
            .upload_id(id)
            .part_number(2)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await
            .expect_err(id);
        assert_eq!(
            (parts(&err).0, parts(&err).1.as_str()),
            (404, "NoSuchUpload"),
            "{k} {id}"
        );
    }
    let err = s3
        .upload_part()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .part_number(10_001)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("part 10001");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (400, "InvalidArgument")
    );
    // Another account's bucket owner: refused, the upload stays.
    let err = s3
        .abort_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .expected_bucket_owner("111111111111")
        .send()
        .await
        .expect_err("another owner");
    assert_eq!(parts(&err).1, "AccessDenied");

    s3.abort_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .expected_bucket_owner(ACCOUNT)
        .send()
        .await
        .expect("abort");
    let err = s3
        .complete_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(
                    CompletedPart::builder()
                        .part_number(1)
                        .e_tag("\"x\"")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect_err("aborted");
    assert_eq!(parts(&err).1, "NoSuchUpload");
    assert_eq!(stored_keys(&s3, &bucket).await, before, "nothing stored");
    // No part file is left at the store's root.
    let leftovers: Vec<String> = std::fs::read_dir(root.path().join("s3"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(&upload))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Into a missing bucket, or onto a key no file can hold: refused at once.
    let err = s3
        .create_multipart_upload()
        .bucket("no-such-bucket")
        .key(key)
        .send()
        .await
        .expect_err("no bucket");
    assert_eq!(parts(&err).1, "NoSuchBucket");
    let err = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key("a//b")
        .send()
        .await
        .expect_err("unstorable");
    assert_eq!(parts(&err).1, "InvalidArgument");

    // A small part before the last one: EntityTooSmall.
    let upload = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .send()
        .await
        .unwrap()
        .upload_id()
        .unwrap()
        .to_owned();
    let e1 = put_part(&s3, &bucket, key, &upload, 1, b"small").await;
    let e2 = put_part(&s3, &bucket, key, &upload, 2, b"last").await;
    let err = s3
        .complete_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .upload_id(&upload)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(CompletedPart::builder().part_number(1).e_tag(e1).build())
                .parts(CompletedPart::builder().part_number(2).e_tag(e2).build())
                .build(),
        )
        .send()
        .await
        .expect_err("too small");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (400, "EntityTooSmall")
    );
    assert_eq!(stored_keys(&s3, &bucket).await, before, "nothing stored");
}

/// S3 completes only with each part's ETag as UploadPart answered it: a
/// wrong or missing one is 400 InvalidPart and the upload stays open.
#[tokio::test]
async fn a_completion_with_a_wrong_part_etag_is_invalid_part() {
    use s3::types::{CompletedMultipartUpload, CompletedPart};
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let key = "rayito-transfer/sbx/down/etag";
    let upload = s3
        .create_multipart_upload()
        .bucket(&bucket)
        .key(key)
        .send()
        .await
        .expect("create")
        .upload_id()
        .expect("an upload id")
        .to_owned();
    let first = noise(5 << 20, 21);
    let second = noise(1000, 22);
    let e1 = put_part(&s3, &bucket, key, &upload, 1, &first).await;
    let e2 = put_part(&s3, &bucket, key, &upload, 2, &second).await;
    let complete = |parts: Vec<CompletedPart>| {
        s3.complete_multipart_upload()
            .bucket(&bucket)
            .key(key)
            .upload_id(&upload)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
    };
    let part = |n: i32, e: Option<&str>| {
        CompletedPart::builder()
            .part_number(n)
            .set_e_tag(e.map(str::to_owned))
            .build()
    };
    // Part 2's ETag under part 1, and no ETag at all.
    for parts in [
        vec![part(1, Some(&e2)), part(2, Some(&e2))],
        vec![part(1, Some(&e1)), part(2, None)],
    ] {
        let err = complete(parts).await.expect_err("a wrong ETag");
        let svc = err.as_service_error().map(|e| e.meta().code());
        assert_eq!(svc, Some(Some("InvalidPart")), "{err:?}");
        assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(400));
    }
    // Still open: the right ETags complete it.
    complete(vec![part(1, Some(&e1)), part(2, Some(&e2))])
        .await
        .expect("the right ETags complete");
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key(key)
        .send()
        .await
        .expect("get")
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert!(got.as_ref() == [first, second].concat().as_slice());
}

/// Ranged GETs (what an S3 mount's reads and ranged exports send) come
/// back as exactly the bytes of their span, through the fast body as
/// through s3s-fs's: open-ended, closed, suffix, the last byte, and a
/// range past the end refused as S3 does.
#[tokio::test]
async fn ranged_gets_answer_exactly_their_bytes() {
    let emu = start().await;
    let s3 = client(&emu);
    let bucket = emu.artifact_bucket();
    let len = (3 << 20) + 12_345;
    let body = noise(len, 11);
    emu.put_object_directly(&bucket, "ranged/object", body.clone())
        .await
        .unwrap();
    let last = format!("bytes={}-{}", len - 1, len - 1);
    let cases: [(&str, std::ops::Range<usize>); 5] = [
        ("bytes=0-", 0..len),
        ("bytes=100-2000000", 100..2_000_001),
        ("bytes=1048576-", 1_048_576..len),
        ("bytes=-10", len - 10..len),
        (&last, len - 1..len),
    ];
    for (range, span) in cases {
        let got = s3
            .get_object()
            .bucket(&bucket)
            .key("ranged/object")
            .range(range)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{range}: {e:?}"));
        assert_eq!(got.content_length(), Some(span.len() as i64), "{range}");
        let bytes = got.body.collect().await.unwrap().into_bytes();
        assert!(
            bytes.as_ref() == &body[span.clone()],
            "{range}: the span's bytes"
        );
    }
    let err = s3
        .get_object()
        .bucket(&bucket)
        .key("ranged/object")
        .range(format!("bytes={len}-"))
        .send()
        .await
        .expect_err("past the end");
    assert_eq!(parts(&err).0, 416, "{err:?}");
}

/// A reader never sees an object's new bytes with its old (or no)
/// metadata: s3s-fs renames the bytes into place before it writes the
/// metadata and ETag files. A writer replaces one key (bytes and a
/// `version` naming them) and now and then deletes it, while readers GET
/// it throughout; every answer with bytes carries those bytes' version
/// and ETag. (A chunked staged write names its last chunk in that
/// metadata: an agent that read it in the window waited for a chunk that
/// never came.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_sees_an_objects_bytes_and_metadata_change_together() {
    use md5::{Digest as _, Md5};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let emu = start().await;
    let bucket = emu.artifact_bucket();
    let s3 = client(&emu);
    let key = "race/object";
    let versions: Vec<(Vec<u8>, String)> = (0..150u64)
        .map(|i| {
            let body = noise(64 << 10, i + 1);
            let md5 = Md5::digest(&body)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            (body, md5)
        })
        .collect();
    let versions = Arc::new(versions);
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        let (versions, done) = (versions.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut seen = 0u32;
            while !done.load(Ordering::Relaxed) {
                let Ok(got) = s3.get_object().bucket(&bucket).key(key).send().await else {
                    continue;
                };
                let version = got.metadata().and_then(|m| m.get("version")).cloned();
                let etag = got.e_tag().map(|e| e.trim_matches('"').to_owned());
                let body = got.body.collect().await.expect("body").to_vec();
                let index: usize = version
                    .expect("bytes come with their metadata")
                    .parse()
                    .expect("a version");
                let (expected, md5) = &versions[index];
                assert!(
                    body == *expected,
                    "the bytes of another version than {index}"
                );
                assert_eq!(etag.as_deref(), Some(md5.as_str()), "version {index}");
                seen += 1;
            }
            seen
        }));
    }
    for (i, (body, _)) in versions.iter().enumerate() {
        s3.put_object()
            .bucket(&bucket)
            .key(key)
            .metadata("version", i.to_string())
            .body(ByteStream::from(body.clone()))
            .send()
            .await
            .expect("put");
        if i % 10 == 9 {
            s3.delete_object()
                .bucket(&bucket)
                .key(key)
                .send()
                .await
                .expect("delete");
        }
    }
    done.store(true, Ordering::Relaxed);
    let mut seen = 0;
    for reader in readers {
        seen += reader.await.expect("every answer was consistent");
    }
    assert!(seen > 0, "the readers saw objects");
}
