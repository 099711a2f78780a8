//! The agent's S3-staged transfers against the emulator's real S3 endpoint
//! (SigV4 verified), with URLs presigned by the real `aws-sdk-s3`: imports
//! that wait for the object, exports by PUT, the checks before any I/O, the
//! table's limits, cancel, expiry, and the reasons of failed transfers.

use crate::emulator_support;
use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3 as s3;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use rayito_agent::AgentConfig;
use rayito_agent::pb;
use rayito_emulator::{Emulator, EmulatorConfig};
use sha2::{Digest as _, Sha256};
use support::{TestAgent, assert_status};
use tokio_stream::StreamExt as _;

const BUCKET: &str = "transfer-test";

struct World {
    emu: Emulator,
    s3: s3::Client,
    agent: TestAgent,
}

async fn world() -> World {
    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts");
    let s3 = emulator_support::s3::client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    let addr = emu
        .s3_endpoint_url()
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let agent = TestAgent::start_config(AgentConfig {
        local_s3_endpoint: Some(addr),
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = agent.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    World { emu, s3, agent }
}

fn object(key: &str) -> pb::S3Object {
    pb::S3Object {
        bucket: BUCKET.into(),
        key: key.into(),
        region: "us-east-1".into(),
    }
}

fn presigned(req: s3::presigning::PresignedRequest) -> pb::PresignedRequest {
    pb::PresignedRequest {
        url: req.uri().to_owned(),
        headers: req
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

fn cfg() -> PresigningConfig {
    PresigningConfig::expires_in(Duration::from_secs(600)).expect("config")
}

impl World {
    async fn get(&self, key: &str) -> pb::PresignedRequest {
        presigned(
            self.s3
                .get_object()
                .bucket(BUCKET)
                .key(key)
                .presigned(cfg())
                .await
                .expect("presigned"),
        )
    }
    async fn delete(&self, key: &str) -> pb::PresignedRequest {
        presigned(
            self.s3
                .delete_object()
                .bucket(BUCKET)
                .key(key)
                .presigned(cfg())
                .await
                .expect("presigned"),
        )
    }
    async fn put_url(&self, key: &str) -> pb::PresignedRequest {
        presigned(
            self.s3
                .put_object()
                .bucket(BUCKET)
                .key(key)
                .presigned(cfg())
                .await
                .expect("presigned"),
        )
    }
    async fn put(&self, key: &str, body: Vec<u8>) {
        self.s3
            .put_object()
            .bucket(BUCKET)
            .key(key)
            .body(ByteStream::from(body))
            .send()
            .await
            .expect("put");
    }
    async fn read(&self, key: &str) -> Option<Vec<u8>> {
        let out = self
            .s3
            .get_object()
            .bucket(BUCKET)
            .key(key)
            .send()
            .await
            .ok()?;
        Some(out.body.collect().await.expect("body").to_vec())
    }
    async fn import_request(&self, path: &str, key: &str, wait: bool) -> pb::StartImportRequest {
        pb::StartImportRequest {
            path: path.into(),
            object: Some(object(key)),
            get: Some(self.get(key).await),
            delete: Some(self.delete(key).await),
            wait_for_object: wait,
            expires_at_unix_ms: in_ms(600_000),
            ..Default::default()
        }
    }
    async fn start_import(&self, req: pb::StartImportRequest) -> Result<String, tonic::Status> {
        self.agent
            .files()
            .start_import(req)
            .await
            .map(|r| r.into_inner().transfer_id)
    }
    /// Starts an export the agent accepts; its transfer id.
    async fn start_export(&self, req: pb::StartExportRequest) -> String {
        self.agent
            .files()
            .start_export(req)
            .await
            .expect("accepted")
            .into_inner()
            .transfer_id
    }
    /// Watches to the terminal state; every state seen, in order.
    async fn watch(&self, id: &str) -> Vec<pb::TransferState> {
        let mut stream = self
            .agent
            .files()
            .watch_transfer(pb::WatchTransferRequest {
                transfer_id: id.into(),
            })
            .await
            .expect("watch")
            .into_inner();
        let mut states = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
            if let Some(pb::transfer_event::Event::State(s)) = ev.expect("event").event {
                states.push(s);
            }
        }
        assert!(
            states
                .last()
                .is_some_and(|s| s.phase >= pb::TransferPhase::Done as i32),
            "the stream ended after a terminal phase: {states:?}"
        );
        states
    }
}

fn in_ms(ms: i64) -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        + ms
}

fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

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

/// The phase and error of a final state.
fn ending(s: &pb::TransferState) -> (i32, String, String) {
    let e = s.error.clone().unwrap_or_default();
    (s.phase, e.code, e.message)
}

/// No message a test saw names the bucket, the key or the path.
fn assert_clean(text: &str, key: &str, path: &str) {
    for secret in [BUCKET, key, path, "X-Amz", "http"] {
        assert!(!text.contains(secret), "{text:?} holds {secret:?}");
    }
}

#[tokio::test]
async fn an_import_waits_for_the_object_then_writes_the_file_and_deletes_the_object() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0001";
    let mut req = w.import_request("data/in.bin", key, true).await;
    req.mode = Some(0o600);
    let id = w.start_import(req).await.expect("accepted");
    assert_eq!(id.len(), 32);
    // Nothing there yet: it waits and probes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let state = w
        .agent
        .files()
        .get_transfer(pb::GetTransferRequest {
            transfer_id: id.clone(),
        })
        .await
        .expect("state")
        .into_inner();
    assert_eq!(state.phase, pb::TransferPhase::Waiting as i32);
    assert_eq!(state.direction, pb::TransferDirection::Import as i32);
    assert_eq!(state.bytes_total, 0);
    assert!(state.probes >= 1, "{state:?}");
    let body = noise(3 << 20, 7);
    w.put(key, body.clone()).await;
    let states = w.watch(&id).await;
    let done = states.last().expect("a state");
    assert_eq!(done.phase, pb::TransferPhase::Done as i32, "{done:?}");
    assert_eq!(done.bytes_done, body.len() as u64);
    assert_eq!(done.bytes_total, body.len() as u64);
    assert_eq!(done.sha256, sha_hex(&body));
    let entry = done.entry.clone().expect("the file's entry");
    assert_eq!(entry.path, "/home/user/data/in.bin");
    assert_eq!(entry.size, body.len() as u64);
    let host = w.agent.host_path("/home/user/data/in.bin");
    assert_eq!(std::fs::read(&host).expect("the file"), body);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&host).expect("md").permissions().mode() & 0o7777,
        0o600
    );
    // No temporary file left beside it, and the staging object is gone.
    let names: Vec<_> = std::fs::read_dir(host.parent().expect("dir"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["in.bin"]);
    assert_eq!(w.read(key).await, None);
}

