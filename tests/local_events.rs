//! Issue 47's "must show", end to end on the embedded local backend
//! (docs/events.md): the events stack deployed on the emulator, a webhook
//! whose secret is in Secrets Manager (moto), and an HTTP receiver on
//! 127.0.0.1 that verifies every delivery with `verify_webhook`.
//!
//! - sandbox A: create, pause, resume, kill reach the webhook as created,
//!   paused (generation 0), resumed (1), killed (request), in that order;
//! - sandbox B: create, `set_timeout(1 s)`, left to time out: created, then
//!   killed with `kill_reason` `timeout`. A timed-out agent exits without
//!   the `/terminate` hook (rayd's exit 124), so the agent writes its
//!   `killed{timeout}` itself at the deadline (docs/events.md, "A timeout
//!   is `killed{timeout}`"; rayd writes nothing and leaves it to the
//!   reconciler's `unknown`, minutes later);
//! - a second webhook whose receiver answers 500 gets 3 attempts (each
//!   signed anew), then the event is a dead letter;
//! - `get_events` (per sandbox, ascending and descending, a types filter)
//!   returns the records the receiver got;
//! - forged (body changed, wrong secret, another webhook's id) and replayed
//!   (its old `t` past the window) deliveries fail `verify_webhook`;
//! - the Python snippet of docs/events.md, run as it is, agrees on a real
//!   delivery.
//!
//! A binary of its own: it deploys and destroys the events stack of the
//! process-wide embedded backend, which another test deploying it would
//! share. Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...`
//! without it (and for the Python part, without `python3`).

use crate::sdk_support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use rayito::events::{
    DEFAULT_WEBHOOK_TOLERANCE, DeadLetter, EventKind, EventOrder, EventQuery, EventRecord,
    EventsDeploy, KillReason, LifecycleEvents, WebhookVerifyError, verify_webhook,
    verify_webhook_with,
};
use rayito::secrets::{SecretCache, SecretCacheOptions};
use rayito::{Client, OnTimeout, SandboxLogging};
use sdk_support::moto::MotoServer;
use sdk_support::skip::skip;

/// The stack's log group: the sandboxes log there, so the pipeline reads
/// their lines.
const GROUP: &str = "/rayito/events-e2e";
/// How long the test waits for what the pipeline has not delivered yet: a
/// give-up point, not a bound the test asserts.
const GIVE_UP: Duration = Duration::from_secs(120);

/// One request a receiver got, with what `verify_webhook` said of it on
/// arrival.
#[derive(Clone, Debug)]
struct Delivery {
    headers: HeaderMap,
    body: Bytes,
    verified: Result<(), WebhookVerifyError>,
}

impl Delivery {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
    }

    /// `t` of `rayito-signature`.
    fn t(&self) -> u64 {
        let sig = self.header("rayito-signature");
        let t = sig
            .split(',')
            .find_map(|p| p.strip_prefix("t="))
            .expect("t=");
        t.parse().unwrap()
    }
}

type Seen = Arc<Mutex<Vec<Delivery>>>;

