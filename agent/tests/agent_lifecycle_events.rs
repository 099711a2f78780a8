//! The `lifecycle_events` Configure section through a real agent: the
//! section applied over gRPC, the hooks posted as AWS (and the emulator)
//! posts them, every line the agent writes read back as the stack's
//! forwarder reads it (`rayito_events::line::parse`, with the stack key
//! the sandbox key was derived from).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rayito_agent::AgentConfig;
use rayito_agent::event_lines::EventLines;
use rayito_agent::pb;
use rayito_events::line::{Rejection, parse};
use rayito_events::{Event, EventKind, KillReason};
use support::{MICROVM_ID, TestAgent};

const STACK_KEY: &[u8] = b"the stack's key, as its secret holds it";
const IMAGE_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:microvm-image:base";

/// The lines an agent wrote, as its sink got them.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn sink(&self) -> EventLines {
        let lines = self.0.clone();
        EventLines::new(move |line| lines.lock().unwrap().push(line.to_owned()))
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Waits (bounded, so that a missing line fails instead of hanging)
    /// until `n` lines were written.
    async fn wait_for(&self, n: usize) -> Vec<String> {
        for _ in 0..500 {
            let all = self.all();
            if all.len() >= n {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{n} lines never came: {:?}", self.all());
    }
}

/// An agent writing its lines to `lines`, after `/run`.
async fn agent(lines: &Lines) -> TestAgent {
    agent_with(AgentConfig {
        event_lines: Some(lines.sink()),
        ..AgentConfig::default()
    })
    .await
}

async fn agent_with(config: AgentConfig) -> TestAgent {
    let t = TestAgent::start_config(config).await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

fn client(t: &TestAgent) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

/// The section the SDK sends: the key derived from `stack_key` for the
/// sandbox.
fn section(stack_key: &[u8]) -> pb::LifecycleEventsConfig {
    pb::LifecycleEventsConfig {
        sandbox_key: rayito_events::key::sandbox_key(stack_key, MICROVM_ID).to_vec(),
        sandbox_id: MICROVM_ID.into(),
        image_arn: IMAGE_ARN.into(),
        image_version: "7".into(),
    }
}

/// Applies `section` alone; its result's code and class.
async fn apply(t: &TestAgent, section: pb::LifecycleEventsConfig) -> (pb::SectionCode, String) {
    let response = client(t)
        .configure(pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            lifecycle_events: Some(section),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let [result] = response.results.as_slice() else {
        panic!("one result: {:?}", response.results);
    };
    assert_eq!(result.section(), pb::ConfigSection::LifecycleEvents);
    (result.code(), result.error_class.clone())
}

async fn status(t: &TestAgent) -> Option<pb::LifecycleEventsStatus> {
    client(t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .lifecycle_events
}

async fn hook(t: &TestAgent, name: &str) {
    assert_eq!(t.hook(name, None).await, (200, "ok".to_owned()), "{name}");
}

/// Every line read back as the forwarder reads it.
fn events(lines: &[String], stack_key: &[u8]) -> Vec<Event> {
    let now = now_ms();
    lines
        .iter()
        .map(|l| parse(l, MICROVM_ID, stack_key, now).unwrap_or_else(|r| panic!("{r:?}: {l}")))
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn kinds(events: &[Event]) -> Vec<(EventKind, u64)> {
    events.iter().map(|e| (e.kind, e.generation)).collect()
}

fn applied() -> (pb::SectionCode, String) {
    (pb::SectionCode::Applied, String::new())
}

/// Create, two suspend/resume cycles and a terminate: created, paused,
/// resumed (generation 1), paused, resumed (2), killed{request}, each
/// signed with the sandbox's key and carrying the section's image; the
/// lines of `/suspend` and `/terminate` are out before the hook answers;
/// a repeated `/suspend` or a `/resume` without one emits nothing; the
/// counters in ConfigureStatus; the key in no line.
#[tokio::test]
async fn a_sandbox_life_in_signed_lines() {
    let lines = Lines::default();
    let t = agent(&lines).await;
    assert_eq!(status(&t).await, None, "no status before a section");
    assert_eq!(apply(&t, section(STACK_KEY)).await, applied());
    // Configure answers once `created` is written.
    assert_eq!(lines.all().len(), 1);

    hook(&t, "resume").await; // not suspended: no step
    hook(&t, "suspend").await;
    assert_eq!(
        lines.all().len(),
        2,
        "paused is out before /suspend answers"
    );
    hook(&t, "suspend").await; // already suspended
    hook(&t, "resume").await;
    lines.wait_for(3).await;
    hook(&t, "suspend").await;
    assert_eq!(lines.all().len(), 4);
    hook(&t, "resume").await;
    lines.wait_for(5).await;
    assert_eq!(
        status(&t).await,
        Some(pb::LifecycleEventsStatus {
            emitted: 5,
            dropped: 0,
            last_error_class: String::new(),
        })
    );
    hook(&t, "terminate").await;
    let all = lines.all();
    assert_eq!(all.len(), 6, "killed is out before /terminate answers");

    let events = events(&all, STACK_KEY);
    assert_eq!(
        kinds(&events),
        [
            (EventKind::Created, 0),
            (EventKind::Paused, 0),
            (EventKind::Resumed, 1),
            (EventKind::Paused, 1),
            (EventKind::Resumed, 2),
            (EventKind::Killed, 2),
        ]
    );
    for e in &events {
        assert_eq!(e.sandbox_id, MICROVM_ID);
        assert_eq!(
            (e.image_arn.as_str(), e.image_version.as_str()),
            (IMAGE_ARN, "7")
        );
        let reason = (e.kind == EventKind::Killed).then_some(KillReason::Request);
        assert_eq!(e.kill_reason, reason);
    }
    let mut ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), events.len(), "every event id is fresh");
    assert!(
        events
            .windows(2)
            .all(|w| w[0].occurred_at_ms <= w[1].occurred_at_ms),
        "in order"
    );

    let key = rayito_events::key::sandbox_key(STACK_KEY, MICROVM_ID);
    let encodings = [
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key),
        base64::engine::general_purpose::STANDARD.encode(key),
        key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    ];
    for line in &all {
        for k in &encodings {
            assert!(!line.contains(k.as_str()), "the key in {line}");
        }
    }
}

/// A re-apply for the same sandbox with a rotated key emits no second
/// `created`, and signs what follows with the new key; a clear (key and id
/// empty) stops emitting; enabling again emits `created` again.
#[tokio::test]
async fn rotate_clear_and_enable_again() {
    let lines = Lines::default();
    let t = agent(&lines).await;
    assert_eq!(apply(&t, section(STACK_KEY)).await, applied());
    let rotated: &[u8] = b"the rotated stack key";
    assert_eq!(apply(&t, section(rotated)).await, applied());
    hook(&t, "suspend").await;
    let all = lines.all();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(
        kinds(&events(&all[..1], STACK_KEY)),
        [(EventKind::Created, 0)]
    );
    assert_eq!(kinds(&events(&all[1..], rotated)), [(EventKind::Paused, 0)]);
    assert_eq!(
        parse(&all[1], MICROVM_ID, STACK_KEY, now_ms()),
        Err(Rejection::MacInvalid),
        "the old key no longer signs"
    );

    assert_eq!(
        apply(&t, pb::LifecycleEventsConfig::default()).await,
        applied()
    );
    hook(&t, "resume").await;
    hook(&t, "suspend").await;
    // Not emitting: nothing more, and the counters stay.
    assert_eq!(lines.all().len(), 2);
    assert_eq!(
        status(&t).await,
        Some(pb::LifecycleEventsStatus {
            emitted: 2,
            ..Default::default()
        })
    );

    hook(&t, "resume").await;
    assert_eq!(apply(&t, section(STACK_KEY)).await, applied());
    let all = lines.all();
    assert_eq!(all.len(), 3);
    // Once per enable, at the generation the sandbox is in.
    assert_eq!(
        kinds(&events(&all[2..], STACK_KEY)),
        [(EventKind::Created, 2)]
    );
}

/// Key without id, id without key, a key that is not 32 bytes: INVALID
/// `invalid_section`, nothing emitted and nothing applied.
#[tokio::test]
async fn half_a_section_is_invalid() {
    let lines = Lines::default();
    let t = agent(&lines).await;
    let invalid = (pb::SectionCode::Invalid, "invalid_section".to_owned());
    let cases = [
        pb::LifecycleEventsConfig {
            sandbox_id: String::new(),
            ..section(STACK_KEY)
        },
        pb::LifecycleEventsConfig {
            sandbox_key: Vec::new(),
            ..section(STACK_KEY)
        },
        pb::LifecycleEventsConfig {
            sandbox_key: vec![1; 16],
            ..section(STACK_KEY)
        },
    ];
    for case in cases {
        assert_eq!(apply(&t, case).await, invalid);
    }
    hook(&t, "suspend").await;
    assert!(lines.all().is_empty());
    assert_eq!(status(&t).await, None);
}

/// An agent without the feature: Health's flag false, the section
/// UNSUPPORTED, no line from any hook.
#[tokio::test]
async fn unsupported_with_the_switch_off() {
    let lines = Lines::default();
    let t = agent_with(AgentConfig {
        lifecycle_events: false,
        event_lines: Some(lines.sink()),
        ..AgentConfig::default()
    })
    .await;
    assert!(!t.features().await.lifecycle_events);
    assert_eq!(
        apply(&t, section(STACK_KEY)).await,
        (pb::SectionCode::Unsupported, String::new())
    );
    hook(&t, "suspend").await;
    hook(&t, "resume").await;
    hook(&t, "terminate").await;
    assert!(lines.all().is_empty());

    let on = agent(&Lines::default()).await;
    assert!(on.features().await.lifecycle_events);
}

/// The agent binary, as a MicroVM runs it: without a sink the lines go to
/// stdout (the console the service forwards to the image's log group),
/// one whole line each, `killed` before the process ends.
#[tokio::test]
async fn the_binary_writes_its_lines_on_stdout() {
    let root = tempfile::tempdir().unwrap();
    let support::ServedBinary {
        mut child,
        mut stdout,
        grpc,
        hooks,
    } = support::ServedBinary::start(env!("CARGO_BIN_EXE_rayito-agent"), root.path()).await;
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .expect("a line within 10 s")
            .unwrap()
    };
    let post = async |name: &str, body: Option<String>| {
        let answer = rayito_agent::hooks::post_hook(hooks, name, body).await;
        assert_eq!(answer.unwrap(), (200, "ok".to_owned()), "{name}");
    };
    let run = rayito_agent::hooks::run_body(MICROVM_ID, &support::payload(serde_json::json!({})));
    post("run", Some(run)).await;
    let channel = support::connect(grpc).await;
    let mut configure = pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        channel,
        |mut req: tonic::Request<()>| {
            let token = support::token().parse().expect("ascii token");
            req.metadata_mut().insert("x-access-token", token);
            Ok(req)
        },
    );
    let response = configure
        .configure(pb::ConfigureRequest {
            lifecycle_events: Some(section(STACK_KEY)),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.results[0].code(), pb::SectionCode::Applied);
    // Its connection would hold the server's graceful stop.
    drop(configure);
    post("suspend", None).await;
    post("resume", None).await;
    post("terminate", None).await;
    let mut lines = Vec::new();
    while let Some(line) = next_line().await {
        lines.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after /terminate")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        kinds(&events(&lines, STACK_KEY)),
        [
            (EventKind::Created, 0),
            (EventKind::Paused, 0),
            (EventKind::Resumed, 1),
            (EventKind::Killed, 1),
        ]
    );
}

/// The deadline in kill mode ends the sandbox with no hook: the agent's
/// own `killed` line says `timeout` (the reference leaves it to the
/// reconciler's `unknown`), admitted by the forwarder's reading; a
/// `/terminate` after it emits nothing more.
#[tokio::test]
async fn the_deadline_in_kill_mode_is_killed_timeout() {
    let lines = Lines::default();
    let t = agent(&lines).await;
    let stack_key = b"stack key of the timeout test";
    assert_eq!(apply(&t, section(stack_key)).await, applied());
    lines.wait_for(1).await;
    t.agent.expire_deadline_now();
    let got = events(&lines.wait_for(2).await, stack_key);
    assert_eq!(
        kinds(&got),
        [(EventKind::Created, 0), (EventKind::Killed, 0)]
    );
    assert_eq!(got[1].kill_reason, Some(rayito_events::KillReason::Timeout));
    let _ = t.hook("terminate", None).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(lines.all().len(), 2, "{:?}", lines.all());
}
