//! Amazon EFS (feature `efs`): the client every EFS call of the SDK goes
//! through (the caller's credentials, the client's AWS configuration: on
//! the local backend the emulator's endpoint, which serves an EFS subset),
//! and the calls, as plain data. What a failure means is decided above;
//! every failure leaves here as [`AwsFailure`] facts.
//!
//! - `mount_targets`: DescribeMountTargets, for the mount target IP a
//!   sandbox's volume mounts through (`crate::volumes`).
//! - `access_points`: Create/Describe/DeleteAccessPoint(s), for the volume
//!   store (`crate::volumes::VolumeStore`).
//! - `file_systems`: the file system's tags, how many mount targets it
//!   has left and DeleteFileSystem, for `EfsVolumes::delete_file_system`.
//!
//! [`AwsFailure`]: crate::error::map::aws::AwsFailure

mod access_points;
mod file_systems;
pub(crate) mod mount_targets;

pub(crate) use access_points::{AccessPoint, NewAccessPoint};

use aws_sdk_efs as efs;
use efs::config::retry::RetryConfig;

use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;

/// Attempts of each EFS call: the AWS SDK's standard retry mode
/// (throttling and transient faults, with backoff). Nothing else retries
/// these calls, so attempts never multiply.
const CALL_ATTEMPTS: u32 = 3;

/// The EFS client (cheap to clone).
#[derive(Clone, Debug)]
pub(crate) struct Efs {
    client: efs::Client,
}

impl Efs {
    /// The client of `sdk_config` (its endpoint, credentials and region),
    /// signing for `region` when given.
    pub(crate) fn new(sdk_config: &aws_types::SdkConfig, region: Option<&str>) -> Self {
        let mut builder = efs::config::Builder::from(sdk_config)
            .retry_config(RetryConfig::standard().with_max_attempts(CALL_ATTEMPTS));
        if let Some(region) = region {
            builder = builder.region(efs::config::Region::new(region.to_owned()));
        }
        Self {
            client: efs::Client::from_conf(builder.build()),
        }
    }
}

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
    /// the environment's chain; the endpoint override applied to every
    /// service), with the region the clients sign for.
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
        let mut config = match &self.sdk_config {
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
        if let Some(url) = &self.endpoint_url {
            config = config.to_builder().endpoint_url(url.clone()).build();
        }
        let region = self
            .region
            .clone()
            .or_else(|| config.region().map(|r| r.as_ref().to_owned()))
            .unwrap_or_default();
        Ok((config, region))
    }
}

/// The facts of a failed EFS call.
fn failure<E: crate::aws::failure::OperationError>(
    operation: &'static str,
    err: &crate::aws::failure::SdkFailure<E>,
) -> AwsFailure {
    crate::aws::failure::extract(operation, err)
}
