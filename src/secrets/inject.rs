//! `secrets` injection: environment variables of sandbox processes whose
//! values are read from Secrets Manager (through a [`SecretCache`]) at the
//! moment each process, terminal, code cell or code context starts.
//!
//! The handle keeps references only. A value travels in exactly one place:
//! the agent's per-process environment field of the request that starts
//! the process (`ProcessConfig.envs`, `PtyStart.envs`,
//! `ExecuteRequest.envs`, `CreateContextRequest.envs`), never in the run
//! hook payload, metadata, tags, logs, errors or `Debug`. Errors name the
//! environment variable, never the secret's name or its value.

use std::collections::HashMap;
use std::sync::Once;

use futures_util::future::try_join_all;

use super::{SecretCache, SecretCacheOptions, SecretRef};
use crate::error::SandboxError;
use crate::sandbox::SandboxBuilder;
use crate::sandbox::client::Client;
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Launch, Stage, Step, StepFuture};
pub(crate) use crate::secret::SecretEnv;

/// What the secrets feature does with a process's secret references.
impl SecretEnv {
    /// Every variable name by the rules of `envs`, and every reference by
    /// the cache's rules (no I/O). `InvalidArgument` (`secrets`) names the
    /// variable.
    pub(crate) fn check(&self, cache: Option<&SecretCache>) -> Result<(), SandboxError> {
        for (variable, reference) in &self.0 {
            let bad_name = variable.is_empty()
                || variable.chars().count() > 256
                || variable.chars().any(char::is_control)
                || variable.contains('=');
            if bad_name {
                return Err(SandboxError::invalid_argument(
                    "secrets",
                    "an environment variable name is empty, longer than 256 characters, or holds `=` or a control character; fix the name",
                ));
            }
            let prefix = cache.map_or(super::DEFAULT_PREFIX, SecretCache::prefix);
            reference.resolve_for_env(prefix, variable)?;
        }
        Ok(())
    }

    /// `self` with `over`'s entries on top (a call's secrets override the
    /// handle's on the same variable).
    pub(crate) fn merged(&self, over: &SecretEnv) -> SecretEnv {
        let mut out = self.clone();
        for (k, v) in &over.0 {
            out.0.insert(k.clone(), v.clone());
        }
        out
    }

    /// `InvalidArgument` (`secrets`) when a variable is also a plain env.
    pub(crate) fn check_disjoint<'a>(
        &self,
        mut envs: impl Iterator<Item = &'a String>,
    ) -> Result<(), SandboxError> {
        match envs.find(|name| self.0.contains_key(*name)) {
            Some(name) => Err(both(name)),
            None => Ok(()),
        }
    }

    /// Reads every value (concurrently, through the cache) and adds it to
    /// `envs`. Fails as a whole: no value is added when one read fails.
    pub(crate) async fn resolve_into(
        &self,
        cache: &SecretCache,
        envs: &mut HashMap<String, String>,
    ) -> Result<(), SandboxError> {
        if self.0.is_empty() {
            return Ok(());
        }
        warn_once();
        let reads = self.0.iter().map(|(variable, reference)| async move {
            let value = cache.get_for_env(reference, variable).await?;
            Ok::<_, SandboxError>((variable.clone(), value))
        });
        let values = try_join_all(reads).await?;
        for (variable, value) in values {
            envs.insert(variable, value.expose().to_owned());
        }
        Ok(())
    }

    /// Reads every value once (the cache keeps them): a missing or
    /// unreadable secret fails here, before anything is launched.
    pub(crate) async fn preflight(&self, cache: &SecretCache) -> Result<(), SandboxError> {
        let mut scratch = HashMap::new();
        self.resolve_into(cache, &mut scratch).await
    }
}

fn both(variable: &str) -> SandboxError {
    SandboxError::invalid_argument(
        "secrets",
        format!(
            "environment variable {variable} is given both in envs and in secrets; pass it in one of them"
        ),
    )
}

/// Sandbox code can read every injected value (its own environment, and
/// `/proc` for the same user): said once per process.
fn warn_once() {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            target: "rayito::secrets",
            "secrets injected into a sandbox are readable by the code that runs in it; inject only what that code may see"
        );
    });
}

