//! The state of a sandbox's MicroVM, as plain data shared by every layer
//! (the control-plane adapter parses it, errors and handles carry it),
//! and [`UnknownValue`], the token of a state or code this SDK does not know
//! (`rayito::error::UnknownValue`). Parsing, which cleans the token as an
//! error keeps it, is in `error::codes`.

use std::fmt;

/// A token that is not (yet) known to this version of the SDK.
///
/// It can only be produced by parsing, so `Unknown("closed")` can never stand
/// next to the known `Closed` arm with the same spelling.
#[derive(Clone, PartialEq, Eq, Hash)]
// A thin pointer: it keeps `CommandExitStatus` at two words, and with it
// `SandboxError` within its 64-byte budget.
#[allow(clippy::box_collection)]
pub struct UnknownValue(Box<String>);

impl UnknownValue {
    /// Wraps a token that `error::codes::clean_token` already cleaned.
    pub(crate) fn new(clean: String) -> Self {
        Self(Box::new(clean))
    }

    /// The token as it was received, cleaned: redacted like server text,
    /// on one line, at most 64 characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for UnknownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

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

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
