//! The `efs_volumes` section of Configure: built from the checked volumes
//! (each with its mount target), and what the agent's answers mean for
//! volumes (`crate::configure::Outcomes`).
//!
//! The reference's agent mounts inside the Configure call, one volume at a
//! time until the first failure, each bounded by 15 s: the call's deadline
//! and the wait for a PENDING answer are both 4 × 15 + 5 = 65 s.

use std::time::Duration;

use super::spec::{ARGUMENT, DOC, EfsVolume};
use crate::configure::{ApplyOptions, Outcomes, Section, SectionPlan, first_waiting};
use crate::error::SandboxError;
use crate::error::VolumeMountCode;
use crate::error::map::configure::{NotAvailable, error_class};
use crate::error::messages as m;
use crate::pb;

/// The deadline of the Configure call with volumes, and of the wait for
/// them to settle: the agent's worst case with 4 volumes (15 s each) plus
/// a margin for the bind, the network and scheduling.
pub(crate) const APPLY_TIMEOUT: Duration = Duration::from_secs(4 * 15 + 5);

/// The request carrying only the `efs_volumes` section for `volumes` (each
/// mount target already looked up; none left empty).
pub(crate) fn request(volumes: &[(String, EfsVolume)]) -> pb::ConfigureRequest {
    pb::ConfigureRequest {
        efs_volumes: Some(pb::EfsVolumesConfig {
            mounts: volumes
                .iter()
                .map(|(path, v)| pb::EfsVolumeMount {
                    mount_path: path.clone(),
                    file_system_id: v.file_system_id.clone(),
                    access_point_id: v.access_point_id.clone(),
                    read_only: v.read_only,
                    mount_target_ip: v
                        .mount_target_ip
                        .map(|ip| ip.to_string())
                        .unwrap_or_default(),
                })
                .collect(),
        }),
        ..Default::default()
    }
}

/// The closed code of an agent's error class (`Unknown` keeps any other,
/// filtered as a class name).
pub(crate) fn code_of(class: &str) -> VolumeMountCode {
    VolumeMountCode::from(error_class(class))
}

/// The code as a message names it: a known one by its name, any other
/// `unknown` (the reference's closed list).
fn shown(code: &VolumeMountCode) -> &str {
    if code.is_known() {
        code.as_str()
    } else {
        "unknown"
    }
}

/// `Unimplemented { feature: "volumes" }`: the image cannot mount EFS.
pub(crate) fn unsupported_image() -> SandboxError {
    SandboxError::unimplemented(ARGUMENT, m::VOLUME_IMAGE_REASON.text, Some(DOC))
}

/// `VolumeMount` for the whole section (INVALID or FAILED).
pub(crate) fn refused(class: &str) -> SandboxError {
    let code = code_of(class);
    let message = m::VOLUME_MOUNT_REFUSED.render(&[("code", shown(&code))]);
    SandboxError::volume_mount(code, message)
}

/// `VolumeMount` for the volume at `path`, FAILED while settling.
pub(crate) fn failed_at(path: &str, class: &str) -> SandboxError {
    let code = code_of(class);
    let message = m::VOLUME_MOUNT_FAILED.render(&[("path", path), ("code", shown(&code))]);
    SandboxError::volume_mount(code, message)
}

/// What the agent's answers mean for the volumes of one apply: settled
/// when every path asked is MOUNTED (the reference's reading: DEGRADED or
/// UNMOUNTED right after a mount is not usable).
#[derive(Debug)]
pub(crate) struct VolumeOutcomes {
    pub(crate) paths: Vec<String>,
}

impl Outcomes for VolumeOutcomes {
    fn not_available(&self, _section: Section, why: NotAvailable) -> SandboxError {
        match why {
            // An agent older than Configure: the generic reason says so.
            NotAvailable::NoFeatures => SandboxError::configure_unimplemented(ARGUMENT, why),
            NotAvailable::SectionOff | NotAvailable::Unsupported => unsupported_image(),
        }
    }

    fn invalid(&self, _section: Section, class: &str) -> SandboxError {
        refused(class)
    }

    fn failed(&self, _section: Section, class: &str) -> SandboxError {
        refused(class)
    }

    fn settled(
        &self,
        _section: Section,
        status: &pb::ConfigureStatusResponse,
    ) -> Result<bool, SandboxError> {
        let reported = status
            .efs_volumes
            .as_ref()
            .map_or(&[][..], |s| s.volumes.as_slice());
        let waiting = first_waiting(
            &self.paths,
            reported,
            |v| &v.mount_path,
            |path, v| match v.state() {
                pb::EfsVolumeState::Failed => Err(failed_at(path, &v.last_error_class)),
                state => Ok(state == pb::EfsVolumeState::Mounted),
            },
        )?;
        Ok(waiting.is_none())
    }

    fn unsettled(&self, _section: Section, limit: Duration) -> SandboxError {
        let code = VolumeMountCode::Timeout;
        let limit = format!("{} s", limit.as_secs());
        SandboxError::volume_mount(code, m::VOLUME_MOUNT_TIMEOUT.render(&[("limit", &limit)]))
    }
}

/// The `efs_volumes` part of the one Configure for `volumes`: their
/// outcomes, the call's deadline and the wait for a PENDING answer (both
/// [`APPLY_TIMEOUT`]).
pub(crate) fn plan(volumes: &[(String, EfsVolume)]) -> SectionPlan {
    SectionPlan {
        section: Section::EfsVolumes,
        request: request(volumes),
        options: ApplyOptions {
            pending_timeout: APPLY_TIMEOUT,
            call_timeout: APPLY_TIMEOUT,
        },
        outcomes: Box::new(VolumeOutcomes {
            paths: volumes.iter().map(|(p, _)| p.clone()).collect(),
        }),
        after: None,
    }
}
