//! TEMPORARY: stands in for h-msdk's error kinds and path rules until its
//! branch is merged (then this file goes).
#![allow(dead_code, missing_docs)]

use crate::error::SandboxError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VolumeMountCode {
    Timeout,
    Other(String),
}

impl VolumeMountCode {
    pub(crate) fn from_class(class: &str) -> Self {
        Self::Other(class.to_owned())
    }
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Timeout => "timeout",
            Self::Other(s) => s,
        }
    }
}

pub(crate) fn volume(message: String) -> SandboxError {
    SandboxError::invalid_argument("volume", message)
}
pub(crate) fn volume_not_found(message: String) -> SandboxError {
    SandboxError::invalid_argument("volume_not_found", message)
}
pub(crate) fn volume_mount(_code: VolumeMountCode, message: String) -> SandboxError {
    SandboxError::invalid_argument("volume_mount", message)
}
pub(crate) fn check_all(_mounts: &[&str], _volumes: &[&str]) -> Result<(), SandboxError> {
    Ok(())
}