/// An HTTP receiver on 127.0.0.1 answering `status` to every POST, after
/// verifying it with `secret`.
async fn receiver(secret: Vec<u8>, status: StatusCode) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = {
        let seen = seen.clone();
        axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                let secret = secret.clone();
                async move {
                    let verified = verify_webhook(&secret, &headers, &body, SystemTime::now());
                    seen.lock().unwrap().push(Delivery {
                        headers,
                        body,
                        verified,
                    });
                    status
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// Waits until `done` holds of the deliveries `seen` got (or gives up).
async fn wait_for(seen: &Seen, what: &str, done: impl Fn(&[Delivery]) -> bool) {
    let start = Instant::now();
    loop {
        if done(&seen.lock().unwrap()) {
            return;
        }
        if start.elapsed() > GIVE_UP {
            panic!(
                "{what}: not seen after {GIVE_UP:?}; got {:#?}",
                seen.lock()
                    .unwrap()
                    .iter()
                    .map(|d| d.json())
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The deliveries of `sandbox_id`'s events.
fn of_sandbox(seen: &[Delivery], sandbox_id: &str) -> Vec<Delivery> {
    seen.iter()
        .filter(|d| d.json()["sandbox_id"] == sandbox_id)
        .cloned()
        .collect()
}

/// `(type, generation, kill_reason)` of each delivery.
fn shape(deliveries: &[Delivery]) -> Vec<(String, u64, Option<String>)> {
    deliveries
        .iter()
        .map(|d| {
            let j = d.json();
            (
                j["type"].as_str().unwrap().to_owned(),
                j["generation"].as_u64().unwrap(),
                j["kill_reason"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// A record as the webhook body carries it.
fn as_body(record: &EventRecord) -> serde_json::Value {
    serde_json::json!({
        "event_id": record.event_id,
        "sandbox_id": record.sandbox_id,
        "type": record.kind.type_name(),
        "kill_reason": record.kill_reason.map(KillReason::as_str),
        "generation": record.generation,
        "occurred_at_ms": record.occurred_at_ms,
        "sandbox_template_id": record.image_arn,
        "sandbox_execution_id": format!("{}#{}", record.sandbox_id, record.generation),
    })
}

fn query(sandbox_id: &str, types: &[EventKind], order: EventOrder) -> EventQuery {
    EventQuery::new()
        .sandbox_id(sandbox_id)
        .types(types.iter().copied())
        .order(order)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_events_reach_a_verifying_webhook_in_order() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEVENTS");
    // Two webhook secrets under rayito/webhooks/, values only this run
    // knows, created as a user would (the AWS CLI, IaC): the SDK's secret
    // store refuses names under that prefix, which belong to the events.
    let raw = aws_sdk_secretsmanager::Client::new(&config);
    let secret = format!("whsec-{:032x}", rand::random::<u128>());
    let failing_secret = format!("whsec-{:032x}", rand::random::<u128>());
    for (name, value) in [("e2e", &secret), ("e2e-failing", &failing_secret)] {
        raw.create_secret()
            .name(format!("rayito/webhooks/{name}"))
            .secret_string(value.as_str())
            .send()
            .await
            .expect("the webhook secret is created");
    }
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).unwrap();

    let client = Client::local().await.expect("the local backend");
    let events: LifecycleEvents = client.events().secret_cache(cache);
    events
        .deploy(EventsDeploy::new("unused-locally", GROUP).reconciler_interval_minutes(2))
        .await
        .expect("the stack deploys on the emulator");

    let (url, seen) = receiver(secret.clone().into_bytes(), StatusCode::OK).await;
    let (failing_url, failing) = receiver(
        failing_secret.clone().into_bytes(),
        StatusCode::INTERNAL_SERVER_ERROR,
    )
    .await;
    let hook = events
        .register_webhook(&url, "e2e", &EventKind::ALL)
        .await
        .expect("the webhook registers");
    assert_eq!(hook.url, url);
    assert_eq!(hook.types, EventKind::ALL.to_vec());
    // The failing receiver subscribes to `paused` only: one event, whose
    // three attempts and dead letter the test follows.
    let failing_hook = events
        .register_webhook(&failing_url, "e2e-failing", &[EventKind::Paused])
        .await
        .expect("the second webhook registers");
    let listed = events.list_webhooks().await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");

    let builder = || {
        client
            .sandbox()
            .logging(SandboxLogging::cloudwatch_group(GROUP))
            .events(events.clone())
    };

    // Sandbox A: create, pause, resume, kill.
    let a = builder().create().await.expect("sandbox A");
    assert!(a.pause().await.unwrap());
    a.resume().await.unwrap();
    assert!(a.kill().await.unwrap());
    let a_id = a.id().to_owned();

    // Sandbox B: a managed lifecycle in kill mode, its timeout moved to 1 s
    // from now, then left alone.
    let b = builder()
        .timeout(Duration::from_secs(300))
        .on_timeout(OnTimeout::Kill)
        .create()
        .await
        .expect("sandbox B");
    b.set_timeout(Duration::from_secs(1)).await.unwrap();
    let b_id = b.id().to_owned();

    wait_for(&seen, "A's four events", |d| {
        of_sandbox(d, &a_id).len() >= 4
    })
    .await;
    let a_seen = of_sandbox(&seen.lock().unwrap(), &a_id);
    assert_eq!(
        shape(&a_seen),
        vec![
            ("sandbox.lifecycle.created".to_owned(), 0, None),
            ("sandbox.lifecycle.paused".to_owned(), 0, None),
            ("sandbox.lifecycle.resumed".to_owned(), 1, None),
            (
                "sandbox.lifecycle.killed".to_owned(),
                1,
                Some("request".to_owned())
            ),
        ]
    );

    wait_for(&seen, "B's created and killed", |d| {
        of_sandbox(d, &b_id).len() >= 2
    })
    .await;
    let b_seen = of_sandbox(&seen.lock().unwrap(), &b_id);
    assert_eq!(
        shape(&b_seen),
        vec![
            ("sandbox.lifecycle.created".to_owned(), 0, None),
            (
                "sandbox.lifecycle.killed".to_owned(),
                0,
                Some("timeout".to_owned())
            ),
        ]
    );

    // Every delivery verified on arrival, each with the webhook's id, a
    // fresh delivery id and the E2B signature version.
    let all = seen.lock().unwrap().clone();
    assert_eq!(
        all.len(),
        6,
        "nothing else was delivered: {:#?}",
        shape(&all)
    );
    let mut delivery_ids = std::collections::BTreeSet::new();
    for d in &all {
        assert_eq!(d.verified, Ok(()), "{:?}", d.json());
        assert_eq!(d.header("e2b-webhook-id"), hook.webhook_id);
        assert_eq!(d.header("e2b-signature-version"), "v1");
        assert_eq!(d.header("content-type"), "application/json");
        let id = d.header("e2b-delivery-id");
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        assert!(delivery_ids.insert(id.to_owned()), "a delivery id twice");
    }
    // Per sandbox, in admission order: A's events before B's killed.
    let order: Vec<_> = all.iter().map(|d| d.json()["sandbox_id"].clone()).collect();
    assert_eq!(order.last().unwrap(), &serde_json::json!(b_id));

    // The failing receiver: 3 attempts of A's paused, then a dead letter.
    wait_for(&failing, "three attempts", |d| d.len() >= 3).await;
    let paused_id = a_seen[1].json()["event_id"].as_str().unwrap().to_owned();
    let dead: Vec<DeadLetter> = {
        let start = Instant::now();
        loop {
            let dead = events.dead_letters().await.unwrap();
            if !dead.is_empty() || start.elapsed() > GIVE_UP {
                break dead;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].webhook_id, failing_hook.webhook_id);
    assert_eq!(dead[0].event_id, paused_id);
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(dead[0].reason, "attempts_exhausted");
    assert_eq!(dead[0].last_status, Some(500));
    let attempts = failing.lock().unwrap().clone();
    assert_eq!(attempts.len(), 3, "no fourth attempt");
    let ids: std::collections::BTreeSet<_> = attempts
        .iter()
        .map(|d| d.header("e2b-delivery-id").to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "a new delivery id per attempt");
    for d in &attempts {
        assert_eq!(d.verified, Ok(()));
        assert_eq!(d.body, a_seen[1].body, "the same event each attempt");
        assert_eq!(d.header("e2b-webhook-id"), failing_hook.webhook_id);
    }

    // get_events: the records the receiver got, both ways, and filtered.
    for (id, got) in [(&a_id, &a_seen), (&b_id, &b_seen)] {
        let asc = events
            .get_events(query(id, &[], EventOrder::Asc))
            .await
            .unwrap();
        let bodies: Vec<_> = got.iter().map(Delivery::json).collect();
        assert_eq!(asc.iter().map(as_body).collect::<Vec<_>>(), bodies);
        let mut desc = events
            .get_events(query(id, &[], EventOrder::Desc))
            .await
            .unwrap();
        desc.reverse();
        assert_eq!(desc, asc);
        for r in &asc {
            assert!(r.image_arn.contains(":microvm-image:"), "{r:?}");
            assert_eq!(r.image_arn, asc[0].image_arn, "one image per sandbox");
            assert!(!r.image_version.is_empty(), "{r:?}");
        }
    }
    let moves = events
        .get_events(query(
            &a_id,
            &[EventKind::Paused, EventKind::Resumed],
            EventOrder::Asc,
        ))
        .await
        .unwrap();
    assert_eq!(
        moves.iter().map(as_body).collect::<Vec<_>>(),
        vec![a_seen[1].json(), a_seen[2].json()]
    );
    let newest = events
        .get_events(query(&a_id, &[], EventOrder::Desc).limit(1))
        .await
        .unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0].kind, EventKind::Killed);
    assert_eq!(newest[0].kill_reason, Some(KillReason::Request));

    // Forged and replayed deliveries fail; the real one verifies.
    forgeries_fail(&a_seen[3], secret.as_bytes(), &failing_hook.webhook_id);
    python_snippet_agrees(&a_seen[3], secret.as_bytes()).await;

    // Clean up: the webhooks, the stack, the secrets.
    assert!(events.delete_webhook(&hook.webhook_id).await.unwrap());
    assert!(
        events
            .delete_webhook(&failing_hook.webhook_id)
            .await
            .unwrap()
    );
    assert!(!events.delete_webhook(&hook.webhook_id).await.unwrap());
    events.destroy().await.unwrap();
    for name in ["e2e", "e2e-failing"] {
        raw.delete_secret()
            .secret_id(format!("rayito/webhooks/{name}"))
            .force_delete_without_recovery(true)
            .send()
            .await
            .unwrap();
    }
}

/// A real delivery verifies; changed, signed with another secret, sent to
/// another webhook, or replayed past the window, it does not.
fn forgeries_fail(real: &Delivery, secret: &[u8], other_webhook: &str) {
    let t = real.t();
    let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
    assert_eq!(
        verify_webhook(secret, &real.headers, &real.body, at(t)),
        Ok(())
    );
    assert_eq!(
        verify_webhook(
            secret,
            &real.headers,
            &real.body,
            at(t) + DEFAULT_WEBHOOK_TOLERANCE
        ),
        Ok(()),
        "the window's last second still verifies"
    );

    let mut changed = real.body.to_vec();
    let text = String::from_utf8(changed.clone()).unwrap();
    changed = text.replace("\"request\"", "\"timeout\"").into_bytes();
    assert_ne!(changed, real.body.to_vec());
    assert_eq!(
        verify_webhook(secret, &real.headers, &changed, at(t)),
        Err(WebhookVerifyError::Mismatch),
        "a changed body"
    );
    assert_eq!(
        verify_webhook(b"not-the-secret", &real.headers, &real.body, at(t)),
        Err(WebhookVerifyError::Mismatch),
        "another secret"
    );
    let mut elsewhere = real.headers.clone();
    elsewhere.insert(
        "e2b-webhook-id",
        HeaderValue::from_str(other_webhook).unwrap(),
    );
    assert_eq!(
        verify_webhook(secret, &elsewhere, &real.body, at(t)),
        Err(WebhookVerifyError::Mismatch),
        "another webhook's id"
    );
    let mut unsigned = real.headers.clone();
    unsigned.remove("rayito-signature");
    assert_eq!(
        verify_webhook(secret, &unsigned, &real.body, at(t)),
        Err(WebhookVerifyError::MissingHeader("rayito-signature")),
        "no rayito-signature"
    );

    // Replayed: the same request, its old `t`, received past the window.
    let late = at(t) + DEFAULT_WEBHOOK_TOLERANCE + Duration::from_secs(1);
    assert_eq!(
        verify_webhook(secret, &real.headers, &real.body, late),
        Err(WebhookVerifyError::OutsideWindow)
    );
    let narrow = Duration::from_secs(30);
    assert_eq!(
        verify_webhook_with(secret, &real.headers, &real.body, at(t + 31), narrow),
        Err(WebhookVerifyError::OutsideWindow),
        "a narrower window"
    );
    assert_eq!(
        verify_webhook_with(secret, &real.headers, &real.body, at(t + 30), narrow),
        Ok(())
    );
}

/// Runs docs/events.md's Python snippet, exactly as the page shows it, on
/// the real delivery: it accepts it, and refuses it changed, under another
/// secret, and past the window.
async fn python_snippet_agrees(real: &Delivery, secret: &[u8]) {
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/events.md")).unwrap();
    let snippet = doc
        .split_once("```python\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(code, _)| code)
        .expect("a python block in docs/events.md");
    let headers: serde_json::Map<String, serde_json::Value> = real
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().into()))
        .collect();
    let t = real.t();
    let input = serde_json::json!({
        "secret": String::from_utf8(secret.to_vec()).unwrap(),
        "headers": headers,
        "body": String::from_utf8(real.body.to_vec()).unwrap(),
        "cases": [
            {"body_suffix": "", "secret_suffix": "", "now": t},
            {"body_suffix": " ", "secret_suffix": "", "now": t},
            {"body_suffix": "", "secret_suffix": "x", "now": t},
            {"body_suffix": "", "secret_suffix": "", "now": t + 301},
        ],
    });
    // The driver after the snippet: each case through `verify_webhook`.
    const DRIVER: &str = r#"
import json, sys
case = json.load(sys.stdin)
out = []
for c in case["cases"]:
    try:
        verify_webhook((case["secret"] + c["secret_suffix"]).encode(), case["headers"],
                       (case["body"] + c["body_suffix"]).encode(), now=c["now"])
        out.append("ok")
    except ValueError as e:
        out.append(str(e))
print(json.dumps(out))
"#;
    let program = format!("{snippet}{DRIVER}");
    let run = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut child = match std::process::Command::new("python3")
            .args(["-c", &program])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        {
            Ok(child) => child,
            Err(err) => return Err(err),
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())?;
        child.wait_with_output()
    })
    .await
    .unwrap();
    let out = match run {
        Ok(out) => out,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            skip("python3 not found: the Python snippet of docs/events.md was not run");
            return;
        }
        Err(err) => panic!("python3: {err}"),
    };
    assert!(
        out.status.success(),
        "the snippet failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        results,
        [
            "ok",
            "signature mismatch",
            "signature mismatch",
            "outside the window"
        ]
    );
}
