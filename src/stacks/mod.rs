//! Optional CloudFormation stacks a feature needs in the account (feature
//! `setup`), beside the two `rayito setup` deploys: each generated here,
//! deployed, read and deleted through the same CloudFormation edge
//! (`crate::aws::cloudformation`).
//!
//! - [`s3_mounts`]: `rayito-s3-mounts`, the managed policy an execution
//!   role needs for sandboxes that mount an S3 bucket (`mounts=`).
//! - [`events_webhooks_template`]: `rayito-events-webhooks`, the lifecycle
//!   events pipeline (`events=`): its template.
//! - [`OptionalStacks`] (feature `stacks`): every component of the
//!   catalog ([`components`]) deployed, read and deleted by name, with the
//!   rules of docs/stacks.md; [`CloudWatchBoard`], the CloudWatch dashboard
//!   `rayito dashboard cloudwatch` prints.

pub mod events_webhooks_template;
pub mod s3_mounts;
mod s3_mounts_template;

#[cfg(feature = "stacks")]
mod catalog;
#[cfg(feature = "stacks")]
mod cloudwatch_board;
#[cfg(feature = "stacks")]
mod dashboard_cloudwatch_template;
#[cfg(feature = "stacks")]
mod dashboard_read_role_template;
#[cfg(feature = "stacks")]
pub mod dashboard_template;
#[cfg(all(feature = "stacks", feature = "efs"))]
mod efs_volumes_template;
#[cfg(feature = "stacks")]
mod metadata_index_template;
#[cfg(feature = "stacks")]
mod model;
#[cfg(feature = "stacks")]
mod otlp_export_template;
#[cfg(feature = "stacks")]
mod plan;
#[cfg(feature = "stacks")]
mod quota_alerts_template;
#[cfg(feature = "stacks")]
mod secrets_access_template;
#[cfg(feature = "stacks")]
mod service;
#[cfg(feature = "stacks")]
mod sizes_guard_template;
#[cfg(feature = "stacks")]
mod templates_policy_template;
#[cfg(all(test, feature = "stacks"))]
mod tests;

#[cfg(feature = "stacks")]
pub use cloudwatch_board::{
    CloudWatchBoard, DASHBOARD_START, DEFAULT_LOG_GROUP_PREFIX, ERROR_PATTERN, LOG_BIN,
    QUOTA_CRITICAL_FRACTION, QUOTA_METRIC_NAME, QUOTA_METRIC_NAMESPACE, QUOTA_WARNING_FRACTION,
};
#[cfg(feature = "stacks")]
pub use dashboard_read_role_template::DASHBOARD_SESSION_SECONDS;
#[cfg(feature = "stacks")]
pub use model::{
    CostStatement, ParameterChange, StackArtifact, StackComponent, StackDeployed, StackParameter,
    StackStatus, UpdateOutcome,
};
#[cfg(feature = "stacks")]
pub use plan::{COMPONENT_TAG, MANAGED_BY, MANAGED_BY_TAG, SDK_VERSION_TAG, artifact_key};
#[cfg(feature = "stacks")]
pub use service::{
    DEFAULT_WAIT_POLL, DEFAULT_WAIT_TIMEOUT, OptionalStacks, StackDeploy, component, components,
};

use std::time::Duration;

use crate::Client;
use crate::aws::cloudformation::Stacks;
use crate::error::SandboxError;
use crate::setup::{CLOUDFORMATION_ENDPOINT_ENV, DEFAULT_POLL_INTERVAL, DEFAULT_STACK_TIMEOUT};

pub use events_webhooks_template::{
    EVENTS_WEBHOOKS_OUTPUTS, EVENTS_WEBHOOKS_STACK, events_webhooks_template,
};
pub use s3_mounts::{S3MountsDeployed, S3MountsPolicies, S3MountsPolicy, S3MountsStack};
pub use s3_mounts_template::{
    MAX_PREFIXES, S3_MOUNTS_OUTPUT, S3_MOUNTS_STACK, s3_mounts_policy, s3_mounts_template,
};

/// How an optional stack is deployed, read and deleted.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StackOptions {
    /// CloudFormation's endpoint, when not AWS's (tests, emulators); else
    /// `AWS_ENDPOINT_URL_CLOUDFORMATION` (as for
    /// [`SetupOptions`](crate::setup::SetupOptions)).
    pub cloudformation_endpoint_url: Option<String>,
    /// How long to wait for a stack to settle (default 15 minutes).
    pub timeout: Duration,
    /// How often its status is read while waiting (default 5 s).
    pub poll_interval: Duration,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            cloudformation_endpoint_url: None,
            timeout: DEFAULT_STACK_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }
}

/// The CloudFormation client of `client`'s account and region.
async fn stacks(client: &Client, options: &StackOptions) -> Result<Stacks, SandboxError> {
    let services = client.template_services().await?;
    let endpoint = options.cloudformation_endpoint_url.clone().or_else(|| {
        std::env::var(CLOUDFORMATION_ENDPOINT_ENV)
            .ok()
            .filter(|v| !v.is_empty())
    });
    Ok(Stacks::new(services.sdk_config(), endpoint.as_deref()))
}
