//! How the fleet's types serialize (the dashboard serves them as JSON):
//! a state as the control plane's token, a time as RFC 3339 UTC, a
//! duration in whole seconds.

use std::time::{Duration, SystemTime};

use serde::Serializer;

use crate::state::SandboxState;

/// `RUNNING`, `SUSPENDED`, ...
pub(crate) fn state<S: Serializer>(state: &SandboxState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.as_str())
}

/// `2026-12-06T23:35:32Z`, or `null`.
pub(crate) fn time<S: Serializer>(time: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(t) => s.serialize_str(&crate::aws::time::rfc3339(*t)),
        None => s.serialize_none(),
    }
}

/// Whole seconds, or `null`.
pub(crate) fn seconds<S: Serializer>(duration: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match duration {
        Some(d) => s.serialize_u64(d.as_secs()),
        None => s.serialize_none(),
    }
}
