//! Code artifacts in S3 (feature `templates`): upload only if absent, read
//! a base image's artifact, always with the caller's account as the
//! expected bucket owner (a bucket name someone else took is never written
//! to or read from).

use crate::quiet::Quiet as _;
use aws_sdk_s3 as s3;
use bytes::Bytes;

use crate::aws::failure::{extract, map_sdk_error};
use crate::error::SandboxError;

/// An `s3://bucket/key` URI split, `None` for anything else.
pub(crate) fn parse_s3_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://")?;
    let (bucket, key) = rest.split_once('/')?;
    (!bucket.is_empty() && !key.is_empty()).then_some((bucket, key))
}

/// An artifact bucket's name has an S3 bucket name's shape (3 to 63 of
/// `a-z`, `0-9`, `.`, `-`), checked before any call (templates, setup).
///
/// # Errors
/// `InvalidArgument` (`bucket`) for any other name.
pub(crate) fn check_bucket(bucket: &str) -> Result<(), SandboxError> {
    let ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "bucket",
            "an S3 bucket name is 3 to 63 of a-z, 0-9, '.' and '-'; pass the artifact bucket's name",
        ))
    }
}

/// The artifact store over one S3 client.
#[derive(Clone, Debug)]
pub(crate) struct ArtifactStore {
    client: s3::Client,
    /// The account every bucket must belong to.
    owner: String,
}

impl ArtifactStore {
    /// The store over `config`; `endpoint` overrides S3's (the local
    /// backend's, path style).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        endpoint: Option<&str>,
        owner: String,
    ) -> Self {
        let mut builder = s3::config::Builder::from(config);
        if let Some(endpoint) = endpoint {
            builder = builder.endpoint_url(endpoint).force_path_style(true);
        }
        Self {
            client: s3::Client::from_conf(builder.build()),
            owner,
        }
    }

    /// Whether the object exists. 403 counts as absent: without
    /// `s3:ListBucket` S3 answers 403 for a missing key, and a real denial
    /// shows at the upload.
    ///
    /// # Errors
    /// Any other failure, mapped.
    pub(crate) async fn exists(&self, bucket: &str, key: &str) -> Result<bool, SandboxError> {
        let result = self
            .client
            .head_object()
            .bucket(bucket)
            .key(key)
            .expected_bucket_owner(&self.owner)
            .send()
            .quiet()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => {
                let failure = extract("HeadObject", &e);
                let absent = matches!(failure.http_status, Some(403 | 404))
                    || matches!(
                        failure.code.as_deref(),
                        Some("NoSuchKey" | "NotFound" | "404" | "403")
                    );
                if absent {
                    Ok(false)
                } else {
                    Err(map_sdk_error("HeadObject", &e))
                }
            }
        }
    }

    /// Whether `bucket` exists and belongs to the caller's account
    /// (HeadBucket with the expected owner). 404 is absent; 403 (another
    /// account's bucket, or no permission) is an error.
    ///
    /// # Errors
    /// Any failure but 404, mapped.
    #[cfg(feature = "setup")]
    pub(crate) async fn bucket_exists(&self, bucket: &str) -> Result<bool, SandboxError> {
        let result = self
            .client
            .head_bucket()
            .bucket(bucket)
            .expected_bucket_owner(&self.owner)
            .send()
            .quiet()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => {
                let failure = extract("HeadBucket", &e);
                let absent = failure.http_status == Some(404)
                    || matches!(failure.code.as_deref(), Some("NotFound" | "NoSuchBucket"));
                if absent {
                    Ok(false)
                } else {
                    Err(map_sdk_error("HeadBucket", &e))
                }
            }
        }
    }

    /// Uploads the object.
    ///
    /// # Errors
    /// The upload failed (mapped: a denial is `Authentication`).
    pub(crate) async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
    ) -> Result<(), SandboxError> {
        self.put_checked(bucket, key, body, None).await
    }

    /// Uploads the object with its SHA-256 (`ChecksumSHA256`, base64): S3
    /// refuses a body that arrives different.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    #[cfg(feature = "stacks")]
    pub(crate) async fn put_with_sha256(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        sha256_base64: &str,
    ) -> Result<(), SandboxError> {
        self.put_checked(bucket, key, body, Some(sha256_base64))
            .await
    }

    async fn put_checked(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        sha256_base64: Option<&str>,
    ) -> Result<(), SandboxError> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(key)
            .expected_bucket_owner(&self.owner)
            .content_type("application/zip")
            .set_checksum_sha256(sha256_base64.map(str::to_owned))
            .body(body.into())
            .send()
            .quiet()
            .await
            .map_err(|e| map_sdk_error("PutObject", &e))?;
        Ok(())
    }

    /// The object's bytes, `None` when it does not exist; refused past
    /// `max_bytes` (the peer's length is never trusted to size a buffer).
    ///
    /// # Errors
    /// Any other failure, mapped; an object larger than `max_bytes`.
    pub(crate) async fn get(
        &self,
        bucket: &str,
        key: &str,
        max_bytes: usize,
    ) -> Result<Option<Bytes>, SandboxError> {
        let result = self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .expected_bucket_owner(&self.owner)
            .send()
            .quiet()
            .await;
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                let failure = extract("GetObject", &e);
                if failure.http_status == Some(404)
                    || matches!(failure.code.as_deref(), Some("NoSuchKey" | "NotFound"))
                {
                    return Ok(None);
                }
                return Err(map_sdk_error("GetObject", &e));
            }
        };
        let too_large = || {
            SandboxError::internal(
                "template build",
                "the base image's code artifact is larger than a template build reads",
            )
        };
        if out
            .content_length
            .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > max_bytes))
        {
            return Err(too_large());
        }
        let mut body = out.body;
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|_| {
                SandboxError::internal(
                    "template build",
                    "reading the base image's code artifact was cut",
                )
            })?;
            if bytes.len().saturating_add(chunk.len()) > max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(Bytes::from(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_s3_uri;

    #[test]
    fn only_s3_uris_with_a_bucket_and_a_key_parse() {
        assert_eq!(parse_s3_uri("s3://b/k/x.zip"), Some(("b", "k/x.zip")));
        for bad in ["https://b/k", "s3://b", "s3://b/", "s3:///k", ""] {
            assert_eq!(parse_s3_uri(bad), None, "{bad}");
        }
    }
}
