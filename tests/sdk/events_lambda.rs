//! The events-webhooks stack's functions (crate `rayito-events-lambda`)
//! as a library against moto's DynamoDB and Secrets Manager: the forwarder
//! admits signed lines and counts each refusal by its class; the
//! deliverer claims each pair once, delivers signed bodies to a real HTTP
//! receiver that checks them with `rayito_events::webhook::verify`,
//! retries a 500 and records the failure, and refuses a loopback URL under
//! the stack's policy.

use crate::sdk_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use rayito_events::key::sandbox_key;
use rayito_events::{Event, EventKind, KillReason, line, webhook};
use rayito_events_lambda::deliverer::Deliverer;
use rayito_events_lambda::forwarder::{self, LogsBatch};
use rayito_events_lambda::post::UrlPolicy;
use rayito_events_lambda::table::Table;
use sdk_support::moto::MotoServer;

const STACK_KEY: &[u8] = b"stack-key-for-the-forwarder-test";
const IMAGE: &str = "arn:aws:lambda:us-east-1:123456789012:microvm-image:base";
const TABLE: &str = "rayito-events";

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

fn config(moto: &MotoServer) -> aws_types::SdkConfig {
    sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEVENTSTEST")
}

/// The stack's table as the template declares it (keys, gsi1, open).
async fn table(moto: &MotoServer) -> Table {
    let client = aws_sdk_dynamodb::Client::new(&config(moto));
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    let index = |name: &str, hash: &str, range: &str| {
        GlobalSecondaryIndex::builder()
            .index_name(name)
            .key_schema(key(hash, KeyType::Hash))
            .key_schema(key(range, KeyType::Range))
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::All)
                    .build(),
            )
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(
            ["pk", "sk", "gsi1pk", "gsi1sk", "open_pk"]
                .map(attr)
                .to_vec(),
        ))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .global_secondary_indexes(index("gsi1", "gsi1pk", "gsi1sk"))
        .global_secondary_indexes(index("open", "open_pk", "pk"))
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewImage)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("the table");
    Table::new(client, TABLE)
}

fn now_ms() -> u64 {
    rayito_events_lambda::now_ms()
}

fn event(sandbox: &str, kind: EventKind, generation: u64, id: u8) -> Event {
    Event {
        event_id: format!("{:032x}", u128::from(id) + 1),
        sandbox_id: sandbox.into(),
        kill_reason: (kind == EventKind::Killed).then_some(KillReason::Request),
        kind,
        generation,
        occurred_at_ms: now_ms(),
        image_arn: IMAGE.into(),
        image_version: "1".into(),
    }
}

fn signed(e: &Event) -> String {
    line::encode(&sandbox_key(STACK_KEY, &e.sandbox_id), e)
}

fn batch(sandbox: &str, messages: Vec<String>) -> LogsBatch {
    LogsBatch {
        log_group: "/rayito/sandboxes".into(),
        log_stream: format!("2026/12/06/[1]{sandbox}"),
        messages,
    }
}

