//! Lifecycle events' checks, request building and verify, without I/O:
//! every refusal pinned with its exact message.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::aws::dynamodb::Attr;

fn refusal<T: std::fmt::Debug>(result: Result<T, SandboxError>) -> (String, String) {
    let err = result.unwrap_err();
    let argument = match &err {
        SandboxError::InvalidArgument { argument, .. } => {
            argument.as_deref().unwrap_or_default().to_owned()
        }
        other => panic!("not InvalidArgument: {other:?}"),
    };
    (argument, err.to_string())
}

#[test]
fn webhook_urls_on_aws_and_locally() {
    let aws = "invalid url: register_webhook: url must be a valid https:// URL to a public address: a DNS host (not localhost) or a public IP (not loopback, private, link-local or metadata), port between 1 and 65535";
    for url in [
        "http://hooks.example.com/",
        "https://127.0.0.1/x",
        "https://localhost:8443/",
        "https://[::ffff:10.0.0.1]/",
        "https://169.254.169.254/",
        "https://hooks.example.com:0/",
        "not a url",
    ] {
        assert_eq!(
            refusal(checks::webhook_url(url, true)),
            ("url".to_owned(), aws.to_owned()),
            "{url}"
        );
    }
    checks::webhook_url("https://hooks.example.com/rayito", true).unwrap();
    let local = "invalid url: register_webhook: url must be an http:// or https:// URL with a host and a port between 1 and 65535 (the local backend also delivers to loopback and plain http)";
    checks::webhook_url("http://127.0.0.1:8080/hook", false).unwrap();
    checks::webhook_url("https://localhost/", false).unwrap();
    for url in [
        "ftp://127.0.0.1/",
        "http://",
        "http://127.0.0.1:0/",
        "127.0.0.1:80",
    ] {
        assert_eq!(
            refusal(checks::webhook_url(url, false)),
            ("url".to_owned(), local.to_owned()),
            "{url}"
        );
    }
}

#[test]
fn types_secret_names_ids_and_limits() {
    assert_eq!(
        refusal(checks::webhook_types(&[])),
        (
            "types".to_owned(),
            "invalid types: register_webhook: types may not be empty; pass one or more of sandbox.lifecycle.created, paused, resumed, killed".to_owned()
        )
    );
    assert_eq!(
        checks::webhook_types(&[EventKind::Killed, EventKind::Created, EventKind::Killed]).unwrap(),
        [EventKind::Killed, EventKind::Created]
    );
    assert_eq!(
        refusal(parse_event_type("sandbox.lifecycle.exploded")),
        (
            "types".to_owned(),
            "invalid types: unknown event type \"sandbox.lifecycle.exploded\"; pass sandbox.lifecycle.created, sandbox.lifecycle.paused, sandbox.lifecycle.resumed or sandbox.lifecycle.killed".to_owned()
        )
    );
    assert_eq!(
        parse_event_type("sandbox.lifecycle.paused").unwrap(),
        EventKind::Paused
    );

    assert_eq!(
        checks::webhook_secret_id("receiver").unwrap(),
        "rayito/webhooks/receiver"
    );
    assert_eq!(
        checks::webhook_secret_id("rayito/webhooks/receiver").unwrap(),
        "rayito/webhooks/receiver"
    );
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf";
    assert_eq!(checks::webhook_secret_id(arn).unwrap(), arn);
    let secret = "invalid secret_name: register_webhook: secret_name is empty or longer than 512 characters; pass the name of the webhook's secret (under rayito/webhooks/) or its ARN";
    for bad in [
        "",
        "a b",
        &"x".repeat(500),
        "arn:aws:s3:::bucket",
        "rayito/webhooks/",
    ] {
        assert_eq!(
            refusal(checks::webhook_secret_id(bad)),
            ("secret_name".to_owned(), secret.to_owned()),
            "{bad:?}"
        );
    }

    checks::webhook_id("0123456789abcdef").unwrap();
    for bad in ["0123456789ABCDEF", "abc", "../../etc/passwd"] {
        assert_eq!(
            refusal(checks::webhook_id(bad)),
            (
                "webhook_id".to_owned(),
                "invalid webhook_id: delete_webhook: a webhook id is 16 lower-case hex characters; pass an id that list_webhooks shows".to_owned()
            )
        );
    }

    for limit in [0, 101] {
        assert_eq!(
            refusal(checks::query(&EventQuery::new().limit(limit))),
            (
                "limit".to_owned(),
                format!("invalid limit: get_events: limit is {limit}; pass 1 to 100")
            )
        );
    }
    checks::query(&EventQuery::new().limit(1)).unwrap();
}

