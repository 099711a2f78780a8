//! Amazon EFS (feature `efs`): the client of the volume store and of
//! `EfsVolumes`, and the calls they make on access points and file
//! systems, as plain data. What a code means is decided above
//! (`crate::volumes`); every failure leaves here as [`AwsFailure`] facts,
//! and EFS's texts (which repeat file system and access point ids) are
//! never kept past the error mapper.

mod access_points;
mod file_systems;

pub(crate) use access_points::AccessPoint;

use aws_sdk_efs as efs;
use efs::config::retry::RetryConfig;

use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;

/// Attempts of each EFS call: the AWS SDK's standard retry mode
/// (throttling and transient faults, with backoff). Nothing else retries
/// these calls, so attempts never multiply.
const CALL_ATTEMPTS: u32 = 3;

/// Where EFS (and the other services of `EfsVolumes`) is: every field
/// optional, the environment's chain fills the rest.
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub region: Option<String>,
    pub sdk_config: Option<aws_types::SdkConfig>,
    pub endpoint_url: Option<String>,
}

crate::secret::redacted_debug! {
    Access |o| region, sdk_config = o.sdk_config.is_some(), endpoint_url = o.endpoint_url.is_some()
}

impl Access {
    /// The AWS configuration these settings name (the given `SdkConfig`, or
    /// the environment's chain), with the region the clients sign for.
    ///
    /// # Errors
    /// `Authentication` when the chain finds no region or no credentials;
    /// `InvalidArgument` for a bad region or endpoint.
    pub(crate) async fn load(&self) -> Result<(aws_types::SdkConfig, String), SandboxError> {
        if let Some(region) = &self.region {
            crate::checks::region(region)?;
        }
        if let Some(url) = &self.endpoint_url {
            crate::checks::endpoint_url(url)?;
        }
        let config = match &self.sdk_config {
            Some(config) => config.clone(),
            None => {
                let settings = crate::aws::config::AwsSettings {
                    region: self.region.clone(),
                    endpoint_url: self.endpoint_url.clone(),
                    ..Default::default()
                };
                crate::aws::config::load(&settings).await?.0
            }
        };
        let region = self
            .region
            .clone()
            .or_else(|| config.region().map(|r| r.as_ref().to_owned()))
            .unwrap_or_default();
        Ok((config, region))
    }
}

/// The EFS client (cheap to clone).
#[derive(Clone, Debug)]
pub(crate) struct Efs {
    client: efs::Client,
}

impl Efs {
    /// The client over `config`, signing for `region`; `endpoint` overrides
    /// EFS's (a moto server in the tests).
    pub(crate) fn new(config: &aws_types::SdkConfig, region: &str, endpoint: Option<&str>) -> Self {
        let mut builder = efs::config::Builder::from(config)
            .retry_config(RetryConfig::standard().with_max_attempts(CALL_ATTEMPTS));
        if !region.is_empty() {
            builder = builder.region(efs::config::Region::new(region.to_owned()));
        }
        if let Some(url) = endpoint {
            builder = builder.endpoint_url(url.to_owned());
        }
        Self {
            client: efs::Client::from_conf(builder.build()),
        }
    }
}

/// The facts of a failed EFS call.
fn failure<E: crate::aws::failure::OperationError>(
    operation: &'static str,
    err: &crate::aws::failure::SdkFailure<E>,
) -> AwsFailure {
    crate::aws::failure::extract(operation, err)
}