#[tokio::test]
async fn a_staged_import_checks_the_sha256_and_leaves_no_file_on_mismatch() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0002";
    let body = noise(100_000, 3);
    w.put(key, body.clone()).await;
    let mut req = w.import_request("bad.bin", key, false).await;
    req.expected_sha256 = sha_hex(b"something else");
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    let (phase, code, message) = ending(&end);
    assert_eq!(phase, pb::TransferPhase::Failed as i32);
    assert_eq!(code, "failed_precondition");
    assert_eq!(
        message,
        "checksum_mismatch: the bytes' sha256 is not the expected one"
    );
    assert!(!w.agent.host_path("/home/user/bad.bin").exists());
    assert_eq!(w.read(key).await, None, "the staging object is deleted");

    // The right sha256: done, file in place.
    w.put(key, body.clone()).await;
    let mut req = w.import_request("good.bin", key, false).await;
    req.expected_sha256 = sha_hex(&body);
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(end.phase, pb::TransferPhase::Done as i32, "{end:?}");
    assert_eq!(
        std::fs::read(w.agent.host_path("/home/user/good.bin")).expect("file"),
        body
    );
}

#[tokio::test]
async fn an_object_over_max_bytes_is_too_large() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0003";
    w.put(key, vec![1u8; 5000]).await;
    let mut req = w.import_request("big.bin", key, false).await;
    req.max_bytes = 4999;
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Failed as i32,
            "failed_precondition".into(),
            "too_large: the object is larger than the transfer allows".into()
        )
    );
    assert!(!w.agent.host_path("/home/user/big.bin").exists());
}

#[tokio::test]
async fn an_upload_that_never_comes_expires() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0004";
    let mut req = w.import_request("never.bin", key, true).await;
    req.expires_at_unix_ms = in_ms(1500);
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Failed as i32,
            "deadline_exceeded".into(),
            "expired: the transfer did not finish before its URLs expired".into()
        )
    );
    assert!(end.probes >= 1);
}

