//! S3-staged transfers through the SDK on the emulator: upload tickets (PUT
//! and POST form) used with a plain HTTP client, a download link fetched
//! plainly, cancel, expiry, the checks before any call, and no URL, bucket
//! or key in any error or `Debug` output. The emulator's S3 verifies every
//! signature (headers, presigned URLs, POST policies).

use crate::sdk_support;

use std::time::Duration;

use aws_sdk_s3 as s3;
use rayito::transfer::{
    DownloadUrlOptions, S3Staging, TransferPhase, UploadMethod, UploadUrlOptions,
};
use rayito::{Sandbox, SandboxError};
use rayito_emulator::Emulator;
use sdk_support::plain_http::{call, form, noise, sha256_hex};

const BUCKET: &str = "sdk-transfers";

struct World {
    emu: Emulator,
    sbx: Sandbox,
    s3: s3::Client,
}

async fn world() -> World {
    let emu = sdk_support::emulator().await;
    let sbx = Sandbox::builder()
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .template(emu.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(30))
        .create()
        .await
        .expect("sandbox");
    // The emulator's key has no session token.
    let s3 = sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), emu.access_key());
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    World { emu, sbx, s3 }
}

fn staging() -> S3Staging {
    S3Staging::new(BUCKET)
}

/// The argument an `InvalidArgument` names.
fn arg(e: &SandboxError) -> Option<&str> {
    match e {
        SandboxError::InvalidArgument { argument, .. } => argument.as_deref(),
        _ => None,
    }
}

/// No URL, bucket or staging key in a text the caller may log.
fn assert_clean(text: &str) {
    for secret in [BUCKET, "rayito-transfer/", "X-Amz", "http://", "https://"] {
        assert!(!text.contains(secret), "{text:?} holds {secret:?}");
    }
}

