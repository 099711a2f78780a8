//! ConfigureService through real gRPC: the local agent implements the secret
//! gateway (agent_gateway.rs tests it), S3 mounts (agent_s3_mounts.rs) and
//! lifecycle events (agent_lifecycle_events.rs), so each other section
//! asked is answered UNSUPPORTED, and the call needs
//! the access token like every RPC but Health.

use crate::support;

use rayito_agent::pb;
use support::{TestAgent, assert_status};
use tonic::Code;

fn client(t: &TestAgent) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

/// Every section set, with contents a real agent would act on.
fn all_sections() -> pb::ConfigureRequest {
    pb::ConfigureRequest {
        request_id: "0123456789abcdef0123456789abcdef".into(),
        s3_mounts: Some(pb::S3MountsConfig {
            mounts: vec![pb::S3Mount {
                mount_path: "/mnt/data".into(),
                bucket: "b".into(),
                ..Default::default()
            }],
        }),
        efs_volumes: Some(pb::EfsVolumesConfig::default()),
        lifecycle_events: Some(pb::LifecycleEventsConfig::default()),
        telemetry_export: Some(pb::TelemetryExportConfig {
            interval_s: 60,
            auth: Some(pb::telemetry_export_config::Auth::Bearer(
                pb::TelemetryExportBearerAuth {
                    token: "canary-token".into(),
                },
            )),
            ..Default::default()
        }),
        secret_gateway: Some(pb::SecretGatewayConfig::default()),
    }
}

#[tokio::test]
async fn each_section_but_the_gateway_is_unsupported() {
    let t = TestAgent::start().await;
    let response = client(&t)
        .configure(all_sections())
        .await
        .unwrap()
        .into_inner();
    let got: Vec<(pb::ConfigSection, pb::SectionCode, String)> = response
        .results
        .iter()
        .map(|r| (r.section(), r.code(), r.error_class.clone()))
        .collect();
    let unsupported = |s| (s, pb::SectionCode::Unsupported, String::new());
    assert_eq!(
        got,
        // In the order of the sections' field numbers.
        [
            // Checked whole before anything: this image allows no bucket.
            (
                pb::ConfigSection::S3Mounts,
                pb::SectionCode::Invalid,
                "not_allowed".to_owned()
            ),
            // No mount.efs on this agent (no local stand-in).
            unsupported(pb::ConfigSection::EfsVolumes),
            // Key and id empty: a clear (agent_lifecycle_events tests it).
            (
                pb::ConfigSection::LifecycleEvents,
                pb::SectionCode::Applied,
                String::new()
            ),
            // Checked whole before anything starts: no service name
            // (agent_telemetry.rs exports for real).
            (
                pb::ConfigSection::TelemetryExport,
                pb::SectionCode::Invalid,
                "service_name".to_owned()
            ),
            (
                pb::ConfigSection::SecretGateway,
                pb::SectionCode::Applied,
                String::new()
            ),
        ]
    );
    assert_eq!(response.config_generation, 2);

    let status = client(&t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    // The empty gateway section applied: no route; the cleared events
    // section: nothing emitted; nothing else.
    assert_eq!(
        status,
        pb::ConfigureStatusResponse {
            lifecycle_events: Some(pb::LifecycleEventsStatus::default()),
            secret_gateway: Some(pb::SecretGatewayStatus::default()),
            ..Default::default()
        }
    );
}

#[tokio::test]
async fn nothing_applied_reports_no_status() {
    let t = TestAgent::start().await;
    let status = client(&t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status, pb::ConfigureStatusResponse::default());
}

#[tokio::test]
async fn one_section_gets_one_result_and_none_gets_none() {
    let t = TestAgent::start().await;
    let one = client(&t)
        .configure(pb::ConfigureRequest {
            request_id: "r".into(),
            efs_volumes: Some(pb::EfsVolumesConfig::default()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.results.len(), 1);
    assert_eq!(one.results[0].section(), pb::ConfigSection::EfsVolumes);
    assert_eq!(one.results[0].code(), pb::SectionCode::Unsupported);
    let none = client(&t)
        .configure(pb::ConfigureRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(none.results.is_empty());
}

#[tokio::test]
async fn configure_needs_the_access_token() {
    let t = TestAgent::start().await;
    let mut anonymous =
        pb::configure_service_client::ConfigureServiceClient::new(t.channel.clone());
    let err = anonymous.configure(all_sections()).await.unwrap_err();
    assert_status(&err, Code::Unauthenticated, "missing access token");
}

#[tokio::test]
async fn health_keeps_every_other_section_flag_false() {
    let t = TestAgent::start().await;
    let f = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
        .features
        .expect("features present");
    assert!(f.configure && f.lifecycle_events, "{f:?}");
    // Telemetry export needs nothing of the host (agent_telemetry.rs).
    assert!(f.telemetry_export, "{f:?}");
    assert!(!(f.s3_mounts || f.efs_volumes), "{f:?}");
}