#[tokio::test]
async fn cancel_is_idempotent_and_ends_a_waiting_import() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0005";
    let id = w
        .start_import(w.import_request("c.bin", key, true).await)
        .await
        .expect("accepted");
    let mut files = w.agent.files();
    for _ in 0..2 {
        files
            .cancel_transfer(pb::CancelTransferRequest {
                transfer_id: id.clone(),
            })
            .await
            .expect("cancel answers");
    }
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Cancelled as i32,
            "cancelled".into(),
            "cancelled: the transfer was cancelled".into()
        )
    );
    // The object coming late changes nothing.
    w.put(key, b"late".to_vec()).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!w.agent.host_path("/home/user/c.bin").exists());
}

#[tokio::test]
async fn unknown_ids_the_empty_one_included_are_not_found() {
    let w = world().await;
    let mut files = w.agent.files();
    for id in ["", "0123456789abcdef0123456789abcdef"] {
        let e = files
            .get_transfer(pb::GetTransferRequest {
                transfer_id: id.into(),
            })
            .await
            .expect_err("unknown");
        assert_status(&e, tonic::Code::NotFound, "unknown transfer");
        let e = files
            .cancel_transfer(pb::CancelTransferRequest {
                transfer_id: id.into(),
            })
            .await
            .expect_err("unknown");
        assert_status(&e, tonic::Code::NotFound, "unknown transfer");
        let e = files
            .watch_transfer(pb::WatchTransferRequest {
                transfer_id: id.into(),
            })
            .await
            .expect_err("unknown");
        assert_status(&e, tonic::Code::NotFound, "unknown transfer");
    }
}

#[tokio::test]
async fn sixteen_waiting_or_running_at_most_and_sixty_four_finished_kept() {
    let w = world().await;
    let mut files = w.agent.files();
    let mut first = None;
    let mut finished = 0;
    for round in 0..5 {
        let mut ids = Vec::new();
        for i in 0..16 {
            let key = format!("rayito-transfer/sbx/up/r{round}-{i}");
            let id = w
                .start_import(w.import_request(&format!("f{round}-{i}"), &key, true).await)
                .await
                .expect("admitted");
            ids.push(id);
        }
        let key = "rayito-transfer/sbx/up/extra";
        let e = w
            .start_import(w.import_request("extra", key, true).await)
            .await
            .expect_err("the 17th");
        assert_status(&e, tonic::Code::ResourceExhausted, "too many transfers");
        first.get_or_insert(ids[0].clone());
        for id in ids {
            files
                .cancel_transfer(pb::CancelTransferRequest { transfer_id: id })
                .await
                .expect("cancelled");
            finished += 1;
        }
    }
    assert_eq!(finished, 80);
    // The oldest 16 were forgotten, the newest 64 are readable.
    let e = files
        .get_transfer(pb::GetTransferRequest {
            transfer_id: first.expect("an id"),
        })
        .await
        .expect_err("forgotten");
    assert_status(&e, tonic::Code::NotFound, "unknown transfer");
}

/// A change to a valid request.
type Edit = Box<dyn Fn(&mut pb::StartImportRequest)>;

