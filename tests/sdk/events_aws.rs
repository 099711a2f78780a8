//! `LifecycleEvents` on AWS, against moto: the not-deployed error, then a
//! stack standing in for events-webhooks (its table with `gsi1` and its
//! key secret, the two outputs the SDK reads) created through moto's
//! CloudFormation; webhooks registered, listed and deleted in the table
//! as the stack's functions read them; events seeded as the forwarder
//! writes them and read back by sandbox, across sandboxes, by kind, in
//! both orders and up to a limit; the deliverable-URL refusal.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use rayito::events::{EventKind, EventOrder, EventQuery, LifecycleEvents};
use rayito::{ErrorKind, SandboxError};

use crate::sdk_support;
use crate::sdk_support::moto::MotoServer;

/// The table and secret of the real stack, as far as the SDK reads them.
const TEMPLATE: &str = r#"{
  "Resources": {
    "EventsTable": {
      "Type": "AWS::DynamoDB::Table",
      "Properties": {
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
          {"AttributeName": "pk", "AttributeType": "S"},
          {"AttributeName": "sk", "AttributeType": "S"},
          {"AttributeName": "gsi1pk", "AttributeType": "S"},
          {"AttributeName": "gsi1sk", "AttributeType": "S"}
        ],
        "KeySchema": [
          {"AttributeName": "pk", "KeyType": "HASH"},
          {"AttributeName": "sk", "KeyType": "RANGE"}
        ],
        "GlobalSecondaryIndexes": [{
          "IndexName": "gsi1",
          "KeySchema": [
            {"AttributeName": "gsi1pk", "KeyType": "HASH"},
            {"AttributeName": "gsi1sk", "KeyType": "RANGE"}
          ],
          "Projection": {"ProjectionType": "ALL"}
        }]
      }
    },
    "StackKey": {
      "Type": "AWS::SecretsManager::Secret",
      "Properties": {"SecretString": "stack-key-canary"}
    }
  },
  "Outputs": {
    "EventsTableName": {"Value": {"Ref": "EventsTable"}},
    "StackKeySecretArn": {"Value": {"Ref": "StackKey"}}
  }
}"#;

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// An event row as the forwarder writes it.
fn event_item(
    sandbox: &str,
    kind: &str,
    generation: u64,
    at: u64,
    id: &str,
) -> HashMap<String, AttributeValue> {
    let sk = format!("{at:020}#{id}");
    let mut item = HashMap::from([
        ("pk".to_owned(), s(&format!("EVENT#{sandbox}"))),
        ("sk".to_owned(), s(&sk)),
        ("gsi1pk".to_owned(), s("EVENT")),
        ("gsi1sk".to_owned(), s(&sk)),
        ("event_id".to_owned(), s(id)),
        ("sandbox_id".to_owned(), s(sandbox)),
        ("kind".to_owned(), s(kind)),
        ("generation".to_owned(), n(generation)),
        ("occurred_at_ms".to_owned(), n(at)),
        (
            "image_arn".to_owned(),
            s("arn:aws:lambda:us-east-1:123456789012:microvm-image:base"),
        ),
        ("image_version".to_owned(), s("1")),
    ]);
    if kind == "killed" {
        item.insert("kill_reason".to_owned(), s("request"));
    }
    item
}

