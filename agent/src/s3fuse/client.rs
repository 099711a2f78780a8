//! The S3 requests a mount makes, over the persistence client's addressing
//! and signer ([`Bucket`]): ListObjectsV2 (prefix, delimiter, continuation),
//! HeadObject, ranged GetObject (conditional on the ETag an open saw),
//! DeleteObject, and the uploads (PutObject, multipart) of `persist::s3`.
//!
//! Failures keep only a class ([`Fail`]): no key, bucket, URL or S3
//! message is kept, so none can reach a log line or an errno's caller.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;

use crate::persist::LocalS3;
use crate::persist::creds::Creds;
use crate::persist::s3::{
    Bucket, Endpoint, S3Failure, classify, content_length, encode_value, http_client, read_bounded,
};

/// How long a metadata request (list, head, delete) may take.
const META_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest listing answer read (1,000 keys of up to 1 KiB each, escaped).
const MAX_LIST_BODY: usize = 8 * 1024 * 1024;

/// Why a request failed, as the file system maps it to an errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fail {
    /// 403, or an S3 code saying the credentials may not do this.
    Denied,
    /// No such bucket.
    NoSuchBucket,
    /// No such key.
    NoSuchKey,
    /// 412: the object changed since it was opened.
    Changed,
    /// S3 could not be reached (connect failure, connection lost).
    Network,
    /// No answer within the bound.
    Timeout,
    /// Anything else (5xx, an answer not understood).
    Other,
}

impl From<S3Failure> for Fail {
    fn from(f: S3Failure) -> Self {
        match f {
            S3Failure::Denied => Self::Denied,
            S3Failure::NoSuchKey => Self::NoSuchKey,
            S3Failure::NoSuchBucket => Self::NoSuchBucket,
            S3Failure::Failed => Self::Other,
        }
    }
}

impl Fail {
    /// The errno a file operation answers with.
    pub(super) fn errno(self) -> fuser::Errno {
        match self {
            Self::Denied => fuser::Errno::EACCES,
            Self::NoSuchKey => fuser::Errno::ENOENT,
            Self::Timeout => fuser::Errno::ETIMEDOUT,
            Self::NoSuchBucket | Self::Changed | Self::Network | Self::Other => fuser::Errno::EIO,
        }
    }
}

/// What S3 says of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ObjectMeta {
    pub size: u64,
    pub mtime: SystemTime,
    pub etag: Option<String>,
}

/// One page of a listing: objects (full key, meta) and common prefixes
/// (full, ending in the delimiter), and where the next page starts.
#[derive(Debug, Default)]
pub(super) struct ListPage {
    pub objects: Vec<(String, ObjectMeta)>,
    pub prefixes: Vec<String>,
    pub next: Option<String>,
}

/// One mount's bucket, prefix and credentials. Keys given to its methods
/// are relative to the mount's prefix.
#[derive(Clone, Debug)]
pub(super) struct Client {
    bucket: Bucket,
    /// The mount's prefix: empty, or ending in `/`.
    prefix: String,
}

impl Client {
    /// A client of `bucket`/`prefix` signing with `s3`'s key.
    pub(super) fn new(bucket: &str, prefix: &str, s3: &LocalS3) -> std::io::Result<Self> {
        let prefix = if prefix.is_empty() || prefix.ends_with('/') {
            prefix.to_owned()
        } else {
            format!("{prefix}/")
        };
        Ok(Self {
            bucket: Bucket {
                client: http_client()?,
                endpoint: Endpoint::PathStyle(s3.endpoint_url.clone()),
                region: s3.region.clone(),
                bucket: bucket.to_owned(),
                creds: Creds {
                    id: s3.access_key_id.clone(),
                    secret: s3.secret_access_key.clone(),
                    token: s3.session_token.clone(),
                    expires: None,
                },
            },
            prefix,
        })
    }