#[tokio::test]
async fn urls_that_do_not_name_the_object_are_refused_before_any_call() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0006";
    w.put(key, b"kept".to_vec()).await;
    let other = w.get("rayito-transfer/sbx/up/other").await;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "a presigned URL does not name the request's object",
            Box::new(move |r| r.get = Some(other.clone())),
        ),
        (
            "a presigned URL does not name the request's object",
            Box::new(|r| {
                if let Some(g) = r.get.as_mut() {
                    g.url = g.url.replace("127.0.0.1", "localhost");
                }
            }),
        ),
        (
            "a presigned URL does not name the request's object",
            Box::new(|r| {
                if let Some(d) = r.delete.as_mut() {
                    d.url = format!(
                        "https://{BUCKET}.s3.us-east-1.amazonaws.com/rayito-transfer/sbx/up/0006"
                    );
                }
            }),
        ),
        (
            "a presigned URL is longer than 8192 bytes",
            Box::new(|r| {
                if let Some(g) = r.get.as_mut() {
                    g.url.push_str(&format!("&pad={}", "a".repeat(8192)));
                }
            }),
        ),
        ("object is required", Box::new(|r| r.object = None)),
        (
            "invalid path",
            Box::new(|r| r.path = "a/../../etc/x".into()),
        ),
        (
            "invalid expected_sha256",
            Box::new(|r| r.expected_sha256 = "xyz".into()),
        ),
        (
            "expires_at is required to wait for the object",
            Box::new(|r| r.expires_at_unix_ms = 0),
        ),
        (
            "expires_at has passed",
            Box::new(|r| r.expires_at_unix_ms = in_ms(-1000)),
        ),
        ("invalid mode", Box::new(|r| r.mode = Some(0o10000))),
    ];
    for (message, edit) in cases {
        let mut req = w.import_request("refused.bin", key, true).await;
        edit(&mut req);
        let e = w.start_import(req).await.expect_err(message);
        assert!(
            matches!(
                e.code(),
                tonic::Code::InvalidArgument | tonic::Code::PermissionDenied
            ),
            "{e:?}"
        );
        assert_eq!(e.message(), message);
        assert_clean(e.message(), key, "refused.bin");
    }
    // Nothing was read or deleted.
    assert_eq!(w.read(key).await.as_deref(), Some(&b"kept"[..]));
    assert!(!w.agent.host_path("/home/user/refused.bin").exists());
}

#[tokio::test]
async fn an_export_puts_the_file_and_reports_its_sha256() {
    let w = world().await;
    let body = noise(5 << 20, 11);
    let host = w.agent.host_path("/home/user/out.bin");
    std::fs::write(&host, &body).expect("file");
    let key = "rayito-transfer/sbx/down/0001";
    let req = pb::StartExportRequest {
        path: "out.bin".into(),
        object: Some(object(key)),
        target: Some(pb::start_export_request::Target::Put(w.put_url(key).await)),
        expires_at_unix_ms: in_ms(600_000),
        ..Default::default()
    };
    let id = w.start_export(req).await;
    let states = w.watch(&id).await;
    assert_eq!(
        states[0].bytes_total,
        body.len() as u64,
        "measured at accept"
    );
    let end = states.last().expect("state");
    assert_eq!(end.phase, pb::TransferPhase::Done as i32, "{end:?}");
    assert_eq!(end.direction, pb::TransferDirection::Export as i32);
    assert_eq!(end.sha256, sha_hex(&body));
    assert_eq!(end.bytes_done, body.len() as u64);
    assert!(end.part_etags.is_empty());
    assert_eq!(w.read(key).await.expect("the object"), body);

    // An empty file exports as an empty object.
    std::fs::write(w.agent.host_path("/home/user/empty"), b"").expect("file");
    let key = "rayito-transfer/sbx/down/0002";
    let req = pb::StartExportRequest {
        path: "/home/user/empty".into(),
        object: Some(object(key)),
        target: Some(pb::start_export_request::Target::Put(w.put_url(key).await)),
        ..Default::default()
    };
    let id = w.start_export(req).await;
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(end.phase, pb::TransferPhase::Done as i32, "{end:?}");
    assert_eq!(end.sha256, sha_hex(b""));
    assert_eq!(w.read(key).await.expect("the object"), b"");
}

#[tokio::test]
async fn an_export_refuses_missing_files_directories_and_parts_that_do_not_fit() {
    let w = world().await;
    let key = "rayito-transfer/sbx/down/0003";
    std::fs::create_dir_all(w.agent.host_path("/home/user/dir")).expect("dir");
    std::fs::write(w.agent.host_path("/home/user/ten"), [0u8; 10]).expect("file");
    let put = w.put_url(key).await;
    let mut files = w.agent.files();
    let export = |path: &str, target| {
        let req = pb::StartExportRequest {
            path: path.into(),
            object: Some(object(key)),
            target: Some(target),
            ..Default::default()
        };
        let mut files = files.clone();
        async move { files.start_export(req).await.expect_err("refused") }
    };
    let e = export(
        "missing",
        pb::start_export_request::Target::Put(put.clone()),
    )
    .await;
    assert_status(&e, tonic::Code::NotFound, "path not found");
    let e = export("dir", pb::start_export_request::Target::Put(put.clone())).await;
    assert_status(&e, tonic::Code::InvalidArgument, "is a directory");
    let parts = pb::PresignedMultipart {
        part_size: 4,
        parts: vec![put.clone(), put.clone()],
    };
    let e = export("ten", pb::start_export_request::Target::Multipart(parts)).await;
    assert_status(
        &e,
        tonic::Code::InvalidArgument,
        "the presigned parts do not match the file's size",
    );
    let _ = files
        .get_transfer(pb::GetTransferRequest::default())
        .await
        .expect_err("still nothing");
}

