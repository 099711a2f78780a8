//! The S3 operations the emulator serves, over s3s-fs, with what S3 does
//! and s3s-fs does not:
//!
//! - `x-amz-expected-bucket-owner` naming another account than the
//!   emulator's: 403 AccessDenied, before anything is read or written;
//! - a key the file system cannot hold (an empty, `.` or `..` segment,
//!   e.g. a trailing `/`):
//!   PutObject 400 InvalidArgument, HeadObject/GetObject 404 NoSuchKey,
//!   DeleteObject 204 (nothing is there);
//! - a "directory" (the common prefix of other keys) is no object: 404;
//! - PutObject into a missing bucket: 404 NoSuchBucket (s3s-fs would
//!   create the bucket);
//! - CreateBucket on an existing bucket: 409 BucketAlreadyOwnedByYou (every
//!   bucket is the emulator's account's);
//! - DeleteObject removes the object's sidecar files too;
//! - S3's messages on NoSuchKey, NoSuchBucket and AccessDenied.
//!
//! - an upload id that names no upload of this bucket and key (malformed,
//!   unknown, completed, aborted, or another key's): 404 NoSuchUpload
//!   (s3s-fs answers 400 or 403 and does not tie an upload to its key);
//! - CompleteMultipartUpload into a missing bucket or onto a key no file
//!   can hold is refused at CreateMultipartUpload already, and it drops the
//!   old object's sidecars first (s3s-fs would keep its checksums beside
//!   the new bytes).
//!
//! - every part CompleteMultipartUpload names must carry the ETag its
//!   UploadPart answered: 400 InvalidPart otherwise (s3s-fs neither checks
//!   nor lists part ETags); ListParts shows them.
//!
//! - an object's bytes and metadata change together for a reader
//!   ([`super::commit`]).
//!
//! Operations: CreateBucket, HeadBucket, ListObjectsV2, HeadObject,
//! GetObject, PutObject, DeleteObject, and multipart uploads
//! (CreateMultipartUpload, UploadPart, ListParts, CompleteMultipartUpload,
//! AbortMultipartUpload; parts numbered 1, 2, ... without gaps, each but
//! the last at least 5 MiB). Any other answers 501 NotImplemented.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, CreateBucketInput, CreateBucketOutput,
    CreateMultipartUploadInput, CreateMultipartUploadOutput, DeleteObjectInput, DeleteObjectOutput,
    GetObjectInput, GetObjectOutput, HeadBucketInput, HeadBucketOutput, HeadObjectInput,
    HeadObjectOutput, ListObjectsV2Input, ListObjectsV2Output, ListPartsInput, ListPartsOutput,
    PutObjectInput, PutObjectOutput, UploadPartInput, UploadPartOutput,
};
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use std::collections::{BTreeMap, HashMap};

use super::commit::{self, KeyLocks};
use crate::objects::{ObjectStore, storable_key};

/// The ETags of the parts of open multipart uploads: upload id -> part
/// number -> ETag (without quotes). An entry goes at complete or abort.
type PartEtags = std::sync::Mutex<HashMap<String, BTreeMap<i32, String>>>;

/// The emulator's buckets: s3s-fs over the object store's root.
pub(super) struct Buckets {
    fs: s3s_fs::FileSystem,
    objects: ObjectStore,
    account_id: String,
    part_etags: PartEtags,
    commits: KeyLocks,
}

impl Buckets {
    pub(super) fn new(fs: s3s_fs::FileSystem, objects: ObjectStore, account_id: String) -> Self {
        Self {
            fs,
            objects,
            account_id,
            part_etags: PartEtags::default(),
            commits: KeyLocks::default(),
        }
    }

    /// S3 refuses a request whose expected bucket owner is another
    /// account, whether or not the bucket exists.
    fn check_owner(&self, expected: Option<&str>) -> S3Result<()> {
        match expected {
            Some(owner) if owner != self.account_id => {
                Err(s3_message(S3Error::new(S3ErrorCode::AccessDenied)))
            }
            _ => Ok(()),
        }
    }

