//! [`SecretStore`]: create, update, describe, list and destroy secrets in
//! the caller's account (docs/secrets.md). Every argument is checked before
//! any call; no error, `Debug` or event holds a value or a name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::client::{Access, Connected};
use super::errors::{Failure, from_secrets_manager, is_deletion_pending, is_not_found, not_found};
use super::reference::{DEFAULT_PREFIX, check_prefix, secret_id};
use crate::aws::secretsmanager::{Described as AwsDescribed, SecretsManager};
use crate::backoff::{Schedule, note_retry};
use crate::error::{Backoff, SandboxError};
use crate::secret::Secret;

/// The start of every version token the store writes.
pub const VERSION_TOKEN_PREFIX: &str = "rayito-secret-version-";
/// Digits of a version number in a token (zero-padded).
const VERSION_DIGITS: usize = 20;
/// The start of a description that holds metadata.
pub const METADATA_PREFIX: &str = "rayito:v1:";
/// The longest description (Secrets Manager's limit), metadata included.
pub const MAX_DESCRIPTION_CHARS: usize = 2_048;
/// The largest value, in UTF-8 bytes (Secrets Manager's `SecretString`).
pub const MAX_VALUE_BYTES: usize = 65_536;
/// The longest KMS key id, alias or ARN.
const MAX_KMS_KEY_CHARS: usize = 2_048;
/// The longest `next_token` accepted back.
const MAX_NEXT_TOKEN_CHARS: usize = 4_096;
/// Two updates of one secret closer than this get a warning (Secrets
/// Manager allows about one write per secret every ten minutes).
const UPDATE_WARN_WITHIN: Duration = Duration::from_secs(600);
/// Secrets whose last update the store remembers for that warning.
const UPDATES_REMEMBERED: usize = 1_024;
/// CreateSecret while a secret of that name is still being deleted:
/// 0.5 s doubling to 8 s, ±25 %, 60 s in all.
const DELETION_BACKOFF: Backoff = Backoff {
    initial: Duration::from_millis(500),
    max_delay: Duration::from_secs(8),
    multiplier: 2,
    jitter_percent: 25,
    max_attempts: None,
    total_budget: Some(Duration::from_secs(60)),
};

/// How a [`SecretStore`] reaches Secrets Manager and names its secrets.
///
/// `Default`: the environment's region and credentials, prefix `rayito/`,
/// the account's default KMS key (`aws/secretsmanager`).
#[derive(Clone)]
pub struct SecretStoreOptions {
    access: Access,
    prefix: String,
    kms_key_id: Option<String>,
}

impl Default for SecretStoreOptions {
    fn default() -> Self {
        Self {
            access: Access::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            kms_key_id: None,
        }
    }
}

crate::secret::redacted_debug! {
    SecretStoreOptions |o| access, prefix_len = o.prefix.len(), kms_key_id = o.kms_key_id.is_some()
}

impl SecretStoreOptions {
    super::client::access_setters! {
        /// The prefix of names (default `rayito/`; `""` allowed; up to 512 of
        /// `A-Z a-z 0-9 / _ + = . @ -`).
    }

    crate::setters::setters! {
        /// The KMS key (id, alias or ARN) new secrets are encrypted with;
        /// readers then need `kms:Decrypt` on it.
        kms_key_id: Some impl String;
    }

    fn check(&self) -> Result<(), SandboxError> {
        self.access.check()?;
        check_prefix(&self.prefix)?;
        if let Some(key) = &self.kms_key_id
            && !((1..=MAX_KMS_KEY_CHARS).contains(&key.len())
                && key.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(SandboxError::invalid_argument(
                "kms_key_id",
                "a KMS key id is 1 to 2,048 printable ASCII characters (an id, alias/<name> or an ARN)",
            ));
        }
        Ok(())
    }
}

/// What the store knows of one secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecretInfo {
    /// The secret's ARN.
    pub secret_id: String,
    /// Its name, the store's prefix stripped.
    pub name: String,
    /// The rayito version of `AWSCURRENT` (0 for a version the store did
    /// not write).
    pub version: u64,
    /// The metadata kept in its description (empty when none).
    pub metadata: BTreeMap<String, String>,
    /// When it was created, when known.
    pub created_at: Option<SystemTime>,
    /// When it last changed, when known.
    pub updated_at: Option<SystemTime>,
}

// Names are confidential selectors: `Debug` shows lengths and counts.
crate::secret::redacted_debug! {
    SecretInfo |o| secret_id_len = o.secret_id.len(), name_len = o.name.len(), version,
    metadata = o.metadata.len(), created_at, updated_at
}