#[tokio::test]
async fn a_file_that_shrinks_during_its_export_fails_as_file_shrank() {
    let w = world().await;
    let size = 256 << 20;
    let host = w.agent.host_path("/home/user/shrinks.bin");
    let f = std::fs::File::create(&host).expect("file");
    f.set_len(size).expect("sparse file");
    drop(f);
    let key = "rayito-transfer/sbx/down/0004";
    let req = pb::StartExportRequest {
        path: "shrinks.bin".into(),
        object: Some(object(key)),
        target: Some(pb::start_export_request::Target::Put(w.put_url(key).await)),
        ..Default::default()
    };
    let id = w.start_export(req).await;
    // Shorter at once: 256 MiB cannot have been sent yet.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&host)
        .expect("open")
        .set_len(1 << 20)
        .expect("truncated");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Failed as i32,
            "failed_precondition".into(),
            "file_shrank: the file became shorter while it was exported".into()
        )
    );
    assert_eq!(w.read(key).await, None, "no object was made");
    let _ = &w.emu;
}

/// A multipart export as the SDK drives one: the caller creates the
/// multipart upload and presigns one UploadPart URL per part, the agent
/// PUTs every part (all but the last exactly `part_size` bytes) and reports
/// their ETags in order, and the caller completes the upload with them.
#[tokio::test]
async fn a_multipart_export_puts_every_part_and_reports_the_etags_that_complete_it() {
    let w = world().await;
    let part_size: u64 = 5 << 20;
    // Two whole parts and a short last one.
    let body = noise((10 << 20) + 12_345, 23);
    std::fs::write(w.agent.host_path("/home/user/big.bin"), &body).expect("file");
    let key = "rayito-transfer/sbx/down/0005";
    let created =
        w.s3.create_multipart_upload()
            .bucket(BUCKET)
            .key(key)
            .send()
            .await
            .expect("a multipart upload");
    let upload_id = created.upload_id().expect("an upload id");
    let count = (body.len() as u64).div_ceil(part_size);
    assert_eq!(count, 3);
    let mut parts = Vec::new();
    for number in 1..=count as i32 {
        parts.push(presigned(
            w.s3.upload_part()
                .bucket(BUCKET)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .presigned(cfg())
                .await
                .expect("presigned"),
        ));
    }
    let req = pb::StartExportRequest {
        path: "big.bin".into(),
        object: Some(object(key)),
        target: Some(pb::start_export_request::Target::Multipart(
            pb::PresignedMultipart { part_size, parts },
        )),
        expires_at_unix_ms: in_ms(600_000),
        ..Default::default()
    };
    let id = w.start_export(req).await;
    let states = w.watch(&id).await;
    assert_eq!(states[0].bytes_total, body.len() as u64);
    let end = states.last().expect("state");
    assert_eq!(end.phase, pb::TransferPhase::Done as i32, "{end:?}");
    assert_eq!(end.direction, pb::TransferDirection::Export as i32);
    assert_eq!(end.bytes_done, body.len() as u64);
    assert_eq!(end.sha256, sha_hex(&body));
    assert_eq!(end.part_etags.len(), 3, "{:?}", end.part_etags);
    // The emulator's S3 holds three parts of the sizes the part size makes.
    let listed =
        w.s3.list_parts()
            .bucket(BUCKET)
            .key(key)
            .upload_id(upload_id)
            .send()
            .await
            .expect("list parts");
    let seen: Vec<(i32, i64)> = listed
        .parts()
        .iter()
        .map(|p| (p.part_number().unwrap_or(0), p.size().unwrap_or(-1)))
        .collect();
    let whole = part_size as i64;
    assert_eq!(
        seen,
        [(1, whole), (2, whole), (3, body.len() as i64 - 2 * whole)]
    );
    // Each reported ETag is the one S3 gives those bytes: the same slices
    // uploaded by this client into a second upload get the same ETags (the
    // emulator's CompleteMultipartUpload, like s3s-fs's, does not compare
    // them, so completing alone would not show a wrong one).
    let twin =
        w.s3.create_multipart_upload()
            .bucket(BUCKET)
            .key("rayito-transfer/sbx/down/twin")
            .send()
            .await
            .expect("a second upload");
    let twin_id = twin.upload_id().expect("an upload id");
    for (i, chunk) in body.chunks(part_size as usize).enumerate() {
        let out =
            w.s3.upload_part()
                .bucket(BUCKET)
                .key("rayito-transfer/sbx/down/twin")
                .upload_id(twin_id)
                .part_number(i as i32 + 1)
                .body(ByteStream::from(chunk.to_vec()))
                .send()
                .await
                .expect("a part");
        assert_eq!(
            out.e_tag(),
            Some(end.part_etags[i].as_str()),
            "part {}",
            i + 1
        );
    }
    w.s3.abort_multipart_upload()
        .bucket(BUCKET)
        .key("rayito-transfer/sbx/down/twin")
        .upload_id(twin_id)
        .send()
        .await
        .expect("aborted");
    // Nothing is readable before the caller completes the upload.
    assert_eq!(w.read(key).await, None);
    let completed = s3::types::CompletedMultipartUpload::builder()
        .set_parts(Some(
            end.part_etags
                .iter()
                .enumerate()
                .map(|(i, etag)| {
                    s3::types::CompletedPart::builder()
                        .part_number(i as i32 + 1)
                        .e_tag(etag)
                        .build()
                })
                .collect(),
        ))
        .build();
    w.s3.complete_multipart_upload()
        .bucket(BUCKET)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(completed)
        .send()
        .await
        .expect("completed with the agent's ETags");
    let got = w.read(key).await.expect("the object");
    assert_eq!(got.len(), body.len());
    assert!(got == body, "the object is the file, byte for byte");
    assert_eq!(sha_hex(&got), end.sha256);
}

