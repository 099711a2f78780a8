//! The events-webhooks stack's template, as `deploy` sends it.
//!
//! The template is generated in Rust by the stack's own module
//! (`crate::stacks`, issue 47's stack part); until that module is in the
//! build, `deploy` on AWS is `Unimplemented` (status, destroy, webhooks and
//! events work against a stack deployed otherwise).

use crate::error::SandboxError;

/// The template body (JSON or YAML) CloudFormation receives.
///
/// # Errors
/// `Unimplemented` (`events deploy`) while the template is not in this build.
pub(crate) fn body() -> Result<String, SandboxError> {
    Err(SandboxError::unimplemented(
        "events deploy",
        "the events-webhooks template is not in this build of the SDK",
        Some("docs/events.md"),
    ))
}
