//! `upload_url` / `download_url` (the `s3` feature) on the local backend,
//! whose S3 stand-in is the bucket `rayito::LOCAL_BUCKET`: bytes PUT to the
//! upload ticket land at the path, and the download link GETs them back.
//! Run by `.ci/run` (`cargo test -p rayito-e2b --features s3`).

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rayito::transfer::{S3Staging, UploadMethod};
use rayito_e2b::{ApiParams, Backend, Sandbox, SandboxOpts};
use std::time::Duration;

const BODY: &[u8] = b"uploaded the E2B way\n";
const BOUNDARY: &str = "rayito-e2b-test-boundary";

/// A browser form: the ticket's fields first, the file last as `file`.
fn form(fields: &std::collections::BTreeMap<String, String>, file: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up.txt\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_url_writes_the_file_and_a_download_url_reads_it() {
    let sbx = Sandbox::create(SandboxOpts {
        backend: Backend::Local,
        staging: Some(S3Staging::new(rayito::LOCAL_BUCKET)),
        ..SandboxOpts::default()
    })
    .await
    .expect("create with local staging");
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();

    let ticket = sbx
        .upload_url("/home/user/up.txt")
        .await
        .expect("upload_url");
    // E2B's upload is a multipart POST; so is the SDK's default ticket.
    assert_eq!(ticket.method(), UploadMethod::Post);
    let post = http::Request::post(ticket.url())
        .header(
            http::header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(Full::new(Bytes::from(form(ticket.fields(), BODY))))
        .expect("request");
    let answer = client.request(post).await.expect("POST");
    assert!(answer.status().is_success(), "{}", answer.status());
    let entry = ticket.wait(Duration::from_secs(30)).await.expect("arrived");
    assert_eq!(entry.size, BODY.len() as u64);
    assert_eq!(
        sbx.files().read("/home/user/up.txt").await.expect("read"),
        BODY
    );

    let link = sbx
        .download_url("/home/user/up.txt")
        .await
        .expect("download_url");
    let answer = client
        .get(link.url().parse().expect("a URI"))
        .await
        .expect("GET");
    assert!(answer.status().is_success(), "{}", answer.status());
    let got = answer.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&got[..], BODY);
    assert!(sbx.kill(ApiParams::default()).await.expect("kill"));
}
