//! The SDK's S3 code against a second S3 that is not ours: a moto server
//! (`sdk_support::moto`). The sandboxes run on an emulator whose agents
//! take moto as their transfer endpoint (`EmulatorConfig::
//! transfer_s3_endpoint`), so the whole flow crosses moto: the SDK signs
//! for moto, a plain HTTP client PUTs or POSTs there, the agent GETs and
//! DELETEs there (import) or PUTs there (export), and the link is fetched
//! from moto; URLs signed for the emulator's own S3 are refused then.
//!
//! What moto checks, and what it does not (moto 5, the version
//! `.ci/install-test-deps` installs): in the mode the shared helper starts
//! it (`INITIAL_NO_AUTH_ACTION_COUNT` infinite) moto verifies no signature
//! at all. With authentication enforced (`MotoServer::enforce_auth`) it
//! verifies header-signed requests against the keys its IAM issued, but
//! answers every presigned (query-signed) request and every POST form with
//! 500, because its check reads an `Authorization` header; it never checks
//! a POST policy's signature nor its `content-length-range`. So here moto
//! checks the URLs' shape (path style, bucket, key, query), the form's
//! fields and the attachment header; the signatures, the policy and its
//! size range are verified by the emulator's S3 (tests/sdk/transfers.rs).
//! The SDK's own header-signed calls are checked by moto with
//! authentication enforced (the last test).

use crate::sdk_support;

use std::net::SocketAddr;
use std::time::Duration;

use aws_sdk_s3 as s3;
use rayito::error::{TransferCode, TransferReason};
use rayito::persistence::S3Prefix;
use rayito::transfer::{
    DownloadUrlOptions, S3Staging, TransferPhase, UploadMethod, UploadUrlOptions,
};
use rayito::{ErrorKind, Sandbox, SandboxError};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};
use sdk_support::moto::{MotoServer, xml_text};
use sdk_support::moto_seed::s3_client;
use sdk_support::plain_http::{call, form, noise, sha256_hex};

const BUCKET: &str = "sdk-moto-transfers";

struct World {
    moto: MotoServer,
    /// The sandbox runs in it.
    emu: Emulator,
    sbx: Sandbox,
    /// moto's S3, signed with the emulator's key (moto checks none).
    s3: s3::Client,
}

