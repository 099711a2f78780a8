//! Listing and deleting the checkpoints of a prefix (cargo feature `s3`):
//! the SDK's own S3 calls, with the caller's credentials (the client's AWS
//! configuration and its S3 endpoint). The reference SDK has no such API.
//!
//! Failures follow spec C4's rule for the SDK's own S3 calls: credential
//! errors are `Authentication`, a missing bucket or the wrong region
//! `InvalidArgument` (`bucket` / `region`), anything else the control
//! plane's mapping; AWS's error text is never kept.

use std::time::SystemTime;

use crate::aws::s3::objects::Objects;

use super::location::{ARCHIVE_OBJECT, MANIFEST_OBJECT, S3Prefix};
use crate::error::SandboxError;
use crate::error::map::s3::s3_failure;

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

crate::secret::redacted_debug! {
    non_exhaustive CheckpointEntry |o| name_len = o.name.len(), archive_bytes, created_at
}

fn s3_client(client: &crate::Client) -> Result<Objects, SandboxError> {
    let backend = client.backend();
    let Some(config) = &backend.sdk_config else {
        return Err(SandboxError::unimplemented(
            "persistence.list",
            "this client has no AWS configuration to call S3 with",
            Some("docs/persistence.md"),
        ));
    };
    Ok(Objects::new(
        config,
        None,
        backend.s3_endpoint_url.as_deref(),
    ))
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
        let out = s3
            .list_page(&at.bucket, &under, token.take())
            .await
            .map_err(s3_failure)?;
        for object in &out.objects {
            let Some(rest) = object.key.as_deref().and_then(|k| k.strip_prefix(&under)) else {
                continue;
            };
            let Some((name, file)) = rest.split_once('/') else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            if file == MANIFEST_OBJECT {
                manifests.push((name.to_owned(), object.last_modified));
            } else if file == ARCHIVE_OBJECT {
                archives.push((name.to_owned(), object.size));
            }
        }
        match out.next {
            Some(next) => token = Some(next),
            None => break,
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
        s3.delete_object(&location.bucket, &format!("{key_prefix}/{object}"))
            .await
            .map_err(s3_failure)?;
    }
    Ok(())
}
