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
    pub(crate) const LOGGER: &str =
        "the SDK emits tracing events; install a tracing subscriber instead";
    pub(crate) const HTTP_VERSION: &str =
        "the SDK chooses HTTP/2 to the agent and the AWS client's own version";
    pub(crate) const TEMPLATE_E2B: &str = "E2B's default image exists only at E2B; RAYITO_TEMPLATE or the backend's default image is used";
    pub(crate) const PAUSE_STRICT: &str = "suspending a MicroVM does not ask its agent, and a suspended sandbox always resumes with its memory";
    pub(crate) const RETAIN_OUTPUT: &str = "a handle keeps what it received until wait() returns; the agent keeps the last 1 MiB for connect_from";
    pub(crate) const CONNECT_TIMEOUT: &str =
        "attaching to a process has no deadline of its own; the process keeps its own timeout";
    pub(crate) const ON_HANDLE: &str = "the handle's connection and control plane are already built; pass it when creating or connecting";
}

/// Every option that can warn, with its reason, in the order of the table
/// in `docs/e2b-compat.md`.
pub const IGNORED: &[(&str, &str)] = &[
    ("api_key", reason::API_KEY),
    ("api_headers", reason::API_HEADERS),
    ("api_url", reason::API_URL),
    ("debug", reason::DEBUG),
    ("domain", reason::DOMAIN),
    ("http_version", reason::HTTP_VERSION),
    ("logger", reason::LOGGER),
    ("proxy", reason::PROXY),
    ("sandbox_url", reason::SANDBOX_URL),
    ("secure", reason::SECURE),
    ("validate_api_key", reason::VALIDATE_API_KEY),
    ("template", reason::TEMPLATE_E2B),
    ("strict", reason::PAUSE_STRICT),
    ("retain_output", reason::RETAIN_OUTPUT),
    ("timeout", reason::CONNECT_TIMEOUT),
    ("headers", reason::ON_HANDLE),
    ("request_timeout", reason::ON_HANDLE),
    ("retries", reason::ON_HANDLE),
];

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
