//! Secret gateways (issue 45; docs/secrets.md, "Gateways"): sandbox code
//! calls an HTTPS API through a loopback port on which the agent adds the
//! secret headers, so the code never holds the key.
//!
//! - [`SecretGateway`] (`spec`): the upstream, the headers and the secrets
//!   they read, the allow rules, the rate; every check, before any call;
//!   `path`: the safe-path rule of allow rules.
//! - `steps`: [`crate::SandboxBuilder::gateway`], the checks and the
//!   preflight read in `create`, the section sent in the one Configure
//!   once the sandbox is ready (terminated on failure unless kept), the
//!   recovery on `connect`.
//! - `section`: the Configure section (header values read through the
//!   secret cache just before the call) and the statuses read back.
//! - `view`: [`crate::Sandbox::gateways`], [`GatewayStatus`], `refresh`.
//! - `pool`: [`crate::Pool::take_with_gateways`].
//!
//! The values of the headers travel only in the Configure request to the
//! agent; no `Debug`, error or log line here holds one, or a secret's name.
//!
//! Only with the `secrets` cargo feature.

mod path;
mod pool;
#[cfg(test)]
mod seam_tests;
mod section;
mod spec;
mod steps;
#[cfg(test)]
mod tests;
mod view;

#[cfg(feature = "agent")]
pub(crate) use path::is_safe as is_safe_path;
pub use spec::{
    MAX_ALLOW_RULES, MAX_GATEWAYS, MAX_HEADERS, MAX_NAME_CHARS, MAX_RATE_PER_MINUTE, SecretGateway,
};
pub(crate) use steps::Steps;
pub use view::{GatewayStatus, Gateways};