/// One page of [`SecretStore::list`].
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecretPage {
    /// The secrets of this page (under the store's prefix).
    pub secrets: Vec<SecretInfo>,
    /// Pass it back for the next page; `None` on the last.
    pub next_token: Option<String>,
}

crate::secret::redacted_debug! {
    SecretPage |o| secrets = o.secrets.len(), next_token = o.next_token.is_some()
}

/// Secrets in AWS Secrets Manager, under a name prefix (docs/secrets.md).
///
/// Cheap to clone; clones share one client, made on first use (making a
/// store calls nothing). Values go in and out as [`Secret`]; reading values
/// is the [`super::SecretCache`]'s job.
///
/// Only with the `secrets` cargo feature.
#[derive(Clone)]
pub struct SecretStore {
    inner: Arc<Inner>,
}

struct Inner {
    options: SecretStoreOptions,
    client: OnceCell<Connected>,
}

/// A secret as Secrets Manager limits its writes: region, credentials
/// identity (a hash of the access key id) and `SecretId`.
type UpdateKey = (String, [u8; 32], String);

/// When each secret was last updated in this process, through any store,
/// and whether it was already warned about: the write limit is the
/// secret's, whichever handle writes (E2B's `Secret` class makes a store
/// per call).
fn updates() -> &'static Mutex<HashMap<UpdateKey, (Instant, bool)>> {
    static UPDATES: OnceLock<Mutex<HashMap<UpdateKey, (Instant, bool)>>> = OnceLock::new();
    UPDATES.get_or_init(Mutex::default)
}

crate::secret::redacted_debug! {
    non_exhaustive SecretStore |o| options = o.inner.options
}

impl SecretStore {
    super::client::checked_new! {
        SecretStoreOptions;
        /// A store with `options`. Calls nothing; the options are checked here.
        ///
        /// # Errors
        /// `InvalidArgument` naming `prefix`, `kms_key_id`, `region` or
        /// `endpoint_url`.
    }

    fn unchecked(options: SecretStoreOptions, client: OnceCell<Connected>) -> Self {
        Self {
            inner: Arc::new(Inner { options, client }),
        }
    }