/// Part lists StartExport refuses before any I/O: no part size, no parts,
/// more than 10,000 parts, a part URL that names another object (a count
/// the file's size does not need: the refusals test above).
#[tokio::test]
async fn an_export_refuses_bad_part_lists_before_any_call() {
    let w = world().await;
    std::fs::write(w.agent.host_path("/home/user/ten"), [0u8; 10]).expect("file");
    let key = "rayito-transfer/sbx/down/0006";
    let part = w.put_url(key).await;
    let other = w.put_url("rayito-transfer/sbx/down/other").await;
    let files = w.agent.files();
    let export = |part_size: u64, parts: Vec<pb::PresignedRequest>| {
        let req = pb::StartExportRequest {
            path: "ten".into(),
            object: Some(object(key)),
            target: Some(pb::start_export_request::Target::Multipart(
                pb::PresignedMultipart { part_size, parts },
            )),
            ..Default::default()
        };
        let mut files = files.clone();
        async move { files.start_export(req).await.expect_err("refused") }
    };
    let e = export(0, vec![part.clone()]).await;
    assert_status(&e, tonic::Code::InvalidArgument, "invalid multipart parts");
    let e = export(16, Vec::new()).await;
    assert_status(&e, tonic::Code::InvalidArgument, "invalid multipart parts");
    // Counted before any URL is read: short stand-ins keep the message small.
    let stub = pb::PresignedRequest {
        url: "x".into(),
        ..Default::default()
    };
    let e = export(16, vec![stub; 10_001]).await;
    assert_status(&e, tonic::Code::InvalidArgument, "invalid multipart parts");
    let e = export(8, vec![part.clone(), other]).await;
    assert_status(
        &e,
        tonic::Code::InvalidArgument,
        "a presigned URL does not name the request's object",
    );
    assert_clean(e.message(), key, "/home/user/ten");
    // Nothing was accepted, and nothing reached S3.
    let _ = w
        .agent
        .files()
        .get_transfer(pb::GetTransferRequest::default())
        .await
        .expect_err("still nothing");
    assert_eq!(w.read(key).await, None);
}

/// A chunked import (issue 44, item 4) of `chunks` chunks of `key`: every
/// chunk's GET and DELETE presigned, expiring in `expires_ms`.
async fn chunked_request(
    w: &World,
    path: &str,
    key: &str,
    chunks: usize,
    expires_ms: i64,
) -> pb::StartImportRequest {
    let mut chunk_gets = Vec::new();
    let mut chunk_deletes = Vec::new();
    for i in 0..chunks {
        chunk_gets.push(w.get(&format!("{key}.{i}")).await);
        chunk_deletes.push(w.delete(&format!("{key}.{i}")).await);
    }
    pb::StartImportRequest {
        path: path.into(),
        object: Some(object(key)),
        expires_at_unix_ms: in_ms(expires_ms),
        chunk_gets,
        chunk_deletes,
        ..Default::default()
    }
}

