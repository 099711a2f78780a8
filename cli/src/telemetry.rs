//! `sandbox create --telemetry ENDPOINT [--telemetry-bearer-secret NAME]
//! [--telemetry-interval SECS]`: the sandbox's agent exports its gauges
//! over OTLP/HTTP (docs/observability.md, "Telemetry export").

use std::time::Duration;

use rayito::SandboxBuilder;
use rayito::telemetry::{OtlpAuth, TelemetryExport};

/// The telemetry export options of `sandbox create`.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct TelemetryArgs {
    /// Export the sandbox's CPU, memory and disk gauges over OTLP/HTTP to
    /// this collector URL (https://, or http:// to a loopback host), signed
    /// with the execution role's SigV4 unless --telemetry-bearer-secret.
    #[arg(long = "telemetry", value_name = "ENDPOINT")]
    endpoint: Option<String>,
    /// Sign the exports with `Authorization: Bearer <token>`, the token the
    /// value of this Secrets Manager secret (name under rayito/, or ARN).
    #[arg(
        long = "telemetry-bearer-secret",
        value_name = "NAME",
        requires = "endpoint"
    )]
    bearer_secret: Option<String>,
    /// Seconds between exports (15 to 300; default 60).
    #[arg(long = "telemetry-interval", value_name = "SECS", requires = "endpoint",
          value_parser = clap::value_parser!(u64).range(15..=300))]
    interval: Option<u64>,
}

impl TelemetryArgs {
    /// `builder` with the export asked for (none: unchanged).
    pub(crate) fn apply(self, builder: SandboxBuilder) -> SandboxBuilder {
        let Some(endpoint) = self.endpoint else {
            return builder;
        };
        let mut export = TelemetryExport::new().endpoint(endpoint);
        if let Some(secs) = self.interval {
            export = export.interval(Duration::from_secs(secs));
        }
        if let Some(name) = self.bearer_secret {
            export = export.auth(OtlpAuth::bearer(name));
        }
        builder.telemetry(export)
    }
}