#[test]
fn deploy_values() {
    assert_eq!(
        refusal(checks::deploy(
            &EventsDeploy::new("b", "/g").reconciler_interval_minutes(1),
            true
        )),
        (
            "reconciler_interval_minutes".to_owned(),
            "invalid reconciler_interval_minutes: deploy: reconciler_interval_minutes is 1; pass 2 to 60 (EventBridge Scheduler's rate(N minutes), at least every hour)".to_owned()
        )
    );
    assert_eq!(
        refusal(checks::deploy(&EventsDeploy::new("b", ""), true)),
        (
            "log_group_name".to_owned(),
            "invalid log_group_name: deploy: log_group_name is empty; pass the log group the sandboxes log to".to_owned()
        )
    );
    assert_eq!(
        refusal(checks::deploy(&EventsDeploy::new("", "/g"), true)),
        (
            "artifact_bucket".to_owned(),
            "invalid artifact_bucket: deploy: artifact_bucket is empty; pass the bucket that holds the stack's functions (rayito setup's artifact bucket)".to_owned()
        )
    );
    checks::deploy(&EventsDeploy::new("", "/g"), false).unwrap();
    let d = EventsDeploy::new("b", "/g")
        .tags([("team", "a"), ("team", "b")])
        .artifact("/tmp/x.zip");
    assert_eq!(d.tags, [("team".to_owned(), "b".to_owned())]);
    assert_eq!(d.reconciler_interval_minutes, 5);
}

#[test]
fn the_section_carries_the_derived_key() {
    let request = steps::section(b"k", "sbx", "arn:img", "3");
    let section = request.lifecycle_events.unwrap();
    assert_eq!(
        section
            .sandbox_key
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        // HMAC-SHA256("k", "rayito.events.v1|sbx"), as rayito-events pins it.
        "0b8f754d27f291b7bbb81dcc02fca3f09be41e68ce269c29138088fde0fc181a"
    );
    assert_eq!(section.sandbox_id, "sbx");
    assert_eq!(section.image_arn, "arn:img");
    assert_eq!(section.image_version, "3");
    assert!(request.secret_gateway.is_none() && request.s3_mounts.is_none());
}