impl World {
    /// PUTs chunk `index` of `key`; the last one names the file's sha256.
    async fn put_chunk(&self, key: &str, index: usize, body: &[u8], last_of: Option<&[u8]>) {
        let mut put = self
            .s3
            .put_object()
            .bucket(BUCKET)
            .key(format!("{key}.{index}"))
            .body(ByteStream::from(body.to_vec()));
        if let Some(whole) = last_of {
            put = put.metadata("rayito-sha256", sha_hex(whole));
        }
        put.send().await.expect("put a chunk");
    }

    /// Names in the directory of `guest` (a temporary file shows here).
    fn siblings(&self, guest: &str) -> Vec<String> {
        let host = self.agent.host_path(guest);
        let dir = host.parent().expect("a directory");
        std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Health announces `chunked_import`; the chunks are taken in order, each
/// waited for while it is not there yet (the SDK uploads it meanwhile),
/// into one file, and each is deleted once read; the last is the one that
/// names the sha256, even with URLs to spare, and may be empty.
#[tokio::test]
async fn a_chunked_import_takes_its_chunks_in_order_as_they_appear() {
    let w = world().await;
    assert!(w.agent.features().await.chunked_import);
    let key = "rayito-transfer/sbx/up/0100";
    let body = noise(5 << 20, 11);
    let (a, b) = body.split_at(3 << 20);
    w.put_chunk(key, 0, a, None).await;
    let req = chunked_request(&w, "data/chunked.bin", key, 8, 600_000).await;
    let id = w.start_import(req).await.expect("accepted");
    // Chunk 0 is read and deleted; the import waits for chunk 1.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while w.read(&format!("{key}.0")).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "chunk 0 was not read"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !w.agent.host_path("/home/user/data/chunked.bin").exists(),
        "no file before the last chunk"
    );
    w.put_chunk(key, 1, b, None).await;
    w.put_chunk(key, 2, b"", Some(&body)).await;
    let states = w.watch(&id).await;
    let done = states.last().expect("a state");
    assert_eq!(done.phase, pb::TransferPhase::Done as i32, "{done:?}");
    assert_eq!(done.sha256, sha_hex(&body));
    assert_eq!(done.bytes_total, body.len() as u64);
    assert!(done.probes >= 1, "it waited for chunk 1: {done:?}");
    assert_eq!(
        std::fs::read(w.agent.host_path("/home/user/data/chunked.bin")).expect("file"),
        body
    );
    assert_eq!(w.siblings("/home/user/data/chunked.bin"), ["chunked.bin"]);
    for i in 0..3 {
        assert_eq!(w.read(&format!("{key}.{i}")).await, None, "chunk {i}");
    }
}

/// A chunk whose bytes are not the ones the last chunk's sha256 names
/// (changed in S3 on the way), and a last chunk that never comes: the
/// import fails with the pinned reason, no file and no temporary file are
/// left, and the chunks it read are deleted.
#[tokio::test]
async fn a_corrupted_or_missing_chunk_leaves_no_file() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0101";
    let body = noise(2 << 20, 12);
    let (a, b) = body.split_at(1 << 20);
    let mut bad = b.to_vec();
    bad[100] ^= 1;
    w.put_chunk(key, 0, a, None).await;
    w.put_chunk(key, 1, &bad, Some(&body)).await;
    let req = chunked_request(&w, "bad/c.bin", key, 4, 600_000).await;
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Failed as i32,
            "failed_precondition".into(),
            "checksum_mismatch: the bytes' sha256 is not the expected one".into()
        )
    );
    assert!(!w.agent.host_path("/home/user/bad/c.bin").exists());
    assert!(w.siblings("/home/user/bad/c.bin").is_empty());
    assert_eq!(w.read(&format!("{key}.0")).await, None);
    assert_eq!(w.read(&format!("{key}.1")).await, None);

    // Chunk 1 never comes: the URLs expire.
    let key = "rayito-transfer/sbx/up/0102";
    w.put_chunk(key, 0, a, None).await;
    let req = chunked_request(&w, "bad/m.bin", key, 4, 2000).await;
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end),
        (
            pb::TransferPhase::Failed as i32,
            "deadline_exceeded".into(),
            "expired: the transfer did not finish before its URLs expired".into()
        )
    );
    assert!(end.probes >= 3, "it kept asking for chunk 1: {end:?}");
    assert!(!w.agent.host_path("/home/user/bad/m.bin").exists());
    assert!(w.siblings("/home/user/bad/m.bin").is_empty());
    assert_eq!(w.read(&format!("{key}.0")).await, None);

    // Chunks that all came without one naming the sha256: not the file.
    let key = "rayito-transfer/sbx/up/0103";
    w.put_chunk(key, 0, a, None).await;
    w.put_chunk(key, 1, b, None).await;
    let req = chunked_request(&w, "bad/n.bin", key, 2, 600_000).await;
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(
        ending(&end).2,
        "checksum_mismatch: the bytes' sha256 is not the expected one"
    );
    assert!(!w.agent.host_path("/home/user/bad/n.bin").exists());
}