async fn staged_keys(w: &World) -> Vec<String> {
    w.s3.list_objects_v2()
        .bucket(BUCKET)
        .send()
        .await
        .expect("list")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_ticket_used_with_plain_http_becomes_the_file() {
    let w = world().await;
    let ticket = w
        .sbx
        .files()
        .upload_url("up/put.bin", UploadUrlOptions::new(staging()).mode(0o640))
        .await
        .expect("ticket");
    assert_eq!(ticket.method(), UploadMethod::Put);
    assert!(ticket.url().starts_with(&w.emu.s3_endpoint_url()));
    assert_clean(&format!("{ticket:?}"));
    let status = ticket.status().await.expect("status");
    assert_eq!(status.phase, TransferPhase::Waiting);
    assert_eq!(status.bytes_total, 0);

    let body = noise(2 << 20, 5);
    let headers: Vec<_> = ticket.headers().clone().into_iter().collect();
    let (code, _, _) = call("PUT", ticket.url(), &headers, body.clone()).await;
    assert_eq!(code, 200);
    let entry = ticket.wait(Duration::from_secs(30)).await.expect("done");
    assert_eq!(entry.path, "/home/user/up/put.bin");
    assert_eq!(entry.size, body.len() as u64);
    assert_eq!(entry.mode, 0o640);
    assert_eq!(w.sbx.files().read("up/put.bin").await.expect("read"), body);
    let status = ticket.status().await.expect("status");
    assert_eq!(status.phase, TransferPhase::Done);
    assert_eq!(status.sha256.as_deref(), Some(sha256_hex(&body).as_str()));
    assert!(
        staged_keys(&w).await.is_empty(),
        "the staging object is deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_form_ticket_enforces_its_size_range_at_s3() {
    let w = world().await;
    let ticket = w
        .sbx
        .files()
        .upload_url(
            "form.txt",
            UploadUrlOptions::new(staging()).form(true).max_bytes(100),
        )
        .await
        .expect("ticket");
    assert_eq!(ticket.method(), UploadMethod::Post);
    for field in [
        "key",
        "policy",
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-signature",
    ] {
        assert!(ticket.fields().contains_key(field), "{field}");
    }
    assert_clean(&format!("{ticket:?}"));
    // Over max_bytes: S3 refuses the upload, the ticket stays armed.
    let (ctype, body) = form(ticket.fields(), &[b'x'; 101]);
    let (code, _, _) = call(
        "POST",
        ticket.url(),
        &[("content-type".into(), ctype)],
        body,
    )
    .await;
    assert!(code >= 400, "refused by the policy: {code}");
    assert_eq!(
        ticket.status().await.expect("status").phase,
        TransferPhase::Waiting
    );
    // Within it: the file.
    let (ctype, body) = form(ticket.fields(), b"hello from a form");
    let (code, _, text) = call(
        "POST",
        ticket.url(),
        &[("content-type".into(), ctype)],
        body,
    )
    .await;
    assert!(
        (200..300).contains(&code),
        "{code} {}",
        String::from_utf8_lossy(&text)
    );
    let entry = ticket.wait(Duration::from_secs(30)).await.expect("done");
    assert_eq!(entry.size, 17);
    assert_eq!(
        w.sbx
            .files()
            .read_to_string("form.txt")
            .await
            .expect("read"),
        "hello from a form"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_link_is_fetched_plainly_as_an_attachment() {
    let w = world().await;
    let body = noise(3 << 20, 9);
    w.sbx
        .files()
        .write("out/report.bin", body.clone())
        .await
        .expect("write");
    let link = w
        .sbx
        .files()
        .download_url("out/report.bin", DownloadUrlOptions::new(staging()))
        .await
        .expect("link");
    assert_eq!(link.size(), body.len() as u64);
    assert_eq!(link.sha256(), sha256_hex(&body));
    assert_clean(&format!("{link:?}"));
    let (code, headers, got) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(got, body);
    assert_eq!(
        headers
            .get("content-disposition")
            .and_then(|v| v.to_str().ok()),
        Some("attachment; filename=\"report.bin\"")
    );

    // A named attachment; a missing file and a directory are refused.
    let link = w
        .sbx
        .files()
        .download_url(
            "out/report.bin",
            DownloadUrlOptions::new(staging()).filename("r.dat"),
        )
        .await
        .expect("link");
    let (_, headers, _) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(
        headers
            .get("content-disposition")
            .and_then(|v| v.to_str().ok()),
        Some("attachment; filename=\"r.dat\"")
    );
    let e = w
        .sbx
        .files()
        .download_url("out/missing", DownloadUrlOptions::new(staging()))
        .await
        .expect_err("missing");
    assert!(matches!(e, SandboxError::FileNotFound { .. }), "{e:?}");
    assert_clean(&e.to_string());
    let e = w
        .sbx
        .files()
        .download_url("out", DownloadUrlOptions::new(staging()))
        .await
        .expect_err("a directory");
    assert_eq!(arg(&e), Some("path"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_is_idempotent_and_a_cancelled_ticket_fails_its_wait() {
    let w = world().await;
    let ticket = w
        .sbx
        .files()
        .upload_url("never.bin", UploadUrlOptions::new(staging()))
        .await
        .expect("ticket");
    ticket.cancel().await.expect("cancel");
    ticket.cancel().await.expect("cancel again");
    assert_eq!(
        ticket.status().await.expect("status").phase,
        TransferPhase::Cancelled
    );
    let e = ticket
        .wait(Duration::from_secs(10))
        .await
        .expect_err("cancelled");
    assert!(
        matches!(
            &e,
            SandboxError::FileUpload {
                code: rayito::error::TransferCode::Cancelled,
                reason: rayito::error::TransferReason::Cancelled,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("cancelled: "), "{e}");
    assert!(e.is(rayito::ErrorKind::Transfer));
    assert_clean(&e.to_string());
    assert_clean(&format!("{e:?}"));
    // A PUT after the cancel changes nothing in the sandbox.
    let headers: Vec<_> = ticket.headers().clone().into_iter().collect();
    let _ = call("PUT", ticket.url(), &headers, b"late".to_vec()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!w.sbx.files().exists("never.bin").await.expect("exists"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_nobody_uses_expires_and_a_short_wait_leaves_it_armed() {
    let w = world().await;
    let ticket = w
        .sbx
        .files()
        .upload_url(
            "late.bin",
            UploadUrlOptions::new(staging()).expires_in(Duration::from_secs(3)),
        )
        .await
        .expect("ticket");
    let e = ticket
        .wait(Duration::from_millis(500))
        .await
        .expect_err("too soon");
    assert!(matches!(e, SandboxError::Timeout { .. }), "{e:?}");
    assert_eq!(
        ticket.status().await.expect("status").phase,
        TransferPhase::Waiting
    );
    let e = ticket
        .wait(Duration::from_secs(20))
        .await
        .expect_err("expired");
    assert!(matches!(e, SandboxError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().starts_with("expired: "), "{e}");
    assert_eq!(
        ticket.status().await.expect("status").phase,
        TransferPhase::Failed
    );
    assert_clean(&e.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_before_any_call_naming_the_field() {
    let w = world().await;
    let files = w.sbx.files();
    let cases: Vec<(UploadUrlOptions, &str)> = vec![
        (
            UploadUrlOptions::new(S3Staging::new("Bad.Bucket")),
            "bucket",
        ),
        (UploadUrlOptions::new(staging().prefix("rayito")), "prefix"),
        (
            UploadUrlOptions::new(staging()).expires_in(Duration::ZERO),
            "expires_in",
        ),
        (UploadUrlOptions::new(staging()).max_bytes(0), "max_bytes"),
        (
            UploadUrlOptions::new(staging()).max_bytes((5 << 30) + 1),
            "max_bytes",
        ),
    ];
    for (options, field) in cases {
        let e = files.upload_url("x.bin", options).await.expect_err(field);
        assert_eq!(arg(&e), Some(field), "{e:?}");
        assert!(!e.to_string().contains("Bad.Bucket"));
    }
    let e = files
        .upload_url("dir/", UploadUrlOptions::new(staging()))
        .await
        .expect_err("a directory path");
    assert_eq!(arg(&e), Some("path"), "{e:?}");
    let e = files
        .download_url("x", DownloadUrlOptions::new(staging()).filename("a/b"))
        .await
        .expect_err("filename");
    assert_eq!(arg(&e), Some("filename"), "{e:?}");
    assert!(staged_keys(&w).await.is_empty());
}

/// A presigned PUT is valid until it expires, not once: a second PUT after
/// the import is accepted by S3 (200) and its object lands in the staging
/// prefix; the agent deletes it again a few seconds after the URL expired
/// (issue 41, section 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_put_to_a_used_upload_url_is_swept_after_the_url_expires() {
    let w = world().await;
    let ticket = w
        .sbx
        .files()
        .upload_url(
            "twice.bin",
            UploadUrlOptions::new(staging()).expires_in(Duration::from_secs(4)),
        )
        .await
        .expect("ticket");
    let headers: Vec<_> = ticket.headers().clone().into_iter().collect();
    let (code, _, _) = call("PUT", ticket.url(), &headers, b"first".to_vec()).await;
    assert_eq!(code, 200);
    ticket.wait(Duration::from_secs(30)).await.expect("done");
    assert!(staged_keys(&w).await.is_empty(), "the import deleted it");
    let (code, _, _) = call("PUT", ticket.url(), &headers, b"second".to_vec()).await;
    assert_eq!(code, 200, "S3 takes a used URL until it expires");
    assert_eq!(
        staged_keys(&w).await.len(),
        1,
        "the second object is staged"
    );
    // Nothing moves it into the sandbox.
    assert_eq!(
        w.sbx.files().read("twice.bin").await.expect("read"),
        b"first"
    );
    let swept = tokio::time::Instant::now() + Duration::from_secs(20);
    while !staged_keys(&w).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < swept,
            "the second object is still staged 20 s after the URL expired"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (code, _, _) = call("PUT", ticket.url(), &headers, b"third".to_vec()).await;
    assert!(code >= 400, "an expired URL is refused: {code}");
    assert!(staged_keys(&w).await.is_empty());
}

/// A download link's object stays until `DownloadLink::delete` (or the
/// lifecycle rule): after it, the link answers 404 and the prefix is
/// empty; a second delete is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_link_s_object_is_deleted_by_delete() {
    let w = world().await;
    w.sbx
        .files()
        .write("out/once.txt", b"fetch me".to_vec())
        .await
        .expect("write");
    let link = w
        .sbx
        .files()
        .download_url("out/once.txt", DownloadUrlOptions::new(staging()))
        .await
        .expect("link");
    let (code, _, got) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!((code, got.as_slice()), (200, &b"fetch me"[..]));
    let (code, _, _) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(code, 200, "a link is valid until it expires, not once");
    assert_eq!(staged_keys(&w).await.len(), 1, "staged until deleted");
    link.delete().await.expect("delete");
    assert!(staged_keys(&w).await.is_empty());
    let (code, _, _) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(code, 404);
    link.delete().await.expect("idempotent");
    assert_eq!(link.clone(), link, "equal by URL, size, sha256 and expiry");
}
