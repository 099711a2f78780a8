//! Listing and deleting the checkpoints of a prefix (cargo feature `s3`):
//! the SDK's own S3 calls, with the caller's credentials (the client's AWS
//! configuration and its S3 endpoint). The reference SDK has no such API.
//!
//! Failures follow spec C4's rule for the SDK's own S3 calls: credential
//! errors are `Authentication`, a missing bucket or the wrong region
//! `InvalidArgument` (`bucket` / `region`), anything else the control
//! plane's mapping; AWS's error text is never kept.

use crate::quiet::Quiet as _;
use std::time::{Duration, SystemTime};

use aws_sdk_s3 as s3;

use super::location::{ARCHIVE_OBJECT, MANIFEST_OBJECT, S3Prefix};
use crate::error::SandboxError;
use crate::error::map::aws::from_aws;

/// The most listing pages read (1,000 keys each): a prefix with more is
/// refused rather than listed partly.
const MAX_PAGES: u32 = 100;

/// A checkpoint found under a prefix: a name whose `manifest.json` exists
/// (a manifest means a complete archive).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointEntry {
    /// The checkpoint's name (the segment under the prefix).
    pub name: String,
    /// `prefix/name`.
    pub key_prefix: String,
    /// The archive's size, when it was listed.
    pub archive_bytes: Option<u64>,
    /// When the manifest was written (the checkpoint's time).
    pub created_at: Option<SystemTime>,
}

impl std::fmt::Debug for CheckpointEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointEntry")
            .field("name_len", &self.name.len())
            .field("archive_bytes", &self.archive_bytes)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

fn s3_client(client: &crate::Client) -> Result<s3::Client, SandboxError> {
    let backend = client.backend();
    let Some(config) = &backend.sdk_config else {
        return Err(SandboxError::unimplemented(
            "persistence.list",
            "this client has no AWS configuration to call S3 with",
            Some("docs/persistence.md"),
        ));
    };
    let mut builder = s3::config::Builder::from(config);
    if let Some(endpoint) = &backend.s3_endpoint_url {
        builder = builder.endpoint_url(endpoint).force_path_style(true);
    }
    Ok(s3::Client::from_conf(builder.build()))
}

/// Maps the SDK's own S3 failure; AWS's text is dropped first.
pub(crate) fn s3_failure<E>(
    operation: &'static str,
    err: &s3::error::SdkError<E, s3::config::http::HttpResponse>,
) -> SandboxError
where
    E: s3::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let mut failure = crate::control::failure::extract(operation, err);
    failure.message = None;
    match failure.code.as_deref() {
        Some("NoSuchBucket") => SandboxError::invalid_argument(
            "bucket",
            "the bucket does not exist (NoSuchBucket); create it or name another",
        ),
        Some(
            "PermanentRedirect"
            | "AuthorizationHeaderMalformed"
            | "IllegalLocationConstraintException",
        ) => SandboxError::invalid_argument(
            "region",
            "the bucket is in another region; pass its region",
        ),
        _ => from_aws(failure),
    }
}

/// The checkpoints under `location`'s prefix (its name is ignored), by
/// name.
///
/// # Errors
/// `InvalidArgument` (`bucket`, `prefix`, `region`) before any I/O and for
/// a missing bucket or the wrong region; `InvalidArgument` (`prefix`) when
/// the prefix holds more than 100,000 objects; `Authentication` for
/// refused credentials; the control plane's mapping for the rest.
pub async fn list(
    client: &crate::Client,
    location: &S3Prefix,
) -> Result<Vec<CheckpointEntry>, SandboxError> {
    let mut at = location.clone();
    at.name = None;
    at.validate()?;
    let s3 = s3_client(client)?;
    let under = format!("{}/", at.prefix);
    let mut manifests: Vec<(String, Option<SystemTime>)> = Vec::new();
    let mut archives: Vec<(String, Option<u64>)> = Vec::new();
    let mut token: Option<String> = None;
    for page in 0.. {
        if page == MAX_PAGES {
            return Err(SandboxError::invalid_argument(
                "prefix",
                "it holds more than 100,000 objects; list a narrower prefix",
            ));
        }
        // Boxed: the AWS SDK's send futures are large (docs/architecture.md,
        // the 4 KiB budget of a public future).
        let out = Box::pin(
            s3.list_objects_v2()
                .bucket(&at.bucket)
                .prefix(&under)
                .set_continuation_token(token.take())
                .send()
                .quiet(),
        )
        .await
        .map_err(|e| s3_failure("ListObjectsV2", &e))?;
        for object in out.contents() {
            let Some(rest) = object.key().and_then(|k| k.strip_prefix(&under)) else {
                continue;
            };
            let Some((name, file)) = rest.split_once('/') else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            if file == MANIFEST_OBJECT {
                let created = object.last_modified().and_then(|t| {
                    let secs = u64::try_from(t.secs()).ok()?;
                    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
                });
                manifests.push((name.to_owned(), created));
            } else if file == ARCHIVE_OBJECT {
                let size = object.size().and_then(|s| u64::try_from(s).ok());
                archives.push((name.to_owned(), size));
            }
        }
        match out.next_continuation_token() {
            Some(next) if out.is_truncated() == Some(true) => token = Some(next.to_owned()),
            _ => break,
        }
    }
    manifests.sort();
    Ok(manifests
        .into_iter()
        .map(|(name, created_at)| CheckpointEntry {
            key_prefix: format!("{}/{name}", at.prefix),
            archive_bytes: archives
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, s)| *s),
            created_at,
            name,
        })
        .collect())
}

/// Deletes the checkpoint at `location` (its name is required): the
/// manifest first, so a half-deleted checkpoint is never taken for a
/// complete one, then the archive. Deleting a checkpoint that does not
/// exist succeeds.
///
/// # Errors
/// `InvalidArgument` (`name`, `bucket`, `prefix`, `region`) before any I/O;
/// otherwise as [`list`].
pub async fn delete(client: &crate::Client, location: &S3Prefix) -> Result<(), SandboxError> {
    location.validate()?;
    let Some(key_prefix) = location.key_prefix() else {
        return Err(SandboxError::invalid_argument(
            "name",
            "delete needs the checkpoint's name",
        ));
    };
    let s3 = s3_client(client)?;
    for object in [MANIFEST_OBJECT, ARCHIVE_OBJECT] {
        Box::pin(
            s3.delete_object()
                .bucket(&location.bucket)
                .key(format!("{key_prefix}/{object}"))
                .send()
                .quiet(),
        )
        .await
        .map_err(|e| s3_failure("DeleteObject", &e))?;
    }
    Ok(())
}