    /// The bucket key of the mount-relative `key`.
    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Signs and sends one request; the answer when 2xx.
    async fn send(
        &self,
        method: Method,
        key: &str,
        query: &str,
        headers: &[(&str, &str)],
        bound: Duration,
    ) -> Result<Response<Incoming>, Fail> {
        let req = self
            .bucket
            .signed_request(method, key, query, headers, Bytes::new())
            .map_err(|_| Fail::Other)?;
        let resp = match tokio::time::timeout(bound, self.bucket.client.request(req)).await {
            Err(_) => return Err(Fail::Timeout),
            Ok(Err(_)) => return Err(Fail::Network),
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        if status == StatusCode::PRECONDITION_FAILED {
            return Err(Fail::Changed);
        }
        let body = read_bounded(resp).await.unwrap_or_default();
        match classify(status, &body) {
            // Whatever its code (NotSignedUp, a policy's explicit deny),
            // a 403 is the credentials'.
            _ if status == StatusCode::FORBIDDEN => Err(Fail::Denied),
            class => Err(class.into()),
        }
    }

    /// One page of ListObjectsV2 under the mount-relative `prefix`, with
    /// `/` as delimiter when `delimited`. Keys in the page are relative to
    /// the mount's prefix too.
    pub(super) async fn list(
        &self,
        prefix: &str,
        delimited: bool,
        token: Option<&str>,
        max_keys: u32,
        bound: Option<Duration>,
    ) -> Result<ListPage, Fail> {
        // The query in the canonical (sorted) order.
        let mut query = String::new();
        if let Some(token) = token {
            query.push_str(&format!("continuation-token={}&", encode_value(token)));
        }
        if delimited {
            query.push_str("delimiter=%2F&");
        }
        query.push_str(&format!(
            "list-type=2&max-keys={max_keys}&prefix={}",
            encode_value(&self.full(prefix))
        ));
        let resp = self
            .send(Method::GET, "", &query, &[], bound.unwrap_or(META_TIMEOUT))
            .await?;
        let body = Limited::new(resp.into_body(), MAX_LIST_BODY)
            .collect()
            .await
            .map_err(|_| Fail::Network)?
            .to_bytes();
        let text = std::str::from_utf8(&body).map_err(|_| Fail::Other)?;
        Ok(parse_list(text, self.prefix.len()))
    }

    /// HeadObject of the mount-relative `key`: `None` when there is none.
    pub(super) async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Fail> {
        match self
            .send(Method::HEAD, &self.full(key), "", &[], META_TIMEOUT)
            .await
        {
            Ok(resp) => {
                let header = |name: http::header::HeaderName| {
                    resp.headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                Ok(Some(ObjectMeta {
                    size: content_length(&resp).ok_or(Fail::Other)?,
                    mtime: header(http::header::LAST_MODIFIED)
                        .and_then(|d| chrono::DateTime::parse_from_rfc2822(&d).ok())
                        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from),
                    etag: header(http::header::ETAG),
                }))
            }
            // A HEAD's 404 has no body: no key, or no bucket.
            Err(Fail::NoSuchKey | Fail::NoSuchBucket) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GetObject of bytes `from..to` of the mount-relative `key`, as long
    /// as its ETag is still `etag`: the body, to stream.
    pub(super) async fn get_range(
        &self,
        key: &str,
        from: u64,
        to: u64,
        etag: Option<&str>,
    ) -> Result<Incoming, Fail> {
        let range = format!("bytes={from}-{}", to.saturating_sub(1));
        let mut headers = vec![("range", range.as_str())];
        if let Some(etag) = etag {
            headers.push(("if-match", etag));
        }
        let resp = self
            .send(Method::GET, &self.full(key), "", &headers, META_TIMEOUT)
            .await?;
        Ok(resp.into_body())
    }

    /// DeleteObject of the mount-relative `key`.
    pub(super) async fn delete(&self, key: &str) -> Result<(), Fail> {
        let resp = self
            .send(Method::DELETE, &self.full(key), "", &[], META_TIMEOUT)
            .await?;
        let _ = read_bounded(resp).await;
        Ok(())
    }

    /// PutObject of a whole (small) body.
    pub(super) async fn put(&self, key: &str, body: Bytes) -> Result<(), Fail> {
        Ok(self
            .bucket
            .put_object(&self.full(key), body, CONTENT_TYPE)
            .await?)
    }

    /// CreateMultipartUpload: the upload id.
    pub(super) async fn create_multipart(&self, key: &str) -> Result<String, Fail> {
        Ok(self
            .bucket
            .create_multipart(&self.full(key), CONTENT_TYPE)
            .await?)
    }

    /// UploadPart: the part's ETag.
    pub(super) async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, Fail> {
        Ok(self
            .bucket
            .upload_part(&self.full(key), upload_id, number, body)
            .await?)
    }

    /// CompleteMultipartUpload of `parts`, in order.
    pub(super) async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), Fail> {
        Ok(self
            .bucket
            .complete_multipart(&self.full(key), upload_id, parts)
            .await?)
    }

    /// AbortMultipartUpload, best effort.
    pub(super) async fn abort_multipart(&self, key: &str, upload_id: &str) {
        self.bucket
            .abort_multipart(&self.full(key), upload_id)
            .await;
    }
}

/// What a file written through a mount is stored as.
const CONTENT_TYPE: &str = "application/octet-stream";

/// The text of every `<tag>…</tag>` in `xml`, in order.
fn elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let Some(end) = after.find(&close) else {
            break;
        };
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    out
}

/// The first `<tag>…</tag>` of `xml`.
fn element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    elements(xml, tag).into_iter().next()
}

