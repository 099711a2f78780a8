//! Where a sandbox's output goes: RunMicrovm's `logging`, always sent
//! explicitly (RunMicrovm does not inherit the image's log group). See
//! docs/sandbox-logs.md.

use crate::control::RunLogging;
use crate::error::SandboxError;

/// The longest CloudWatch Logs group name (AWS's limit).
const MAX_GROUP_CHARS: usize = 512;

/// The refusal of a log group name (the reason part of
/// `invalid log_group: <reason>`); it never quotes the name.
pub(crate) const BAD_GROUP: &str = "a log group name must be 1 to 512 of A-Z, a-z, 0-9, '_', '-', '/', '.' and '#'; pass a valid group name, or none for /rayito/<template name>";

/// A sandbox's logging (RunMicrovm `logging`).
///
/// The default is [`SandboxLogging::Disabled`]. With
/// [`SandboxLogging::cloudwatch`] the service writes the sandbox's output
/// to CloudWatch Logs, group `/rayito/<template name>` unless another is
/// named, stream `YYYY/MM/DD[<imageVersion>]<sandbox id>` (the UTC day it
/// started). Useful only with an execution role
/// ([`crate::SandboxBuilder::execution_role_arn`]) that may write there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxLogging {
    /// No logs (sent as `logging: {disabled: {}}`).
    #[default]
    Disabled,
    /// CloudWatch Logs.
    CloudWatch {
        /// The group; `None`: `/rayito/<template name>`.
        log_group: Option<String>,
    },
}

impl SandboxLogging {
    /// CloudWatch Logs in the default group, `/rayito/<template name>`.
    pub fn cloudwatch() -> Self {
        Self::CloudWatch { log_group: None }
    }

    /// CloudWatch Logs in `log_group`.
    pub fn cloudwatch_group(log_group: impl Into<String>) -> Self {
        Self::CloudWatch {
            log_group: Some(log_group.into()),
        }
    }

    /// Refuses a group name CloudWatch Logs would refuse, before any call.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        match self {
            Self::CloudWatch {
                log_group: Some(group),
            } => check_log_group(group),
            _ => Ok(()),
        }
    }

    /// What RunMicrovm sends for a sandbox of the image `image_arn`.
    pub(crate) fn resolve(&self, image_arn: &str) -> RunLogging {
        match self {
            Self::Disabled => RunLogging::Disabled,
            Self::CloudWatch { log_group } => RunLogging::CloudWatch {
                log_group: log_group
                    .clone()
                    .unwrap_or_else(|| default_log_group(image_arn)),
            },
        }
    }
}

/// `/rayito/<image name>`: the group of an image's builds and of its
/// sandboxes (the name is the ARN's last part, `microvm-image:<name>`).
pub(crate) fn default_log_group(image_arn: &str) -> String {
    let name = image_arn
        .rsplit_once(":microvm-image:")
        .map_or(image_arn, |(_, name)| name);
    // A version suffix (`name:3`) is not part of the name.
    let name = name.split(':').next().unwrap_or(name);
    format!("/rayito/{name}")
}

/// `log_group` as CloudWatch Logs takes it: 1 to 512 of `[.\-_/#A-Za-z0-9]`.
///
/// # Errors
/// `InvalidArgument` (`log_group`).
pub(crate) fn check_log_group(log_group: &str) -> Result<(), SandboxError> {
    let ok = !log_group.is_empty()
        && log_group.len() <= MAX_GROUP_CHARS
        && log_group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/#".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument("log_group", BAD_GROUP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:lambda:us-east-1:123456789012:microvm-image:py-large";

    #[test]
    fn the_default_group_is_the_image_name_under_rayito() {
        assert_eq!(default_log_group(ARN), "/rayito/py-large");
        assert_eq!(default_log_group(&format!("{ARN}:3")), "/rayito/py-large");
        assert_eq!(SandboxLogging::default().resolve(ARN), RunLogging::Disabled);
        assert_eq!(
            SandboxLogging::cloudwatch().resolve(ARN),
            RunLogging::CloudWatch {
                log_group: "/rayito/py-large".to_owned()
            }
        );
        assert_eq!(
            SandboxLogging::cloudwatch_group("/team/a").resolve(ARN),
            RunLogging::CloudWatch {
                log_group: "/team/a".to_owned()
            }
        );
    }

    #[test]
    fn bad_group_names_are_refused_naming_the_argument_only() {
        for bad in ["", "has space", "a*b", &"a".repeat(513), "ünï"] {
            let err = SandboxLogging::cloudwatch_group(bad).check().unwrap_err();
            assert_eq!(err.to_string(), format!("invalid log_group: {BAD_GROUP}"));
        }
        for good in ["/rayito/x", "a.b-c_d#e/f", &"a".repeat(512)] {
            SandboxLogging::cloudwatch_group(good).check().unwrap();
        }
        SandboxLogging::cloudwatch().check().unwrap();
    }
}
