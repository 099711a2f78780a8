//! Telemetry export (Configure's `telemetry_export` section) against a real
//! OTLP/HTTP receiver on loopback: each request is decoded with
//! OpenTelemetry's own types (`opentelemetry-proto`) after gunzip, and the
//! gauges' names, resource attributes and values are checked against the
//! agent's own metrics history (the sample with the point's timestamp).
//! Also: the bearer header, SigV4 headers verified by signing again, a
//! receiver answering 503 then 200 (the points requeued, none lost), the
//! flush on `/suspend`, and the section's refusals.

use crate::support;

use std::io::Read as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message as _;
use rayito_agent::pb;
use rayito_agent::persist::{LocalS3, PersistenceAccess};
use rayito_agent::{Agent, AgentConfig};
use support::TestAgent;

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Got {
    headers: http::HeaderMap,
    /// The body as sent (gzip).
    raw: Vec<u8>,
    decoded: ExportMetricsServiceRequest,
}

/// An OTLP/HTTP receiver on 127.0.0.1: answers each request with the next
/// of `answers` (200 once they run out) and keeps what it got.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    async fn start(answers: Vec<u16>) -> Self {
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let kept = got.clone();
        let app = axum::Router::new().route(
            "/v1/metrics",
            axum::routing::post(move |headers: http::HeaderMap, body: axum::body::Bytes| {
                let kept = kept.clone();
                let answers = answers.clone();
                async move {
                    let mut plain = Vec::new();
                    flate2::read::GzDecoder::new(&body[..])
                        .read_to_end(&mut plain)
                        .expect("a gzip body");
                    let decoded = ExportMetricsServiceRequest::decode(&plain[..])
                        .expect("an ExportMetricsServiceRequest");
                    kept.lock().unwrap().push(Got {
                        headers,
                        raw: body.to_vec(),
                        decoded,
                    });
                    let status = answers.lock().unwrap().next().unwrap_or(200);
                    http::StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/metrics", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, got }
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (bounded) until `n` requests came.
    async fn wait_for(&self, n: usize) -> Vec<Got> {
        for _ in 0..300 {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver got {} requests, not {n}", self.got().len());
    }
}

/// The local backend's credentials (what the emulator hands a sandbox with
/// an execution role).
fn local_role() -> PersistenceAccess {
    PersistenceAccess::Local(Some(LocalS3 {
        endpoint_url: "http://127.0.0.1:9".into(),
        region: "us-west-2".into(),
        access_key_id: "AKIDTELEMETRY".into(),
        secret_access_key: "telemetry-secret".into(),
        session_token: Some("telemetry-session".into()),
    }))
}

/// An agent sampling every 100 ms, `/run` posted, with `persistence`.
async fn agent(persistence: PersistenceAccess) -> TestAgent {
    let t = TestAgent::start_config(AgentConfig {
        metrics_interval: Some(Duration::from_millis(100)),
        persistence,
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

fn configure(
    t: &TestAgent,
) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

/// The metrics history now (oldest first).
async fn history(t: &TestAgent) -> Vec<pb::MetricsResponse> {
    t.health_authed()
        .metrics_history(pb::MetricsHistoryRequest::default())
        .await
        .unwrap()
        .into_inner()
        .samples
}

/// Waits (bounded) until the history holds a sample newer than `after_ms`.
async fn sampled_after(t: &TestAgent, after_ms: i64) {
    for _ in 0..200 {
        if history(t)
            .await
            .iter()
            .any(|s| s.timestamp_unix_ms > after_ms)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no metrics sample after {after_ms}");
}

fn bearer(token: &str) -> pb::telemetry_export_config::Auth {
    pb::telemetry_export_config::Auth::Bearer(pb::TelemetryExportBearerAuth {
        token: token.into(),
    })
}

fn execution_role() -> pb::telemetry_export_config::Auth {
    pb::telemetry_export_config::Auth::ExecutionRole(pb::TelemetryExportExecutionRoleAuth {})
}

fn section(endpoint: &str, auth: pb::telemetry_export_config::Auth) -> pb::TelemetryExportConfig {
    pb::TelemetryExportConfig {
        interval_s: 60,
        service_name: "checkout".into(),
        names: pb::TelemetryExportNameStyle::Rayito as i32,
        auth: Some(auth),
        image_arn: "arn:aws:lambda-microvms:us-west-2:123456789012:image/rayito-base".into(),
        image_version: "7".into(),
        image_memory_mib: 2048,
        endpoint: endpoint.into(),
    }
}

/// Applies `config`; the section's (code, class).
async fn apply(t: &TestAgent, config: pb::TelemetryExportConfig) -> (pb::SectionCode, String) {
    let response = configure(t)
        .configure(pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            telemetry_export: Some(config),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.results.len(), 1);
    let r = &response.results[0];
    assert_eq!(r.section(), pb::ConfigSection::TelemetryExport);
    (r.code(), r.error_class.clone())
}

async fn status(t: &TestAgent) -> pb::TelemetryExportStatus {
    configure(t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .telemetry_export
        .expect("a telemetry export status")
}

/// The gauges' names, in the order sent.
fn names(got: &Got) -> Vec<String> {
    got.decoded.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

/// Each gauge's points as (time in ms, value as f64), by name.
fn points(got: &Got) -> Vec<(String, Vec<(i64, f64)>)> {
    got.decoded.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| {
            let Some(metric::Data::Gauge(g)) = &m.data else {
                panic!("{} is not a gauge", m.name)
            };
            let pts = g
                .data_points
                .iter()
                .map(|p| {
                    let v = match p.value {
                        Some(number_data_point::Value::AsDouble(d)) => d,
                        Some(number_data_point::Value::AsInt(i)) => i as f64,
                        None => panic!("a point without a value"),
                    };
                    ((p.time_unix_nano / 1_000_000) as i64, v)
                })
                .collect();
            (m.name.clone(), pts)
        })
        .collect()
}

const GAUGES: [&str; 7] = [
    "cpu.used_pct",
    "memory.used_bytes",
    "memory.total_bytes",
    "memory.cache_bytes",
    "disk.used_bytes",
    "disk.total_bytes",
    "cpu.count",
];

/// A sample's value of `gauge`.
fn value_of(s: &pb::MetricsResponse, gauge: &str) -> f64 {
    match gauge {
        "cpu.used_pct" => s.cpu_used_pct,
        "memory.used_bytes" => s.mem_used_bytes as f64,
        "memory.total_bytes" => s.mem_total_bytes as f64,
        "memory.cache_bytes" => s.mem_cache_bytes as f64,
        "disk.used_bytes" => s.disk_used_bytes as f64,
        "disk.total_bytes" => s.disk_total_bytes as f64,
        "cpu.count" => f64::from(s.cpu_count),
        other => panic!("no gauge {other}"),
    }
}

#[tokio::test]
async fn the_gauges_reach_the_receiver_with_the_agents_own_metrics() {
    let receiver = Receiver::start(Vec::new()).await;
    let t = agent(PersistenceAccess::Local(None)).await;
    let features = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
        .features
        .unwrap();
    assert!(features.telemetry_export);
    sampled_after(&t, 0).await;

    let applied = apply(&t, section(&receiver.url, bearer("otlp-canary-token"))).await;
    assert_eq!(applied, (pb::SectionCode::Applied, String::new()));
    let got = receiver.wait_for(1).await;
    let first = &got[0];

    // Headers: OTLP/HTTP protobuf, gzip, our agent, the bearer token.
    let h = &first.headers;
    assert_eq!(h["content-type"], "application/x-protobuf");
    assert_eq!(h["content-encoding"], "gzip");
    assert_eq!(
        h["user-agent"].to_str().unwrap(),
        format!("rayito-agent/{}", rayito_agent::AGENT_VERSION)
    );
    assert_eq!(h["authorization"], "Bearer otlp-canary-token");

    // The resource: the sandbox's facts.
    let rm = &first.decoded.resource_metrics[0];
    let attrs: Vec<(String, String)> = rm
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                Some(any_value::Value::StringValue(s)) => s,
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                other => panic!("{}: {other:?}", kv.key),
            };
            (kv.key.clone(), v)
        })
        .collect();
    let sandbox_id = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
        .sandbox_id;
    let want = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        attrs,
        [
            want("service.name", "checkout"),
            want("sandbox_id", &sandbox_id),
            want(
                "image_arn",
                "arn:aws:lambda-microvms:us-west-2:123456789012:image/rayito-base"
            ),
            want("image_version", "7"),
            want("image_memory_mib", "2048"),
        ]
    );
    let scope = rm.scope_metrics[0].scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("rayito-agent", rayito_agent::AGENT_VERSION)
    );

    // The seven gauges, one point each, equal to the history's sample of
    // that moment.
    let want_names: Vec<String> = GAUGES
        .iter()
        .map(|g| format!("rayito.sandbox.{g}"))
        .collect();
    assert_eq!(names(first), want_names);
    let history = history(&t).await;
    for (name, pts) in points(first) {
        assert_eq!(pts.len(), 1, "{name}");
        let (at, value) = pts[0];
        let sample = history
            .iter()
            .find(|s| s.timestamp_unix_ms == at)
            .unwrap_or_else(|| panic!("no history sample at {at}"));
        let gauge = name.strip_prefix("rayito.sandbox.").unwrap();
        assert_eq!(value, value_of(sample, gauge), "{name}");
    }

    let s = status(&t).await;
    assert_eq!(
        (s.exported, s.dropped, s.last_error_class.as_str()),
        (7, 0, "")
    );
    assert!(!format!("{s:?}").contains("canary"));
}

/// Signs again what the receiver got, with the same time and credentials:
/// the same Authorization header means the agent's signature verifies.
fn verify_sigv4(got: &Got, url: &str) {
    use aws_sigv4::http_request::{
        PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign,
    };
    let h = &got.headers;
    let auth = h["authorization"].to_str().unwrap();
    let date = h["x-amz-date"].to_str().unwrap();
    assert!(
        auth.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDTELEMETRY/{}/us-west-2/monitoring/aws4_request, ",
            &date[..8]
        )),
        "{auth}"
    );
    assert_eq!(h["x-amz-security-token"], "telemetry-session");
    let sha = sha2::Sha256::digest(&got.raw);
    use sha2::Digest as _;
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(h["x-amz-content-sha256"].to_str().unwrap(), hex);

    let signed_names: Vec<&str> = auth
        .split("SignedHeaders=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .split(';')
        .collect();
    let added = ["x-amz-date", "x-amz-content-sha256", "x-amz-security-token"];
    let headers: Vec<(&str, &str)> = signed_names
        .iter()
        .filter(|n| !added.contains(n))
        .map(|n| (*n, h[*n].to_str().unwrap()))
        .collect();
    let time = chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ")
        .unwrap()
        .and_utc();
    let identity = aws_credential_types::Credentials::new(
        "AKIDTELEMETRY",
        "telemetry-secret",
        Some("telemetry-session".into()),
        None,
        "test",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-west-2")
        .name("monitoring")
        .time(time.into())
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.into_iter(),
        SignableBody::Bytes(&got.raw),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let expected = instructions
        .headers()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.to_owned())
        .unwrap();
    assert_eq!(auth, expected);
}

#[tokio::test]
async fn the_execution_role_signs_with_sigv4_for_monitoring() {
    let receiver = Receiver::start(Vec::new()).await;
    let t = agent(local_role()).await;
    sampled_after(&t, 0).await;
    let mut config = section(&receiver.url, execution_role());
    config.names = pb::TelemetryExportNameStyle::E2b as i32;
    assert_eq!(
        apply(&t, config).await,
        (pb::SectionCode::Applied, String::new())
    );
    let got = receiver.wait_for(1).await;
    verify_sigv4(&got[0], &receiver.url);
    assert!(names(&got[0]).iter().all(|n| n.starts_with("e2b.sandbox.")));
    assert_eq!(names(&got[0]).len(), 7);
}

#[tokio::test]
async fn a_refused_export_is_retried_and_no_point_is_lost() {
    let receiver = Receiver::start(vec![503]).await;
    let t = agent(PersistenceAccess::Local(None)).await;
    sampled_after(&t, 0).await;
    assert_eq!(
        apply(&t, section(&receiver.url, bearer("tok"))).await.0,
        pb::SectionCode::Applied
    );
    // The first answer was 503: the same points come again after the
    // backoff (0.5 to 1 s), and the collector's 200 counts them once.
    let got = receiver.wait_for(2).await;
    assert_eq!(points(&got[0]), points(&got[1]));
    for _ in 0..100 {
        if status(&t).await.exported == 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = status(&t).await;
    assert_eq!(
        (s.exported, s.dropped, s.last_error_class.as_str()),
        (7, 0, "rejected")
    );
}

#[tokio::test]
async fn suspend_flushes_the_newest_sample() {
    let receiver = Receiver::start(Vec::new()).await;
    let t = agent(PersistenceAccess::Local(None)).await;
    sampled_after(&t, 0).await;
    assert_eq!(
        apply(&t, section(&receiver.url, bearer("tok"))).await.0,
        pb::SectionCode::Applied
    );
    let got = receiver.wait_for(1).await;
    let first_at = points(&got[0])[0].1[0].0;
    // The interval is 60 s: only the flush sends a second export.
    sampled_after(&t, first_at).await;
    let (code, _) = t.hook("suspend", None).await;
    assert_eq!(code, 200);
    // Posted before /suspend answered.
    let got = receiver.got();
    assert_eq!(got.len(), 2, "the flush posted before /suspend answered");
    assert!(points(&got[1])[0].1[0].0 > first_at);
    assert_eq!(status(&t).await.exported, 14);
}

#[tokio::test]
async fn the_section_is_checked_whole_and_stops_when_empty() {
    let t = agent(PersistenceAccess::Local(None)).await;
    let url = "http://127.0.0.1:9/v1/metrics";
    let cases: Vec<(pb::TelemetryExportConfig, &str)> = vec![
        (
            pb::TelemetryExportConfig {
                interval_s: 14,
                ..section(url, bearer("t"))
            },
            "interval_s",
        ),
        (
            pb::TelemetryExportConfig {
                names: 0,
                ..section(url, bearer("t"))
            },
            "names",
        ),
        (
            pb::TelemetryExportConfig {
                auth: None,
                ..section(url, bearer("t"))
            },
            "auth",
        ),
        (
            section("http://example.com/v1/metrics", bearer("t")),
            "endpoint",
        ),
    ];
    for (config, class) in cases {
        assert_eq!(
            apply(&t, config).await,
            (pb::SectionCode::Invalid, class.to_owned())
        );
    }
    // Nothing applied yet: no status.
    let none = configure(&t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(none.telemetry_export.is_none());
    // The local backend calls no AWS endpoint: CloudWatch's is unsupported.
    assert_eq!(
        apply(&t, section("", bearer("t"))).await,
        (pb::SectionCode::Unsupported, String::new())
    );
    // SigV4 without an execution role cannot start.
    assert_eq!(
        apply(&t, section(url, execution_role())).await,
        (pb::SectionCode::Failed, "sink_init_failed".to_owned())
    );
    // The all-default section stops (applied).
    assert_eq!(
        apply(&t, pb::TelemetryExportConfig::default()).await,
        (pb::SectionCode::Applied, String::new())
    );
}

#[tokio::test]
async fn an_agent_without_the_feature_answers_unsupported() {
    let agent = Agent::start(AgentConfig {
        telemetry_export: false,
        ..AgentConfig::default()
    })
    .await
    .unwrap();
    let t = TestAgent {
        channel: support::connect(agent.grpc_addr()).await,
        agent,
    };
    let (status, _) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!(status, 200);
    let features = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
        .features
        .unwrap();
    assert!(!features.telemetry_export);
    assert_eq!(
        apply(&t, section("http://127.0.0.1:9/v1/metrics", bearer("t"))).await,
        (pb::SectionCode::Unsupported, String::new())
    );
}