#[test]
fn the_table_requests_are_the_references() {
    let q = EventQuery::new()
        .types([EventKind::Paused, EventKind::Created, EventKind::Paused])
        .order(EventOrder::Asc)
        .limit(7);
    assert_eq!(
        aws::events_key(&q),
        (Some("gsi1"), "gsi1pk = :pk", "EVENT".to_owned())
    );
    let one = q.clone().sandbox_id("vm-1");
    assert_eq!(
        aws::events_key(&one),
        (None, "pk = :pk", "EVENT#vm-1".to_owned())
    );
    let filter = aws::kinds_filter(&q.types);
    assert_eq!(
        filter.condition.as_deref(),
        Some("kind IN (:kind0, :kind1)")
    );
    assert_eq!(
        filter.values,
        [
            (":kind0".to_owned(), Attr::S("created".to_owned())),
            (":kind1".to_owned(), Attr::S("paused".to_owned()))
        ]
    );
    assert!(aws::kinds_filter(&[]).condition.is_none());

    let item = aws::webhook_item(
        "0123456789abcdef",
        "https://h.example/x",
        "rayito/webhooks/r",
        &[EventKind::Created, EventKind::Killed],
    );
    assert_eq!(item["pk"], Attr::S("WEBHOOK".to_owned()));
    assert_eq!(item["secret_name"], Attr::S("rayito/webhooks/r".to_owned()));
    let back = aws::webhook_of(&item).unwrap();
    assert_eq!(back.webhook_id, "0123456789abcdef");
    assert_eq!(back.types, [EventKind::Created, EventKind::Killed]);

    let record: HashMap<String, Attr> = [
        ("event_id", Attr::S("e".repeat(32))),
        ("sandbox_id", Attr::S("vm-1".into())),
        ("kind", Attr::S("killed".into())),
        ("kill_reason", Attr::S("timeout".into())),
        ("generation", Attr::N("2".into())),
        ("occurred_at_ms", Attr::N("1700000000000".into())),
        ("image_arn", Attr::S("arn:img".into())),
        ("image_version", Attr::S("1".into())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let r = aws::record_of(&record).unwrap();
    assert_eq!(r.kind, EventKind::Killed);
    assert_eq!(r.kill_reason, Some(KillReason::Timeout));
    assert_eq!(r.sandbox_execution_id(), "vm-1#2");
    assert_eq!(r.event_type(), "sandbox.lifecycle.killed");

    assert_eq!(
        local::records_path(&one),
        "/records?limit=7&order=asc&sandboxId=vm-1&type=sandbox.lifecycle.paused&type=sandbox.lifecycle.created&type=sandbox.lifecycle.paused"
    );
}

#[tokio::test]
async fn dead_letters_on_aws_name_the_queue() {
    let err = LifecycleEvents::new().dead_letters().await.unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Unimplemented);
    assert!(
        err.to_string().contains("on AWS the deliverer's failures go to the stack's SQS queue DelivererFailuresQueue (its DelivererFailuresQueueUrl output): read that queue"),
        "{err}"
    );
}

#[test]
fn not_deployed_is_a_webhook_error() {
    let err = local::not_deployed("rayito-events-webhooks");
    assert_eq!(err.kind(), crate::ErrorKind::Webhook);
    assert_eq!(
        err.to_string(),
        "the stack rayito-events-webhooks is not deployed; call deploy() first (rayito events deploy)"
    );
    assert!(local::is_not_deployed(&err));
}

fn signed(secret: &[u8], body: &[u8], t: u64) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in rayito_events::webhook::headers(
        secret,
        "0123456789abcdef",
        "d".repeat(32).as_str(),
        body,
        t,
    ) {
        headers.insert(name, value.parse().unwrap());
    }
    headers
}

#[test]
fn verify_webhook_checks_signature_window_and_headers() {
    let now = SystemTime::now();
    let t = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let body = br#"{"event_id":"x"}"#;
    let headers = signed(b"s3cret", body, t);
    verify_webhook(b"s3cret", &headers, body, now).unwrap();
    assert_eq!(
        verify_webhook(b"other", &headers, body, now),
        Err(WebhookVerifyError::Mismatch)
    );
    assert_eq!(
        verify_webhook(b"s3cret", &headers, b"{\"event_id\":\"y\"}", now),
        Err(WebhookVerifyError::Mismatch)
    );
    let late = now + Duration::from_secs(301);
    assert_eq!(
        verify_webhook(b"s3cret", &headers, body, late),
        Err(WebhookVerifyError::OutsideWindow)
    );
    verify_webhook_with(b"s3cret", &headers, body, late, Duration::from_secs(600)).unwrap();
    let mut missing = headers.clone();
    missing.remove("rayito-signature");
    assert_eq!(
        verify_webhook(b"s3cret", &missing, body, now),
        Err(WebhookVerifyError::MissingHeader("rayito-signature"))
    );
    let mut bad = headers.clone();
    bad.insert("rayito-signature", "t=1,v1=zz".parse().unwrap());
    assert_eq!(
        verify_webhook(b"s3cret", &bad, body, now),
        Err(WebhookVerifyError::Malformed)
    );
    let mut binary = headers;
    binary.insert(
        "e2b-webhook-id",
        http::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
    );
    assert_eq!(
        verify_webhook(b"s3cret", &binary, body, now),
        Err(WebhookVerifyError::Malformed)
    );
    assert_eq!(
        WebhookVerifyError::MissingHeader("e2b-webhook-id").to_string(),
        "the delivery has no e2b-webhook-id header"
    );
}

#[test]
fn setters_make_new_instances_and_debug_shows_no_key() {
    let events = LifecycleEvents::new()
        .stack_name("mine")
        .region("eu-west-1");
    assert_eq!(events.backend_name(), "aws");
    let shown = format!("{events:?}");
    assert!(shown.contains("mine") && shown.contains("aws"), "{shown}");
}
