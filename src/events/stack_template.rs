//! The events-webhooks stack's template and parameter names, as `deploy`
//! sends them: generated in Rust by `crate::stacks` (the stack's own
//! module), so this SDK and the reference read and update one stack.

pub(super) use crate::stacks::events_webhooks_template::params;

/// The template body CloudFormation receives.
pub(super) fn body() -> String {
    crate::stacks::events_webhooks_template()
}

/// The largest reconciler interval the template accepts (its `MaxValue`).
pub(super) const MAX_RECONCILER_INTERVAL_MINUTES: u32 =
    crate::stacks::events_webhooks_template::MAX_RECONCILER_INTERVAL_MINUTES;
