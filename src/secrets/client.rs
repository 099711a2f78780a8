//! How the store and the cache reach Secrets Manager: a region or a whole
//! `SdkConfig`, and an endpoint override (a moto server in the tests). The
//! client is made on first use; nothing here calls AWS before that.

use std::fmt;

use aws_sdk_secretsmanager as sm;
use sm::config::retry::RetryConfig;

use crate::control::aws::{AwsControlPlane, AwsSettings};
use crate::error::SandboxError;
use crate::quiet::Quiet as _;

/// Attempts of each Secrets Manager call: the AWS SDK's standard retry mode
/// (throttling and transient faults, with backoff). Nothing else retries
/// these calls, so attempts never multiply.
const CALL_ATTEMPTS: u32 = 3;

/// Where Secrets Manager is: every field optional (the environment's chain
/// fills the rest).
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub region: Option<String>,
    pub sdk_config: Option<aws_types::SdkConfig>,
    pub endpoint_url: Option<String>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("region", &self.region)
            .field("sdk_config", &self.sdk_config.is_some())
            .field("endpoint_url", &self.endpoint_url.is_some())
            .finish()
    }
}

impl Access {
    /// Checks what needs no I/O: the region's and the endpoint's shapes.
    ///
    /// # Errors
    /// `InvalidArgument` (`region`, `endpoint_url`).
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        if let Some(region) = &self.region {
            crate::checks::region(region)?;
        }
        if let Some(url) = &self.endpoint_url {
            crate::checks::endpoint_url(url)?;
        }
        Ok(())
    }

    /// Makes the client: from the given `SdkConfig` (region and endpoint
    /// overrides applied), else from the environment's chain (which checks
    /// that a region and credentials exist).
    ///
    /// # Errors
    /// `InvalidArgument` for a bad region or endpoint; `Authentication`
    /// when the chain finds no region or no credentials.
    pub(crate) async fn client(&self) -> Result<Connected, SandboxError> {
        self.check()?;
        let sdk_config = match &self.sdk_config {
            Some(config) => config.clone(),
            None => {
                let settings = AwsSettings {
                    region: self.region.clone(),
                    endpoint_url: self.endpoint_url.clone(),
                    ..AwsSettings::default()
                };
                AwsControlPlane::connect(&settings)
                    .await?
                    .sdk_config()
                    .clone()
            }
        };
        let mut builder = sm::config::Builder::from(&sdk_config)
            .retry_config(RetryConfig::standard().with_max_attempts(CALL_ATTEMPTS));
        if let Some(region) = &self.region {
            builder = builder.region(sm::config::Region::new(region.clone()));
        }
        if let Some(url) = &self.endpoint_url {
            builder = builder.endpoint_url(url.clone());
        }
        Ok(Connected {
            client: sm::Client::from_conf(builder.build()),
            identity: identity(sdk_config.credentials_provider()).await,
        })
    }
}

/// A client and the identity of the credentials it signs with.
#[derive(Clone, Debug)]
pub(crate) struct Connected {
    pub client: sm::Client,
    /// SHA-256 of the access key id (never the id itself); zeros when none
    /// resolve (the calls then fail on their own).
    pub identity: [u8; 32],
}

/// Resolved once, when the client is made: a provider chain may call STS
/// or SSO to answer, and a cache hit must make no call at all.
async fn identity(provider: Option<aws_types::sdk_config::SharedCredentialsProvider>) -> [u8; 32] {
    use sha2::Digest as _;
    use sm::config::ProvideCredentials as _;
    let Some(provider) = provider else {
        return [0; 32];
    };
    match provider.provide_credentials().quiet().await {
        Ok(credentials) => sha2::Sha256::digest(credentials.access_key_id().as_bytes()).into(),
        Err(_) => [0; 32],
    }
}
