//! The efs-volumes component's template (features `stacks` and `efs`):
//! written from the deploy's parameters by the volumes' own generator
//! (`crate::volumes`' template, which has no CloudFormation parameter and
//! no condition: one mount target per subnet, the client policy built for
//! the given access points), so that `rayito stack deploy efs-volumes` and
//! `rayito volumes deploy` send the same template for the same values,
//! with the same tags.

use std::collections::BTreeMap;

use crate::error::SandboxError;
use crate::volumes::{EfsDeployOptions, EfsVolumes};

/// A comma list (`a,b`), blanks and empty items dropped.
fn list(value: Option<&String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The options of `EfsVolumes::deploy` the parameters say (the defaults
/// for those left out) and the VPC and subnets.
///
/// # Errors
/// `InvalidArgument` (`parameters`) for an `AllowWrite` other than `true`
/// or `false`.
pub(crate) fn deploy_values(
    values: &BTreeMap<String, String>,
) -> Result<(String, Vec<String>, EfsDeployOptions), SandboxError> {
    let mut options = EfsDeployOptions::default();
    if let Some(name) = values.get("ConnectorName") {
        options.connector_name.clone_from(name);
    }
    options.allow_write = match values.get("AllowWrite").map(String::as_str) {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => {
            return Err(SandboxError::invalid_argument(
                "parameters",
                "efs-volumes: AllowWrite is true or false",
            ));
        }
    };
    options.access_point_arns = list(values.get("AccessPointArns"));
    options.read_only_access_point_arns = list(values.get("ReadOnlyAccessPointArns"));
    let vpc_id = values.get("VpcId").cloned().unwrap_or_default();
    Ok((vpc_id, list(values.get("SubnetIds")), options))
}

/// The template a deploy with `values` sends.
///
/// # Errors
/// As [`deploy_values`], and `EfsVolumes::template`'s refusals (the VPC,
/// the subnets, the ARNs, the connector's name).
pub(crate) fn render(values: &BTreeMap<String, String>) -> Result<String, SandboxError> {
    let (vpc_id, subnet_ids, options) = deploy_values(values)?;
    EfsVolumes::template(&vpc_id, &subnet_ids, &options)
}