/// moto with the staging bucket, and a sandbox on an emulator whose agents
/// call moto for transfers; the SDK signs its transfer URLs for moto.
/// `None` (after a skip line) without moto.
async fn world() -> Option<World> {
    let moto = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")?;
    let moto_addr = SocketAddr::from(([127, 0, 0, 1], moto.port()));
    let emu = Emulator::start(EmulatorConfig {
        transfer_s3_endpoint: Some(moto_addr),
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let sbx = Sandbox::builder()
        .aws(sdk_support::aws(&emu).s3_endpoint_url(moto.endpoint_url()))
        .template(emu.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(30))
        .create()
        .await
        .expect("sandbox");
    let s3 = s3_client(&moto.endpoint_url(), emu.access_key());
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("the staging bucket in moto");
    Some(World { moto, emu, sbx, s3 })
}

fn staging() -> S3Staging {
    S3Staging::new(BUCKET)
}

/// No URL, bucket, staging key or endpoint in a text the caller may log
/// (moto's port alone is not looked for: a `Debug` of a time may hold
/// its digits).
fn assert_clean(text: &str, moto: &MotoServer) {
    let endpoint = moto.endpoint_url();
    let host = endpoint.trim_start_matches("http://");
    for secret in [
        BUCKET,
        "rayito-transfer/",
        "X-Amz",
        "http://",
        "https://",
        host,
    ] {
        assert!(!text.contains(secret), "{text:?} holds {secret:?}");
    }
}

/// The keys in moto's staging bucket.
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
async fn a_put_ticket_signed_for_moto_becomes_the_file_and_the_object_is_deleted() {
    let Some(w) = world().await else {
        return;
    };
    let ticket = w
        .sbx
        .files()
        .upload_url("up/put.bin", UploadUrlOptions::new(staging()).mode(0o640))
        .await
        .expect("ticket");
    assert_eq!(ticket.method(), UploadMethod::Put);
    assert!(
        ticket.url().starts_with(&format!(
            "{}/{BUCKET}/rayito-transfer/",
            w.moto.endpoint_url()
        )),
        "a path-style URL into moto's staging bucket"
    );
    assert_clean(&format!("{ticket:?}"), &w.moto);

    let body = noise(2 << 20, 5);
    let headers: Vec<_> = ticket.headers().clone().into_iter().collect();
    let (code, _, text) = call("PUT", ticket.url(), &headers, body.clone()).await;
    assert_eq!(
        code,
        200,
        "moto took the PUT: {}",
        String::from_utf8_lossy(&text)
    );
    let entry = ticket.wait(Duration::from_secs(60)).await.expect("done");
    assert_eq!(entry.path, "/home/user/up/put.bin");
    assert_eq!(entry.size, body.len() as u64);
    assert_eq!(entry.mode, 0o640);
    assert_eq!(w.sbx.files().read("up/put.bin").await.expect("read"), body);
    let status = ticket.status().await.expect("status");
    assert_eq!(status.phase, TransferPhase::Done);
    assert_eq!(status.bytes_total, body.len() as u64);
    assert_eq!(status.sha256.as_deref(), Some(sha256_hex(&body).as_str()));
    assert!(
        staged_keys(&w).await.is_empty(),
        "the agent's presigned DELETE removed the object from moto"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_form_is_taken_by_moto_and_an_object_over_max_bytes_is_refused_by_the_agent() {
    let Some(w) = world().await else {
        return;
    };
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
    assert_eq!(
        ticket.url(),
        format!("{}/{BUCKET}", w.moto.endpoint_url()),
        "a path-style bucket URL"
    );
    assert_clean(&format!("{ticket:?}"), &w.moto);
    let (ctype, body) = form(ticket.fields(), b"hello from a form");
    let (code, _, text) = call(
        "POST",
        ticket.url(),
        &[("content-type".into(), ctype)],
        body,
    )
    .await;
    assert_eq!(code, 204, "{}", String::from_utf8_lossy(&text));
    let entry = ticket.wait(Duration::from_secs(60)).await.expect("done");
    assert_eq!(entry.size, 17);
    assert_eq!(
        w.sbx
            .files()
            .read_to_string("form.txt")
            .await
            .expect("read"),
        "hello from a form"
    );
    assert!(staged_keys(&w).await.is_empty(), "deleted from moto");

    // Over max_bytes. moto does not enforce the policy's
    // content-length-range (the emulator's S3 does: tests/sdk/transfers.rs),
    // so the object lands in moto; the agent's own limit refuses it.
    let ticket = w
        .sbx
        .files()
        .upload_url(
            "big.txt",
            UploadUrlOptions::new(staging()).form(true).max_bytes(100),
        )
        .await
        .expect("ticket");
    let (ctype, body) = form(ticket.fields(), &[b'x'; 101]);
    let (code, _, text) = call(
        "POST",
        ticket.url(),
        &[("content-type".into(), ctype)],
        body,
    )
    .await;
    assert_eq!(
        code,
        204,
        "moto takes a form over its size range: {}",
        String::from_utf8_lossy(&text)
    );
    let e = ticket
        .wait(Duration::from_secs(60))
        .await
        .expect_err("too large");
    assert!(
        matches!(
            &e,
            SandboxError::FileUpload {
                code: TransferCode::FailedPrecondition,
                reason: TransferReason::TooLarge,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "too_large: the object is larger than the upload allows; send a smaller file or allow more bytes (max_bytes)"
    );
    assert_clean(&e.to_string(), &w.moto);
    assert_clean(&format!("{e:?}"), &w.moto);
    assert_eq!(
        ticket.status().await.expect("status").phase,
        TransferPhase::Failed
    );
    assert!(!w.sbx.files().exists("big.txt").await.expect("exists"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_link_into_moto_is_fetched_plainly_as_an_attachment() {
    let Some(w) = world().await else {
        return;
    };
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
    assert!(link.url().starts_with(&w.moto.endpoint_url()));
    assert_clean(&format!("{link:?}"), &w.moto);
    // The agent's PUT made the object in moto.
    let keys = staged_keys(&w).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with(&format!("rayito-transfer/{}/down/", w.sbx.id())));
    let (code, headers, got) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(got, body);
    assert_eq!(
        headers
            .get("content-disposition")
            .and_then(|v| v.to_str().ok()),
        Some("attachment; filename=\"report.bin\"")
    );

    let link = w
        .sbx
        .files()
        .download_url(
            "out/report.bin",
            DownloadUrlOptions::new(staging()).filename("r.dat"),
        )
        .await
        .expect("link");
    let (code, headers, got) = call("GET", link.url(), &[], Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(got, body);
    assert_eq!(
        headers
            .get("content-disposition")
            .and_then(|v| v.to_str().ok()),
        Some("attachment; filename=\"r.dat\"")
    );
}

/// The option replaces the emulator's S3 for transfers, it does not add
/// moto beside it: a handle that signs for the emulator's own S3 is
/// refused by the agent before any call (and nothing is staged anywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_signed_for_the_emulators_own_s3_are_refused_by_an_agent_told_of_moto() {
    let Some(w) = world().await else {
        return;
    };
    let own = Sandbox::builder()
        .aws(sdk_support::aws(&w.emu).s3_endpoint_url(w.emu.s3_endpoint_url()))
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(30))
        .connect(w.sbx.id(), w.sbx.access_token().clone())
        .await
        .expect("a second handle");
    let e = own
        .files()
        .upload_url("refused.bin", UploadUrlOptions::new(staging()))
        .await
        .expect_err("not moto's endpoint");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    assert_clean(&e.to_string(), &w.moto);
    assert_clean(&format!("{e:?}"), &w.moto);
    assert!(!e.to_string().contains(&w.emu.s3_endpoint_url()));
    // The same call signed for moto is taken.
    w.sbx
        .files()
        .upload_url("taken.bin", UploadUrlOptions::new(staging()))
        .await
        .expect("moto's endpoint")
        .cancel()
        .await
        .expect("cancel");
    assert!(staged_keys(&w).await.is_empty());
}

/// A client whose AWS calls (S3 included) go to moto, signed with `key`.
async fn client_on_moto(moto: &MotoServer, key: &AccessKey) -> rayito::Client {
    rayito::Client::builder()
        .aws(
            rayito::AwsOptions::new()
                .endpoint_url(moto.endpoint_url())
                .s3_endpoint_url(moto.endpoint_url())
                .region("us-east-1")
                .static_credentials(key.id.clone(), key.secret.clone()),
        )
        .build()
        .await
        .expect("a client")
}

/// The SDK's own S3 calls (persistence list and delete) with moto
/// checking signatures: a key moto never issued and a wrong secret are
/// `Authentication`, a missing bucket `InvalidArgument` naming `bucket`
/// (for delete too), with neither AWS's text nor the location.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_own_s3_calls_refused_by_moto_map_to_authentication_and_invalid_argument() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    moto.iam("CreateUser", &[("UserName", "checkpoints")]);
    moto.iam(
        "PutUserPolicy",
        &[
            ("UserName", "checkpoints"),
            ("PolicyName", "s3"),
            (
                "PolicyDocument",
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#,
            ),
        ],
    );
    let answer = moto.iam("CreateAccessKey", &[("UserName", "checkpoints")]);
    let good = AccessKey::new(
        xml_text(&answer, "AccessKeyId").expect("an access key id"),
        xml_text(&answer, "SecretAccessKey").expect("a secret"),
    );
    s3_client(&moto.endpoint_url(), &good)
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("a bucket");
    moto.enforce_auth();

    // The right key is accepted: moto checked its signature.
    let client = client_on_moto(&moto, &good).await;
    let listed = rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
        .await
        .expect("list with moto's key");
    assert!(listed.is_empty());

    let wrong_secret = AccessKey::new(good.id.clone(), "not-the-secret-0123456789");
    let unknown_key = AccessKey::new("AKIAUNKNOWNTOMOTO000", "whatever-secret-0123456789");
    for key in [&wrong_secret, &unknown_key] {
        let client = client_on_moto(&moto, key).await;
        let e = rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
            .await
            .expect_err("refused credentials");
        assert_eq!(e.kind(), ErrorKind::Authentication, "{e:?}");
        assert!(!e.is_retryable(), "{e:?}");
        assert_clean(&e.to_string(), &moto);
        assert_clean(&format!("{e:?}"), &moto);
        let e = rayito::persistence::delete(&client, &S3Prefix::new(BUCKET).name("a"))
            .await
            .expect_err("refused credentials");
        assert_eq!(e.kind(), ErrorKind::Authentication, "{e:?}");
        assert_clean(&e.to_string(), &moto);
    }

    let e = rayito::persistence::delete(&client, &S3Prefix::new("no-such-bucket-here").name("a"))
        .await
        .expect_err("no bucket");
    assert_eq!(
        e.to_string(),
        "invalid bucket: the bucket does not exist (NoSuchBucket); create it or name another"
    );
    assert!(
        matches!(&e, SandboxError::InvalidArgument { argument: Some(a), .. } if a.as_ref() == "bucket"),
        "{e:?}"
    );
    moto.relax_auth();
}

/// The JSON object that follows `marker` in `doc` (a fenced block).
fn json_after(doc: &str, marker: &str) -> serde_json::Value {
    let at = doc.find(marker).expect("the marker");
    let start = at + doc[at..].find("```json\n").expect("a json block") + 8;
    let end = start + doc[start..].find("```").expect("the block's end");
    serde_json::from_str(&doc[start..end]).expect("valid JSON")
}

/// The staging lifecycle rule docs/transfers.md gives is the one
/// docs/persistence.md repeats, names the default prefix, outlives the
/// default URL lifetime, and is taken by an S3 (moto) as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_staging_lifecycle_rule_is_one_s3_takes() {
    use s3::types::{
        AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
        LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    };
    let transfers = include_str!("../../docs/transfers.md");
    let persistence = include_str!("../../docs/persistence.md");
    let rule = json_after(transfers, "<!-- staging-lifecycle -->")["Rules"][0].clone();
    let both = json_after(persistence, "## Bucket lifecycle");
    assert!(
        both["Rules"].as_array().unwrap().contains(&rule),
        "docs/persistence.md repeats the staging rule: {both}"
    );
    let prefix = rule["Filter"]["Prefix"].as_str().unwrap();
    assert_eq!(prefix, format!("{}/", rayito::transfer::DEFAULT_PREFIX));
    let days = rule["Expiration"]["Days"].as_i64().unwrap();
    let default_life = S3Staging::new("b").max_expires_in;
    assert!(
        Duration::from_secs(days as u64 * 86_400) > default_life,
        "objects must outlive the default URL lifetime"
    );

    let Some(w) = world().await else {
        return;
    };
    let to_rule = |r: &serde_json::Value| {
        LifecycleRule::builder()
            .id(r["ID"].as_str().unwrap())
            .status(ExpirationStatus::from(r["Status"].as_str().unwrap()))
            .filter(
                LifecycleRuleFilter::builder()
                    .prefix(r["Filter"]["Prefix"].as_str().unwrap())
                    .build(),
            )
            .expiration(
                LifecycleExpiration::builder()
                    .days(r["Expiration"]["Days"].as_i64().unwrap() as i32)
                    .build(),
            )
            .abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(
                        r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]
                            .as_i64()
                            .unwrap() as i32,
                    )
                    .build(),
            )
            .build()
            .expect("a rule")
    };
    w.s3.put_bucket_lifecycle_configuration()
        .bucket(BUCKET)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(to_rule(&rule))
                .build()
                .expect("a configuration"),
        )
        .send()
        .await
        .expect("moto takes the rule");
    let got =
        w.s3.get_bucket_lifecycle_configuration()
            .bucket(BUCKET)
            .send()
            .await
            .expect("read back");
    let got = &got.rules()[0];
    assert_eq!(got.id(), rule["ID"].as_str());
    assert_eq!(got.expiration().and_then(|e| e.days()), Some(days as i32));
}
