//! Telemetry export through the local backend (docs/observability.md):
//! `SandboxBuilder::telemetry` with an endpoint sends the section in the
//! one Configure, and the sandbox's agent posts its gauges to an OTLP/HTTP
//! receiver here (decoded with `opentelemetry-proto`), signed with SigV4
//! by the execution role the emulator hands the sandbox; the resource
//! carries the sandbox's id, image and memory. And the refusals: before
//! any launch (the interval, a non-caps official image with the execution
//! role, connect), and after it (the local backend has no CloudWatch: no
//! endpoint is `Unimplemented`, the sandbox terminated).

use crate::sdk_support;

use std::io::Read as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use rayito::telemetry::{TelemetryExport, TelemetryNames};
use rayito::{Sandbox, SandboxError};
use rayito_emulator::MicrovmState;

const ROLE: &str = "arn:aws:iam::000000000000:role/rayito-sandbox";

/// What an OTLP/HTTP receiver on 127.0.0.1 got: each request's
/// Authorization header and decoded body.
type Got = Arc<Mutex<Vec<(String, ExportMetricsServiceRequest)>>>;

async fn receiver() -> (String, Got) {
    let got: Got = Arc::default();
    let kept = got.clone();
    let app = axum::Router::new().route(
        "/v1/metrics",
        axum::routing::post(move |headers: http::HeaderMap, body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_end(&mut plain)
                    .expect("gzip");
                let req = ExportMetricsServiceRequest::decode(&plain[..]).expect("OTLP");
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                kept.lock().unwrap().push((auth, req));
                http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/metrics", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, got)
}

fn attr(req: &ExportMetricsServiceRequest, key: &str) -> String {
    let res = req.resource_metrics[0].resource.as_ref().unwrap();
    let kv = res.attributes.iter().find(|kv| kv.key == key).unwrap();
    match kv.value.as_ref().and_then(|v| v.value.clone()) {
        Some(any_value::Value::StringValue(s)) => s,
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        other => panic!("{key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builders_export_reaches_a_collector_signed_by_the_role() {
    let emu = sdk_support::emulator().await;
    let (url, got) = receiver().await;
    let sbx = sdk_support::builder(&emu)
        .template(emu.image_arn("rayito-base-caps"))
        .execution_role_arn(ROLE)
        .telemetry(
            TelemetryExport::new()
                .interval(Duration::from_secs(15))
                .service_name("sdk-test")
                .names(TelemetryNames::E2b)
                .endpoint(&url),
        )
        .create()
        .await
        .expect("a sandbox exporting telemetry");
    let mut first = None;
    for _ in 0..200 {
        if let Some(one) = got.lock().unwrap().first().cloned() {
            first = Some(one);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (auth, req) = first.expect("the collector got an export");
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=")
            && auth.contains("/monitoring/aws4_request"),
        "{auth}"
    );
    let names: Vec<&str> = req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "e2b.sandbox.cpu.used_pct",
            "e2b.sandbox.memory.used_bytes",
            "e2b.sandbox.memory.total_bytes",
            "e2b.sandbox.memory.cache_bytes",
            "e2b.sandbox.disk.used_bytes",
            "e2b.sandbox.disk.total_bytes",
            "e2b.sandbox.cpu.count",
        ]
    );
    let info = sbx.get_info().await.unwrap();
    let health = sbx.health().await.unwrap();
    assert_eq!(attr(&req, "sandbox_id"), sbx.id());
    assert_eq!(attr(&req, "service.name"), "sdk-test");
    assert_eq!(attr(&req, "image_arn"), info.image_arn);
    assert_eq!(attr(&req, "image_version"), info.image_version);
    assert_eq!(
        attr(&req, "image_memory_mib"),
        (health.memory_total_bytes / (4 * 1024 * 1024)).to_string()
    );
    let mut status = sbx.telemetry_status().await.unwrap();
    for _ in 0..100 {
        if status.exported >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = sbx.telemetry_status().await.unwrap();
    }
    assert_eq!((status.exported, status.dropped), (7, 0), "{status:?}");
    assert_eq!(status.last_error_class, None);
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusals_come_before_any_launch_or_terminate_the_sandbox() {
    let emu = sdk_support::emulator().await;
    // The interval, before any call.
    let err = sdk_support::builder(&emu)
        .telemetry(TelemetryExport::new().interval(Duration::from_secs(5)))
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("the telemetry export's interval is 5s; pass 15 to 300 whole seconds"),
        "{err}"
    );
    // The execution role on an official image that is not caps.
    let err = Sandbox::builder()
        .local()
        .template("rayito-base")
        .telemetry(TelemetryExport::new())
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Unimplemented { feature, .. } if &**feature == "telemetry"),
        "{err:?}"
    );
    // connect applies none.
    let sbx = sdk_support::sandbox(&emu).await;
    let err = sdk_support::builder(&emu)
        .telemetry(TelemetryExport::new())
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("connect applies no telemetry export"),
        "{err}"
    );
    // No telemetry: zero counters.
    let none = sbx.telemetry_status().await.unwrap();
    assert_eq!(
        (none.exported, none.dropped, none.last_error_class),
        (0, 0, None)
    );
    sbx.kill().await.unwrap();

    // No endpoint: the local agent knows no region for CloudWatch.
    let before = emu.microvm_ids();
    let err = sdk_support::builder(&emu)
        .template(emu.image_arn("rayito-base-caps"))
        .execution_role_arn(ROLE)
        .telemetry(TelemetryExport::new())
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Unimplemented { feature, .. } if &**feature == "telemetry"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("it knows no AWS region for CloudWatch's endpoint"),
        "{err}"
    );
    // The one launched is terminated.
    let launched: Vec<String> = emu
        .microvm_ids()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(launched.len(), 1);
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while emu.state(&launched[0]) != Some(MicrovmState::Terminated) {
        assert!(
            std::time::Instant::now() < until,
            "still {:?}",
            emu.state(&launched[0])
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