/// The secrets bound to a sandbox handle (from its builder) and the cache
/// that reads them.
#[derive(Clone, Default)]
pub(crate) struct HandleSecrets {
    bound: SecretEnv,
    /// The builder's cache; else one made on first use.
    cache: Option<SecretCache>,
    made: std::sync::Arc<tokio::sync::OnceCell<SecretCache>>,
}

crate::secret::redacted_debug! {
    HandleSecrets |o| bound, cache = o.cache.is_some()
}

impl HandleSecrets {
    pub(crate) fn new(bound: SecretEnv, cache: Option<SecretCache>) -> Self {
        Self {
            bound,
            cache,
            made: std::sync::Arc::default(),
        }
    }

    pub(crate) fn bound(&self) -> &SecretEnv {
        &self.bound
    }

    /// The cache: the builder's, else the process-wide cache of the
    /// client's AWS configuration (AWS backend), else one over the
    /// environment's AWS chain (the local backend has no Secrets Manager:
    /// `AWS_ENDPOINT_URL_SECRETS_MANAGER` or the profile decide).
    pub(crate) async fn cache(
        &self,
        client: &crate::sandbox::client::Client,
    ) -> Result<SecretCache, SandboxError> {
        if let Some(cache) = &self.cache {
            return Ok(cache.clone());
        }
        self.made
            .get_or_try_init(|| async { default_cache(client) })
            .await
            .cloned()
    }

    /// Injects the handle's secrets and `call`'s (which win on the same
    /// variable) into `envs`, after checking that no variable is also a
    /// plain env of the call. `include_bound: false` leaves the handle's
    /// out (a code cell that is not known to be Python).
    pub(crate) async fn inject(
        &self,
        client: &crate::sandbox::client::Client,
        call: &SecretEnv,
        include_bound: bool,
        envs: &mut HashMap<String, String>,
    ) -> Result<(), SandboxError> {
        let merged = if include_bound {
            self.bound.merged(call)
        } else {
            call.clone()
        };
        if merged.is_empty() {
            return Ok(());
        }
        call.check(self.cache.as_ref())?;
        merged.check_disjoint(envs.keys())?;
        let cache = self.cache(client).await?;
        merged.resolve_into(&cache, envs).await
    }
}

/// The cache of a handle whose builder gave none.
pub(crate) fn default_cache(
    client: &crate::sandbox::client::Client,
) -> Result<SecretCache, SandboxError> {
    let backend = client.backend();
    match (&backend.local, &backend.sdk_config) {
        (None, Some(config)) => Ok(SecretCache::shared(config)),
        _ => SecretCache::new(SecretCacheOptions::new()),
    }
}

/// The secrets given to a sandbox builder (its part): environment
/// variables from Secrets Manager, bound to the handle (references only),
/// and the cache that reads them.
#[derive(Debug, Clone, Default)]
struct BuilderSecrets {
    env: SecretEnv,
    cache: Option<SecretCache>,
}

/// The secrets setters of the sandbox builder.
impl SandboxBuilder {
    /// Sets the environment variable `variable` of every command, terminal,
    /// Python cell and code context of the sandbox to the value of a
    /// secret in AWS Secrets Manager (`reference`: a name under the
    /// cache's prefix, an ARN, or a [`crate::secrets::SecretRef`] with a
    /// version).
    ///
    /// The handle keeps the reference only; the value is read through the
    /// secret cache when each process starts and travels only in that
    /// process's environment, never in the run payload, metadata, logs,
    /// errors or `Debug`. `create` and `connect` read every secret once
    /// first: a missing one fails before anything is launched. A variable
    /// also given to [`SandboxBuilder::env`] is refused. Sandbox code can
    /// read the values (docs/secrets.md).
    ///
    /// Only with the `secrets` cargo feature.
    pub fn secret(mut self, variable: impl Into<String>, reference: impl Into<SecretRef>) -> Self {
        self.parts_mut()
            .update::<BuilderSecrets>(|s| s.env.insert(variable.into(), reference.into()));
        self
    }

