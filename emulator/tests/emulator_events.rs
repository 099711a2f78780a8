//! The emulator as the whole lifecycle events pipeline (docs/local.md,
//! "Lifecycle events pipeline"): the local events API (signed, its refusals), event
//! lines from a MicroVM's sink into its log stream and the forwarder (each
//! refusal counted), deliveries to real HTTP receivers verified with
//! `rayito_events::webhook::verify` in admission order, retries and dead
//! letters, and the reconciler.

use crate::emulator_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatchlogs as cwl;
use aws_sdk_lambdamicrovms::types::{CloudWatchLogging, Logging, MicrovmState};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use emulator_support::*;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rayito_emulator::{Emulator, EmulatorConfig};
use rayito_events::{Event, EventKind, KillReason, key, line, webhook};
use serde_json::{Value, json};

const GROUP: &str = "/rayito/events-test";
const ALL_TYPES: [&str; 4] = [
    "sandbox.lifecycle.created",
    "sandbox.lifecycle.paused",
    "sandbox.lifecycle.resumed",
    "sandbox.lifecycle.killed",
];

/// One signed call to the local events API: (status, JSON body).
async fn api(emu: &Emulator, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    call(emu, method, path, body, true).await
}

async fn call(
    emu: &Emulator,
    method: Method,
    path: &str,
    body: Option<Value>,
    sign: bool,
) -> (u16, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = format!("{}{path}", emu.endpoint_url());
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = Request::builder().method(method.clone()).uri(&url);
    if sign {
        for (name, value) in emu
            .access_key()
            .sign(method.as_str(), &url, bytes.as_bytes(), "us-east-1")
            .unwrap()
        {
            req = req.header(name, value);
        }
    }
    let resp = client
        .request(req.body(Full::new(Bytes::from(bytes))).unwrap())
        .await
        .expect("answer");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).expect("JSON body")
    };
    (status, json)
}

fn message(m: &str) -> Value {
    json!({ "message": m })
}

