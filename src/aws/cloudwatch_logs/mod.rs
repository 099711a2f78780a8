//! CloudWatch Logs: build logs (feature `templates`, [`build`]) and
//! sandbox logs (feature `logs`, [`sandbox`]), over one client setup: the
//! caller's AWS configuration as it is (region, credentials, and the
//! endpoint the AWS SDKs' own settings give, e.g.
//! `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`).

#[cfg(feature = "templates")]
pub(crate) mod build;
#[cfg(feature = "logs")]
pub(crate) mod sandbox;

use aws_sdk_cloudwatchlogs as logs;

/// A CloudWatch Logs client over `config`.
pub(crate) fn client(config: &aws_types::SdkConfig) -> logs::Client {
    logs::Client::new(config)
}
