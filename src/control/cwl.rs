//! The one CloudWatch Logs client setup, shared by build logs (feature
//! `templates`) and sandbox logs (feature `logs`): the caller's AWS
//! configuration as it is (region, credentials, and the endpoint the AWS
//! SDKs' own settings give, e.g. `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`).

use aws_sdk_cloudwatchlogs as logs;

/// A CloudWatch Logs client over `config`.
pub(crate) fn client(config: &aws_types::SdkConfig) -> logs::Client {
    logs::Client::new(config)
}
