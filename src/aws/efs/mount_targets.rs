//! DescribeMountTargets: a file system's mount targets, as plain data (the
//! choice of one is `crate::volumes`'s).

use super::Efs;
use crate::aws::failure::extract;
use crate::error::map::aws::AwsFailure;

/// The most pages read (EFS has at most one mount target per Availability
/// Zone, so one page of the default 10 is the rule; the bound stops a
/// server that would page forever).
const MAX_PAGES: usize = 16;

/// One mount target of a file system.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MountTarget {
    pub id: String,
    /// Its `AvailabilityZoneId` (empty when EFS gives none).
    pub availability_zone_id: String,
    /// Its `LifeCycleState` (`creating`, `available`, ...).
    pub state: String,
    /// Its IPv4 address, when it has one.
    pub ip_address: Option<String>,
}

impl Efs {
    /// Every mount target of `file_system_id` (DescribeMountTargets, all
    /// pages).
    ///
    /// # Errors
    /// The call's failure, as facts (`FileSystemNotFound`,
    /// `AccessDeniedException`, throttling, no response, ...).
    pub(crate) async fn mount_targets(
        &self,
        file_system_id: &str,
    ) -> Result<Vec<MountTarget>, AwsFailure> {
        const OPERATION: &str = "DescribeMountTargets";
        let mut targets = Vec::new();
        let mut marker: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .client
                .describe_mount_targets()
                .file_system_id(file_system_id)
                .set_marker(marker.take())
                .send()
                .await
                .map_err(|err| extract(OPERATION, &err))?;
            targets.extend(page.mount_targets().iter().map(|t| MountTarget {
                id: t.mount_target_id().to_owned(),
                availability_zone_id: t.availability_zone_id().unwrap_or_default().to_owned(),
                state: t.life_cycle_state().as_str().to_owned(),
                ip_address: t.ip_address().map(str::to_owned),
            }));
            match page.next_marker() {
                Some(next) if !next.is_empty() => marker = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(targets)
    }
}
