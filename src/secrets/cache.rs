//! [`SecretCache`]: reads secret values (GetSecretValue) with a TTL, one
//! request in flight per key, and a bound on what it keeps.
//!
//! The key of an entry is (region, credentials identity, resolved
//! `SecretId`, version selector): the same name read with other
//! credentials is another entry. A hit makes no AWS call; expired entries
//! are swept on every use; a not-found answer is never kept (a secret
//! created a moment later is found at once). An invalidate bumps a
//! generation counter, and a fetch that started before it does not store
//! its answer (it still returns it to its callers).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::client::{Access, Connected};
use super::entries::Entries;
use super::errors::Failure;
use super::reference::{DEFAULT_PREFIX, SecretRef, Selector, check_prefix, secret_id};
use crate::aws::config::ConfigIdentity;
use crate::aws::secretsmanager::{SecretsManager, Version};
use crate::error::SandboxError;
use crate::secret::Secret;

/// The time an entry is kept unless set otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// The longest TTL accepted.
pub const MAX_TTL: Duration = Duration::from_secs(86_400);
/// Entries kept unless set otherwise (the least recently used goes first).
pub const DEFAULT_MAX_ENTRIES: usize = 1_024;
/// The largest `max_entries` accepted.
const MAX_MAX_ENTRIES: usize = 1_000_000;
/// Process-wide caches kept by [`SecretCache::shared`] (one per region and
/// credentials; the least recently used goes first).
const SHARED_CACHES: usize = 32;

/// How a [`SecretCache`] reaches Secrets Manager and what it keeps.
///
/// `Default`: the environment's region and credentials, prefix `rayito/`,
/// TTL 300 s, at most 1,024 entries.
#[derive(Clone)]
pub struct SecretCacheOptions {
    access: Access,
    prefix: String,
    ttl: Duration,
    max_entries: usize,
}

impl Default for SecretCacheOptions {
    fn default() -> Self {
        Self {
            access: Access::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            ttl: DEFAULT_TTL,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

crate::secret::redacted_debug! {
    SecretCacheOptions |o| access, prefix_len = o.prefix.len(), ttl, max_entries
}

impl SecretCacheOptions {
    super::client::access_setters! {
        /// The prefix of names (default `rayito/`, `""` allowed); ARNs are
        /// used as they are.
    }

    crate::setters::setters! {
        /// How long a value is kept: 1 s to 86,400 s (default 300 s).
        ttl: Duration;
        /// At most this many entries (default 1,024; 1 to 1,000,000).
        max_entries: usize;
    }

    fn check(&self) -> Result<(), SandboxError> {
        self.access.check()?;
        check_prefix(&self.prefix)?;
        if self.ttl < Duration::from_secs(1) || self.ttl > MAX_TTL {
            return Err(SandboxError::invalid_argument(
                "ttl",
                "a secret cache's TTL is 1 s to 86,400 s; pass a duration in that range",
            ));
        }
        if !(1..=MAX_MAX_ENTRIES).contains(&self.max_entries) {
            return Err(SandboxError::invalid_argument(
                "max_entries",
                "a secret cache keeps 1 to 1,000,000 entries; pass a count in that range",
            ));
        }
        Ok(())
    }
}

/// Reads secret values from AWS Secrets Manager and keeps them for a TTL
/// (docs/secrets.md).
///
/// Cheap to clone: clones share the entries and one client, made on first
/// use (making a cache calls nothing). Concurrent reads of one key make one
/// GetSecretValue call. `Debug` shows counts only.
///
/// Only with the `secrets` cargo feature.
#[derive(Clone)]
pub struct SecretCache {
    inner: Arc<Inner>,
}

struct Inner {
    options: SecretCacheOptions,
    client: OnceCell<Connected>,
    state: Mutex<State>,
}

/// The key of an entry: (region, credentials identity, resolved
/// `SecretId`, version selector). Region and identity are those of the
/// cache's client, resolved once when it is made.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    region: String,
    /// SHA-256 of the access key id (never the id itself).
    identity: [u8; 32],
    secret_id: String,
    selector: Selector,
}

/// One fetch of a key, shared by every reader that arrives while it runs
/// (a failure is kept as facts: each reader names its own variable).
type Flight = Arc<OnceCell<Result<Secret, Failure>>>;

#[derive(Default)]
struct State {
    entries: Entries<Key, Secret>,
    flights: HashMap<Key, Flight>,
    /// Bumped by every invalidate: a fetch started under an older
    /// generation does not store.
    generation: u64,
    /// GetSecretValue calls made, for `Debug` and the tests.
    fetches: u64,
}

impl fmt::Debug for SecretCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (entries, in_flight) = self
            .inner
            .state
            .lock()
            .map(|state| (state.entries.len(), state.flights.len()))
            .unwrap_or_default();
        f.debug_struct("SecretCache")
            .field("entries", &entries)
            .field("in_flight", &in_flight)
            .finish()
    }
}

