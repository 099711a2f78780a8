//! Telemetry export (issue 47; docs/observability.md, "Telemetry export"):
//! the sandbox's agent pushes its gauges (CPU, memory, disk) over
//! OTLP/HTTP on an interval, to CloudWatch's OTLP endpoint (signed with
//! the execution role) or to any collector (`TelemetryExport::endpoint`,
//! a bearer token or the execution role). The SDK makes no call of its
//! own for it: it sends the section in the one Configure of `create`.
//!
//! - `spec`: [`TelemetryExport`], [`OtlpAuth`], [`TelemetryNames`] and
//!   every check of `create`, before any call.
//! - `steps`: [`crate::SandboxBuilder::telemetry`], the checks, the
//!   `telemetry_export` section (image facts read once the sandbox runs;
//!   the bearer token read through the secret cache).
//! - `view`: [`crate::Sandbox::telemetry_status`], [`TelemetryHealth`].
//!
//! The bearer token travels only in Configure: never in a message,
//! `Debug`, log line or status.

mod spec;
mod steps;
#[cfg(test)]
mod tests;
mod view;

pub use spec::{OtlpAuth, TelemetryExport, TelemetryNames};
pub(crate) use steps::Steps;
pub use view::TelemetryHealth;
