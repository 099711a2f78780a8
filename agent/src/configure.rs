//! `rayito.v1.ConfigureService`: the optional agent-side sections (S3 mounts,
//! EFS volumes, lifecycle events, telemetry export, secret gateway).
//!
//! The local agent implements the secret gateway (`crate::gateway`), S3
//! mounts (`crate::s3_mounts`), EFS volumes (`crate::efs_volumes`) and
//! lifecycle events (`crate::lifecycle_events`) and telemetry export
//! (`crate::telemetry_export`), each behind its `AgentConfig` switch: a
//! section switched off is answered UNSUPPORTED (the contract's per-section
//! answer, instead of a transport-level UNIMPLEMENTED), and Health keeps
//! its flag false so the SDK refuses it before calling. The sections' contents
//! (secret header values, a bearer token, key material) are never logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tonic::{Request, Response, Status};

use crate::efs_volumes::EfsVolumes;
use crate::gateway::Gateways;
use crate::lifecycle_events::LifecycleEvents;
use crate::pb;
use crate::s3_mounts::S3Mounts;
use crate::telemetry_export::TelemetryExports;

/// `rayito.v1.ConfigureService`.
#[derive(Debug)]
pub(crate) struct ConfigureServiceImpl {
    pub(crate) gateways: Arc<Gateways>,
    pub(crate) volumes: Arc<EfsVolumes>,
    pub(crate) s3_mounts: Arc<S3Mounts>,
    pub(crate) events: Arc<LifecycleEvents>,
    /// The telemetry export section (none: answered UNSUPPORTED).
    pub(crate) telemetry: Option<Arc<TelemetryExports>>,
    /// Bumped by every apply that changed something.
    pub(crate) generation: AtomicU64,
    /// Bumped by every Configure call (`Agent::configure_calls`).
    calls: Arc<AtomicU64>,
}

impl ConfigureServiceImpl {
    pub(crate) fn new(
        gateways: Arc<Gateways>,
        s3_mounts: Arc<S3Mounts>,
        volumes: Arc<EfsVolumes>,
        events: Arc<LifecycleEvents>,
    ) -> Self {
        Self {
            gateways,
            s3_mounts,
            volumes,
            events,
            telemetry: None,
            generation: AtomicU64::new(0),
            calls: Arc::default(),
        }
    }

    /// Counts every Configure call in `calls`.
    pub(crate) fn counting(mut self, calls: Arc<AtomicU64>) -> Self {
        self.calls = calls;
        self
    }

    /// Serves the telemetry export section with `telemetry`.
    pub(crate) fn with_telemetry(mut self, telemetry: Arc<TelemetryExports>) -> Self {
        self.telemetry = Some(telemetry);
        self
    }
}

fn result(section: pb::ConfigSection, code: pb::SectionCode, class: &str) -> pb::SectionResult {
    pb::SectionResult {
        section: section as i32,
        code: code as i32,
        error_class: class.to_owned(),
    }
}

#[tonic::async_trait]
impl pb::configure_service_server::ConfigureService for ConfigureServiceImpl {
    async fn configure(
        &self,
        request: Request<pb::ConfigureRequest>,
    ) -> Result<Response<pb::ConfigureResponse>, Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut request = request.into_inner();
        let mut results = Vec::new();
        if let Some(section) = request.s3_mounts.take() {
            let (code, class) = self.s3_mounts.apply(section).await;
            if matches!(code, pb::SectionCode::Applied | pb::SectionCode::Pending) {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            results.push(result(pb::ConfigSection::S3Mounts, code, class));
        }
        if let Some(section) = request.efs_volumes.take() {
            let (code, class) = self.volumes.apply(section).await;
            if code == pb::SectionCode::Applied {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            results.push(result(pb::ConfigSection::EfsVolumes, code, class));
        }
        if let Some(section) = request.lifecycle_events.take() {
            let (code, class) = self.events.apply(section).await;
            if code == pb::SectionCode::Applied {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            results.push(result(pb::ConfigSection::LifecycleEvents, code, class));
        }
        if let Some(section) = request.telemetry_export.take() {
            let (code, class) = match &self.telemetry {
                Some(telemetry) => telemetry.apply(section),
                None => (pb::SectionCode::Unsupported, ""),
            };
            if code == pb::SectionCode::Applied {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            results.push(result(pb::ConfigSection::TelemetryExport, code, class));
        }
        if let Some(section) = request.secret_gateway.take() {
            let (code, class) = self.gateways.apply(section).await;
            if code == pb::SectionCode::Applied {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            results.push(result(pb::ConfigSection::SecretGateway, code, class));
        }
        // In the order of the sections' field numbers.
        results.sort_by_key(|r| r.section);
        Ok(Response::new(pb::ConfigureResponse {
            results,
            config_generation: self.generation.load(Ordering::Relaxed),
        }))
    }

    async fn configure_status(
        &self,
        _request: Request<pb::ConfigureStatusRequest>,
    ) -> Result<Response<pb::ConfigureStatusResponse>, Status> {
        Ok(Response::new(pb::ConfigureStatusResponse {
            s3_mounts: self.s3_mounts.status(),
            secret_gateway: self.gateways.status(),
            efs_volumes: self.volumes.status(),
            lifecycle_events: self.events.status(),
            telemetry_export: self.telemetry.as_ref().and_then(|t| t.status()),
        }))
    }
}
