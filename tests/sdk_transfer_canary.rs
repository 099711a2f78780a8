//! Canary (issue 26): no URL, bucket, key, path or signature of a
//! checkpoint, a restore or an S3-staged transfer reaches any `tracing`
//! subscriber or any error, through the SDK's own events, the AWS SDK it
//! drives, or the emulator and the agent running in this process.
//!
//! One test per binary: it installs the process-wide TRACE subscriber that
//! captures every event and span of every target, then runs a staged write
//! and read (a multipart upload and a multipart export), a `read_stream`, a
//! PUT upload ticket, a POST form, a download link, a cancelled ticket, a
//! checkpoint and a restore, and a staged read into a bucket that does not
//! exist, with recognisable names, and looks for each name in the log and
//! in every error's `Display` and `Debug`.

use crate::sdk_support;

use sdk_support::captured::Captured;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::SandboxError;
use rayito::persistence::{CheckpointOptions, RestoreOptions, S3Prefix};
use rayito::transfer::{DownloadUrlOptions, S3Staging, UploadUrlOptions};
use sdk_support::plain_http::{form, noise};
use tracing::instrument::WithSubscriber as _;

/// Every name below is distinctive enough that finding it anywhere in the
/// log means it leaked.
const BUCKET: &str = "canarybucketq7zx";
const PERSIST_PREFIX: &str = "canarypersistpfx";
const PERSIST_NAME: &str = "canarypersistname";
const STAGING_PREFIX: &str = "canarystagingpfx";
const DIR: &str = "canarydirw3";
const MISSING_BUCKET: &str = "canarymissingbucketk9";
const MIB: usize = 1 << 20;

/// What a browser does with a URL, kept out of the capture: the test's
/// own HTTP client is not under test.
async fn call(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    sdk_support::plain_http::call(method, url, headers, body)
        .with_subscriber(tracing::Dispatch::none())
        .await
}

fn staging(bucket: &str) -> S3Staging {
    S3Staging::new(bucket)
        .prefix(STAGING_PREFIX)
        .threshold_bytes(MIB as u64)
        .multipart_threshold_bytes(16 << 20)
}