/// Every chunk URL must name its own chunk (`<key>.<index>`); the chunk
/// lists are bounded and checked before any call.
#[tokio::test]
async fn chunk_urls_are_checked_before_any_call() {
    let w = world().await;
    let key = "rayito-transfer/sbx/up/0104";
    w.put_chunk(key, 0, b"kept", None).await;
    let other = w.get(&format!("{key}.0")).await;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "a presigned URL does not name the request's object",
            Box::new(move |r| r.chunk_gets[1] = other.clone()),
        ),
        (
            "chunk_deletes must be empty or one per chunk",
            Box::new(|r| {
                r.chunk_deletes.pop();
            }),
        ),
        (
            "more than 1024 chunks",
            Box::new(|r| {
                let first = r.chunk_gets[0].clone();
                r.chunk_gets.resize(1025, first);
                r.chunk_deletes.clear();
            }),
        ),
        (
            "a chunked import needs expires_at and no wait_for_object",
            Box::new(|r| r.wait_for_object = true),
        ),
        (
            "a chunked import needs expires_at and no wait_for_object",
            Box::new(|r| r.expires_at_unix_ms = 0),
        ),
    ];
    for (message, edit) in cases {
        let mut req = chunked_request(&w, "refused.bin", key, 3, 600_000).await;
        edit(&mut req);
        let e = w.start_import(req).await.expect_err(message);
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert_eq!(e.message(), message);
        assert_clean(e.message(), key, "refused.bin");
    }
    assert_eq!(
        w.read(&format!("{key}.0")).await.as_deref(),
        Some(&b"kept"[..])
    );
    assert!(!w.agent.host_path("/home/user/refused.bin").exists());
}

/// An agent without chunked imports (`AgentConfig::chunked_import` off, as
/// the reference's) announces none and ignores the chunks: the import is
/// of the one object `get` names.
#[tokio::test]
async fn an_agent_without_chunked_import_ignores_the_chunks() {
    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts");
    let s3 = emulator_support::s3::client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    let addr = emu
        .s3_endpoint_url()
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let agent = TestAgent::start_config(AgentConfig {
        local_s3_endpoint: Some(addr),
        chunked_import: false,
        ..AgentConfig::default()
    })
    .await;
    let (status, _) = agent.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!(status, 200);
    let w = World { emu, s3, agent };
    assert!(!w.agent.features().await.chunked_import);
    let key = "rayito-transfer/sbx/up/0105";
    let whole = noise(1 << 20, 13);
    w.put(key, whole.clone()).await;
    w.put_chunk(key, 0, b"a chunk", Some(b"a chunk")).await;
    let mut req = chunked_request(&w, "old.bin", key, 2, 600_000).await;
    req.get = Some(w.get(key).await);
    req.delete = Some(w.delete(key).await);
    let id = w.start_import(req).await.expect("accepted");
    let end = w.watch(&id).await.pop().expect("state");
    assert_eq!(end.phase, pb::TransferPhase::Done as i32, "{end:?}");
    assert_eq!(
        std::fs::read(w.agent.host_path("/home/user/old.bin")).expect("file"),
        whole
    );
    assert_eq!(w.read(key).await, None);
    assert!(
        w.read(&format!("{key}.0")).await.is_some(),
        "chunks untouched"
    );
}
