//! The state of a sandbox's MicroVM, as plain data shared by every layer
//! (the control-plane adapter parses it, errors and handles carry it).

use std::fmt;

use crate::error::{UnknownValue, clean_token};

/// The state of a MicroVM as the control plane reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SandboxState {
    /// Starting; the agent has not accepted the run hook yet.
    Pending,
    /// Running.
    Running,
    /// Being suspended.
    Suspending,
    /// Suspended (paused).
    Suspended,
    /// Being terminated.
    Terminating,
    /// Terminated.
    Terminated,
    /// A state this SDK does not know yet. The token is kept, and only
    /// parsing can produce it (see [`UnknownValue`]): match newer states
    /// with a guard on [`SandboxState::as_str`].
    Unknown(UnknownValue),
}

impl SandboxState {
    /// The control plane's token (`RUNNING`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Suspending => "SUSPENDING",
            Self::Suspended => "SUSPENDED",
            Self::Terminating => "TERMINATING",
            Self::Terminated => "TERMINATED",
            Self::Unknown(other) => other.as_str(),
        }
    }

    /// True for `TERMINATING` and `TERMINATED`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Terminating | Self::Terminated)
    }
}

impl From<&str> for SandboxState {
    fn from(token: &str) -> Self {
        let token = clean_token(token);
        match token.as_str() {
            "PENDING" => Self::Pending,
            "RUNNING" => Self::Running,
            "SUSPENDING" => Self::Suspending,
            "SUSPENDED" => Self::Suspended,
            "TERMINATING" => Self::Terminating,
            "TERMINATED" => Self::Terminated,
            _ => Self::Unknown(UnknownValue::new(token)),
        }
    }
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
