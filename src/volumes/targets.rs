//! The mount target each volume mounts through, looked up before
//! RunMicrovm for the volumes that do not carry one, so a file system
//! without a reachable mount target never launches (and bills) a MicroVM.
//!
//! One DescribeMountTargets per file system (and region) per `create`, with
//! the caller's credentials. EFS has one mount target per Availability
//! Zone and the SDK does not know the MicroVM's (its connector may leave
//! through any of its subnets), so the choice is deterministic: the first
//! `available` target by (`AvailabilityZoneId`, `MountTargetId`). Any of
//! them is reachable from the connector's subnets; crossing zones is billed
//! by EC2 apart.

use std::future::Future;
use std::net::Ipv4Addr;

use super::spec::EfsVolume;
use crate::aws::efs::Efs;
use crate::aws::efs::mount_targets::MountTarget;
use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, from_aws};
use crate::error::messages as m;

/// The one life-cycle state of a mount target that takes connections.
const AVAILABLE: &str = "available";

/// The address of the first `available` mount target with an IPv4
/// address, by (`AvailabilityZoneId`, `MountTargetId`); `None` when there is
/// none.
pub(crate) fn choose(targets: &[MountTarget]) -> Option<Ipv4Addr> {
    targets
        .iter()
        .filter(|t| t.state == AVAILABLE)
        .filter_map(|t| {
            let ip = t.ip_address.as_deref()?.parse::<Ipv4Addr>().ok()?;
            Some((t.availability_zone_id.as_str(), t.id.as_str(), ip))
        })
        .min()
        .map(|(_, _, ip)| ip)
}

/// Gives every volume without a mount target the one `lookup` finds for its
/// file system (`lookup(region, file_system_id)`: called once per file
/// system and region, in the volumes' order).
///
/// # Errors
/// `lookup`'s; `Volume` when a file system has no `available` mount target.
pub(crate) async fn resolve<F, Fut>(
    volumes: &mut [(String, EfsVolume)],
    mut lookup: F,
) -> Result<(), SandboxError>
where
    F: FnMut(Option<String>, String) -> Fut,
    Fut: Future<Output = Result<Vec<MountTarget>, SandboxError>>,
{
    let mut found: Vec<((Option<String>, String), Ipv4Addr)> = Vec::new();
    for (_, volume) in volumes.iter_mut() {
        if volume.mount_target_ip.is_some() {
            continue;
        }
        let key = (volume.region.clone(), volume.file_system_id.clone());
        let ip = match found.iter().find(|(k, _)| *k == key) {
            Some((_, ip)) => *ip,
            None => {
                let targets = lookup(key.0.clone(), key.1.clone()).await?;
                let ip = choose(&targets)
                    .ok_or_else(|| super::shim::volume(m::VOLUME_NO_MOUNT_TARGET.render(&[])))?;
                found.push((key, ip));
                ip
            }
        };
        volume.mount_target_ip = Some(ip);
    }
    Ok(())
}

/// Whether any volume needs a lookup (only then is an EFS client made).
pub(crate) fn needed(volumes: &[(String, EfsVolume)]) -> bool {
    volumes.iter().any(|(_, v)| v.mount_target_ip.is_none())
}

/// DescribeMountTargets through the AWS edge, with `sdk_config` (the
/// client's: on the local backend, the emulator's endpoint).
///
/// # Errors
/// As [`lookup_error`].
pub(crate) async fn describe(
    sdk_config: &aws_types::SdkConfig,
    region: Option<String>,
    file_system_id: String,
) -> Result<Vec<MountTarget>, SandboxError> {
    Efs::new(sdk_config, region.as_deref())
        .mount_targets(&file_system_id)
        .await
        .map_err(lookup_error)
}

/// What a failed DescribeMountTargets is: `VolumeNotFound` for a file
/// system that does not exist, `Volume` for a refused permission, else
/// the AWS mapping (throttling, no response, ...) without AWS's text,
/// which can name the file system.
pub(crate) fn lookup_error(mut failure: AwsFailure) -> SandboxError {
    match failure.code.as_deref() {
        Some("FileSystemNotFound") => {
            super::shim::volume_not_found(m::VOLUME_LOOKUP_NOT_FOUND.render(&[]))
        }
        Some("AccessDeniedException" | "AccessDenied") => {
            super::shim::volume(m::VOLUME_LOOKUP_DENIED.render(&[]))
        }
        _ => {
            failure.message = None;
            from_aws(failure)
        }
    }
}