/// Each error's `Display` and `Debug`, kept to be searched.
fn keep(errors: &mut Vec<String>, e: &SandboxError) {
    errors.push(format!("{e} | {e:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_url_bucket_key_or_path_reaches_any_subscriber_or_error() {
    let captured = Captured::install_global_trace();

    let emu = sdk_support::emulator().await;
    let key = emu.access_key();
    // The test's own S3 client (it makes the bucket) is not under test:
    // its AWS SDK logs are kept out of the capture.
    let s3 = sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), key);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .with_subscriber(tracing::Dispatch::none())
        .await
        .expect("bucket");

    let sbx = sdk_support::builder(&emu)
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .execution_role_arn("arn:aws:iam::000000000000:role/rayito-sandbox")
        .persist(
            S3Prefix::new(BUCKET)
                .prefix(PERSIST_PREFIX)
                .name(PERSIST_NAME),
        )
        .staging(staging(BUCKET))
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("sandbox");
    let files = sbx.files();
    let mut errors = Vec::new();

    // Staged write (a multipart upload of 3 parts) and staged reads (a
    // multipart export, then a single one through read_stream).
    let big = noise(20 * MIB, 7);
    files
        .write(&format!("{DIR}/big.bin"), big.clone())
        .await
        .expect("staged write");
    assert!(files.read(&format!("{DIR}/big.bin")).await.expect("read") == big);
    files
        .write(&format!("{DIR}/two.bin"), noise(2 * MIB, 8))
        .await
        .expect("staged write");
    let mut stream = files
        .read_stream(&format!("{DIR}/two.bin"))
        .await
        .expect("read_stream");
    let mut got = 0;
    while let Some(chunk) = stream.next().await {
        got += chunk.expect("chunk").len();
    }
    assert_eq!(got, 2 * MIB);

    // A PUT ticket used plainly, a POST form, a download link.
    let ticket = files
        .upload_url(
            &format!("{DIR}/put.bin"),
            UploadUrlOptions::new(staging(BUCKET)),
        )
        .await
        .expect("upload url");
    let headers: Vec<(String, String)> = ticket
        .headers()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (status, _, _) = call("PUT", ticket.url(), &headers, noise(4096, 9)).await;
    assert_eq!(status, 200);
    ticket
        .wait(Duration::from_secs(60))
        .await
        .expect("imported");
    let post = files
        .upload_url(
            &format!("{DIR}/post.bin"),
            UploadUrlOptions::new(staging(BUCKET)).form(true),
        )
        .await
        .expect("form");
    let (content_type, body) = form(post.fields(), &noise(4096, 10));
    let (status, _, _) = call(
        "POST",
        post.url(),
        &[("content-type".to_owned(), content_type)],
        body,
    )
    .await;
    assert!((200..300).contains(&status), "POST answered {status}");
    post.wait(Duration::from_secs(60)).await.expect("imported");
    let link = files
        .download_url(
            &format!("{DIR}/put.bin"),
            DownloadUrlOptions::new(staging(BUCKET)),
        )
        .await
        .expect("download link");
    let (status, _, body) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!((status, body.len()), (200, 4096));
    let debug = format!("{ticket:?} {post:?} {link:?}");
    assert!(
        !debug.contains(BUCKET) && !debug.contains("http"),
        "{debug}"
    );

    // A cancelled ticket's wait, and a staged read into a bucket that is
    // not there: errors to search.
    let cancelled = files
        .upload_url(
            &format!("{DIR}/never.bin"),
            UploadUrlOptions::new(staging(BUCKET)),
        )
        .await
        .expect("upload url");
    cancelled.cancel().await.expect("cancel");
    keep(
        &mut errors,
        &cancelled
            .wait(Duration::from_secs(30))
            .await
            .expect_err("cancelled"),
    );
    let elsewhere = sdk_support::builder(&emu)
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .staging(staging(MISSING_BUCKET))
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect("connect");
    keep(
        &mut errors,
        &elsewhere
            .files()
            .read(&format!("{DIR}/big.bin"))
            .await
            .expect_err("no such bucket"),
    );
    keep(
        &mut errors,
        &elsewhere
            .files()
            .write(&format!("{DIR}/w.bin"), noise(2 * MIB, 11))
            .await
            .expect_err("no such bucket"),
    );

    // A checkpoint and a restore.
    sbx.persistence()
        .checkpoint(CheckpointOptions::default())
        .await
        .expect("checkpoint");
    sbx.persistence()
        .restore(RestoreOptions::default())
        .await
        .expect("restore");
    sbx.kill().await.expect("kill");

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).expect("utf-8 log");
    assert!(
        log.len() > 1000,
        "the capture saw the run ({} bytes)",
        log.len()
    );
    // A URL of the local S3 (its bare host is no secret: hyper-util's
    // connection pool logs it at TRACE from a background task; on AWS that
    // host is `<bucket>.s3.<region>.amazonaws.com`, see docs/transfers.md).
    let s3_url = format!("{}/", emu.s3_endpoint_url().trim_end_matches('/'));
    let needles = [
        BUCKET,
        MISSING_BUCKET,
        PERSIST_PREFIX,
        PERSIST_NAME,
        STAGING_PREFIX,
        DIR,
        "X-Amz-Signature",
        "X-Amz-Credential",
        "x-amz-signature",
        key.id.as_str(),
        key.secret.as_str(),
        s3_url.as_str(),
    ];
    for needle in needles {
        if let Some(at) = log.find(needle) {
            // The event's line and the two before it (a multi-line
            // event's header).
            let start = log[..at]
                .rmatch_indices('\n')
                .nth(2)
                .map_or(0, |(n, _)| n + 1);
            let end = log[at..].find('\n').map_or(log.len(), |n| at + n);
            panic!("the log holds {needle:?}: {}", &log[start..end]);
        }
        for e in &errors {
            assert!(!e.contains(needle), "an error holds {needle:?}: {e}");
        }
    }
}