    /// Refuses, as S3 does, a missing bucket (NoSuchBucket) or a key that
    /// names no stored object (NoSuchKey): absent, a directory (a prefix of
    /// other keys) or a key no file can hold. s3s-fs tells neither apart
    /// on GetObject and serves a directory as an object.
    async fn check_object(&self, bucket: &str, key: &str) -> S3Result<()> {
        self.check_bucket(bucket).await?;
        let path = self.objects.root().join(bucket).join(key);
        let is_file = tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_file());
        if !storable_key(key) || !is_file {
            return Err(no_such_key());
        }
        Ok(())
    }

    /// Refuses a missing bucket (NoSuchBucket): s3s-fs's PutObject would
    /// create its directory.
    async fn check_bucket(&self, bucket: &str) -> S3Result<()> {
        let dir = self.objects.root().join(bucket);
        if tokio::fs::metadata(&dir).await.is_ok_and(|m| m.is_dir()) {
            Ok(())
        } else {
            Err(s3_message(S3Error::new(S3ErrorCode::NoSuchBucket)))
        }
    }
}

impl Buckets {
    /// Refuses (404 NoSuchUpload) an upload id that is not a live upload
    /// of `bucket`/`key`. s3s-fs keeps, while an upload is open, the file
    /// `.bucket-<b64 bucket>.object-<b64 key>.upload-<id>.metadata.json`
    /// at the root: its presence ties the id to this key. The id must be
    /// the lowercase hyphenated UUID s3s-fs hands out, so that no other
    /// spelling of it reaches a file name.
    async fn check_upload(&self, bucket: &str, key: &str, upload_id: &str) -> S3Result<()> {
        let canonical = upload_id.len() == 36
            && upload_id.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
            });
        if !canonical {
            return Err(no_such_upload());
        }
        let marker = self.objects.root().join(format!(
            ".bucket-{}.object-{}.upload-{upload_id}.metadata.json",
            URL_SAFE_NO_PAD.encode(bucket),
            URL_SAFE_NO_PAD.encode(key)
        ));
        if tokio::fs::metadata(&marker)
            .await
            .is_ok_and(|m| m.is_file())
        {
            Ok(())
        } else {
            Err(no_such_upload())
        }
    }
}

impl Buckets {
    fn lock_etags(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<i32, String>>> {
        // A panic while holding it left only a map of strings behind.
        self.part_etags
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Refuses (400 InvalidPart) a completion naming a part without the
    /// ETag its upload answered, as S3 does.
    fn check_part_etags(&self, input: &CompleteMultipartUploadInput) -> S3Result<()> {
        let etags = self.lock_etags();
        let known = etags.get(&input.upload_id);
        let parts = input
            .multipart_upload
            .as_ref()
            .and_then(|m| m.parts.as_deref())
            .unwrap_or_default();
        for part in parts {
            let recorded = part.part_number.and_then(|n| known.and_then(|k| k.get(&n)));
            let given = part.e_tag.as_ref().map(|e| e.value());
            if recorded.is_none() || recorded.map(String::as_str) != given {
                return Err(invalid_part());
            }
        }
        Ok(())
    }
}

/// The body of a GET (whole, or the one range s3s-fs resolved), read 1 MiB
/// at a time: s3s-fs reads 4 KiB at a time (about 100-150 MiB/s on
/// loopback, which made every staged transfer and every read through an
/// S3 mount on the local backend slow). `content_range` is what s3s-fs
/// answered (`None`: the whole object); the body is capped at the length
/// it measured. `None` (keep s3s-fs's body) when the file is not that long
/// any more (replaced meanwhile) or the range is not one this reads.
async fn fast_object_body(
    path: &std::path::Path,
    len: i64,
    content_range: Option<&str>,
) -> Option<s3s::dto::StreamingBlob> {
    use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
    let len = u64::try_from(len).ok()?;
    let (start, file_len) = match content_range {
        None => (0, len),
        Some(range) => {
            let (start, end, total) = parse_content_range(range)?;
            (end.checked_sub(start)?.checked_add(1) == Some(len)).then_some(())?;
            (start, total)
        }
    };
    let mut file = tokio::fs::File::open(path).await.ok()?;
    if file.metadata().await.ok()?.len() != file_len {
        return None;
    }
    file.seek(std::io::SeekFrom::Start(start)).await.ok()?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file.take(len), 1 << 20);
    Some(s3s::dto::StreamingBlob::wrap(stream))
}

/// `bytes <start>-<end>/<total>` (the form a resolved range answers).
fn parse_content_range(range: &str) -> Option<(u64, u64, u64)> {
    let (span, total) = range.strip_prefix("bytes ")?.split_once('/')?;
    let (start, end) = span.split_once('-')?;
    let (start, end, total) = (start.parse().ok()?, end.parse().ok()?, total.parse().ok()?);
    (start <= end && end < total).then_some((start, end, total))
}

/// 400 InvalidPart with S3's message.
fn invalid_part() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidPart,
        "One or more of the specified parts could not be found.  The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
    )
}

