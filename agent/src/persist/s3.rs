//! A small S3 client: the few operations checkpoint and restore need
//! (PutObject, multipart upload, GetObject streamed, HeadObject; the local
//! S3 mounts' `s3fuse::client` adds its listing, ranged reads and deletes
//! over the same addressing and signer), signed
//! with SigV4 by `aws-sigv4` and sent on hyper-util's client (rustls with
//! the system's roots for HTTPS).
//!
//! Addressing: on AWS the regional virtual-hosted endpoint
//! (`https://<bucket>.s3.<region>.amazonaws.com/<key>`; path-style on the
//! regional endpoint for a bucket with a dot, which a wildcard certificate
//! does not cover); on the local backend, path-style against the
//! emulator's endpoint (`http://127.0.0.1:PORT/<bucket>/<key>`).
//!
//! A failed request becomes an [`S3Failure`] that keeps only what the
//! caller maps to a code: the S3 error code, read from at most
//! [`MAX_ERROR_BODY`] bytes of the XML body, is classified and dropped,
//! never kept as text; no bucket, key, URL or credential is in any error.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;

use super::creds::Creds;

/// Largest error or small-answer body read.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;
/// Connect timeout of every request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may wait for the answer's head (a part upload sends
/// 8 MiB first).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Why an S3 request failed, as the caller maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum S3Failure {
    /// 403 or an S3 code saying the credentials may not do this.
    Denied,
    /// 404 NoSuchKey (or HEAD 404).
    NoSuchKey,
    /// 404 NoSuchBucket.
    NoSuchBucket,
    /// Anything else: 5xx, a network failure, an answer not understood.
    Failed,
}

/// Where requests go.
#[derive(Clone, Debug)]
pub(crate) enum Endpoint {
    /// AWS's regional endpoint of the region.
    Aws,
    /// Path-style against this base URL (`http://127.0.0.1:PORT`).
    PathStyle(String),
}

pub(crate) type HttpsClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The HTTP client, kept by an agent for its operations.
#[derive(Clone)]
pub(crate) struct HttpsClientCell(pub HttpsClient);

impl std::fmt::Debug for HttpsClientCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpsClient")
    }
}

/// The HTTP client, shared by every operation of an agent.
pub(crate) fn http_client() -> std::io::Result<HttpsClient> {
    let mut roots = rustls::RootCertStore::empty();
    // A certificate the store refuses is skipped; none at all fails the
    // first HTTPS call, which is then `internal`.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https),
    )
}

/// One bucket in one region, with credentials.
#[derive(Clone)]
pub(crate) struct Bucket {
    pub client: HttpsClient,
    pub endpoint: Endpoint,
    pub region: String,
    pub bucket: String,
    pub creds: Creds,
}

opaque_debug!(Bucket);

/// Signs `req` (whose body is `body`) with SigV4 for `service` in
/// `region` with `creds` (S3 here; telemetry export's `monitoring`);
/// `None` when it cannot be signed.
pub(crate) fn sign_v4(
    req: &mut Request<Full<Bytes>>,
    body: &[u8],
    creds: &Creds,
    region: &str,
    service: &str,
    settings: aws_sigv4::http_request::SigningSettings,
) -> Option<()> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, sign};
    let identity = aws_credential_types::Credentials::new(
        creds.id.clone(),
        creds.secret.clone(),
        creds.token.clone(),
        creds.expires,
        "rayito-agent",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .ok()?
        .into();
    let headers: Vec<(&str, &str)> = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
        .collect();
    let uri = req.uri().to_string();
    // aws-sigv4 logs the request it signs (its URL: bucket and key)
    // and the canonical request at debug level: none of it may reach
    // the agent's log. (`none` is not registered with the callsites.)
    let signed = tracing::dispatcher::with_default(&tracing::Dispatch::none(), || {
        let signable = SignableRequest::new(
            req.method().as_str(),
            uri,
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .ok()?;
        sign(signable, &params).ok()
    });
    let (instructions, _) = signed?.into_parts();
    instructions.apply_to_request_http1x(req);
    Some(())
}

/// Percent-encodes a key for a URL path: every byte but the unreserved
/// ones and `/` (S3 signs the path as sent: encoded once).
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a query value.
pub(crate) fn encode_value(v: &str) -> String {
    encode_key(v).replace('/', "%2F")
}

/// The S3 error code's class, from an error answer's XML body.
pub(crate) fn classify(status: StatusCode, body: &[u8]) -> S3Failure {
    let text = String::from_utf8_lossy(body);
    let code = text
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code.trim());
    match code {
        Some(
            "AccessDenied"
            | "InvalidAccessKeyId"
            | "SignatureDoesNotMatch"
            | "InvalidToken"
            | "ExpiredToken"
            | "TokenRefreshRequired"
            | "AllAccessDisabled"
            | "InvalidSecurity"
            | "AccountProblem",
        ) => S3Failure::Denied,
        Some("NoSuchKey") => S3Failure::NoSuchKey,
        Some("NoSuchBucket") => S3Failure::NoSuchBucket,
        Some(_) => S3Failure::Failed,
        None => match status {
            StatusCode::FORBIDDEN => S3Failure::Denied,
            StatusCode::NOT_FOUND => S3Failure::NoSuchKey,
            _ => S3Failure::Failed,
        },
    }
}