/// XML text with its five entities and character references decoded.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let Some(end) = tail.find(';') else {
            out.push_str(tail);
            return out;
        };
        let entity = &tail[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A ListObjectsV2 answer, keys made relative by dropping `strip` bytes
/// (the mount's prefix, which every key of the answer starts with).
fn parse_list(xml: &str, strip: usize) -> ListPage {
    let relative = |key: String| key.get(strip..).map(str::to_owned);
    let objects = elements(xml, "Contents")
        .into_iter()
        .filter_map(|c| {
            let key = relative(unescape(element(c, "Key")?))?;
            let meta = ObjectMeta {
                size: element(c, "Size")?.trim().parse().ok()?,
                mtime: element(c, "LastModified")
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t.trim()).ok())
                    .map_or(SystemTime::UNIX_EPOCH, SystemTime::from),
                etag: element(c, "ETag").map(unescape),
            };
            Some((key, meta))
        })
        .collect();
    let prefixes = elements(xml, "CommonPrefixes")
        .into_iter()
        .filter_map(|p| relative(unescape(element(p, "Prefix")?)))
        .collect();
    let truncated = element(xml, "IsTruncated").is_some_and(|t| t.trim() == "true");
    let next = element(xml, "NextContinuationToken")
        .map(unescape)
        .filter(|t| truncated && !t.is_empty());
    ListPage {
        objects,
        prefixes,
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_are_parsed_and_made_relative() {
        let xml = r#"<?xml version="1.0"?><ListBucketResult><Name>b</Name><Prefix>m/d/</Prefix>
            <Contents><Key>m/d/a&amp;b.txt</Key><LastModified>2026-12-01T20:44:05.000Z</LastModified><ETag>&quot;e1&quot;</ETag><Size>12</Size></Contents>
            <Contents><Key>m/d/z</Key><Size>0</Size></Contents>
            <CommonPrefixes><Prefix>m/d/sub/</Prefix></CommonPrefixes>
            <IsTruncated>true</IsTruncated><NextContinuationToken>tok&lt;1</NextContinuationToken></ListBucketResult>"#;
        let page = parse_list(xml, 2);
        assert_eq!(page.objects.len(), 2);
        assert_eq!(page.objects[0].0, "d/a&b.txt");
        assert_eq!(page.objects[0].1.size, 12);
        assert_eq!(page.objects[0].1.etag.as_deref(), Some("\"e1\""));
        assert_ne!(page.objects[0].1.mtime, SystemTime::UNIX_EPOCH);
        assert_eq!(page.objects[1].0, "d/z");
        assert_eq!(page.prefixes, vec!["d/sub/".to_owned()]);
        assert_eq!(page.next.as_deref(), Some("tok<1"));
        let last = parse_list("<IsTruncated>false</IsTruncated>", 0);
        assert!(last.objects.is_empty() && last.prefixes.is_empty() && last.next.is_none());
    }

    #[test]
    fn entities_and_character_references_decode() {
        assert_eq!(unescape("a&#47;b&#x41;&amp;&bogus;"), "a/bA&&bogus;");
        assert_eq!(unescape("plain"), "plain");
    }

    #[test]
    fn failures_map_to_errnos_without_text() {
        assert_eq!(Fail::Denied.errno(), fuser::Errno::EACCES);
        assert_eq!(Fail::NoSuchKey.errno(), fuser::Errno::ENOENT);
        assert_eq!(Fail::Changed.errno(), fuser::Errno::EIO);
        assert_eq!(Fail::from(S3Failure::NoSuchBucket), Fail::NoSuchBucket);
    }
}
