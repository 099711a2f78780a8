//! E2B's `Secret` class over AWS Secrets Manager (`rayito::secrets::
//! SecretStore`, this crate's `secrets` feature).
//!
//! The signatures are the same in every build: without the feature each
//! call is `Unimplemented { feature: "secret" }` saying how to enable it,
//! before any call. Values go in as [`SecretValue`] and never come out;
//! [`SecretInfo`]'s `Debug` shows lengths, not names (the SDK treats a
//! secret's name as a confidential selector).

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use rayito::{SandboxError, Secret as SecretValue};

use crate::unimplemented::Missing;

/// E2B's `Secret` class: create, update, describe, list and destroy
/// secrets (values are write-only, as in E2B).
///
/// A name is relative to the store's prefix (`rayito/` unless
/// [`SecretOpts`] says otherwise); `get_info`, `update`, `exists` and
/// `destroy` also take a full ARN, as E2B takes a secret's id.
#[derive(Debug, Clone, Copy, Default)]
pub struct Secret;

/// What E2B's `SecretInfo` says of one secret. Never its value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretInfo {
    /// `secret_id`: the secret's ARN.
    pub secret_id: String,
    /// `name`: its name, the store's prefix stripped.
    pub name: String,
    /// `version`: the version readers get (1 for a new secret; 0 for a
    /// version written outside rayito).
    pub version: u64,
    /// `metadata`: the caller's metadata (empty when none).
    pub metadata: BTreeMap<String, String>,
    /// `created_at`, when known.
    pub created_at: Option<SystemTime>,
    /// `updated_at`, when known.
    pub updated_at: Option<SystemTime>,
}

/// Names are confidential selectors: `Debug` shows lengths and counts.
impl fmt::Debug for SecretInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretInfo")
            .field("secret_id_len", &self.secret_id.len())
            .field("name_len", &self.name.len())
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// E2B's `**opts` of the `Secret` calls. E2B's `ApiParams` (`api_key`,
/// `domain`, ...) address E2B's API, which does not exist here; the store
/// is reached with the AWS session of the environment.
#[derive(Debug, Clone, Default)]
pub struct SecretOpts {
    /// rayito only: how the store reaches Secrets Manager and its name
    /// prefix. Default: the environment's region and credentials
    /// (`AWS_ENDPOINT_URL_SECRETS_MANAGER` included), prefix `rayito/`,
    /// the same secrets `rayito secret` and `SandboxBuilder::secret` see.
    #[cfg(feature = "secrets")]
    pub store: rayito::secrets::SecretStoreOptions,
}

/// E2B's `SecretPaginator`: pages of [`SecretInfo`], read with
/// [`SecretPaginator::next_items`] while [`SecretPaginator::has_next`].
/// `Debug` says whether a next token is held, never the token.
pub struct SecretPaginator {
    #[cfg(feature = "secrets")]
    store: rayito::secrets::SecretStore,
    #[cfg(feature = "secrets")]
    limit: u32,
    #[cfg(feature = "secrets")]
    next_token: Option<String>,
    #[cfg(feature = "secrets")]
    has_next: bool,
    /// Without the feature no paginator can be made.
    #[cfg(not(feature = "secrets"))]
    never: std::convert::Infallible,
}

#[cfg(feature = "secrets")]
impl fmt::Debug for SecretPaginator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretPaginator")
            .field("store", &self.store)
            .field("limit", &self.limit)
            .field("next_token", &self.next_token.is_some())
            .field("has_next", &self.has_next)
            .finish()
    }
}

#[cfg(not(feature = "secrets"))]
impl fmt::Debug for SecretPaginator {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.never {}
    }
}

impl Secret {
    /// `Secret.fill(secret)`: E2B's `${e2b.secrets.<name>}` placeholder,
    /// which E2B's runtime resolves. Nothing resolves it here, so no
    /// placeholder is made.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret.fill" }`, naming
    /// `CommandOpts::secret` and `RunCodeOpts::secret` as the way to give a
    /// process a secret.
    pub fn fill(_secret: &str) -> Result<String, SandboxError> {
        Err(Missing::SecretFill.error())
    }

    /// `Secret.iam_token(audience=, token_type=)`: there are no audience
    /// tokens.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "iam" }`, with no call made.
    #[allow(clippy::unused_async)]
    pub async fn iam_token(
        _audience: impl Send,
        _token_type: impl Send,
    ) -> Result<std::convert::Infallible, SandboxError> {
        Err(Missing::Iam.error())
    }
}

