//! One warning for every E2B option that means nothing on AWS.
//!
//! A warning names the option and says why it is ignored; it never holds the
//! option's value (an `api_key` is a secret). Each is emitted once as a
//! `tracing::warn!` event with target `rayito::compat` and kept on the handle
//! ([`crate::Sandbox::compat_warnings`]).

use std::sync::{Arc, Mutex, PoisonError};

/// An option that was set and is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatWarning {
    /// The E2B option name (`api_key`, `secure`, `request_timeout`, ...).
    pub option: &'static str,
    /// Why it means nothing here (a fixed text, never the option's value).
    pub reason: &'static str,
}

impl std::fmt::Display for CompatWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ignored: {}", self.option, self.reason)
    }
}

/// The reason for each ignored option: a contract, pinned by tests and
/// transcribed in `docs/e2b-compat.md`.
pub(crate) mod reason {
    pub(crate) const API_KEY: &str = "rayito uses the AWS credentials of the session";
    pub(crate) const DOMAIN: &str = "Lambda MicroVMs assigns each sandbox its own endpoint";
    pub(crate) const DEBUG: &str = "there is no local debug mode; choose the local backend instead";
    pub(crate) const API_URL: &str =
        "there is no E2B API; the control plane is Lambda MicroVMs in your AWS account";
    pub(crate) const SANDBOX_URL: &str = "Lambda MicroVMs assigns each sandbox its own endpoint";
    pub(crate) const VALIDATE_API_KEY: &str = "there is no api_key to validate";
    pub(crate) const API_HEADERS: &str = "there is no E2B API to send them to";
    pub(crate) const SECURE: &str =
        "every call to a sandbox carries its access token; it cannot be turned off";
    pub(crate) const PROXY: &str =
        "the SDK's HTTP clients do not take a proxy option; set HTTPS_PROXY for the AWS client";
    pub(crate) const ON_HANDLE: &str = "the handle's connection and control plane are already built; pass it when creating or connecting";
}

/// The warnings of one handle: emitted once each, kept in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Warnings(Arc<Mutex<Vec<CompatWarning>>>);

impl Warnings {
    /// Records and emits `option` (once per handle: a second identical
    /// warning is neither kept nor logged).
    pub(crate) fn warn(&self, option: &'static str, reason: &'static str) {
        let warning = CompatWarning { option, reason };
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.contains(&warning) {
            return;
        }
        tracing::warn!(target: "rayito::compat", option, reason, "{option} ignored: {reason}");
        kept.push(warning);
    }

    /// Every warning so far.
    pub(crate) fn all(&self) -> Vec<CompatWarning> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