async fn event_rows(table: &Table, moto: &MotoServer, sandbox: &str) -> Vec<String> {
    let client = aws_sdk_dynamodb::Client::new(&config(moto));
    let out = client
        .query()
        .table_name(table.name())
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(format!("EVENT#{sandbox}")))
        .send()
        .await
        .unwrap();
    out.items()
        .iter()
        .map(|i| i["kind"].as_s().unwrap().clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarder_admits_signed_lines_and_counts_each_refusal() {
    let Some(moto) = moto().await else { return };
    let table = table(&moto).await;
    let sbx = "0123456789abcdef0123456789abcdef";
    let created = event(sbx, EventKind::Created, 0, 1);
    let mut forged = signed(&event(sbx, EventKind::Paused, 0, 2));
    forged.replace_range(forged.len() - 4.., "AAAA");
    let other = event("another-sandbox", EventKind::Created, 0, 3);
    let stale = Event {
        occurred_at_ms: now_ms() - 25 * 3600 * 1000,
        ..event(sbx, EventKind::Paused, 0, 4)
    };
    let lines = vec![
        format!("2026-12-06T20:00:00Z {}", signed(&created)),
        signed(&created),
        forged,
        "rayito.event.v1 not-a-line".into(),
        line::encode(&sandbox_key(STACK_KEY, sbx), &other),
        signed(&stale),
        signed(&event(sbx, EventKind::Resumed, 1, 5)),
    ];
    let report = forwarder::forward(&table, STACK_KEY, &batch(sbx, lines), now_ms())
        .await
        .expect("the batch is forwarded");
    assert_eq!((report.admitted, report.duplicates), (1, 1));
    let counted: Vec<(&str, u64)> = report.rejected.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(
        counted,
        [
            ("invalid_transition", 1),
            ("mac_invalid", 1),
            ("malformed_line", 1),
            ("sandbox_mismatch", 1),
            ("stale_event", 1),
        ]
    );
    // A stream that names no sandbox refuses its lines as mismatched.
    let mut nameless = batch(sbx, vec![signed(&created)]);
    nameless.log_stream = "no-bracket".into();
    let report = forwarder::forward(&table, STACK_KEY, &nameless, now_ms())
        .await
        .unwrap();
    assert_eq!(report.rejected.get("sandbox_mismatch"), Some(&1));

    // Pauses and resumes past the burst of 20 are rate limited; killed is
    // not, and closes the sandbox.
    let mut lines = Vec::new();
    let mut generation = 0;
    for i in 0..21u8 {
        let kind = if i % 2 == 0 {
            EventKind::Paused
        } else {
            generation += 1;
            EventKind::Resumed
        };
        lines.push(signed(&event(sbx, kind, generation, 10 + i)));
    }
    lines.push(signed(&event(sbx, EventKind::Killed, generation, 40)));
    let report = forwarder::forward(&table, STACK_KEY, &batch(sbx, lines), now_ms())
        .await
        .unwrap();
    assert_eq!(report.admitted, 21, "{report:?}");
    assert_eq!(report.rejected.get("rate_limited"), Some(&1), "{report:?}");
    let kinds = event_rows(&table, &moto, sbx).await;
    assert_eq!(kinds.len(), 22);
    assert_eq!(kinds.first().map(String::as_str), Some("created"));
    assert_eq!(kinds.last().map(String::as_str), Some("killed"));
    assert!(table.open_sandboxes().await.unwrap().is_empty());
    let state = table.state(sbx).await.unwrap().expect("the state row");
    assert_eq!(state.state.last, EventKind::Killed);
}

/// What the receiver saw: each body whose signature verified, and how
/// many requests failed verification.
#[derive(Default)]
struct Received {
    verified: Vec<serde_json::Value>,
    refused: usize,
    calls: usize,
}

type Receiver = Arc<Mutex<Received>>;

async fn receive(
    State((seen, secret, status)): State<(Receiver, &'static [u8], StatusCode)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let now = rayito_events_lambda::now_s();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut seen = seen.lock().unwrap();
    seen.calls += 1;
    match webhook::verify(secret, header, &body, now, webhook::DEFAULT_TOLERANCE_S) {
        Ok(()) => seen
            .verified
            .push(serde_json::from_slice(&body).expect("a JSON body")),
        Err(_) => seen.refused += 1,
    }
    status
}

/// A receiver on 127.0.0.1 answering `status`: its URL and what it saw.
async fn receiver(secret: &'static [u8], status: StatusCode) -> (String, Receiver) {
    let seen = Receiver::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state((seen.clone(), secret, status));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

async fn register(moto: &MotoServer, id: &str, url: &str, secret_name: &str, secret: &[u8]) {
    let sm = aws_sdk_secretsmanager::Client::new(&config(moto));
    sm.create_secret()
        .name(secret_name)
        .secret_string(std::str::from_utf8(secret).unwrap())
        .send()
        .await
        .expect("the webhook's secret");
    let db = aws_sdk_dynamodb::Client::new(&config(moto));
    let s = |v: &str| AttributeValue::S(v.into());
    db.put_item()
        .table_name(TABLE)
        .item("pk", s("WEBHOOK"))
        .item("sk", s(id))
        .item("url", s(url))
        .item("secret_name", s(secret_name))
        .item(
            "types",
            AttributeValue::L(vec![
                s("sandbox.lifecycle.created"),
                s("sandbox.lifecycle.killed"),
            ]),
        )
        .send()
        .await
        .expect("the webhook row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deliverer_claims_once_signs_retries_and_records_failures() {
    let Some(moto) = moto().await else { return };
    let table = table(&moto).await;
    const GOOD: &[u8] = b"whsec-good-receiver";
    const BAD: &[u8] = b"whsec-failing-receiver";
    let (good_url, good) = receiver(GOOD, StatusCode::OK).await;
    let (bad_url, bad) = receiver(BAD, StatusCode::INTERNAL_SERVER_ERROR).await;
    register(&moto, "hook-ok", &good_url, "rayito/webhooks/ok", GOOD).await;
    register(&moto, "hook-500", &bad_url, "rayito/webhooks/bad", BAD).await;
    let secrets = aws_sdk_secretsmanager::Client::new(&config(&moto));
    let deliverer = Deliverer::new(table.clone(), secrets.clone())
        .url_policy(UrlPolicy::AnyHost)
        .backoff([Duration::from_millis(20), Duration::from_millis(40)]);

    let sbx = "fedcba9876543210fedcba9876543210";
    let created = event(sbx, EventKind::Created, 0, 1);
    let image = serde_json::json!({
        "pk": {"S": format!("EVENT#{sbx}")}, "sk": {"S": "k"},
        "event_id": {"S": created.event_id}, "sandbox_id": {"S": sbx},
        "kind": {"S": "created"}, "generation": {"N": "0"},
        "occurred_at_ms": {"N": created.occurred_at_ms.to_string()},
        "image_arn": {"S": IMAGE}, "image_version": {"S": "1"}
    });
    let stream = serde_json::json!({ "Records": [
        { "eventName": "INSERT", "dynamodb": { "NewImage": image, "SequenceNumber": "1" } }
    ]});
    let response = deliverer.deliver_stream(&stream).await.unwrap();
    assert!(response.batch_item_failures.is_empty());

    {
        let good = good.lock().unwrap();
        assert_eq!((good.calls, good.refused), (1, 0));
        assert_eq!(good.verified[0]["type"], "sandbox.lifecycle.created");
        assert_eq!(good.verified[0]["event_id"], created.event_id.as_str());
        assert_eq!(good.verified[0]["sandbox_template_id"], IMAGE);
        let bad = bad.lock().unwrap();
        assert_eq!((bad.calls, bad.refused, bad.verified.len()), (3, 0, 3));
    }
    assert_eq!(
        table.delivery_status(&created, "hook-ok").await.unwrap(),
        Some("delivered".into())
    );
    assert_eq!(
        table.delivery_status(&created, "hook-500").await.unwrap(),
        Some("failed".into())
    );

    // The stream redelivers: the delivered pair is skipped, the failed one
    // tried again.
    let again = deliverer
        .deliver_event(&created, rayito_events_lambda::now_s)
        .await
        .unwrap();
    let outcomes: Vec<(&str, &str, usize, Option<u16>)> = again
        .iter()
        .map(|d| {
            (
                d.webhook_id.as_str(),
                d.outcome.as_str(),
                d.attempts,
                d.last_status,
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("hook-500", "attempts_exhausted", 3, Some(500)),
            ("hook-ok", "skipped", 0, None),
        ]
    );
    assert_eq!(good.lock().unwrap().calls, 1);

    // A type the webhooks did not subscribe to reaches neither.
    let paused = event(sbx, EventKind::Paused, 0, 2);
    assert!(
        deliverer
            .deliver_event(&paused, rayito_events_lambda::now_s)
            .await
            .unwrap()
            .is_empty()
    );

    // Under the stack's policy, plain http and a loopback address are
    // refused before any request.
    let public = Deliverer::new(table.clone(), secrets);
    let killed = event(sbx, EventKind::Killed, 0, 3);
    let refused = public
        .deliver_event(&killed, rayito_events_lambda::now_s)
        .await
        .unwrap();
    assert!(
        refused
            .iter()
            .all(|d| d.outcome == "invalid_url" && d.attempts == 1),
        "{refused:?}"
    );
    let https_loopback = rayito_events_lambda::post::post(
        "https://127.0.0.1:9/hook",
        &[],
        Vec::new(),
        UrlPolicy::Public,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(
        https_loopback,
        Err(rayito_events_lambda::post::PostError::Blocked)
    );
    assert_eq!(good.lock().unwrap().calls, 1);
}
