//! The `rayito-agent serve` binary and the library's abrupt `kill()`.

use crate::support;

use std::time::Duration;

use rayito_agent::pb;
use support::{Event, TestAgent, alive, bash, next_event};

#[tokio::test]
async fn serve_answers_and_stops_cleanly_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let support::ServedBinary {
        mut child,
        grpc,
        hooks,
        // Kept open: the agent's stdout stays a live pipe.
        stdout: _stdout,
    } = support::ServedBinary::start(env!("CARGO_BIN_EXE_rayito-agent"), root.path()).await;

    let channel = support::connect(grpc).await;
    let mut health = pb::health_service_client::HealthServiceClient::new(channel);
    let body =
        rayito_agent::hooks::run_body("microvm-cli", &support::payload(serde_json::json!({})));
    let (status, answer) = rayito_agent::hooks::post_hook(hooks, "run", Some(body))
        .await
        .unwrap();
    assert_eq!((status, answer.as_str()), (200, "ok"));
    let h = health
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.sandbox_id, "microvm-cli");

    let pid = child.id().unwrap() as i32;
    // SAFETY: kill(2) of our own child's pid; no pointers involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits within 10 s")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    // The root given on the command line is kept.
    assert!(root.path().join("home/user").is_dir());
}

#[tokio::test]
async fn serve_rejects_unknown_flags() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_rayito-agent"))
        .args(["serve", "--nope", "x"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("unknown flag --nope"));
}

#[tokio::test]
async fn kill_drops_streams_and_processes_without_terminating() {
    let t = TestAgent::start().await;
    let mut stream = t
        .process()
        .start(bash("sleep 100"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    t.agent.kill();
    // The live stream is cut: an error or a close, never an EndEvent.
    let next = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap();
    assert!(!matches!(
        next,
        Ok(Some(pb::ProcessEvent {
            event: Some(Event::End(_))
        }))
    ));
    for _ in 0..50 {
        if !alive(s.pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(s.pid));
    // kill() is not /terminate: terminated() stays pending.
    let pending = tokio::time::timeout(Duration::from_millis(200), t.agent.terminated()).await;
    assert!(pending.is_err());
}