    /// [`SandboxBuilder::secret`] for each pair.
    ///
    /// Only with the `secrets` cargo feature.
    pub fn secrets<K, R>(mut self, secrets: impl IntoIterator<Item = (K, R)>) -> Self
    where
        K: Into<String>,
        R: Into<SecretRef>,
    {
        self.parts_mut().update::<BuilderSecrets>(|s| {
            for (variable, reference) in secrets {
                s.env.insert(variable.into(), reference.into());
            }
        });
        self
    }

    /// The cache that reads the sandbox's secrets (its region, endpoint,
    /// prefix and TTL). Without it: the process-wide cache of the client's
    /// AWS configuration on AWS, and one over the environment's AWS
    /// configuration on the local backend (which has no Secrets Manager of
    /// its own).
    ///
    /// Only with the `secrets` cargo feature.
    pub fn secret_cache(mut self, cache: SecretCache) -> Self {
        self.parts_mut()
            .update::<BuilderSecrets>(|s| s.cache = Some(cache));
        self
    }
}

/// The secret cache a builder was given (`secret_cache`), if any: what
/// the gateways read their headers with.
pub(crate) fn builder_cache(builder: &SandboxBuilder) -> Option<SecretCache> {
    builder
        .parts()
        .get::<BuilderSecrets>()
        .and_then(|s| s.cache.clone())
}

/// The secrets of a builder's handle, checked (no I/O).
fn checked(builder: &SandboxBuilder) -> Result<HandleSecrets, SandboxError> {
    let given = builder.parts().get::<BuilderSecrets>();
    let env = given.map(|s| s.env.clone()).unwrap_or_default();
    let cache = given.and_then(|s| s.cache.clone());
    env.check(cache.as_ref())?;
    // Builder envs go into the image's environment (the run payload):
    // a secret of the same name would be shadowed or shadow it.
    env.check_disjoint(builder.env_names())?;
    Ok(HandleSecrets::new(env, cache))
}

/// Reads every bound secret once, before anything is launched.
async fn preflight(secrets: &HandleSecrets, client: &Client) -> Result<(), SandboxError> {
    if secrets.bound().is_empty() {
        return Ok(());
    }
    let cache = secrets.cache(client).await?;
    secrets.bound().preflight(&cache).await
}

/// The secrets' part in `create`, `connect` and a pool's take: the checks,
/// the preflight read (a missing or unreadable secret launches nothing),
/// the handle's bound secrets.
pub(crate) struct Steps;

impl Step for Steps {
    fn prepare(
        &self,
        builder: &SandboxBuilder,
        _stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        handle.set(checked(builder)?);
        Ok(())
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            match at.handle.get::<HandleSecrets>() {
                Some(secrets) => preflight(secrets, at.client).await,
                None => Ok(()),
            }
        })
    }

    fn unbind(&self, builder: &mut Parts) {
        if builder.get::<BuilderSecrets>().is_some() {
            builder.update::<BuilderSecrets>(|s| s.env = SecretEnv::default());
        }
    }

    fn preflight<'a>(&'a self, builder: &'a SandboxBuilder) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let secrets = checked(builder)?;
            if !secrets.bound().is_empty() {
                let client = builder.base_client().await?;
                preflight(&secrets, &client).await?;
            }
            Ok(())
        })
    }
}

/// The bound secrets on the sandbox core.
impl crate::sandbox::Sandbox {
    /// Injects the handle's bound secrets (when `include_bound`) and a
    /// call's into the environment of the process a request starts
    /// (`envs`). Checks first (a variable also in `envs` is refused), then
    /// reads through the cache.
    pub(crate) async fn inject_secrets(
        &self,
        call: &SecretEnv,
        include_bound: bool,
        envs: &mut std::collections::HashMap<String, String>,
    ) -> Result<(), SandboxError> {
        match self.parts().get::<HandleSecrets>() {
            Some(secrets) => {
                secrets
                    .inject(self.client(), call, include_bound, envs)
                    .await
            }
            None => {
                HandleSecrets::default()
                    .inject(self.client(), call, include_bound, envs)
                    .await
            }
        }
    }
}
