//! `sandbox.telemetry_status()`: the export's counters as the agent
//! reports them (one ConfigureStatus per read).

use crate::error::SandboxError;
use crate::pb;

/// A telemetry export's counters (all zero and no class when the sandbox
/// exports nothing, or its agent cannot).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryHealth {
    /// Points the collector took (seven a sample).
    pub exported: u64,
    /// Points dropped because the collector did not take them for too
    /// long (the agent keeps the newest 60 samples).
    pub dropped: u64,
    /// The class of the last failed export (`network`, `rejected`,
    /// `no_credentials`), kept after a later success; `None` before any
    /// failure. A class name only, never the agent's text.
    pub last_error_class: Option<String>,
}

impl TelemetryHealth {
    pub(crate) fn from_wire(status: Option<&pb::TelemetryExportStatus>) -> Self {
        let Some(s) = status else {
            return Self::default();
        };
        Self {
            exported: s.exported,
            dropped: s.dropped,
            last_error_class: (!s.last_error_class.is_empty())
                .then(|| crate::error::map::configure::error_class(&s.last_error_class).to_owned()),
        }
    }
}

impl crate::sandbox::Sandbox {
    /// The sandbox's telemetry export counters, read from its agent (one
    /// ConfigureStatus); all zero when it exports nothing
    /// (docs/observability.md).
    ///
    /// # Errors
    /// ConfigureStatus's failures, as the transport maps them.
    pub async fn telemetry_status(&self) -> Result<TelemetryHealth, SandboxError> {
        boxed!(Result<TelemetryHealth, SandboxError>, {
            let status = crate::configure::read_status(self.conn()).await?;
            Ok(TelemetryHealth::from_wire(status.telemetry_export.as_ref()))
        })
    }
}
