//! Sandbox metrics on the emulator (docs/metrics.md): a snapshot with sane
//! values, the sampled history and its `max_points` bucketing, the by-id
//! forms (RUNNING only), an agent without metrics as a distinguishable
//! `Unimplemented`, and the query's refusals before any call.

use crate::sdk_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito::error::ErrorKind;
use rayito::{MetricsHistoryQuery, Sandbox, SandboxError, SandboxMetrics};
use rayito_emulator::{Emulator, EmulatorConfig};

/// The sampling interval of these tests' agents (5 s by default).
const INTERVAL: Duration = Duration::from_millis(200);

async fn world(metrics: Option<Duration>) -> (Emulator, Sandbox) {
    let emu = Emulator::start(EmulatorConfig {
        agent_metrics: metrics,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let sbx = sdk_support::builder(&emu).create().await.expect("sandbox");
    (emu, sbx)
}

fn assert_sane(m: &SandboxMetrics) {
    assert!(m.cpu_count >= 1, "{m:?}");
    assert!((0.0..=100.0).contains(&m.cpu_used_pct), "{m:?}");
    assert!(m.mem_total_bytes > m.mem_used_bytes, "{m:?}");
    assert!(m.mem_used_bytes > 0, "{m:?}");
    assert!(m.disk_total_bytes > m.disk_used_bytes, "{m:?}");
    let age = SystemTime::now()
        .duration_since(m.timestamp)
        .unwrap_or_default();
    assert!(age < Duration::from_secs(8 * 3600 + 60), "{m:?}");
    assert!(m.timestamp > UNIX_EPOCH + Duration::from_secs(1_600_000_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_and_the_history() {
    let (_emu, sbx) = world(Some(INTERVAL)).await;
    // Something running in the sandbox, so its cgroup (where it has one)
    // holds memory.
    let _bg = sbx
        .commands()
        .spawn("sleep 60", rayito::CommandOptions::new())
        .await
        .expect("background");
    let now = sbx.metrics().current().await.expect("metrics");
    assert_sane(&now);

    tokio::time::sleep(INTERVAL * 8).await;
    let all = sbx
        .metrics()
        .history(MetricsHistoryQuery::default())
        .await
        .expect("history");
    assert!(all.len() >= 3, "{} samples", all.len());
    assert!(all.windows(2).all(|w| w[0].timestamp < w[1].timestamp));
    for s in &all {
        assert_sane(s);
    }

    // Bounds are inclusive: a window on one sample's exact time is it.
    let one = all[1].timestamp;
    let got = sbx
        .metrics()
        .history(MetricsHistoryQuery::new().start(one).end(one))
        .await
        .expect("window");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].timestamp, one);

    // max_points: exactly that many, the last one the last sample's.
    let two = sbx
        .metrics()
        .history(
            MetricsHistoryQuery::new()
                .end(all.last().unwrap().timestamp)
                .max_points(2),
        )
        .await
        .expect("bucketed");
    assert_eq!(two.len(), 2);
    assert_eq!(two[1].timestamp, all.last().unwrap().timestamp);

    // By id with the token: the same numbers' kind.
    let id = sbx.id().to_owned();
    let token = sbx.access_token().clone();
    let by_id = sdk_support::builder(&_emu)
        .client()
        .await
        .unwrap()
        .get_metrics_by_id(&id, token.clone())
        .await
        .expect("by id");
    assert_sane(&by_id);
    let hist = sdk_support::builder(&_emu)
        .client()
        .await
        .unwrap()
        .get_metrics_history_by_id(&id, token.clone(), MetricsHistoryQuery::new().max_points(1))
        .await
        .expect("history by id");
    assert_eq!(hist.len(), 1);

    // Paused: SandboxState before any proxy token; killed: not found.
    sbx.pause().await.expect("pause");
    let err = sdk_support::builder(&_emu)
        .client()
        .await
        .unwrap()
        .get_metrics_by_id(&id, token.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SandboxState, "{err}");
    assert_eq!(
        err.to_string(),
        "the sandbox is suspended; resume it first (resume_by_id)"
    );
    sbx.resume().await.expect("resume");
    sbx.kill().await.expect("kill");
    let err = sdk_support::builder(&_emu)
        .client()
        .await
        .unwrap()
        .get_metrics_by_id(&id, token)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SandboxNotFound, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_metrics_is_unimplemented_by_feature() {
    let (_emu, sbx) = world(None).await;
    let err = sbx.metrics().current().await.unwrap_err();
    match &err {
        SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "get_metrics"),
        other => panic!("{other:?}"),
    }
    let err = sbx
        .metrics()
        .history(MetricsHistoryQuery::default())
        .await
        .unwrap_err();
    match &err {
        SandboxError::Unimplemented { feature, .. } => {
            assert_eq!(&**feature, "get_metrics_history")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.kind(), ErrorKind::Unimplemented);
    sbx.kill().await.expect("kill");
}

#[tokio::test]
async fn the_query_is_refused_before_any_call() {
    // No emulator at all: a refusal that reached the network would fail
    // otherwise (connection refused), not with InvalidArgument.
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let cases = [
        (
            MetricsHistoryQuery::new()
                .start(t + Duration::from_millis(1))
                .end(t),
            "invalid start: start must not be after end; swap them or drop one",
        ),
        (
            MetricsHistoryQuery::new().max_points(0),
            "invalid max_points: max_points must be at least 1; pass None for every sample",
        ),
        (
            MetricsHistoryQuery::new().start(UNIX_EPOCH - Duration::from_secs(1)),
            "invalid start: the time must not be before 1970 (UNIX_EPOCH)",
        ),
        (
            MetricsHistoryQuery::new().end(UNIX_EPOCH - Duration::from_secs(1)),
            "invalid end: the time must not be before 1970 (UNIX_EPOCH)",
        ),
    ];
    let builder = Sandbox::builder().aws(
        rayito::AwsOptions::new()
            .endpoint_url("http://127.0.0.1:9")
            .region("us-east-1")
            .static_credentials("AKIDEXAMPLE", "secret"),
    );
    for (query, text) in cases {
        let err = builder
            .client()
            .await
            .unwrap()
            .get_metrics_history_by_id("microvm-1", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", query)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.to_string(), text);
    }
}
