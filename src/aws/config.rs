//! The AWS configuration every client of the edge is made from: the
//! caller's settings (`AwsOptions`), or a whole `SdkConfig` they loaded,
//! checked once (a region and credentials must exist) so that a machine
//! with no AWS setup gets one clear error before any call.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_lambdamicrovms::config::{Credentials, ProvideCredentials};
use aws_types::region::Region;

use crate::error::SandboxError;
use crate::error::map::aws::{no_credentials, profile_not_found};
use crate::quiet::Quiet as _;
use crate::secret::Secret;

/// The profile the caller named (`AwsOptions::profile`, else `AWS_PROFILE`),
/// when it is in neither AWS file. `default` is never reported: without any
/// file it legitimately does not exist.
async fn missing_profile(settings: &AwsSettings) -> Option<String> {
    use aws_runtime::env_config::file::EnvConfigFiles;
    use aws_types::os_shim_internal::{Env, Fs};
    let name = settings
        .profile
        .clone()
        .or_else(|| std::env::var("AWS_PROFILE").ok())
        .filter(|name| !name.is_empty() && name != "default")?;
    let loaded = aws_config::profile::load(
        &Fs::real(),
        &Env::real(),
        &EnvConfigFiles::default(),
        Some(name.clone().into()),
    )
    .quiet()
    .await;
    match loaded {
        Ok(set) if set.get_profile(&name).is_some() => None,
        _ => Some(name),
    }
}

/// Connect timeout of control-plane calls.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Read timeout of control-plane calls.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach the control plane; every field optional (the aws-config chain
/// fills the rest from the environment and profiles).
#[derive(Clone, Default)]
pub(crate) struct AwsSettings {
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
    /// S3's endpoint, path style (template builds; `None`: S3's own, or
    /// `endpoint_url` when that is set).
    pub s3_endpoint_url: Option<String>,
    pub profile: Option<String>,
    /// Static credentials (access key id, secret access key).
    pub static_credentials: Option<(String, Secret)>,
    /// The session token of temporary static credentials.
    pub session_token: Option<Secret>,
    /// Connect timeout of every call (`None`: [`CONNECT_TIMEOUT`]).
    pub connect_timeout: Option<Duration>,
    /// Read timeout of every call (`None`: [`READ_TIMEOUT`]).
    pub read_timeout: Option<Duration>,
    /// A loaded AWS configuration to start from instead of the
    /// environment's chain (`AwsOptions::sdk_config`); the fields above
    /// override its parts.
    /// Boxed: the options stay small beside the other backend choices.
    pub sdk_config: Option<Box<aws_types::SdkConfig>>,
}

crate::secret::redacted_debug! {
    AwsSettings |o| region, endpoint_url, s3_endpoint_url, profile,
    static_credentials = o.static_credentials.is_some(), session_token = o.session_token.is_some(),
    connect_timeout, read_timeout, sdk_config = o.sdk_config.is_some()
}

impl AwsSettings {
    /// What tells one configuration from another (the implicit clients of
    /// the shortcuts): every setting that shapes the client, secrets only
    /// as SHA-256 digests.
    pub(crate) fn key(&self) -> SettingsKey {
        let digest = |secret: &Secret| -> [u8; 32] {
            use sha2::Digest as _;
            sha2::Sha256::digest(secret.expose().as_bytes()).into()
        };
        SettingsKey {
            region: self.region.clone(),
            endpoint_url: self.endpoint_url.clone(),
            s3_endpoint_url: self.s3_endpoint_url.clone(),
            profile: self.profile.clone(),
            access_key_id: self
                .static_credentials
                .as_ref()
                .map(|(key_id, _)| key_id.clone()),
            secret_digest: self
                .static_credentials
                .as_ref()
                .map(|(_, secret)| digest(secret)),
            session_token_digest: self.session_token.as_ref().map(digest),
            connect_timeout: self.connect_timeout,
            read_timeout: self.read_timeout,
            sdk_config: self.sdk_config.as_deref().map(ConfigIdentity::of),
        }
    }
}

/// [`AwsSettings::key`]: comparable, and with no secret in clear.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SettingsKey {
    region: Option<String>,
    endpoint_url: Option<String>,
    s3_endpoint_url: Option<String>,
    profile: Option<String>,
    access_key_id: Option<String>,
    secret_digest: Option<[u8; 32]>,
    session_token_digest: Option<[u8; 32]>,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    sdk_config: Option<ConfigIdentity>,
}

crate::secret::redacted_debug! {
    non_exhaustive SettingsKey |o| region, endpoint_url, profile
}

/// What tells one `SdkConfig` from another without reading a secret: its
/// region, its endpoint and its credentials provider (by identity: clones
/// of one `SdkConfig` share it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ConfigIdentity {
    region: Option<String>,
    endpoint_url: Option<String>,
    provider: usize,
}

impl ConfigIdentity {
    /// The identity of `config`.
    pub(crate) fn of(config: &aws_types::SdkConfig) -> Self {
        Self {
            region: config.region().map(ToString::to_string),
            endpoint_url: config.endpoint_url().map(str::to_owned),
            provider: config.credentials_provider().map_or(0, |provider| {
                let inner: &dyn ProvideCredentials = provider.as_ref();
                std::ptr::from_ref(inner).cast::<()>() as usize
            }),
        }
    }
}