/// 404 NoSuchUpload with S3's message.
fn no_such_upload() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
    )
}

/// The refusal of a key no file can hold, at PutObject and
/// CreateMultipartUpload.
fn unstorable_key() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidArgument,
        "the emulator stores objects as files: a key with an empty, \".\" or \"..\" segment cannot be stored; use another key",
    )
}

/// S3's message for the codes an operation here answers with when s3s-fs
/// gave none.
fn s3_message(mut err: S3Error) -> S3Error {
    if err.message().is_none() {
        let message = match err.code() {
            S3ErrorCode::NoSuchKey => Some("The specified key does not exist."),
            S3ErrorCode::NoSuchBucket => Some("The specified bucket does not exist"),
            S3ErrorCode::AccessDenied => Some("Access Denied"),
            _ => None,
        };
        if let Some(message) = message {
            err.set_message(message);
        }
    }
    err
}

fn no_such_key() -> S3Error {
    s3_message(S3Error::new(S3ErrorCode::NoSuchKey))
}

#[async_trait::async_trait]
impl S3 for Buckets {
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.fs.create_bucket(req).await.map_err(|err| {
            if *err.code() == S3ErrorCode::BucketAlreadyExists {
                S3Error::with_message(
                    S3ErrorCode::BucketAlreadyOwnedByYou,
                    "Your previous request to create the named bucket succeeded and you already own it.",
                )
            } else {
                s3_message(err)
            }
        })
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        self.fs.head_bucket(req).await.map_err(s3_message)
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        self.fs.list_objects_v2(req).await.map_err(s3_message)
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        let _reading = self.commits.read(&req.input.bucket, &req.input.key).await;
        self.check_object(&req.input.bucket, &req.input.key).await?;
        self.fs.head_object(req).await.map_err(s3_message)
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        // Held while the file is opened and its metadata read (the body
        // then reads the opened file); at most commit::READ_WAIT.
        let _reading = self.commits.read(&req.input.bucket, &req.input.key).await;
        self.check_object(&req.input.bucket, &req.input.key).await?;
        let input = &req.input;
        // A part number's bytes are not one span of the file this knows.
        let plain = input.part_number.is_none();
        let path = plain.then(|| self.objects.root().join(&input.bucket).join(&input.key));
        let mut out = self.fs.get_object(req).await.map_err(s3_message)?;
        if let (Some(path), Some(len)) = (path, out.output.content_length)
            && let Some(body) =
                fast_object_body(&path, len, out.output.content_range.as_deref()).await
        {
            out.output.body = Some(body);
        }
        Ok(out)
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        if !storable_key(&req.input.key) {
            return Err(unstorable_key());
        }
        self.check_bucket(&req.input.bucket).await?;
        let mut req = req;
        let slot = commit::CommitSlot::default();
        if let Some(body) = req.input.body.take() {
            req.input.body = Some(self.commits.commit_on_end(
                &req.input.bucket,
                &req.input.key,
                body,
                slot.clone(),
            ));
        }
        let out = self.fs.put_object(req).await.map_err(s3_message);
        commit::release(&slot);
        out
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        if !storable_key(&req.input.key) {
            return Ok(S3Response::new(DeleteObjectOutput::default()));
        }
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let _writing = self.commits.write(&bucket, &key).await;
        let out = self.fs.delete_object(req).await.map_err(s3_message)?;
        // s3s-fs leaves them behind; a later object of the same key gets
        // its own.
        let _ = self.objects.remove_sidecars(&bucket, &key).await;
        Ok(out)
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        if !storable_key(&req.input.key) {
            return Err(unstorable_key());
        }
        self.check_bucket(&req.input.bucket).await?;
        self.fs
            .create_multipart_upload(req)
            .await
            .map_err(s3_message)
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        let input = &req.input;
        self.check_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        if !(1..=10_000).contains(&input.part_number) {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "Part number must be an integer between 1 and 10000, inclusive",
            ));
        }
        let (upload_id, number) = (input.upload_id.clone(), input.part_number);
        let out = self.fs.upload_part(req).await.map_err(s3_message)?;
        if let Some(etag) = &out.output.e_tag {
            self.lock_etags()
                .entry(upload_id)
                .or_default()
                .insert(number, etag.value().to_owned());
        }
        Ok(out)
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        let input = &req.input;
        self.check_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let req_upload_id = input.upload_id.clone();
        let mut out = self.fs.list_parts(req).await.map_err(s3_message)?;
        // s3s-fs lists them in directory order.
        if let Some(parts) = out.output.parts.as_mut() {
            parts.sort_by_key(|p| p.part_number);
            let etags = self.lock_etags();
            let known = etags.get(&req_upload_id);
            for part in parts.iter_mut() {
                let etag = part.part_number.and_then(|n| known.and_then(|k| k.get(&n)));
                if let Some(etag) = etag {
                    part.e_tag = Some(s3s::dto::ETag::Strong(etag.clone()));
                }
            }
        }
        Ok(out)
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        self.check_upload(&bucket, &key, &req.input.upload_id)
            .await?;
        self.check_bucket(&bucket).await?;
        self.check_part_etags(&req.input)?;
        let _writing = self.commits.write(&bucket, &key).await;
        // The old object's ETag and checksums are not the new bytes'.
        self.objects
            .remove_sidecars(&bucket, &key)
            .await
            .map_err(|_| S3Error::new(S3ErrorCode::InternalError))?;
        let upload_id = req.input.upload_id.clone();
        let out = self
            .fs
            .complete_multipart_upload(req)
            .await
            .map_err(s3_message)?;
        self.lock_etags().remove(&upload_id);
        Ok(out)
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.check_owner(req.input.expected_bucket_owner.as_deref())?;
        let input = &req.input;
        self.check_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        let upload_id = input.upload_id.clone();
        let out = self
            .fs
            .abort_multipart_upload(req)
            .await
            .map_err(s3_message)?;
        self.lock_etags().remove(&upload_id);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_resolved_range_is_read_back_and_anything_else_is_not() {
        use super::parse_content_range as p;
        assert_eq!(p("bytes 0-1023/4096"), Some((0, 1023, 4096)));
        assert_eq!(p("bytes 4095-4095/4096"), Some((4095, 4095, 4096)));
        for bad in [
            "bytes 5-4/10",
            "bytes 0-10/10",
            "bytes */10",
            "bytes 0-1",
            "0-1/2",
            "bytes -1-2/3",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }
}