impl Bucket {
    /// The URL of `key` (with `query`, already encoded).
    fn url(&self, key: &str, query: &str) -> String {
        let path = encode_key(key);
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        match &self.endpoint {
            Endpoint::PathStyle(base) => {
                format!("{}/{}/{path}{q}", base.trim_end_matches('/'), self.bucket)
            }
            Endpoint::Aws if self.bucket.contains('.') => format!(
                "https://s3.{}.amazonaws.com/{}/{path}{q}",
                self.region, self.bucket
            ),
            Endpoint::Aws => format!(
                "https://{}.s3.{}.amazonaws.com/{path}{q}",
                self.bucket, self.region
            ),
        }
    }

    /// Builds, signs and sends a request; the answer when 2xx.
    async fn send(
        &self,
        method: Method,
        key: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>, S3Failure> {
        let req = self.signed_request(method, key, query, headers, body)?;
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(req)).await;
        let resp = match sent {
            Ok(Ok(resp)) => resp,
            _ => return Err(S3Failure::Failed),
        };
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = read_bounded(resp).await.unwrap_or_default();
        Err(classify(status, &body))
    }

    /// The request for `key` (with `query`, already encoded), signed.
    pub(crate) fn signed_request(
        &self,
        method: Method,
        key: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, S3Failure> {
        let uri: http::Uri = self
            .url(key, query)
            .parse()
            .map_err(|_| S3Failure::Failed)?;
        let host = uri
            .authority()
            .ok_or(S3Failure::Failed)?
            .as_str()
            .to_owned();
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::HOST, host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req
            .body(Full::new(body.clone()))
            .map_err(|_| S3Failure::Failed)?;
        self.sign(&mut req, &body)?;
        Ok(req)
    }

    fn sign(&self, req: &mut Request<Full<Bytes>>, body: &[u8]) -> Result<(), S3Failure> {
        use aws_sigv4::http_request::{
            PayloadChecksumKind, PercentEncodingMode, SigningSettings, UriPathNormalizationMode,
        };
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        sign_v4(req, body, &self.creds, &self.region, "s3", settings).ok_or(S3Failure::Failed)
    }

    /// PutObject of a small body.
    pub(crate) async fn put_object(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<(), S3Failure> {
        let resp = self
            .send(
                Method::PUT,
                key,
                "",
                &[("content-type", content_type)],
                body,
            )
            .await?;
        drain(resp).await;
        Ok(())
    }

    /// HeadObject: the object's length.
    pub(crate) async fn head_object(&self, key: &str) -> Result<u64, S3Failure> {
        let resp = self.send(Method::HEAD, key, "", &[], Bytes::new()).await?;
        content_length(&resp).ok_or(S3Failure::Failed)
    }

    /// GetObject of a small object (at most `max` bytes, else `Failed`).
    pub(crate) async fn get_small(&self, key: &str, max: usize) -> Result<Bytes, S3Failure> {
        let resp = self.send(Method::GET, key, "", &[], Bytes::new()).await?;
        Limited::new(resp.into_body(), max)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|_| S3Failure::Failed)
    }

    /// GetObject, streamed: the answer (read its body frame by frame) and
    /// its length.
    pub(crate) async fn get_stream(&self, key: &str) -> Result<(Incoming, Option<u64>), S3Failure> {
        let resp = self.send(Method::GET, key, "", &[], Bytes::new()).await?;
        let len = content_length(&resp);
        Ok((resp.into_body(), len))
    }

    /// CreateMultipartUpload: the upload id.
    pub(crate) async fn create_multipart(
        &self,
        key: &str,
        content_type: &str,
    ) -> Result<String, S3Failure> {
        let resp = self
            .send(
                Method::POST,
                key,
                "uploads=",
                &[("content-type", content_type)],
                Bytes::new(),
            )
            .await?;
        let body = read_bounded(resp).await.ok_or(S3Failure::Failed)?;
        let text = std::str::from_utf8(&body).map_err(|_| S3Failure::Failed)?;
        let id = text
            .split_once("<UploadId>")
            .and_then(|(_, rest)| rest.split_once("</UploadId>"))
            .map(|(id, _)| id.trim().to_owned())
            .filter(|id| !id.is_empty() && id.len() <= 1024)
            .ok_or(S3Failure::Failed)?;
        Ok(id)
    }

    /// UploadPart: the part's ETag.
    pub(crate) async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, S3Failure> {
        let query = format!("partNumber={number}&uploadId={}", encode_value(upload_id));
        let resp = self.send(Method::PUT, key, &query, &[], body).await?;
        let etag = resp
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(S3Failure::Failed)?;
        drain(resp).await;
        Ok(etag)
    }

    /// CompleteMultipartUpload of `parts` (number, ETag), in order. S3 may
    /// answer 200 with an error in the body: that is a failure too.
    pub(crate) async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), S3Failure> {
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (n, etag) in parts {
            let etag = etag
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;");
            xml.push_str(&format!(
                "<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
            ));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let query = format!("uploadId={}", encode_value(upload_id));
        let resp = self
            .send(
                Method::POST,
                key,
                &query,
                &[("content-type", "application/xml")],
                Bytes::from(xml),
            )
            .await?;
        let status = resp.status();
        let body = read_bounded(resp).await.ok_or(S3Failure::Failed)?;
        if body.windows(7).any(|w| w == b"<Error>") {
            return Err(classify(status, &body));
        }
        Ok(())
    }

    /// AbortMultipartUpload, best effort.
    pub(crate) async fn abort_multipart(&self, key: &str, upload_id: &str) {
        let query = format!("uploadId={}", encode_value(upload_id));
        if let Ok(resp) = self
            .send(Method::DELETE, key, &query, &[], Bytes::new())
            .await
        {
            drain(resp).await;
        }
    }
}

pub(crate) fn content_length(resp: &Response<Incoming>) -> Option<u64> {
    resp.headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// At most [`MAX_ERROR_BODY`] bytes of an answer's body.
pub(crate) async fn read_bounded(resp: Response<Incoming>) -> Option<Bytes> {
    Limited::new(resp.into_body(), MAX_ERROR_BODY)
        .collect()
        .await
        .ok()
        .map(|b| b.to_bytes())
}

/// Reads the rest of a small answer so the connection can be reused.
async fn drain(resp: Response<Incoming>) {
    let _ = read_bounded(resp).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_once_and_slashes_kept() {
        assert_eq!(encode_key("a b/c+d~e.f"), "a%20b/c%2Bd~e.f");
        assert_eq!(encode_value("x/y=z"), "x%2Fy%3Dz");
    }

    #[test]
    fn error_codes_are_classified_not_kept() {
        let body = b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>secret-bucket</Message></Error>";
        assert_eq!(classify(StatusCode::FORBIDDEN, body), S3Failure::Denied);
        let body = b"<Error><Code>NoSuchKey</Code></Error>";
        assert_eq!(classify(StatusCode::NOT_FOUND, body), S3Failure::NoSuchKey);
        let body = b"<Error><Code>NoSuchBucket</Code></Error>";
        assert_eq!(
            classify(StatusCode::NOT_FOUND, body),
            S3Failure::NoSuchBucket
        );
        let body = b"<Error><Code>InternalError</Code></Error>";
        assert_eq!(
            classify(StatusCode::INTERNAL_SERVER_ERROR, body),
            S3Failure::Failed
        );
        assert_eq!(classify(StatusCode::FORBIDDEN, b""), S3Failure::Denied);
        assert_eq!(classify(StatusCode::NOT_FOUND, b""), S3Failure::NoSuchKey);
        assert_eq!(
            classify(StatusCode::SERVICE_UNAVAILABLE, b""),
            S3Failure::Failed
        );
    }

    #[test]
    fn addressing_is_virtual_hosted_on_aws_and_path_style_locally() {
        let b = |endpoint, bucket: &str| Bucket {
            client: http_client().unwrap(),
            endpoint,
            region: "eu-west-1".into(),
            bucket: bucket.into(),
            creds: Creds {
                id: "a".into(),
                secret: "s".into(),
                token: None,
                expires: None,
            },
        };
        assert_eq!(
            b(Endpoint::Aws, "bkt").url("p/home.tar.gz", ""),
            "https://bkt.s3.eu-west-1.amazonaws.com/p/home.tar.gz"
        );
        assert_eq!(
            b(Endpoint::Aws, "my.bkt").url("k", "uploads="),
            "https://s3.eu-west-1.amazonaws.com/my.bkt/k?uploads="
        );
        assert_eq!(
            b(Endpoint::PathStyle("http://127.0.0.1:9/".into()), "bkt").url("a b", ""),
            "http://127.0.0.1:9/bkt/a%20b"
        );
    }
}