#[tokio::test]
async fn events_on_aws_through_moto() {
    let Some(moto) = moto().await else { return };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEVENTSAWS");
    let events = LifecycleEvents::new()
        .sdk_config(config.clone())
        .endpoint_url(moto.endpoint_url())
        .stack_name("sdk-events-test");

    // Nothing deployed: every table call says so.
    assert!(events.status().await.expect("status").is_none());
    let err = events.list_webhooks().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Webhook, "{err:?}");
    assert_eq!(
        err.to_string(),
        "the stack sdk-events-test is not deployed; call deploy() first (rayito events deploy)"
    );
    assert!(matches!(err, SandboxError::Webhook { aws_code: None, .. }));

    // The deliverable-URL rule of AWS, before any call.
    let err = events
        .register_webhook("http://127.0.0.1:8080/hook", "receiver", &EventKind::ALL)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid url: register_webhook: url must be a valid https:// URL to a public address: a DNS host (not localhost) or a public IP (not loopback, private, link-local or metadata), port between 1 and 65535"
    );

    // The stand-in stack.
    aws_sdk_cloudformation::Client::new(&config)
        .create_stack()
        .stack_name("sdk-events-test")
        .template_body(TEMPLATE)
        .send()
        .await
        .expect("create the stand-in stack");
    let stack = events.status().await.expect("status").expect("deployed");
    let table = stack.outputs["EventsTableName"].clone();
    // (moto leaves out the secret's output: the stack key is read through
    // the local backend's test, tests/sdk/events.rs.)

    // Webhooks in the table as the deliverer reads them.
    let hook = events
        .register_webhook(
            "https://hooks.example.com/rayito",
            "receiver",
            &[EventKind::Created, EventKind::Killed],
        )
        .await
        .expect("register");
    assert_eq!(hook.webhook_id.len(), 16);
    let dynamo = aws_sdk_dynamodb::Client::new(&config);
    let row = dynamo
        .get_item()
        .table_name(&table)
        .key("pk", s("WEBHOOK"))
        .key("sk", s(&hook.webhook_id))
        .send()
        .await
        .expect("get the row")
        .item
        .expect("the webhook's row");
    assert_eq!(row["url"], s("https://hooks.example.com/rayito"));
    assert_eq!(row["secret_name"], s("rayito/webhooks/receiver"));
    assert_eq!(
        row["types"],
        AttributeValue::L(vec![
            s("sandbox.lifecycle.created"),
            s("sandbox.lifecycle.killed")
        ])
    );
    assert_eq!(
        events.list_webhooks().await.expect("list"),
        std::slice::from_ref(&hook)
    );
    assert!(
        events
            .delete_webhook(&hook.webhook_id)
            .await
            .expect("delete")
    );
    assert!(
        !events
            .delete_webhook(&hook.webhook_id)
            .await
            .expect("delete again")
    );
    assert!(events.list_webhooks().await.expect("list").is_empty());

    // Events as the forwarder writes them.
    let e = |i: u32| format!("{i:032x}");
    for item in [
        event_item("vm-a", "created", 0, 1_000, &e(1)),
        event_item("vm-a", "paused", 0, 2_000, &e(2)),
        event_item("vm-b", "created", 0, 2_500, &e(3)),
        event_item("vm-a", "resumed", 1, 3_000, &e(4)),
        event_item("vm-a", "killed", 1, 4_000, &e(5)),
    ] {
        dynamo
            .put_item()
            .table_name(&table)
            .set_item(Some(item))
            .send()
            .await
            .expect("seed an event");
    }
    let a = events
        .get_events(EventQuery::new().sandbox_id("vm-a").order(EventOrder::Asc))
        .await
        .expect("vm-a");
    let kinds: Vec<EventKind> = a.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Created,
            EventKind::Paused,
            EventKind::Resumed,
            EventKind::Killed
        ]
    );
    assert_eq!(a[3].sandbox_execution_id(), "vm-a#1");
    assert_eq!(a[3].kill_reason, Some(rayito::events::KillReason::Request));
    let newest = events
        .get_events(EventQuery::new().limit(2))
        .await
        .expect("across sandboxes");
    let ids: Vec<&str> = newest.iter().map(|r| r.event_id.as_str()).collect();
    assert_eq!(ids, [e(5), e(4)]);
    let created = events
        .get_events(
            EventQuery::new()
                .types([EventKind::Created])
                .order(EventOrder::Asc),
        )
        .await
        .expect("created only");
    let sandboxes: Vec<&str> = created.iter().map(|r| r.sandbox_id.as_str()).collect();
    assert_eq!(sandboxes, ["vm-a", "vm-b"]);
}

/// A peer standing in for CloudFormation (the stack's outputs) and for a
/// DynamoDB table whose webhook Query never stops paging: it answers the
/// same `LastEvaluatedKey` every time. `list_webhooks` ends with an error
/// after its page bound instead of looping (the reference pages without
/// bound); the count of Query calls is the bound.
#[tokio::test]
async fn list_webhooks_stops_paging_at_its_bound() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Bytes;
    use axum::http::HeaderMap;

    let queries = Arc::new(AtomicUsize::new(0));
    let counted = queries.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let counted = counted.clone();
        async move {
            let target = headers
                .get("x-amz-target")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if target == "DynamoDB_20120810.Query" {
                counted.fetch_add(1, Ordering::SeqCst);
                let page = r#"{"Count":0,"ScannedCount":0,"Items":[],"LastEvaluatedKey":{"pk":{"S":"WEBHOOK"},"sk":{"S":"0000000000000000"}}}"#;
                return (
                    [("content-type", "application/x-amz-json-1.0")],
                    page.to_owned(),
                );
            }
            assert!(
                String::from_utf8_lossy(&body).contains("Action=DescribeStacks"),
                "only DescribeStacks and Query are expected"
            );
            let stack = "<DescribeStacksResponse xmlns=\"http://cloudformation.amazonaws.com/doc/2010-05-15/\">\
                 <DescribeStacksResult><Stacks><member><StackName>sdk-events-paging</StackName>\
                 <StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/sdk-events-paging/1</StackId>\
                 <CreationTime>2026-01-01T00:00:00Z</CreationTime>\
                 <StackStatus>CREATE_COMPLETE</StackStatus>\
                 <Outputs><member><OutputKey>EventsTableName</OutputKey><OutputValue>paging</OutputValue></member></Outputs>\
                 </member></Stacks></DescribeStacksResult>\
                 <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeStacksResponse>";
            ([("content-type", "text/xml")], stack.to_owned())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let config = sdk_support::moto_config::sdk_config(&endpoint, "AKIDEVENTSPAGES");
    let events = LifecycleEvents::new()
        .sdk_config(config)
        .endpoint_url(&endpoint)
        .stack_name("sdk-events-paging");
    let err = events.list_webhooks().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Webhook, "{err:?}");
    assert!(matches!(err, SandboxError::Webhook { aws_code: None, .. }));
    assert_eq!(
        err.to_string(),
        "list_webhooks: the table still had more webhooks after 100 pages of 100; delete the webhooks you no longer use"
    );
    assert_eq!(queries.load(Ordering::SeqCst), 100);
    server.abort();
}
