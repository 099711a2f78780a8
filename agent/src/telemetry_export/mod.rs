//! Configure's `telemetry_export` section: the agent pushes the sandbox's
//! gauges (the metrics history's newest sample: CPU, memory, disk) over
//! OTLP/HTTP on the section's interval (docs/observability.md).
//!
//! - `plan`: the section checked whole (INVALID names the field).
//! - `otlp`: the request body (OTLP's `ExportMetricsServiceRequest`).
//! - `sink`: one POST (gzip, SigV4 or bearer, timeouts, failure classes).
//! - `exporter`: the task (queue, retries with jittered backoff, flush).
//!
//! Where: CloudWatch's OTLP endpoint of the agent's region
//! (`https://monitoring.<region>.amazonaws.com/v1/metrics`; the section is
//! UNSUPPORTED when the agent knows no region: `AWS_REGION` on a MicroVM,
//! never on the local backend, which calls no AWS endpoint), or the
//! section's `endpoint` (a rayito extension: any OTLP/HTTP collector).
//! Replace semantics: a section replaces the running export (counters
//! start again); the all-default section stops it. The bearer token is
//! never logged and never reported back.

mod exporter;
mod otlp;
mod plan;
mod sink;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::metrics::Metrics;
use crate::pb;
use crate::persist::{Persist, PersistenceAccess};
use crate::run::RunState;
use exporter::{Counters, Handle};
use plan::{Auth, Target};

/// How long `/suspend` waits for the flush.
pub(crate) const FLUSH_WITHIN: Duration = Duration::from_secs(2);

/// FAILED: the export could not be set up (no HTTP client, or SigV4 with
/// no credentials or no region to sign for).
const SINK_INIT_FAILED: &str = "sink_init_failed";

/// A section's answer.
type Outcome = (pb::SectionCode, &'static str);

/// The running export and the counters ConfigureStatus reports.
#[derive(Debug, Default)]
struct State {
    running: Option<Handle>,
    /// The last applied export's counters (kept after a stop).
    counters: Option<Arc<Counters>>,
}

/// One agent's telemetry export.
#[derive(Debug)]
pub(crate) struct TelemetryExports {
    enabled: bool,
    metrics: Option<Arc<Metrics>>,
    persist: Arc<Persist>,
    run: Arc<RunState>,
    state: Mutex<State>,
}

impl TelemetryExports {
    /// The export of an agent whose feature switch is `enabled`, reading
    /// `metrics` (none: an agent without metrics cannot export).
    pub(crate) fn new(
        enabled: bool,
        metrics: Option<Arc<Metrics>>,
        persist: Arc<Persist>,
        run: Arc<RunState>,
    ) -> Self {
        Self {
            enabled,
            metrics,
            persist,
            run,
            state: Mutex::default(),
        }
    }

    /// Health's `features.telemetry_export`: the feature on, with metrics.
    pub(crate) fn supported(&self) -> bool {
        self.enabled && self.metrics.is_some()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The region CloudWatch's endpoint is in: the agent's on AWS; none on
    /// the local backend.
    fn cloudwatch_region(&self) -> Option<String> {
        match self.persist.access() {
            PersistenceAccess::Aws => crate::persist::aws_region(),
            PersistenceAccess::Local(_) => None,
        }
    }

    /// The region a SigV4 signature names, with whether credentials exist
    /// at all (`false`: a local sandbox without an execution role).
    fn signing(&self) -> (Option<String>, bool) {
        match self.persist.access() {
            PersistenceAccess::Aws => (crate::persist::aws_region(), true),
            PersistenceAccess::Local(Some(local)) => (Some(local.region), true),
            PersistenceAccess::Local(None) => (None, false),
        }
    }

    /// Applies a section: starts (or replaces, or stops) the export.
    pub(crate) fn apply(&self, config: pb::TelemetryExportConfig) -> Outcome {
        let Some(metrics) = self.metrics.clone().filter(|_| self.enabled) else {
            return (pb::SectionCode::Unsupported, "");
        };
        if plan::is_stop(&config) {
            self.state().running = None;
            return (pb::SectionCode::Applied, "");
        }
        let plan = match plan::check(config) {
            Ok(plan) => plan,
            Err(class) => return (pb::SectionCode::Invalid, class),
        };
        let url = match &plan.target {
            Target::Url(url) => url.clone(),
            Target::CloudWatch => match self.cloudwatch_region() {
                Some(region) => match cloudwatch_url(&region) {
                    Some(url) => url,
                    None => return (pb::SectionCode::Failed, SINK_INIT_FAILED),
                },
                None => return (pb::SectionCode::Unsupported, ""),
            },
        };
        let signer = match &plan.auth {
            Auth::Bearer(token) => sink::Signer::Bearer(token.clone()),
            Auth::ExecutionRole => match self.signing() {
                (Some(region), true) => sink::Signer::SigV4 {
                    persist: self.persist.clone(),
                    region,
                },
                _ => return (pb::SectionCode::Failed, SINK_INIT_FAILED),
            },
        };
        let Ok(client) = crate::persist::s3::http_client() else {
            return (pb::SectionCode::Failed, SINK_INIT_FAILED);
        };
        let sandbox_id = self
            .run
            .info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|r| r.sandbox_id.clone())
            .unwrap_or_default();
        let counters = Arc::new(Counters::default());
        let handle = exporter::spawn(exporter::Task {
            plan,
            sink: sink::Sink {
                client,
                url,
                signer,
            },
            metrics,
            run: self.run.clone(),
            sandbox_id,
            counters: counters.clone(),
        });
        let mut state = self.state();
        // The previous task stops as its handle drops.
        state.running = Some(handle);
        state.counters = Some(counters);
        (pb::SectionCode::Applied, "")
    }

    /// ConfigureStatus's `telemetry_export`: `None` until a section was
    /// applied. Counters and a class only: never the token or the URL.
    pub(crate) fn status(&self) -> Option<pb::TelemetryExportStatus> {
        let counters = self.state().counters.clone()?;
        use std::sync::atomic::Ordering::Relaxed;
        let last = *counters
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Some(pb::TelemetryExportStatus {
            exported: counters.exported.load(Relaxed),
            dropped: counters.dropped.load(Relaxed),
            last_error_class: last.to_owned(),
        })
    }

    /// `/suspend`: the newest sample and everything queued posted once,
    /// within [`FLUSH_WITHIN`] (nothing running: at once).
    pub(crate) async fn flush(&self) {
        let flusher = self.state().running.as_ref().map(Handle::flusher);
        if let Some(flush) = flusher {
            flush.flush(FLUSH_WITHIN).await;
        }
    }

    /// `/terminate`: stops the export.
    pub(crate) fn stop(&self) {
        self.state().running = None;
    }
}

/// CloudWatch's OTLP metrics endpoint in `region`.
fn cloudwatch_url(region: &str) -> Option<http::Uri> {
    format!("https://monitoring.{region}.amazonaws.com/v1/metrics")
        .parse()
        .ok()
}
