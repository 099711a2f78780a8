//! What a browser or `curl` does with the SDK's transfer URLs, for the
//! transfer tests: one plain HTTP/1.1 request (no AWS client, no signing),
//! a `multipart/form-data` body for a POST form, and deterministic test
//! bytes with their sha256.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest as _, Sha256};

/// `method url` with `headers` and `body` over plain HTTP: the status, the
/// answer's headers and its body.
///
/// # Panics
/// When the request cannot be built or gets no answer.
pub async fn call(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut req = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let resp = client
        .request(req.body(Full::new(Bytes::from(body))).expect("request"))
        .await
        .expect("answered");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

/// A browser form's `multipart/form-data` body: `fields` first, then
/// `file` as field `file`. The content type (with its boundary) and the
/// body.
pub fn form(fields: &BTreeMap<String, String>, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "rayito-test-boundary-7c1f";
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `len` deterministic bytes (xorshift from `seed`) that no run of a
/// pattern repeats.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
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

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