/// Loads the AWS configuration (credential chain, region, endpoint
/// override; or the given `SdkConfig` with the settings' overrides) and
/// checks that credentials and a region exist. Returns it with the region
/// the clients sign for. Retries are off: each service's client sets its
/// own (none for the control plane, whose retry layer decides).
///
/// # Errors
/// `InvalidArgument` for a bad region, endpoint or timeout (or a profile
/// beside an `SdkConfig`); `Authentication` when no region, no
/// credentials or the named profile are found.
pub(crate) async fn load(
    settings: &AwsSettings,
) -> Result<(aws_types::SdkConfig, String), SandboxError> {
    let connect_timeout = positive("connect_timeout", settings.connect_timeout)?;
    let read_timeout = positive("read_timeout", settings.read_timeout)?;
    if let Some(region) = &settings.region {
        crate::checks::region(region)?;
    }
    if let Some(url) = &settings.endpoint_url {
        crate::checks::endpoint_url(url)?;
    }
    if let Some(url) = &settings.s3_endpoint_url {
        crate::checks::s3_endpoint_url(url)?;
    }
    let static_credentials = settings
        .static_credentials
        .as_ref()
        .map(|(key_id, secret)| {
            Credentials::new(
                key_id.clone(),
                secret.expose().to_owned(),
                settings
                    .session_token
                    .as_ref()
                    .map(|token| token.expose().to_owned()),
                None,
                "rayito-static",
            )
        });
    let config = match &settings.sdk_config {
        Some(base) => {
            if settings.profile.is_some() {
                return Err(SandboxError::invalid_argument(
                    "profile",
                    "a profile and an SdkConfig were both given; load the profile into the SdkConfig or drop one",
                ));
            }
            let given = base.timeout_config();
            let timeouts = TimeoutConfig::builder()
                .connect_timeout(
                    connect_timeout
                        .or_else(|| given.and_then(TimeoutConfig::connect_timeout))
                        .unwrap_or(CONNECT_TIMEOUT),
                )
                .read_timeout(
                    read_timeout
                        .or_else(|| given.and_then(TimeoutConfig::read_timeout))
                        .unwrap_or(READ_TIMEOUT),
                )
                .build();
            let mut builder = base
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .timeout_config(timeouts);
            if let Some(region) = &settings.region {
                builder = builder.region(Region::new(region.clone()));
            }
            if let Some(url) = &settings.endpoint_url {
                builder = builder.endpoint_url(url.clone());
            }
            if let Some(credentials) = static_credentials {
                builder = builder.credentials_provider(
                    aws_types::sdk_config::SharedCredentialsProvider::new(credentials),
                );
            }
            builder.build()
        }
        None => {
            let mut loader = aws_config::defaults(BehaviorVersion::latest())
                .retry_config(RetryConfig::disabled())
                .timeout_config(
                    TimeoutConfig::builder()
                        .connect_timeout(connect_timeout.unwrap_or(CONNECT_TIMEOUT))
                        .read_timeout(read_timeout.unwrap_or(READ_TIMEOUT))
                        .build(),
                );
            if let Some(region) = &settings.region {
                loader = loader.region(Region::new(region.clone()));
            }
            if let Some(url) = &settings.endpoint_url {
                loader = loader.endpoint_url(url.clone());
            }
            if let Some(profile) = &settings.profile {
                loader = loader.profile_name(profile.clone());
            }
            if let Some(credentials) = static_credentials {
                loader = loader.credentials_provider(credentials);
            }
            if let Some(profile) = missing_profile(settings).await {
                return Err(profile_not_found(&profile));
            }
            loader.load().quiet().await
        }
    };
    let Some(region) = config.region() else {
        return Err(no_credentials("no AWS region is configured"));
    };
    // A region from the environment or a profile follows the same rule.
    crate::checks::region(region.as_ref())?;
    let region = region.to_string();
    let Some(provider) = config.credentials_provider() else {
        return Err(no_credentials("no AWS credentials were found"));
    };
    // The chain caches what it found; this only proves something is there.
    // Its error text can name files and profiles, so it is not kept.
    if provider.provide_credentials().quiet().await.is_err() {
        return Err(no_credentials("no AWS credentials were found"));
    }
    Ok((config, region))
}

/// The configuration of the embedded emulator: fixed endpoint, region and
/// the emulator's own access key, reading nothing from the environment or
/// profiles.
pub(crate) fn hermetic(
    endpoint_url: &str,
    region: &str,
    access_key_id: &str,
    secret_access_key: &Secret,
) -> aws_types::SdkConfig {
    aws_types::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            Credentials::new(
                access_key_id,
                secret_access_key.expose(),
                None,
                None,
                "rayito-local",
            ),
        ))
        .endpoint_url(endpoint_url)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(READ_TIMEOUT)
                .build(),
        )
        .build()
}

/// `value`, refused when zero (a zero timeout would fail every call).
fn positive(
    argument: &'static str,
    value: Option<Duration>,
) -> Result<Option<Duration>, SandboxError> {
    if let Some(v) = value {
        crate::checks::positive_duration(argument, v)?;
    }
    // Saturated: the AWS runtime adds the timeout to an instant, and a
    // caller's `Duration::MAX` must not overflow there.
    Ok(value.map(|v| v.min(MAX_CONTROL_TIMEOUT)))
}

/// The longest control-plane connect or read timeout taken (a day).
const MAX_CONTROL_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
