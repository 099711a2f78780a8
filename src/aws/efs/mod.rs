//! Amazon EFS (feature `efs`): the client every EFS call of the SDK goes
//! through (the caller's credentials, the client's AWS configuration: on
//! the local backend the emulator's endpoint, which serves an EFS subset),
//! and the calls, as plain data. What a failure means is decided above;
//! every failure leaves here as [`AwsFailure`] facts.
//!
//! - `mount_targets`: DescribeMountTargets, for the mount target IP a
//!   sandbox's volume mounts through (`crate::volumes`).
//!
//! [`AwsFailure`]: crate::error::map::aws::AwsFailure

pub(crate) mod mount_targets;

use aws_sdk_efs as efs;
use efs::config::retry::RetryConfig;

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
