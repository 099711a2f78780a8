//! `rayito.v1.ConfigureService`: the optional agent-side sections (S3 mounts,
//! EFS volumes, lifecycle events, telemetry export, secret gateway).
//!
//! The local agent implements none of them yet. It still serves the service,
//! so that a client that calls Configure gets the contract's per-section
//! answer (UNSUPPORTED) instead of a transport-level UNIMPLEMENTED, and
//! ConfigureStatus reports nothing applied. Health keeps every section flag
//! false, so the SDK refuses a section before it would call this service.

use tonic::{Request, Response, Status};

use crate::pb;

/// `rayito.v1.ConfigureService`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConfigureServiceImpl;

/// The sections a request sets, in the order of their field numbers.
fn requested(request: &pb::ConfigureRequest) -> Vec<pb::ConfigSection> {
    [
        (request.s3_mounts.is_some(), pb::ConfigSection::S3Mounts),
        (request.efs_volumes.is_some(), pb::ConfigSection::EfsVolumes),
        (
            request.lifecycle_events.is_some(),
            pb::ConfigSection::LifecycleEvents,
        ),
        (
            request.telemetry_export.is_some(),
            pb::ConfigSection::TelemetryExport,
        ),
        (
            request.secret_gateway.is_some(),
            pb::ConfigSection::SecretGateway,
        ),
    ]
    .into_iter()
    .filter_map(|(set, section)| set.then_some(section))
    .collect()
}

/// One UNSUPPORTED result per section asked; nothing is applied, so the
/// generation stays 0. The sections' contents (which may hold secret header
/// values, a bearer token or key material) are neither read nor logged.
pub(crate) fn unsupported(request: &pb::ConfigureRequest) -> pb::ConfigureResponse {
    pb::ConfigureResponse {
        results: requested(request)
            .into_iter()
            .map(|section| pb::SectionResult {
                section: section as i32,
                code: pb::SectionCode::Unsupported as i32,
                error_class: String::new(),
            })
            .collect(),
        config_generation: 0,
    }
}

#[tonic::async_trait]
impl pb::configure_service_server::ConfigureService for ConfigureServiceImpl {
    async fn configure(
        &self,
        request: Request<pb::ConfigureRequest>,
    ) -> Result<Response<pb::ConfigureResponse>, Status> {
        Ok(Response::new(unsupported(request.get_ref())))
    }

    async fn configure_status(
        &self,
        _request: Request<pb::ConfigureStatusRequest>,
    ) -> Result<Response<pb::ConfigureStatusResponse>, Status> {
        // No section was ever applied: every status is absent.
        Ok(Response::new(pb::ConfigureStatusResponse::default()))
    }
}