async fn deploy(emu: &Emulator) -> Value {
    let (status, body) = api(
        emu,
        Method::PUT,
        "/_rayito/events/stack",
        Some(json!({"logGroupName": GROUP, "reconcilerIntervalMinutes": 2})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn stack_key(emu: &Emulator) -> Vec<u8> {
    let (status, body) = api(emu, Method::GET, "/_rayito/events/stack-key", None).await;
    assert_eq!(status, 200, "{body}");
    STANDARD.decode(body["stackKey"].as_str().unwrap()).unwrap()
}

async fn register(emu: &Emulator, url: &str, secret: &[u8], types: &[&str]) -> String {
    let (status, body) = api(
        emu,
        Method::POST,
        "/_rayito/events/webhooks",
        Some(json!({
            "url": url,
            "secretName": "rayito/webhooks/test",
            "secret": STANDARD.encode(secret),
            "types": types,
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["url"], url);
    assert_eq!(body["types"], json!(types));
    let id = body["webhookId"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 16);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    id
}

async fn records(emu: &Emulator, query: &str) -> Vec<Value> {
    let (status, body) = api(
        emu,
        Method::GET,
        &format!("/_rayito/events/records{query}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["events"].as_array().unwrap().clone()
}

async fn get_json(emu: &Emulator, path: &str) -> Value {
    let (status, body) = api(emu, Method::GET, path, None).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Polls `f` (every 20 ms, at most 30 s) until it gives `Some`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A webhook receiver on 127.0.0.1: every delivery it got, answering
/// `status`.
#[derive(Clone)]
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

impl Receiver {
    async fn start(status: StatusCode) -> Receiver {
        let got: Arc<Mutex<Vec<(HeaderMap, Bytes)>>> = Arc::default();
        let seen = got.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push((headers, body));
                    (status, "answered")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{addr}/hook"),
            got,
        }
    }

    fn deliveries(&self) -> Vec<(HeaderMap, Bytes)> {
        self.got.lock().unwrap().clone()
    }

    async fn wait_for(&self, n: usize) -> Vec<(HeaderMap, Bytes)> {
        eventually(&format!("{n} deliveries"), || async {
            let d = self.deliveries();
            (d.len() >= n).then_some(d)
        })
        .await
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// An event of `sandbox` as its agent would emit it.
fn event(emu: &Emulator, sandbox: &str, kind: EventKind, generation: u64) -> Event {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&now_ms().to_be_bytes());
    id[8] = kind as u8;
    id[9] = generation as u8;
    Event {
        event_id: id.iter().map(|b| format!("{b:02x}")).collect(),
        sandbox_id: sandbox.to_owned(),
        kill_reason: (kind == EventKind::Killed).then_some(KillReason::Request),
        kind,
        generation,
        occurred_at_ms: now_ms(),
        image_arn: emu.image_arn("rayito-base"),
        image_version: "1.0".to_owned(),
    }
}

/// The event line of `e`, signed with the key the SDK derives.
fn signed_line(stack_key: &[u8], e: &Event) -> String {
    line::encode(&key::sandbox_key(stack_key, &e.sandbox_id), e)
}

/// Verifies one delivery as a receiver does: its body's event.
fn verified(secret: &[u8], (headers, body): &(HeaderMap, Bytes)) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let lookup = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    webhook::verify(secret, lookup, body, now, webhook::DEFAULT_TOLERANCE_S)
        .expect("every delivery verifies");
    assert_eq!(lookup("content-type"), Some("application/json"));
    assert_eq!(lookup(webhook::SIGNATURE_VERSION), Some("v1"));
    serde_json::from_slice(body).unwrap()
}

/// A RUNNING MicroVM logging to `group`.
async fn run_logging_to(h: &Harness, group: &str) -> String {
    let group = group.to_owned();
    let (id, _) = h
        .run_ready_with(move |r| {
            r.logging(Logging::CloudWatch(
                CloudWatchLogging::builder().log_group(group).build(),
            ))
        })
        .await;
    id
}

#[tokio::test]
async fn the_api_is_signed_and_refuses_what_it_cannot_do() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    // Not deployed: every call but the deploy is a 404.
    for (method, path) in [
        (Method::GET, "/_rayito/events/stack"),
        (Method::DELETE, "/_rayito/events/stack"),
        (Method::GET, "/_rayito/events/stack-key"),
        (Method::GET, "/_rayito/events/webhooks"),
        (Method::DELETE, "/_rayito/events/webhooks/0011223344556677"),
        (Method::GET, "/_rayito/events/records"),
        (Method::GET, "/_rayito/events/dead-letters"),
        (Method::GET, "/_rayito/events/counters"),
    ] {
        assert_eq!(
            api(&emu, method.clone(), path, None).await,
            (404, message("the events stack is not deployed")),
            "{method} {path}"
        );
    }
    let hook = json!({"url": "http://127.0.0.1:9/h", "secretName": "n", "secret": "cw==", "types": ALL_TYPES});
    assert_eq!(
        api(
            &emu,
            Method::POST,
            "/_rayito/events/webhooks",
            Some(hook.clone())
        )
        .await,
        (404, message("the events stack is not deployed"))
    );
    // Unsigned: refused as every control-plane call is.
    let (status, body) = call(&emu, Method::GET, "/_rayito/events/stack", None, false).await;
    assert_eq!(status, 403, "{body}");
    let put = |body: Value| api(&emu, Method::PUT, "/_rayito/events/stack", Some(body));
    for (body, refusal) in [
        (json!({}), "logGroupName must be a non-empty string"),
        (
            json!({"logGroupName": " "}),
            "logGroupName must be a non-empty string",
        ),
        (
            json!({"logGroupName": GROUP, "reconcilerIntervalMinutes": 1}),
            "reconcilerIntervalMinutes must be between 2 and 60",
        ),
        (
            json!({"logGroupName": GROUP, "reconcilerIntervalMinutes": 61}),
            "reconcilerIntervalMinutes must be between 2 and 60",
        ),
        (json!({"logGroupName": 5}), "Malformed request body."),
    ] {
        assert_eq!(put(body.clone()).await, (400, message(refusal)), "{body}");
    }
    // Deploy, then redeploy: the key is kept.
    let first = put(json!({"logGroupName": GROUP})).await;
    assert_eq!(first.0, 200);
    assert_eq!(first.1["status"], "CREATE_COMPLETE");
    let outputs = &first.1["outputs"];
    assert!(
        outputs["EventsTableName"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert!(
        outputs["StackKeySecretArn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:secretsmanager:us-east-1:000000000000:secret:")
    );
    let key = stack_key(&emu).await;
    assert_eq!(key.len(), 32);
    let again = put(json!({"logGroupName": "/other", "reconcilerIntervalMinutes": 10})).await;
    assert_eq!(again.1["status"], "UPDATE_COMPLETE");
    assert_eq!(again.1["outputs"], *outputs);
    assert_eq!(stack_key(&emu).await, key, "a redeploy keeps the key");
    let status = get_json(&emu, "/_rayito/events/stack").await;
    assert_eq!(status["status"], "UPDATE_COMPLETE");
    // Webhooks: each refusal pinned.
    let post = |body: Value| api(&emu, Method::POST, "/_rayito/events/webhooks", Some(body));
    let with = |k: &str, v: Value| {
        let mut b = hook.clone();
        b[k] = v;
        b
    };
    for (body, refusal) in [
        (
            with("url", json!("ftp://example.com/h")),
            "url must be an http:// or https:// URL with a host",
        ),
        (
            with("url", json!("/relative")),
            "url must be an http:// or https:// URL with a host",
        ),
        (with("types", json!([])), "types cannot be empty"),
        (
            with("types", json!(["sandbox.lifecycle.exploded"])),
            "unknown event type: sandbox.lifecycle.exploded",
        ),
        (
            with("secretName", json!("")),
            "secretName must not be empty",
        ),
        (
            with("secret", json!("not base64!")),
            "secret must be the base64 of a non-empty value",
        ),
        (
            with("secret", json!("")),
            "secret must be the base64 of a non-empty value",
        ),
        (json!({"url": "http://x/"}), "Malformed request body."),
    ] {
        assert_eq!(post(body.clone()).await, (400, message(refusal)), "{body}");
    }
    let a = register(&emu, "http://127.0.0.1:9/a", b"s", &ALL_TYPES).await;
    let b = register(
        &emu,
        "https://hooks.example.com/b",
        b"s",
        &["sandbox.lifecycle.killed"],
    )
    .await;
    assert_ne!(a, b);
    let listed = get_json(&emu, "/_rayito/events/webhooks").await;
    assert_eq!(
        listed,
        json!({"webhooks": [
            {"webhookId": a, "url": "http://127.0.0.1:9/a", "types": ALL_TYPES},
            {"webhookId": b, "url": "https://hooks.example.com/b", "types": ["sandbox.lifecycle.killed"]},
        ]})
    );
    let del = format!("/_rayito/events/webhooks/{a}");
    assert_eq!(
        api(&emu, Method::DELETE, &del, None).await,
        (200, json!({"deleted": true}))
    );
    assert_eq!(
        api(&emu, Method::DELETE, &del, None).await,
        (200, json!({"deleted": false}))
    );
    assert_eq!(
        get_json(&emu, "/_rayito/events/webhooks").await["webhooks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Records: the query's refusals.
    for (query, refusal) in [
        ("?limit=0", "limit must be between 1 and 100"),
        ("?limit=101", "limit must be between 1 and 100"),
        ("?limit=x", "limit must be between 1 and 100"),
        ("?order=up", "order must be asc or desc"),
        (
            "?type=sandbox.lifecycle.x",
            "unknown event type: sandbox.lifecycle.x",
        ),
    ] {
        assert_eq!(
            api(
                &emu,
                Method::GET,
                &format!("/_rayito/events/records{query}"),
                None
            )
            .await,
            (400, message(refusal)),
            "{query}"
        );
    }
    assert!(records(&emu, "?limit=100&order=asc").await.is_empty());
    let counters = get_json(&emu, "/_rayito/events/counters").await;
    assert_eq!(counters["admitted"], 0);
    assert_eq!(
        counters["rejected"],
        json!({"malformed_line": 0, "mac_invalid": 0, "sandbox_mismatch": 0, "stale_event": 0,
               "invalid_transition": 0, "rate_limited": 0, "internal_error": 0})
    );
    // Destroy: everything goes, the key with it.
    assert_eq!(
        api(&emu, Method::DELETE, "/_rayito/events/stack", None).await,
        (200, json!({"status": "DELETE_COMPLETE"}))
    );
    assert_eq!(
        api(&emu, Method::GET, "/_rayito/events/webhooks", None)
            .await
            .0,
        404
    );
    deploy(&emu).await;
    assert_ne!(stack_key(&emu).await, key, "a new stack, a new key");
    assert!(
        get_json(&emu, "/_rayito/events/webhooks").await["webhooks"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn lines_reach_the_log_stream_the_store_and_the_webhooks_in_order() {
    let h = Harness::start().await;
    let emu = &h.emulator;
    deploy(emu).await;
    let stack = stack_key(emu).await;
    let all = Receiver::start(StatusCode::OK).await;
    let killed_only = Receiver::start(StatusCode::NO_CONTENT).await;
    let all_id = register(emu, &all.url, b"all-secret", &ALL_TYPES).await;
    let killed_id = register(
        emu,
        &killed_only.url,
        b"k-secret",
        &["sandbox.lifecycle.killed"],
    )
    .await;
    let vm = run_logging_to(&h, GROUP).await;
    let elsewhere = run_logging_to(&h, "/rayito/another-group").await;

    let lifecycle = [
        event(emu, &vm, EventKind::Created, 0),
        event(emu, &vm, EventKind::Paused, 0),
        event(emu, &vm, EventKind::Resumed, 1),
        event(emu, &vm, EventKind::Killed, 1),
    ];
    // Refused lines, each under its counter, none delivered.
    let mut forged = lifecycle[0].clone();
    forged.event_id = "f".repeat(32);
    emu.event_line(&vm, &signed_line(b"not the stack key", &forged));
    emu.event_line(&vm, "rayito.event.v1 garbage");
    emu.event_line(&vm, &signed_line(&stack, &lifecycle[1])); // paused before created
    // A day and more old; signed for this sandbox but naming another.
    let mut stale = lifecycle[0].clone();
    stale.occurred_at_ms -= 25 * 60 * 60 * 1000;
    emu.event_line(&vm, &signed_line(&stack, &stale));
    let mut other = lifecycle[0].clone();
    other.sandbox_id = elsewhere.clone();
    emu.event_line(&vm, &line::encode(&key::sandbox_key(&stack, &vm), &other));
    // Not an event line: the log stream only.
    emu.event_line(&vm, "hello from the console");
    // Another group's sandbox: logged, never forwarded.
    emu.event_line(
        &elsewhere,
        &signed_line(&stack, &event(emu, &elsewhere, EventKind::Created, 0)),
    );
    for e in &lifecycle {
        emu.event_line(&vm, &signed_line(&stack, e));
    }
    // A replay of an admitted line.
    emu.event_line(&vm, &signed_line(&stack, &lifecycle[0]));

    let got = all.wait_for(4).await;
    let bodies: Vec<Value> = got.iter().map(|d| verified(b"all-secret", d)).collect();
    let types: Vec<&str> = bodies.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(types, ALL_TYPES, "one at a time, in admission order");
    for ((headers, _), (b, e)) in got.iter().zip(bodies.iter().zip(&lifecycle)) {
        assert_eq!(headers[webhook::WEBHOOK_ID], all_id.as_str());
        let delivery = headers[webhook::DELIVERY_ID].to_str().unwrap();
        assert_eq!(delivery.len(), 32);
        assert_eq!(b["event_id"], e.event_id.as_str());
        assert_eq!(b["sandbox_id"], vm.as_str());
        assert_eq!(b["sandbox_execution_id"], format!("{vm}#{}", e.generation));
        assert_eq!(b["sandbox_template_id"], e.image_arn.as_str());
    }
    assert_eq!(bodies[3]["kill_reason"], "request");
    // A signature does not verify under another secret.
    let lookup = |name: &str| got[0].0.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(
        webhook::verify(b"wrong", lookup, &got[0].1, now_ms() / 1000, 300),
        Err(webhook::VerifyError::Mismatch)
    );
    let killed = killed_only.wait_for(1).await;
    let k = verified(b"k-secret", &killed[0]);
    assert_eq!(k["type"], "sandbox.lifecycle.killed");
    assert_eq!(killed[0].0[webhook::WEBHOOK_ID], killed_id.as_str());

    // The records: the same events, with their fields.
    let asc = records(emu, &format!("?sandboxId={vm}&order=asc")).await;
    assert_eq!(asc.len(), 4);
    for (r, e) in asc.iter().zip(&lifecycle) {
        assert_eq!(
            *r,
            json!({
                "eventId": e.event_id, "sandboxId": vm, "kind": e.kind.as_str(),
                "killReason": e.kill_reason.map(|r| r.as_str()), "generation": e.generation,
                "occurredAtMs": e.occurred_at_ms, "imageArn": e.image_arn,
                "imageVersion": e.image_version,
            })
        );
    }
    let desc = records(emu, "?limit=2").await;
    assert_eq!(
        desc,
        vec![asc[3].clone(), asc[2].clone()],
        "newest first by default"
    );
    let filtered = records(
        emu,
        "?type=sandbox.lifecycle.created&type=sandbox.lifecycle.killed&order=asc",
    )
    .await;
    assert_eq!(filtered, vec![asc[0].clone(), asc[3].clone()]);
    assert!(
        records(emu, &format!("?sandboxId={elsewhere}"))
            .await
            .is_empty()
    );

    let counters = eventually("every delivery counted", || async {
        let c = get_json(emu, "/_rayito/events/counters").await;
        (c["delivered"] == 5).then_some(c)
    })
    .await;
    assert_eq!(counters["admitted"], 4);
    assert_eq!(counters["rejected"]["mac_invalid"], 1);
    assert_eq!(counters["rejected"]["malformed_line"], 1);
    assert_eq!(counters["rejected"]["stale_event"], 1);
    assert_eq!(counters["rejected"]["sandbox_mismatch"], 1);
    assert_eq!(
        counters["rejected"]["invalid_transition"], 2,
        "early paused, replayed created"
    );
    assert_eq!(counters["dropped"], 0);
    assert!(
        get_json(emu, "/_rayito/events/dead-letters").await["deadLetters"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(all.deliveries().len(), 4, "nothing refused was delivered");

    // The sandbox's log stream carries every line, as its console would.
    let logs = logs_client(emu);
    let streams = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .send()
        .await
        .unwrap();
    let stream = streams
        .log_streams()
        .iter()
        .filter_map(|s| s.log_stream_name())
        .find(|n| n.ends_with(&format!("]{vm}")))
        .expect("the sandbox's stream")
        .to_owned();
    let lines: Vec<String> = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name(stream)
        .start_from_head(true)
        .send()
        .await
        .unwrap()
        .events()
        .iter()
        .filter_map(|e| e.message().map(str::to_owned))
        .collect();
    assert!(lines.iter().any(|l| l == "hello from the console"));
    for e in &lifecycle {
        assert!(lines.contains(&signed_line(&stack, e)), "{lines:?}");
    }
    h.emulator.shutdown().await;
}

fn logs_client(emu: &Emulator) -> cwl::Client {
    let key = emu.access_key();
    let conf = cwl::Config::builder()
        .behavior_version(cwl::config::BehaviorVersion::latest())
        .region(cwl::config::Region::new("us-east-1"))
        .credentials_provider(cwl::config::Credentials::new(
            &key.id,
            &key.secret,
            None,
            None,
            "test",
        ))
        .endpoint_url(emu.endpoint_url())
        .build();
    cwl::Client::from_conf(conf)
}

#[tokio::test]
async fn failed_deliveries_are_retried_then_dead_letters() {
    let h = Harness::start().await;
    let emu = &h.emulator;
    deploy(emu).await;
    let stack = stack_key(emu).await;
    let failing = Receiver::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    let missing = Receiver::start(StatusCode::NOT_FOUND).await;
    // Nobody listens there once the listener is gone: transport failures.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    let failing_id = register(emu, &failing.url, b"s", &ALL_TYPES).await;
    let missing_id = register(emu, &missing.url, b"s", &ALL_TYPES).await;
    let closed_id = register(emu, &closed, b"s", &ALL_TYPES).await;
    let vm = run_logging_to(&h, GROUP).await;
    let created = event(emu, &vm, EventKind::Created, 0);
    emu.event_line(&vm, &signed_line(&stack, &created));

    let letters = eventually("three dead letters", || async {
        let d = get_json(emu, "/_rayito/events/dead-letters").await;
        let d = d["deadLetters"].as_array().unwrap().clone();
        (d.len() == 3).then_some(d)
    })
    .await;
    let letter = |id: &str| {
        letters
            .iter()
            .find(|l| l["webhookId"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        letter(&failing_id),
        json!({"webhookId": failing_id, "eventId": created.event_id, "attempts": 3,
               "reason": "attempts_exhausted", "lastStatus": 500})
    );
    assert_eq!(
        letter(&missing_id),
        json!({"webhookId": missing_id, "eventId": created.event_id, "attempts": 1,
               "reason": "rejected_404", "lastStatus": 404})
    );
    assert_eq!(
        letter(&closed_id),
        json!({"webhookId": closed_id, "eventId": created.event_id, "attempts": 3,
               "reason": "attempts_exhausted", "lastStatus": null})
    );
    // Three signed attempts, each with its own delivery id.
    let attempts = failing.deliveries();
    assert_eq!(attempts.len(), 3);
    let mut ids: Vec<String> = attempts
        .iter()
        .map(|d| {
            verified(b"s", d);
            d.0[webhook::DELIVERY_ID].to_str().unwrap().to_owned()
        })
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 3, "a new delivery id per attempt");
    assert_eq!(missing.deliveries().len(), 1, "a 4xx is not retried");
    let counters = get_json(emu, "/_rayito/events/counters").await;
    assert_eq!(
        (counters["admitted"].clone(), counters["delivered"].clone()),
        (json!(1), json!(0))
    );
    h.emulator.shutdown().await;
}

#[tokio::test]
async fn the_reconciler_closes_a_sandbox_the_emulator_dropped() {
    let h = Harness::start_with(EmulatorConfig {
        events_reconcile_interval: Some(Duration::from_millis(100)),
        ..EmulatorConfig::default()
    })
    .await;
    let emu = &h.emulator;
    deploy(emu).await;
    let stack = stack_key(emu).await;
    let receiver = Receiver::start(StatusCode::OK).await;
    register(emu, &receiver.url, b"r", &["sandbox.lifecycle.killed"]).await;
    let vm = run_logging_to(&h, GROUP).await;
    let alive = run_logging_to(&h, GROUP).await;
    for id in [&vm, &alive] {
        emu.event_line(
            id,
            &signed_line(&stack, &event(emu, id, EventKind::Created, 0)),
        );
    }
    eventually("both created", || async {
        (records(emu, "").await.len() == 2).then_some(())
    })
    .await;
    // The guest dies without a word: no killed line.
    assert!(emu.faults().kill_agent(&vm));
    wait_state(&h.client, &vm, MicrovmState::Terminated).await;
    let got = receiver.wait_for(1).await;
    let body = verified(b"r", &got[0]);
    assert_eq!(body["sandbox_id"], vm.as_str());
    assert_eq!(body["kill_reason"], "unknown");
    let killed = records(emu, "?type=sandbox.lifecycle.killed").await;
    assert_eq!(killed.len(), 1, "only the dropped sandbox: {killed:?}");
    assert_eq!(killed[0]["killReason"], "unknown");
    assert_eq!(killed[0]["generation"], 0);
    assert_eq!(killed[0]["imageArn"], emu.image_arn("rayito-base"));
    // Later runs add nothing: the sandbox is closed.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(records(emu, &format!("?sandboxId={vm}")).await.len(), 2);
    assert_eq!(receiver.deliveries().len(), 1);
    h.emulator.shutdown().await;
}

/// docs/local.md transcribes the API's refusals: each message the tests
/// above pin is there, word for word.
#[test]
fn the_docs_transcribe_every_refusal() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/local.md"))
        .expect("docs/local.md");
    let section = docs
        .split("### Lifecycle events pipeline")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("the events section");
    for message in [
        "the events stack is not deployed",
        "logGroupName must be a non-empty string",
        "reconcilerIntervalMinutes must be between 2 and 60",
        "Malformed request body.",
        "url must be an http:// or https:// URL with a host",
        "types cannot be empty",
        "unknown event type: <type>",
        "secretName must not be empty",
        "secret must be the base64 of a non-empty value",
        "a stack holds at most 100 webhooks",
        "limit must be between 1 and 100",
        "order must be asc or desc",
        "attempts_exhausted",
        "rejected_<status>",
        "queue_full",
    ] {
        assert!(section.contains(&format!("`{message}`")), "{message}");
    }
}

/// A real sandbox's life, end to end: its agent configured for events
/// (the section the SDK sends, through the proxy), then suspended,
/// resumed and terminated through the control plane; its own signed
/// lines reach a verifying receiver in order, and a receiver answering
/// 500 gets three attempts, then a dead letter.
#[tokio::test]
async fn a_sandboxs_own_events_reach_its_webhooks() {
    let h = Harness::start().await;
    let emu = &h.emulator;
    deploy(emu).await;
    let stack = stack_key(emu).await;
    let receiver = Receiver::start(StatusCode::OK).await;
    let failing = Receiver::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    register(emu, &receiver.url, b"ok-secret", &ALL_TYPES).await;
    let failing_id = register(
        emu,
        &failing.url,
        b"bad-secret",
        &["sandbox.lifecycle.killed"],
    )
    .await;

    let group = GROUP.to_owned();
    let (vm, endpoint) = h
        .run_ready_with(move |r| {
            r.logging(Logging::CloudWatch(
                CloudWatchLogging::builder().log_group(group).build(),
            ))
        })
        .await;
    let token = h.mint(&vm, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let image_arn = emu.image_arn("rayito-base");
    let response =
        rayito_agent::pb::configure_service_client::ConfigureServiceClient::with_interceptor(
            ch.clone(),
            ProxyHeaders::sdk(&token),
        )
        .configure(rayito_agent::pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            lifecycle_events: Some(rayito_agent::pb::LifecycleEventsConfig {
                sandbox_key: key::sandbox_key(&stack, &vm).to_vec(),
                sandbox_id: vm.clone(),
                image_arn: image_arn.clone(),
                image_version: "1.0".into(),
            }),
            ..Default::default()
        })
        .await
        .expect("Configure")
        .into_inner();
    assert_eq!(
        response
            .results
            .iter()
            .map(|r| r.code())
            .collect::<Vec<_>>(),
        [rayito_agent::pb::SectionCode::Applied]
    );
    receiver.wait_for(1).await;
    h.client
        .suspend_microvm()
        .microvm_identifier(&vm)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &vm, MicrovmState::Suspended).await;
    h.client
        .resume_microvm()
        .microvm_identifier(&vm)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &vm, MicrovmState::Running).await;
    h.client
        .terminate_microvm()
        .microvm_identifier(&vm)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &vm, MicrovmState::Terminated).await;

    let got = receiver.wait_for(4).await;
    let bodies: Vec<Value> = got.iter().map(|d| verified(b"ok-secret", d)).collect();
    let seen: Vec<(&str, u64)> = bodies
        .iter()
        .map(|b| {
            (
                b["type"].as_str().unwrap(),
                b["generation"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("sandbox.lifecycle.created", 0),
            ("sandbox.lifecycle.paused", 0),
            ("sandbox.lifecycle.resumed", 1),
            ("sandbox.lifecycle.killed", 1),
        ]
    );
    assert_eq!(bodies[3]["kill_reason"], "request");
    assert!(
        bodies
            .iter()
            .all(|b| b["sandbox_id"] == vm.as_str()
                && b["sandbox_template_id"] == image_arn.as_str())
    );
    // get_events returns the same records.
    let asc = records(emu, &format!("?sandboxId={vm}&order=asc")).await;
    let ids = |v: &[Value], key: &str| -> Vec<String> {
        v.iter()
            .map(|x| x[key].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&asc, "eventId"), ids(&bodies, "event_id"));

    let letters = eventually("the failing receiver's dead letter", || async {
        let d = get_json(emu, "/_rayito/events/dead-letters").await;
        let d = d["deadLetters"].as_array().unwrap().clone();
        (!d.is_empty()).then_some(d)
    })
    .await;
    assert_eq!(
        letters,
        [
            json!({"webhookId": failing_id, "eventId": bodies[3]["event_id"], "attempts": 3,
                "reason": "attempts_exhausted", "lastStatus": 500})
        ]
    );
    let attempts = failing.deliveries();
    assert_eq!(attempts.len(), 3);
    for a in &attempts {
        assert_eq!(
            verified(b"bad-secret", a)["type"],
            "sandbox.lifecycle.killed"
        );
    }
    let counters = get_json(emu, "/_rayito/events/counters").await;
    assert_eq!(counters["admitted"], 4);
    assert_eq!(counters["delivered"], 4);
    assert!(
        counters["rejected"]
            .as_object()
            .unwrap()
            .values()
            .all(|n| *n == 0),
        "{counters}"
    );
    h.emulator.shutdown().await;
}
