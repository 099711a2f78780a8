//! `rayito.v1.HealthService`: readiness and guest facts. Health is the one
//! anonymous RPC; Metrics and MetricsHistory answer from `crate::metrics`
//! (UNIMPLEMENTED on an agent started without metrics, as an old agent).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tonic::{Request, Response, Status};

use crate::code::CodeServiceImpl;
use crate::egress::Egress;
use crate::lifecycle::Lifecycle;
use crate::pb;
use crate::run::RunState;
use crate::template::TemplateGate;

/// Response header of Health naming why the default kernel could not start
/// (while `kernel_ready` is false): lets a client fail at once instead of
/// waiting out its readiness timeout. Additive: clients that do not know it
/// ignore it.
pub const KERNEL_FAILURE_HEADER: &str = rayito_proto::tokens::header::KERNEL_FAILURE;

/// How long Health waits, in all, for `/run` (when it has not come yet) and
/// for a default kernel that is starting, before it answers `kernel_ready:
/// false`: under the SDK's shortest probe timeout (0.5 s), so a slow start
/// costs a probe, never a failed one.
const KERNEL_START_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

/// The agent version Health reports (the crate version).
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `rayito.v1.HealthService`.
#[derive(Clone, Debug)]
pub(crate) struct HealthServiceImpl {
    /// StartImport takes chunks (`AgentConfig::chunked_import`).
    pub(crate) chunked_import: bool,
    pub(crate) run: Arc<RunState>,
    /// The default kernel's readiness and failure.
    pub(crate) code: CodeServiceImpl,
    /// The image's template readiness (`agent_ready`).
    pub(crate) template: TemplateGate,
    pub(crate) lifecycle: Arc<Lifecycle>,
    pub(crate) egress: Arc<Egress>,
    pub(crate) gateways: Arc<crate::gateway::Gateways>,
    pub(crate) volumes: Arc<crate::efs_volumes::EfsVolumes>,
    pub(crate) s3_mounts: Arc<crate::s3_mounts::S3Mounts>,
    pub(crate) events: Arc<crate::lifecycle_events::LifecycleEvents>,
    pub(crate) telemetry: Arc<crate::telemetry_export::TelemetryExports>,
    /// `None`: Metrics and MetricsHistory answer UNIMPLEMENTED
    /// (`AgentConfig::metrics_interval`).
    pub(crate) metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// Total memory from /proc/meminfo (0 where it cannot be read).
fn memory_total_bytes() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

impl HealthServiceImpl {
    /// The optional features: Configure is served (every section it does
    /// not implement answers UNSUPPORTED), and of its sections the secret
    /// gateway, where it can verify an upstream, S3 mounts, where it can
    /// mount (FUSE, a mount namespace, a helper), EFS volumes, and
    /// lifecycle events unless switched off (`AgentConfig::lifecycle_events`),
    /// and chunked imports likewise (`AgentConfig::chunked_import`).
    fn features(&self) -> pb::AgentFeatures {
        let secret_gateway = self.gateways.supported();
        pb::AgentFeatures {
            configure: true,
            s3_mounts: self.s3_mounts.supported(),
            secret_gateway,
            efs_volumes: self.volumes.supported(),
            lifecycle_events: self.events.supported(),
            telemetry_export: self.telemetry.supported(),
            template_start: true,
            chunked_import: self.chunked_import,
            root_egress: if secret_gateway {
                vec![pb::RootEgressClass::SecretGatewayUpstream as i32]
            } else {
                Vec::new()
            },
        }
    }

    async fn response(&self) -> pb::HealthResponse {
        let s = &self.run;
        // RunMicrovm answers before `/run` is posted, so a readiness probe
        // often comes first: it waits for the hook within the same bound,
        // instead of answering "not yet" and costing the caller a poll
        // interval (0.25 s) for a sandbox that is ready milliseconds later.
        let waited = std::time::Instant::now();
        let mut ran = s.ran.subscribe();
        let _ = tokio::time::timeout(KERNEL_START_WAIT, ran.wait_for(|ran| *ran)).await;
        let left = KERNEL_START_WAIT.saturating_sub(waited.elapsed());
        let kernel_ready = self.code.kernel_ready_within(left).await;
        let (sandbox_id, metadata) = match s.info.lock().expect("run lock").as_ref() {
            Some(run) => (
                run.sandbox_id.clone(),
                run.metadata.clone().into_iter().collect(),
            ),
            None => (String::new(), Default::default()),
        };
        pb::HealthResponse {
            // Not ready while the template's ready check runs: on AWS the
            // sandbox is restored from a snapshot taken after `/ready`
            // passed, so no client ever sees the start command not ready.
            agent_ready: !self.template.is_pending(),
            kernel_ready,
            agent_version: AGENT_VERSION.to_owned(),
            uptime_ms: s.started.elapsed().as_millis() as u64,
            sandbox_id,
            resume_generation: s.resume_generation.load(Ordering::Relaxed),
            clock_offset_ms: 0,
            kernel_state_lost: false,
            imds_blocked: false,
            hook_anomalies: s.hook_anomalies.load(Ordering::Relaxed),
            metadata,
            lifecycle: Some(self.lifecycle.snapshot()),
            egress_enforcement: self.egress.enforcement() as i32,
            cpu_count: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            memory_total_bytes: memory_total_bytes(),
            features: Some(self.features()),
        }
    }
}

#[tonic::async_trait]
impl pb::health_service_server::HealthService for HealthServiceImpl {
    async fn health(
        &self,
        _request: Request<pb::HealthRequest>,
    ) -> Result<Response<pb::HealthResponse>, Status> {
        let mut response = Response::new(self.response().await);
        if let Some(reason) = self.code.kernel_failure() {
            response.metadata_mut().insert(
                KERNEL_FAILURE_HEADER,
                tonic::metadata::MetadataValue::from_static(reason),
            );
        }
        Ok(response)
    }

    async fn metrics(
        &self,
        _request: Request<pb::MetricsRequest>,
    ) -> Result<Response<pb::MetricsResponse>, Status> {
        match &self.metrics {
            Some(metrics) => Ok(Response::new(metrics.snapshot().await)),
            None => Err(Status::unimplemented(
                "Metrics is not implemented by this agent",
            )),
        }
    }

    async fn metrics_history(
        &self,
        request: Request<pb::MetricsHistoryRequest>,
    ) -> Result<Response<pb::MetricsHistoryResponse>, Status> {
        match &self.metrics {
            Some(metrics) => metrics.history(request.get_ref()).map(Response::new),
            None => Err(Status::unimplemented(
                "MetricsHistory is not implemented by this agent",
            )),
        }
    }
}
