//! LifecycleService.SetTimeout and the deadline gate, through real gRPC.

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito_agent::pb;
use support::{Event, TestAgent, alive, assert_status, bash, collect_events, next_event, outcome};
use tonic::Code;

fn lifecycle(timeout_s: u64, on_timeout: &str) -> serde_json::Value {
    serde_json::json!({"lifecycle": {
        "timeout_s": timeout_s, "cap_s": 120, "on_timeout": on_timeout,
        "auto_resume": on_timeout == "pause",
    }})
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn health(t: &TestAgent) -> pb::HealthResponse {
    t.health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner()
}

fn set(timeout_ms: u64, mode: pb::TimeoutMode) -> pb::SetTimeoutRequest {
    pb::SetTimeoutRequest {
        timeout_ms,
        mode: mode as i32,
    }
}

#[tokio::test]
async fn kill_mode_deadline_ends_streams_kills_and_gates() {
    // A deadline far away while the process starts (no race with a loaded
    // machine), then moved to 1 s from now.
    let t = TestAgent::start_with(lifecycle(100, "kill")).await;
    let lc = health(&t).await.lifecycle.unwrap();
    assert_eq!(lc.phase, pb::LifecyclePhase::Active as i32);
    assert_eq!(lc.on_timeout, pb::TimeoutAction::Kill as i32);
    // Both measured from /run, a moment ago.
    assert!(
        (lc.deadline_unix_ms - (now_ms() + 60_000)).abs() < 10_000,
        "the cap bounds the deadline"
    );
    assert!((lc.cap_unix_ms - (now_ms() + 60_000)).abs() < 10_000);

    let mut stream = t
        .process()
        .start(bash("sleep 30"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let lc = t
        .lifecycle()
        .set_timeout(set(1_000, pb::TimeoutMode::Exact))
        .await
        .unwrap()
        .into_inner();
    assert!((lc.deadline_unix_ms - (now_ms() + 1_000)).abs() < 1_000);
    let mut events = vec![Event::Start(s)];
    events.extend(collect_events(stream).await);
    let end = outcome(&events).end.unwrap();
    assert_eq!(
        (end.exited, end.status.as_str()),
        (false, "sandbox_timeout")
    );
    let err = end.error.unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("sandbox_timeout", "sandbox_timeout")
    );
    for _ in 0..50 {
        if !alive(s.pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(s.pid), "kill mode kills processes");

    let err = t.process().start(bash("true")).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let err = t.process().list(pb::ListRequest {}).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let err = t
        .lifecycle()
        .set_timeout(set(10_000, pb::TimeoutMode::Exact))
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    // The token layer comes first: an unauthenticated caller never learns the phase.
    let err = t
        .process_with(t.raw_interceptor(None))
        .list(pb::ListRequest {})
        .await
        .unwrap_err();
    assert_status(&err, Code::Unauthenticated, "missing access token");
    assert_eq!(
        health(&t).await.lifecycle.unwrap().phase,
        pb::LifecyclePhase::Expired as i32
    );
}

#[tokio::test]
async fn expire_deadline_now_gates_every_rpc_but_health() {
    let t = TestAgent::start().await;
    t.agent.expire_deadline_now();
    let err = t.process().list(pb::ListRequest {}).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let err = t
        .files()
        .stat(pb::StatRequest {
            path: "/home/user".into(),
            user: None,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let err = t
        .code()
        .list_contexts(pb::ListContextsRequest {})
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let err = t
        .lifecycle()
        .set_timeout(set(10_000, pb::TimeoutMode::Exact))
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    assert!(health(&t).await.agent_ready);
}

#[tokio::test]
async fn set_timeout_rules_and_messages() {
    let t = TestAgent::start_with(lifecycle(60, "kill")).await;
    let cases = [
        (
            set(10_000, pb::TimeoutMode::Unspecified),
            "mode must be EXACT or AT_LEAST",
        ),
        (
            set(0, pb::TimeoutMode::Exact),
            "timeout_ms must be positive",
        ),
        (set(999, pb::TimeoutMode::AtLeast), "timeout below 1 s"),
    ];
    for (req, msg) in cases {
        let err = t.lifecycle().set_timeout(req).await.unwrap_err();
        assert_status(&err, Code::InvalidArgument, msg);
    }
    let cap = health(&t).await.lifecycle.unwrap().cap_unix_ms;
    let err = t
        .lifecycle()
        .set_timeout(set(200_000, pb::TimeoutMode::Exact))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let n: i64 = err
        .message()
        .strip_prefix("timeout beyond cap; cap_unix_ms=")
        .expect("message prefix")
        .parse()
        .unwrap();
    assert!((n - cap).abs() <= 2, "{n} vs {cap}");
    // A hostile client's u64::MAX is beyond the cap, not a panic.
    let err = t
        .lifecycle()
        .set_timeout(set(u64::MAX, pb::TimeoutMode::Exact))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .starts_with("timeout beyond cap; cap_unix_ms=")
    );

    let lc = t
        .lifecycle()
        .set_timeout(set(10_000, pb::TimeoutMode::Exact))
        .await
        .unwrap()
        .into_inner();
    assert!((lc.deadline_unix_ms - (now_ms() + 10_000)).abs() < 2_000);
    assert_eq!((lc.timeout_ms, lc.extensions), (10_000, 1));
    // AT_LEAST never shortens.
    let at_least = t
        .lifecycle()
        .set_timeout(set(5_000, pb::TimeoutMode::AtLeast))
        .await
        .unwrap()
        .into_inner();
    assert!((at_least.deadline_unix_ms - lc.deadline_unix_ms).abs() <= 2);
    // EXACT may shorten.
    let exact = t
        .lifecycle()
        .set_timeout(set(5_000, pb::TimeoutMode::Exact))
        .await
        .unwrap()
        .into_inner();
    assert!(exact.deadline_unix_ms < lc.deadline_unix_ms - 3_000);
    assert_eq!(health(&t).await.lifecycle.unwrap().extensions, 3);
}

#[tokio::test]
async fn pause_mode_keeps_processes_and_set_timeout_reopens() {
    let t = TestAgent::start_with(lifecycle(100, "pause")).await;
    let mut stream = t
        .process()
        .start(bash("sleep 30"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    // Moved to 1 s from now once the process runs (no race with its start).
    t.lifecycle()
        .set_timeout(set(1_000, pb::TimeoutMode::Exact))
        .await
        .unwrap();
    let end = loop {
        if let Event::End(e) = next_event(&mut stream).await {
            break e;
        }
    };
    assert_eq!(end.status, "sandbox_timeout");
    assert!(alive(s.pid), "pause mode keeps processes");
    let err = t.process().start(bash("true")).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    let lc = t
        .lifecycle()
        .set_timeout(set(30_000, pb::TimeoutMode::AtLeast))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(lc.phase, pb::LifecyclePhase::Active as i32);
    assert!((lc.deadline_unix_ms - (now_ms() + 30_000)).abs() < 5_000);
    let o = outcome(
        &collect_events(
            t.process()
                .start(bash("echo back"))
                .await
                .unwrap()
                .into_inner(),
        )
        .await,
    );
    assert_eq!(o.stdout, b"back\n");
}

#[tokio::test]
async fn resume_after_the_deadline_is_resume_grace() {
    let t = TestAgent::start_with(lifecycle(1, "pause")).await;
    t.hook("suspend", None).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    t.hook("resume", None).await;
    let h = health(&t).await;
    assert_eq!(h.resume_generation, 1);
    assert_eq!(
        h.lifecycle.unwrap().phase,
        pb::LifecyclePhase::ResumeGrace as i32
    );
    let err = t.process().list(pb::ListRequest {}).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "sandbox_timeout");
    t.lifecycle()
        .set_timeout(set(30_000, pb::TimeoutMode::AtLeast))
        .await
        .unwrap();
    t.process()
        .list(pb::ListRequest {})
        .await
        .expect("set_timeout reopened the gate");
}