#[cfg(feature = "secrets")]
mod store {
    use super::{BTreeMap, Secret, SecretInfo, SecretOpts, SecretPaginator, SecretValue};
    use rayito::SandboxError;
    use rayito::secrets::SecretStore;

    /// Secrets per page when E2B's `limit` is not given (the store's
    /// largest page: fewest calls).
    pub(super) const DEFAULT_LIMIT: u32 = 100;

    impl From<rayito::secrets::SecretInfo> for SecretInfo {
        fn from(info: rayito::secrets::SecretInfo) -> Self {
            Self {
                secret_id: info.secret_id,
                name: info.name,
                version: info.version,
                metadata: info.metadata,
                created_at: info.created_at,
                updated_at: info.updated_at,
            }
        }
    }

    fn store(opts: SecretOpts) -> Result<SecretStore, SandboxError> {
        SecretStore::new(opts.store)
    }

    impl Secret {
        /// `Secret.create(name, value, metadata)`: version 1 of a new
        /// secret `name` (under the prefix; not an ARN).
        ///
        /// # Errors
        /// `InvalidArgumentException` naming `name`, `value` or `metadata`
        /// before any call; a `SecretException` when it exists or AWS
        /// refuses; a `RateLimitException` when throttled (the SDK's
        /// `SecretStore::create`).
        pub async fn create(
            name: &str,
            value: impl Into<SecretValue> + Send,
            metadata: Option<BTreeMap<String, String>>,
            opts: SecretOpts,
        ) -> Result<SecretInfo, SandboxError> {
            let value = value.into();
            let store = store(opts)?;
            let info = store
                .create(name, value, &metadata.unwrap_or_default())
                .await?;
            Ok(info.into())
        }

        /// `Secret.update(secret, value, metadata)`: a new version of the
        /// value; `metadata`, when given, replaces the stored metadata.
        ///
        /// # Errors
        /// `InvalidArgumentException` before any call;
        /// `SecretNotFoundException`; a `SecretException` on a version
        /// conflict or when AWS refuses (`SecretStore::update`).
        pub async fn update(
            secret: &str,
            value: impl Into<SecretValue> + Send,
            metadata: Option<BTreeMap<String, String>>,
            opts: SecretOpts,
        ) -> Result<SecretInfo, SandboxError> {
            let value = value.into();
            let store = store(opts)?;
            let info = store.update(secret, value, metadata.as_ref()).await?;
            Ok(info.into())
        }

        /// `Secret.get_info(secret)`: what is known of it, never its value.
        ///
        /// # Errors
        /// `InvalidArgumentException` (`name`) before any call;
        /// `SecretNotFoundException`; a `SecretException` when AWS refuses.
        pub async fn get_info(secret: &str, opts: SecretOpts) -> Result<SecretInfo, SandboxError> {
            Ok(store(opts)?.get_info(secret).await?.into())
        }

        /// `Secret.exists(secret)`.
        ///
        /// # Errors
        /// As [`Secret::get_info`], except that not found is `false`.
        pub async fn exists(secret: &str, opts: SecretOpts) -> Result<bool, SandboxError> {
            store(opts)?.exists(secret).await
        }

        /// `Secret.destroy(secret)`: deletes it at once (no recovery
        /// window); `false` when it does not exist.
        ///
        /// # Errors
        /// `InvalidArgumentException` (`name`) before any call; a
        /// `SecretException` when AWS refuses.
        pub async fn destroy(secret: &str, opts: SecretOpts) -> Result<bool, SandboxError> {
            store(opts)?.destroy(secret).await
        }

        /// `Secret.list(limit, next_token)`: a paginator over the store's
        /// secrets, `limit` (1 to 100, default 100) per page, starting at
        /// `next_token` (a paginator's [`SecretPaginator::next_token`]).
        /// Calls nothing; listing is eventually consistent.
        ///
        /// # Errors
        /// `InvalidArgumentException` naming `limit` or `next_token` (or a
        /// store option), before any call.
        pub fn list(
            limit: Option<u32>,
            next_token: Option<String>,
            opts: SecretOpts,
        ) -> Result<SecretPaginator, SandboxError> {
            let limit = limit.unwrap_or(DEFAULT_LIMIT);
            if !(1..=100).contains(&limit) {
                return Err(SandboxError::invalid_argument(
                    "limit",
                    "a page holds 1 to 100 secrets; pass a limit in that range",
                ));
            }
            Ok(SecretPaginator {
                store: store(opts)?,
                limit,
                // E2B reads an empty token as none.
                next_token: next_token.filter(|token| !token.is_empty()),
                has_next: true,
            })
        }
    }