    /// The store's name prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.options.prefix
    }

    async fn client(&self) -> Result<&SecretsManager, SandboxError> {
        Ok(&self.connected().await?.client)
    }

    /// The client with the credentials identity it resolved.
    async fn connected(&self) -> Result<&Connected, SandboxError> {
        self.inner
            .client
            .get_or_try_init(|| self.inner.options.access.client())
            .await
    }

    /// Creates the secret `name` (under the prefix; not an ARN) with
    /// version 1 of `value` and `metadata` (kept in its description).
    /// While a secret of that name is still being deleted, CreateSecret is
    /// retried with the same token: 0.5 s doubling to 8 s, ±25 %, for 60 s.
    ///
    /// # Errors
    /// `InvalidArgument` naming `name`, `value` or `metadata`, before any
    /// call; `Secret` when it exists (`ResourceExistsException`), when
    /// the deletion did not end within 60 s, or AWS refuses (the IAM action
    /// and the AWS code); `RateLimit` when throttled.
    pub async fn create(
        &self,
        name: &str,
        value: impl Into<Secret>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<SecretInfo, SandboxError> {
        let value = value.into();
        if name.starts_with("arn:") {
            return Err(SandboxError::invalid_argument(
                "name",
                "create takes a name under the store's prefix, not an ARN",
            ));
        }
        let id = secret_id(self.prefix(), name, "name")?;
        check_value(&value)?;
        let description = description(metadata)?;
        let client = self.client().await?;
        let token = version_token(1);
        let mut schedule = Schedule::new(&DELETION_BACKOFF);
        let started = Instant::now();
        let mut attempt: u32 = 0;
        let out = loop {
            attempt = attempt.saturating_add(1);
            let created = client
                .create_secret(
                    &id,
                    &value,
                    &token,
                    &description,
                    self.inner.options.kms_key_id.as_deref(),
                )
                .await;
            match created {
                Ok(arn) => break arn,
                Err(failure) => {
                    if !is_deletion_pending(&failure) {
                        let err = from_secrets_manager(failure, None);
                        super::event("CreateSecret", false);
                        return Err(err);
                    }
                    let Some(delay) = schedule.next(None) else {
                        super::event("CreateSecret", false);
                        return Err(super::errors::deletion_pending(started.elapsed())
                            .with_attempts(attempt));
                    };
                    note_retry(
                        "CreateSecret",
                        &super::errors::deletion_pending(started.elapsed()),
                        attempt,
                        delay,
                        started,
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        };
        super::event("CreateSecret", true);
        let now = SystemTime::now();
        Ok(SecretInfo {
            secret_id: out.unwrap_or_default(),
            name: name.to_owned(),
            version: 1,
            metadata: metadata.clone(),
            created_at: Some(now),
            updated_at: Some(now),
        })
    }

    /// Writes a new version of `name`'s value (one past the highest rayito
    /// version; it becomes `AWSCURRENT`), and replaces the metadata when
    /// `metadata` is given. Two updates of one secret within 600 s log a
    /// warning once (Secrets Manager allows about one write per 10 min).
    ///
    /// # Errors
    /// `InvalidArgument` naming `name`, `value` or `metadata`, before any
    /// call; `SecretNotFound`; `Secret` on a version conflict (another
    /// writer took the version: `ResourceExistsException`) or when AWS
    /// refuses; `RateLimit` when throttled.
    pub async fn update(
        &self,
        name: &str,
        value: impl Into<Secret>,
        metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<SecretInfo, SandboxError> {
        let value = value.into();
        let id = secret_id(self.prefix(), name, "name")?;
        check_value(&value)?;
        let description = metadata.map(description).transpose()?;
        let connected = self.connected().await?;
        Self::note_update(connected, &id);
        let client = &connected.client;
        let mut info = self.describe(client, &id).await?;
        let next = info.version_after.checked_add(1).ok_or_else(|| {
            SandboxError::internal("secrets", "the secret's version number is at its maximum")
        })?;
        let put = client
            .put_secret_value(&id, &value, version_token(next))
            .await;
        super::event("PutSecretValue", put.is_ok());
        put.map_err(|failure| from_secrets_manager(failure, None))?;
        if let Some(description) = description {
            let updated = client.update_description(&id, description).await;
            super::event("UpdateSecret", updated.is_ok());
            updated.map_err(|failure| from_secrets_manager(failure, None))?;
            if let Some(metadata) = metadata {
                info.info.metadata = metadata.clone();
            }
        }
        info.info.version = next;
        info.info.updated_at = Some(SystemTime::now());
        Ok(info.info)
    }

    /// What the store knows of `name` (a name under the prefix, or an ARN).
    ///
    /// # Errors
    /// `InvalidArgument` (`name`) before any call; `SecretNotFound` (also
    /// for a secret scheduled for deletion); `Secret` when AWS refuses.
    pub async fn get_info(&self, name: &str) -> Result<SecretInfo, SandboxError> {
        let id = secret_id(self.prefix(), name, "name")?;
        let client = self.client().await?;
        Ok(self.describe(client, &id).await?.info)
    }

    /// Whether `name` exists (and is not scheduled for deletion).
    ///
    /// # Errors
    /// As [`SecretStore::get_info`], except that not found is `false`.
    pub async fn exists(&self, name: &str) -> Result<bool, SandboxError> {
        match self.get_info(name).await {
            Ok(_) => Ok(true),
            Err(err) if super::errors::is_secret_not_found(&err) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// One page of at most `limit` (1 to 100) secrets under the prefix,
    /// secrets scheduled for deletion left out. ListSecrets is eventually
    /// consistent: a secret created a few seconds ago may be missing.
    ///
    /// # Errors
    /// `InvalidArgument` naming `limit` or `next_token` before any call;
    /// `Secret` when AWS refuses; `RateLimit` when throttled.
    pub async fn list(
        &self,
        limit: u32,
        next_token: Option<&str>,
    ) -> Result<SecretPage, SandboxError> {
        if !(1..=100).contains(&limit) {
            return Err(SandboxError::invalid_argument(
                "limit",
                "a page holds 1 to 100 secrets; pass a limit in that range",
            ));
        }
        if let Some(token) = next_token
            && !((1..=MAX_NEXT_TOKEN_CHARS).contains(&token.len())
                && token.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(SandboxError::invalid_argument(
                "next_token",
                "a next_token is 1 to 4,096 printable ASCII characters; pass the one a page returned",
            ));
        }
        let client = self.client().await?;
        let prefix = self.prefix();
        let out = client
            .list_secrets(
                i32::try_from(limit).unwrap_or(100),
                next_token,
                (!prefix.is_empty()).then_some(prefix),
            )
            .await;
        super::event("ListSecrets", out.is_ok());
        let out = out.map_err(|failure| from_secrets_manager(failure, None))?;
        let secrets = out
            .secrets
            .iter()
            .filter(|entry| !entry.deleted)
            .filter_map(|entry| {
                // The name filter matches words anywhere in the name; only
                // names that start with the prefix are the store's.
                let name = entry.name.as_deref()?.strip_prefix(prefix)?;
                Some(SecretInfo {
                    secret_id: entry.arn.clone().unwrap_or_default(),
                    name: name.to_owned(),
                    version: current_version(entry.versions.as_ref()),
                    metadata: parse_metadata(entry.description.as_deref()),
                    created_at: entry.created,
                    updated_at: entry.last_changed,
                })
            })
            .collect();
        Ok(SecretPage {
            secrets,
            next_token: out.next_token,
        })
    }

    /// Deletes `name` at once, without a recovery window. `false` (and no
    /// DeleteSecret) when it does not exist.
    ///
    /// # Errors
    /// `InvalidArgument` (`name`) before any call; `Secret` when AWS
    /// refuses; `RateLimit` when throttled.
    pub async fn destroy(&self, name: &str) -> Result<bool, SandboxError> {
        let id = secret_id(self.prefix(), name, "name")?;
        let client = self.client().await?;
        match self.describe(client, &id).await {
            Ok(_) => {}
            Err(err) if super::errors::is_secret_not_found(&err) => return Ok(false),
            Err(err) => return Err(err),
        }
        let out = client.delete_now(&id).await;
        super::event("DeleteSecret", out.is_ok());
        match out {
            Ok(()) => Ok(true),
            Err(failure) => {
                if is_not_found(&failure) {
                    // Deleted by someone else in between.
                    Ok(false)
                } else {
                    Err(Failure::Aws(failure).into_error(None))
                }
            }
        }
    }

    /// DescribeSecret: the info and the highest rayito version of any
    /// stage. A deletion date means not found.
    async fn describe(&self, client: &SecretsManager, id: &str) -> Result<Described, SandboxError> {
        let out = client.describe_secret(id).await;
        super::event("DescribeSecret", out.is_ok());
        let out: AwsDescribed = out.map_err(|failure| from_secrets_manager(failure, None))?;
        if out.deleted {
            return Err(not_found("DescribeSecret"));
        }
        let stages = out.versions.as_ref();
        let version_after = stages
            .map(|stages| stages.keys().map(|id| parse_version(id)).max().unwrap_or(0))
            .unwrap_or(0);
        let full = out.name.as_deref().unwrap_or_default();
        let name = full.strip_prefix(self.prefix()).unwrap_or(full).to_owned();
        Ok(Described {
            info: SecretInfo {
                secret_id: out.arn.clone().unwrap_or_default(),
                name,
                version: current_version(stages),
                metadata: parse_metadata(out.description.as_deref()),
                created_at: out.created,
                updated_at: out.last_changed,
            },
            version_after,
        })
    }

    /// Remembers an update of `id` through `connected`; warns (once per
    /// secret) when the last one in this process was less than 600 s ago.
    fn note_update(connected: &Connected, id: &str) {
        let now = Instant::now();
        let region = connected.region.clone();
        let key = (region, connected.identity, id.to_owned());
        let mut updates = updates()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let warn = match updates.get_mut(&key) {
            Some((last, warned)) => {
                let soon = now.duration_since(*last) < UPDATE_WARN_WITHIN;
                *last = now;
                let warn = soon && !*warned;
                *warned |= warn;
                warn
            }
            None => {
                if updates.len() >= UPDATES_REMEMBERED
                    && let Some(oldest) = updates
                        .iter()
                        .min_by_key(|(_, (last, _))| *last)
                        .map(|(key, _)| key.clone())
                {
                    updates.remove(&oldest);
                }
                updates.insert(key, (now, false));
                false
            }
        };
        if warn {
            tracing::warn!(
                target: "rayito::secrets",
                "a secret was updated twice within 600 s: Secrets Manager allows about one write per secret every 10 minutes, later writes may fail with LimitExceededException"
            );
        }
    }
}

/// DescribeSecret's answer, with the version an update builds on.
struct Described {
    info: SecretInfo,
    /// The highest rayito version among all versions.
    version_after: u64,
}

/// `rayito-secret-version-` + 20 zero-padded digits (42 characters).
pub(crate) fn version_token(version: u64) -> String {
    format!("{VERSION_TOKEN_PREFIX}{version:0VERSION_DIGITS$}")
}

/// The version of a token the store wrote; 0 for any other VersionId.
pub(crate) fn parse_version(token: &str) -> u64 {
    token
        .strip_prefix(VERSION_TOKEN_PREFIX)
        .filter(|digits| {
            digits.len() == VERSION_DIGITS && digits.bytes().all(|b| b.is_ascii_digit())
        })
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0)
}

/// The rayito version of the version staged `AWSCURRENT`.
fn current_version(stages: Option<&HashMap<String, Vec<String>>>) -> u64 {
    stages
        .and_then(|stages| {
            stages.iter().find(|(_, labels)| {
                labels
                    .iter()
                    .any(|label| label == super::reference::AWSCURRENT)
            })
        })
        .map_or(0, |(id, _)| parse_version(id))
}

/// A value: non-empty, at most 65,536 UTF-8 bytes.
fn check_value(value: &Secret) -> Result<(), SandboxError> {
    let len = value.expose().len();
    if len == 0 {
        return Err(SandboxError::invalid_argument(
            "value",
            "a secret value is empty; pass 1 to 65,536 bytes of UTF-8",
        ));
    }
    if len > MAX_VALUE_BYTES {
        return Err(SandboxError::invalid_argument(
            "value",
            "a secret value is larger than 65,536 bytes of UTF-8; pass a smaller value",
        ));
    }
    Ok(())
}

/// The description that holds `metadata`: `rayito:v1:` + compact JSON,
/// keys sorted, at most 2,048 characters.
pub(crate) fn description(metadata: &BTreeMap<String, String>) -> Result<String, SandboxError> {
    let json = serde_json::to_string(metadata)
        .map_err(|_| SandboxError::internal("secrets", "metadata as JSON"))?;
    let description = format!("{METADATA_PREFIX}{json}");
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(SandboxError::invalid_argument(
            "metadata",
            "metadata takes at most 2,048 characters as rayito:v1: and compact JSON; pass less",
        ));
    }
    Ok(description)
}

/// The metadata of a description; empty for one the store did not write
/// (or that is not a JSON object of strings).
pub(crate) fn parse_metadata(description: Option<&str>) -> BTreeMap<String, String> {
    description
        .and_then(|text| text.strip_prefix(METADATA_PREFIX))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tokens_are_42_chars_and_foreign_ids_read_as_0() {
        let token = version_token(2);
        assert_eq!(token, "rayito-secret-version-00000000000000000002");
        assert_eq!(token.len(), 42);
        assert_eq!(parse_version(&token), 2);
        assert_eq!(parse_version(&version_token(u64::MAX)), u64::MAX);
        assert_eq!(parse_version("a1b2c3d4-5678-90ab-cdef-EXAMPLE11111"), 0);
        assert_eq!(parse_version("rayito-secret-version-2"), 0);
        assert_eq!(
            parse_version("rayito-secret-version-99999999999999999999"),
            0
        );
    }

    #[test]
    fn metadata_is_compact_key_sorted_json_and_bounded() {
        let metadata: BTreeMap<String, String> = [
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "1".to_owned()),
        ]
        .into();
        let text = description(&metadata).unwrap();
        assert_eq!(text, r#"rayito:v1:{"a":"1","b":"2"}"#);
        assert_eq!(parse_metadata(Some(&text)), metadata);
        assert!(parse_metadata(Some("a description of someone else")).is_empty());
        assert!(parse_metadata(None).is_empty());
        // 2,048 characters in all is the limit: prefix (10) + {"k":"…"} (8).
        let fits: BTreeMap<String, String> = [("k".to_owned(), "é".repeat(2_030))].into();
        assert_eq!(description(&fits).unwrap().chars().count(), 2_048);
        let over: BTreeMap<String, String> = [("k".to_owned(), "é".repeat(2_031))].into();
        let err = description(&over).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid metadata: metadata takes at most 2,048 characters as rayito:v1: and compact JSON; pass less"
        );
    }

    #[test]
    fn values_are_non_empty_and_bounded() {
        assert!(check_value(&Secret::new("x".repeat(MAX_VALUE_BYTES))).is_ok());
        let empty = check_value(&Secret::new("")).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "invalid value: a secret value is empty; pass 1 to 65,536 bytes of UTF-8"
        );
        let big = check_value(&Secret::new("x".repeat(MAX_VALUE_BYTES + 1))).unwrap_err();
        assert_eq!(
            big.to_string(),
            "invalid value: a secret value is larger than 65,536 bytes of UTF-8; pass a smaller value"
        );
    }
}
