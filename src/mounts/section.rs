//! The `s3_mounts` section of Configure: built from the checked mounts,
//! and what the agent's answers mean for mounts
//! (`crate::configure::Outcomes`).
//!
//! The agent answers PENDING and mounts in the background, each mount
//! bounded by 10 s (it reports `timeout` itself past that): the SDK polls
//! ConfigureStatus for at most [`SETTLE_TIMEOUT`], 5 s more, so that the
//! agent's verdict is reported rather than guessed.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::spec::{DOC, S3Mount};
use crate::configure::{ApplyOptions, Outcomes, Section, SectionPlan, first_waiting};
use crate::error::map::configure::{NotAvailable, error_class};
use crate::error::messages::{self as m, Template};
use crate::error::{MountCode, SandboxError};
use crate::mount_path::MOUNTS;
use crate::pb;

/// How long `create` waits for every mount to settle.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);

/// The request carrying only the `s3_mounts` section for `mounts`.
pub(crate) fn request(mounts: &[(String, S3Mount)]) -> pb::ConfigureRequest {
    pb::ConfigureRequest {
        s3_mounts: Some(pb::S3MountsConfig {
            mounts: mounts
                .iter()
                .map(|(path, mount)| pb::S3Mount {
                    mount_path: path.clone(),
                    bucket: mount.bucket.clone(),
                    prefix: mount.prefix.clone(),
                    read_only: mount.read_only,
                    allow_overwrite: mount.allow_overwrite,
                    allow_delete: mount.allow_delete,
                })
                .collect(),
        }),
        ..Default::default()
    }
}

/// The closed code of an agent's error class (`Unknown` keeps any other,
/// filtered as a class name).
pub(crate) fn code_of(class: &str) -> MountCode {
    MountCode::from(error_class(class))
}

/// The code as a message names it (a known one by its name, any other
/// `unknown`) and what to do about it.
fn shown(code: &MountCode) -> (&str, Template) {
    let remedy = match code {
        MountCode::Network => m::MOUNT_REMEDY_NETWORK,
        MountCode::IamDenied => m::MOUNT_REMEDY_IAM_DENIED,
        MountCode::NotFound => m::MOUNT_REMEDY_NOT_FOUND,
        MountCode::NotAllowed => m::MOUNT_REMEDY_NOT_ALLOWED,
        MountCode::InvalidPath => m::MOUNT_REMEDY_INVALID_PATH,
        MountCode::HelperMissing => m::MOUNT_REMEDY_HELPER_MISSING,
        MountCode::Timeout => m::MOUNT_REMEDY_TIMEOUT,
        _ => m::MOUNT_REMEDY_UNKNOWN,
    };
    let name = if code.is_known() {
        code.as_str()
    } else {
        "unknown"
    };
    (name, remedy)
}

/// `Mount { code }` from `template` with the code's name and remedy.
fn mount_error(code: MountCode, template: Template, args: &[(&str, &str)]) -> SandboxError {
    let (name, remedy) = shown(&code);
    let mut all = vec![("code", name), ("remedy", remedy.text)];
    all.extend_from_slice(args);
    let message = template.render(&all);
    SandboxError::mount(code, message)
}

/// `Mount` for the whole section, answered `status` (`INVALID`, `FAILED`).
pub(crate) fn refused(status: &str, class: &str) -> SandboxError {
    mount_error(code_of(class), m::MOUNT_REFUSED, &[("status", status)])
}

/// `Mount` for the mount at `path`, FAILED while settling.
pub(crate) fn failed_at(path: &str, class: &str) -> SandboxError {
    mount_error(code_of(class), m::MOUNT_FAILED, &[("path", path)])
}

/// `Mount { timeout }`: the mount at `path` had not settled after `waited`.
pub(crate) fn unsettled_at(path: &str, waited: Duration) -> SandboxError {
    let waited = format!("{} s", waited.as_secs());
    mount_error(
        MountCode::Timeout,
        m::MOUNT_UNSETTLED,
        &[("path", path), ("waited", &waited)],
    )
}

/// `Unimplemented { feature: "mounts" }`, saying why.
pub(crate) fn not_available(why: NotAvailable) -> SandboxError {
    let reason = match why {
        // An agent older than Configure: the generic reason says so.
        NotAvailable::NoFeatures => return SandboxError::configure_unimplemented(MOUNTS, why),
        NotAvailable::SectionOff => m::MOUNT_OFF_REASON,
        NotAvailable::Unsupported => m::MOUNT_UNSUPPORTED_REASON,
    };
    SandboxError::unimplemented(MOUNTS, reason.text, Some(DOC))
}

/// What the agent's answers mean for the mounts of one apply: settled when
/// every path asked is MOUNTED; the first FAILED one fails; a path not
/// reported, or in a phase this SDK does not know, is pending.
#[derive(Debug)]
pub(crate) struct MountOutcomes {
    paths: Vec<String>,
    /// The first path still pending at the latest poll (the one a timeout
    /// names).
    waiting: Mutex<Option<String>>,
}

impl MountOutcomes {
    pub(crate) fn new(mounts: &[(String, S3Mount)]) -> Self {
        Self {
            paths: mounts.iter().map(|(p, _)| p.clone()).collect(),
            waiting: Mutex::new(None),
        }
    }
}

impl Outcomes for MountOutcomes {
    fn not_available(&self, _section: Section, why: NotAvailable) -> SandboxError {
        not_available(why)
    }

    fn invalid(&self, _section: Section, class: &str) -> SandboxError {
        refused("INVALID", class)
    }

    fn failed(&self, _section: Section, class: &str) -> SandboxError {
        refused("FAILED", class)
    }

    fn settled(
        &self,
        _section: Section,
        status: &pb::ConfigureStatusResponse,
    ) -> Result<bool, SandboxError> {
        let reported = status
            .s3_mounts
            .as_ref()
            .map_or(&[][..], |s| s.mounts.as_slice());
        let waiting = first_waiting(
            &self.paths,
            reported,
            |s| &s.mount_path,
            |path, s| match s.phase() {
                pb::S3MountPhase::Failed => Err(failed_at(path, &s.error_class)),
                phase => Ok(phase == pb::S3MountPhase::Mounted),
            },
        )?;
        let settled = waiting.is_none();
        *self.waiting.lock().unwrap_or_else(PoisonError::into_inner) = waiting;
        Ok(settled)
    }

    fn unsettled(&self, _section: Section, limit: Duration) -> SandboxError {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // No poll yet (a zero bound): every path is still waiting.
        let path = waiting
            .or_else(|| self.paths.first().cloned())
            .unwrap_or_default();
        unsettled_at(&path, limit)
    }
}

/// The `s3_mounts` part of the one Configure for `mounts`: their outcomes,
/// and the wait for a PENDING answer ([`SETTLE_TIMEOUT`]).
pub(crate) fn plan(mounts: &[(String, S3Mount)]) -> SectionPlan {
    SectionPlan {
        section: Section::S3Mounts,
        request: request(mounts),
        options: ApplyOptions {
            pending_timeout: SETTLE_TIMEOUT,
            ..ApplyOptions::default()
        },
        outcomes: Box::new(MountOutcomes::new(mounts)),
        after: None,
    }
}