    impl SecretPaginator {
        /// `has_next`: whether [`SecretPaginator::next_items`] may return
        /// more (false once a page came without a next token).
        pub fn has_next(&self) -> bool {
            self.has_next
        }

        /// `next_token`: where the next page starts (`None` at the start
        /// and after the last page). Pass it to [`Secret::list`] to resume.
        /// It is Secrets Manager's own token, the one a page returned.
        pub fn next_token(&self) -> Option<&str> {
            self.next_token.as_deref()
        }

        /// `next_items()`: the next page. A page may be empty while
        /// `has_next` stays true (secrets of other prefixes or being
        /// deleted are left out of it); after the last page, an empty page
        /// with no call (as `SandboxPaginator`; E2B raises there).
        ///
        /// # Errors
        /// `InvalidArgumentException` naming `next_token` (a token that is
        /// not Secrets Manager's shape) before any call; a
        /// `SecretException` when AWS refuses; a `RateLimitException` when
        /// throttled.
        pub async fn next_items(&mut self) -> Result<Vec<SecretInfo>, SandboxError> {
            if !self.has_next {
                return Ok(Vec::new());
            }
            let page = self
                .store
                .list(self.limit, self.next_token.as_deref())
                .await?;
            self.next_token = page.next_token;
            self.has_next = self.next_token.is_some();
            Ok(page.secrets.into_iter().map(SecretInfo::from).collect())
        }
    }
}

#[cfg(not(feature = "secrets"))]
impl Secret {
    /// `Secret.create(name, value, metadata)`: needs this crate's
    /// `secrets` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` in a build without the
    /// `secrets` feature, with no call made.
    #[allow(clippy::unused_async)]
    pub async fn create(
        _name: &str,
        _value: impl Into<SecretValue> + Send,
        _metadata: Option<BTreeMap<String, String>>,
        _opts: SecretOpts,
    ) -> Result<SecretInfo, SandboxError> {
        Err(Missing::Secret.error())
    }

    /// `Secret.update(secret, value, metadata)`: needs the `secrets`
    /// feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` without the feature.
    #[allow(clippy::unused_async)]
    pub async fn update(
        _secret: &str,
        _value: impl Into<SecretValue> + Send,
        _metadata: Option<BTreeMap<String, String>>,
        _opts: SecretOpts,
    ) -> Result<SecretInfo, SandboxError> {
        Err(Missing::Secret.error())
    }

    /// `Secret.get_info(secret)`: needs the `secrets` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` without the feature.
    #[allow(clippy::unused_async)]
    pub async fn get_info(_secret: &str, _opts: SecretOpts) -> Result<SecretInfo, SandboxError> {
        Err(Missing::Secret.error())
    }

    /// `Secret.exists(secret)`: needs the `secrets` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` without the feature.
    #[allow(clippy::unused_async)]
    pub async fn exists(_secret: &str, _opts: SecretOpts) -> Result<bool, SandboxError> {
        Err(Missing::Secret.error())
    }

    /// `Secret.destroy(secret)`: needs the `secrets` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` without the feature.
    #[allow(clippy::unused_async)]
    pub async fn destroy(_secret: &str, _opts: SecretOpts) -> Result<bool, SandboxError> {
        Err(Missing::Secret.error())
    }

    /// `Secret.list(limit, next_token)`: needs the `secrets` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "secret" }` without the feature.
    pub fn list(
        _limit: Option<u32>,
        _next_token: Option<String>,
        _opts: SecretOpts,
    ) -> Result<SecretPaginator, SandboxError> {
        Err(Missing::Secret.error())
    }
}

#[cfg(not(feature = "secrets"))]
impl SecretPaginator {
    /// `has_next` (no paginator exists without the `secrets` feature).
    pub fn has_next(&self) -> bool {
        match self.never {}
    }

    /// `next_token` (no paginator exists without the `secrets` feature).
    pub fn next_token(&self) -> Option<&str> {
        match self.never {}
    }

    /// `next_items()` (no paginator exists without the `secrets` feature).
    ///
    /// # Errors
    /// None: there is no paginator to call it on.
    #[allow(clippy::unused_async)]
    pub async fn next_items(&mut self) -> Result<Vec<SecretInfo>, SandboxError> {
        match self.never {}
    }
}