impl SecretCache {
    super::client::checked_new! {
        SecretCacheOptions;
        /// A cache with `options`. Calls nothing; the options are checked here.
        ///
        /// # Errors
        /// `InvalidArgument` naming `ttl` (0 or past 86,400 s), `max_entries`,
        /// `prefix`, `region` or `endpoint_url`.
    }

    fn unchecked(options: SecretCacheOptions, client: OnceCell<Connected>) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                client,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The process-wide cache for `config`'s region, credentials provider
    /// and endpoint (the endpoint override, for a moto server, is
    /// `config`'s own `endpoint_url`): the same cache for every call with
    /// that configuration or a clone of it, default options otherwise
    /// (prefix `rayito/`, TTL 300 s). At most 32 are kept, the least
    /// recently used dropped first.
    pub fn shared(config: &aws_types::SdkConfig) -> SecretCache {
        static SHARED: OnceLock<Mutex<Vec<(SharedKey, SecretCache, u64)>>> = OnceLock::new();
        static TICK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let key = SharedKey::of(config);
        let tick = TICK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut caches = SHARED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = caches.iter_mut().find(|(k, _, _)| *k == key) {
            found.2 = tick;
            return found.1.clone();
        }
        if caches.len() >= SHARED_CACHES
            && let Some(oldest) = caches
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, _, used))| *used)
                .map(|(i, _)| i)
        {
            caches.swap_remove(oldest);
        }
        let cache = Self::unchecked(
            SecretCacheOptions::default().sdk_config(config.clone()),
            OnceCell::new(),
        );
        caches.push((key, cache.clone(), tick));
        cache
    }

    /// The prefix of names this cache reads under.
    pub(crate) fn prefix(&self) -> &str {
        &self.inner.options.prefix
    }

    /// The secret's value: from the cache while its entry is fresh, else
    /// from one GetSecretValue call shared by every concurrent reader of
    /// the same key.
    ///
    /// # Errors
    /// `InvalidArgument` (`reference`) for a bad name, ARN or selector,
    /// before any call; `SecretNotFound` (never cached); `Secret` when AWS
    /// refuses (the IAM action `secretsmanager:GetSecretValue` and the AWS
    /// code, never AWS's text) or the secret holds binary data;
    /// `RateLimit` when throttled; the AWS configuration's own failures
    /// (`Authentication`). No error holds the value or the name.
    pub async fn get(&self, reference: &SecretRef) -> Result<Secret, SandboxError> {
        self.read(reference, None).await
    }

    /// [`SecretCache::get`] for a sandbox's environment variable `variable`:
    /// its errors name the variable.
    pub(crate) async fn get_for_env(
        &self,
        reference: &SecretRef,
        variable: &str,
    ) -> Result<Secret, SandboxError> {
        self.read(reference, Some(variable)).await
    }

    /// Drops every cached version of `reference`'s secret and reads it
    /// again now.
    ///
    /// # Errors
    /// As [`SecretCache::get`].
    pub async fn refresh(&self, reference: &SecretRef) -> Result<Secret, SandboxError> {
        self.invalidate(reference.name())?;
        self.get(reference).await
    }

    /// Drops every entry (and lets no running fetch store its answer).
    pub fn refresh_all(&self) {
        let mut state = self.state();
        state.generation = state.generation.wrapping_add(1);
        state.entries.clear();
        state.flights.clear();
    }

    /// Drops every cached version of the secret `name` (a name relative to
    /// the prefix, or the ARN it was read by); a read of it that is running
    /// does not store its answer.
    ///
    /// # Errors
    /// `InvalidArgument` (`name`) for a bad name or ARN.
    pub fn invalidate(&self, name: &str) -> Result<(), SandboxError> {
        let id = secret_id(&self.inner.options.prefix, name, "name")?;
        let mut state = self.state();
        state.generation = state.generation.wrapping_add(1);
        state.entries.retain(|key| key.secret_id != id);
        state.flights.retain(|key, _| key.secret_id != id);
        Ok(())
    }

    /// Whether `other` is this cache or a clone of it.
    pub fn is_same(&self, other: &SecretCache) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Entries kept now (expired ones included until the next use).
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// GetSecretValue calls this cache made so far (what a hit saves).
    pub fn fetches(&self) -> u64 {
        self.state().fetches
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent maps behind.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn client(&self) -> Result<&Connected, SandboxError> {
        self.inner
            .client
            .get_or_try_init(|| self.inner.options.access.client())
            .await
    }

    async fn read(
        &self,
        reference: &SecretRef,
        variable: Option<&str>,
    ) -> Result<Secret, SandboxError> {
        let prefix = &self.inner.options.prefix;
        let (secret_id, selector) = match variable {
            None => reference.resolve(prefix, "reference")?,
            Some(variable) => reference.resolve_for_env(prefix, variable)?,
        };
        self.read_resolved(secret_id, selector, variable).await
    }

    /// The current value of a lifecycle-event webhook's secret
    /// (`secret_id`: a full name under `rayito/webhooks/` or an ARN, checked
    /// by the events feature, the only caller: [`Self::get`] refuses that
    /// prefix), read and kept like any other value.
    #[cfg(feature = "events")]
    pub(crate) async fn get_webhook_secret(
        &self,
        secret_id: String,
    ) -> Result<Secret, SandboxError> {
        let selector = Selector::Stage(super::AWSCURRENT.to_owned());
        self.read_resolved(secret_id, selector, None).await
    }

    async fn read_resolved(
        &self,
        secret_id: String,
        selector: Selector,
        variable: Option<&str>,
    ) -> Result<Secret, SandboxError> {
        let connected = self.client().await?;
        let client = &connected.client;
        let key = Key {
            region: connected.region.clone(),
            identity: connected.identity,
            secret_id,
            selector,
        };
        let (flight, generation) = {
            let mut state = self.state();
            state.entries.sweep(Instant::now());
            if let Some(value) = state.entries.get(&key) {
                return Ok(value);
            }
            let generation = state.generation;
            let flight = state.flights.entry(key.clone()).or_default().clone();
            (flight, generation)
        };
        let result = flight
            .get_or_init(|| async {
                let fetched = fetch(client, &key).await;
                let mut state = self.state();
                state.fetches = state.fetches.saturating_add(1);
                if let Ok(value) = &fetched
                    && state.generation == generation
                {
                    self.store(&mut state, key.clone(), value.clone());
                }
                fetched
            })
            .await
            .clone();
        {
            // The flight is over: the next reader after the TTL starts a
            // new one.
            let mut state = self.state();
            if state
                .flights
                .get(&key)
                .is_some_and(|current| Arc::ptr_eq(current, &flight))
            {
                state.flights.remove(&key);
            }
        }
        result.map_err(|failure| failure.into_error(variable))
    }

    fn store(&self, state: &mut State, key: Key, value: Secret) {
        // The TTL is at most a day: adding it to the clock cannot overflow.
        let expires = Instant::now() + self.inner.options.ttl;
        state
            .entries
            .insert(key, value, expires, self.inner.options.max_entries);
    }
}

/// One GetSecretValue.
async fn fetch(client: &SecretsManager, key: &Key) -> Result<Secret, Failure> {
    let version = match &key.selector {
        Selector::Id(id) => Version::Id(id),
        Selector::Stage(stage) => Version::Stage(stage),
    };
    let result = match client.get_secret_value(&key.secret_id, version).await {
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err(Failure::NotString),
        Err(failure) => Err(Failure::Aws(failure)),
    };
    super::event("GetSecretValue", result.is_ok());
    result
}

/// What tells one process-wide cache from another: the region, the
/// endpoint and the credentials provider (by identity: clones of one
/// `SdkConfig` share it).
type SharedKey = ConfigIdentity;
