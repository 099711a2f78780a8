//! S3 objects with the caller's credentials (feature `s3`): listing and
//! deleting checkpoints ([`crate::persistence`]), and the SDK's side of
//! staged transfers ([`crate::transfer`]): uploads, multipart uploads and
//! reads. Every failure leaves as [`AwsFailure`] facts; the caller maps
//! them. The AWS SDK's send futures are large, so each is boxed
//! (docs/architecture.md, the 4 KiB budget of a public future).

use std::time::{Duration, SystemTime};

use aws_sdk_s3 as s3;
use bytes::Bytes;
use s3::primitives::ByteStream;

use crate::aws::failure::extract;
use crate::error::map::aws::AwsFailure;
use crate::quiet::Quiet as _;

/// An S3 client (cheap to clone).
#[derive(Clone, Debug)]
pub(crate) struct Objects {
    client: s3::Client,
}

/// One object of a listing.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    pub key: Option<String>,
    /// Whole seconds, as S3 gives them.
    pub last_modified: Option<SystemTime>,
    pub size: Option<u64>,
}

/// One ListObjectsV2 page.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListPage {
    pub objects: Vec<Listed>,
    /// The continuation token, when the listing is truncated.
    pub next: Option<String>,
}

/// An object's body as it arrives.
#[derive(Debug)]
pub(crate) struct ObjectBody(ByteStream);

impl ObjectBody {
    /// The next chunk; `Err` when reading was cut (the cause is not kept).
    pub(crate) async fn next(&mut self) -> Option<Result<Bytes, ()>> {
        self.0.next().await.map(|chunk| chunk.map_err(|_| ()))
    }

    /// A body of `bytes` (the tests of the checks above).
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: Bytes) -> Self {
        Self(ByteStream::from(bytes))
    }
}

impl Objects {
    /// The client over `config`, signing for `region` when given;
    /// `endpoint` overrides S3's (path style: the local backend's S3, or
    /// the options').
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        region: Option<&str>,
        endpoint: Option<&str>,
    ) -> Self {
        let mut builder = s3::config::Builder::from(config);
        if let Some(region) = region {
            builder = builder.region(s3::config::Region::new(region.to_owned()));
        }
        if let Some(endpoint) = endpoint {
            builder = builder.endpoint_url(endpoint).force_path_style(true);
        }
        Self {
            client: s3::Client::from_conf(builder.build()),
        }
    }

    /// The client itself, for the presigner over the same configuration.
    pub(super) fn sdk(&self) -> &s3::Client {
        &self.client
    }

    /// One ListObjectsV2 page of `prefix`, from `token`.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        token: Option<String>,
    ) -> Result<ListPage, AwsFailure> {
        let out = Box::pin(
            self.client
                .list_objects_v2()
                .bucket(bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .quiet(),
        )
        .await
        .map_err(|e| extract("ListObjectsV2", &e))?;
        let objects = out
            .contents()
            .iter()
            .map(|object| Listed {
                key: object.key().map(str::to_owned),
                last_modified: object.last_modified().and_then(|t| {
                    let secs = u64::try_from(t.secs()).ok()?;
                    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
                }),
                size: object.size().and_then(|s| u64::try_from(s).ok()),
            })
            .collect();
        let next = match out.next_continuation_token() {
            Some(next) if out.is_truncated() == Some(true) => Some(next.to_owned()),
            _ => None,
        };
        Ok(ListPage { objects, next })
    }

    /// DeleteObject.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), AwsFailure> {
        Box::pin(
            self.client
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .quiet(),
        )
        .await
        .map(|_| ())
        .map_err(|e| extract("DeleteObject", &e))
    }

    /// PutObject of `body`. The payload is not signed (`UNSIGNED-PAYLOAD`):
    /// signing it would hash every byte with sha256 once more, beside the
    /// staged write's own sha256 and the CRC32 S3 checks; TLS and that
    /// CRC32 protect the bytes on the way.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
    ) -> Result<(), AwsFailure> {
        self.put_object_with(bucket, key, body, None).await
    }

    /// [`Objects::put_object`] with one user metadata entry (`name`,
    /// value): S3 answers it as `x-amz-meta-<name>` on every GET.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn put_object_with(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        metadata: Option<(&str, &str)>,
    ) -> Result<(), AwsFailure> {
        let mut put = self.client.put_object();
        if let Some((name, value)) = metadata {
            put = put.metadata(name, value);
        }
        Box::pin(
            put.bucket(bucket)
                .key(key)
                .body(ByteStream::from(body))
                .customize()
                .disable_payload_signing()
                .send()
                .quiet(),
        )
        .await
        .map(|_| ())
        .map_err(|e| extract("PutObject", &e))
    }

    /// GetObject: the body as it arrives.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn get_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<ObjectBody, AwsFailure> {
        Box::pin(
            self.client
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .quiet(),
        )
        .await
        .map(|out| ObjectBody(out.body))
        .map_err(|e| extract("GetObject", &e))
    }

    /// CreateMultipartUpload: the upload id (`None` when S3 gave none).
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn create_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<String>, AwsFailure> {
        Box::pin(
            self.client
                .create_multipart_upload()
                .bucket(bucket)
                .key(key)
                .send()
                .quiet(),
        )
        .await
        .map(|out| out.upload_id().map(str::to_owned))
        .map_err(|e| extract("CreateMultipartUpload", &e))
    }

    /// UploadPart `number` of `body`: the part's ETag. The payload is not
    /// signed, as in [`Objects::put_object`].
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn upload_part(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        number: i32,
        body: Bytes,
    ) -> Result<Option<String>, AwsFailure> {
        Box::pin(
            self.client
                .upload_part()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .body(ByteStream::from(body))
                .customize()
                .disable_payload_signing()
                .send()
                .quiet(),
        )
        .await
        .map(|out| out.e_tag().map(str::to_owned))
        .map_err(|e| extract("UploadPart", &e))
    }

    /// CompleteMultipartUpload with `parts` (number, ETag), in order.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: impl IntoIterator<Item = (i32, Option<String>)>,
    ) -> Result<(), AwsFailure> {
        let completed: Vec<_> = parts
            .into_iter()
            .map(|(n, etag)| {
                s3::types::CompletedPart::builder()
                    .part_number(n)
                    .set_e_tag(etag)
                    .build()
            })
            .collect();
        Box::pin(
            self.client
                .complete_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .multipart_upload(
                    s3::types::CompletedMultipartUpload::builder()
                        .set_parts(Some(completed))
                        .build(),
                )
                .send()
                .quiet(),
        )
        .await
        .map(|_| ())
        .map_err(|e| extract("CompleteMultipartUpload", &e))
    }

    /// AbortMultipartUpload.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn abort_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), AwsFailure> {
        Box::pin(
            self.client
                .abort_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .send()
                .quiet(),
        )
        .await
        .map(|_| ())
        .map_err(|e| extract("AbortMultipartUpload", &e))
    }
}
