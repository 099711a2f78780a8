//! `LifecycleEvents` on the local backend (the emulator's events API):
//! deploy and status, a webhook registered with its secret read from a
//! moto Secrets Manager, listed and deleted, a sandbox's created and
//! killed events read back with `get_events`, and the refusals before any
//! call, each pinned. The end-to-end delivery (every kind in order, the
//! retries, the dead letters) is tests/local_events.rs.

use std::time::Duration;

use rayito::events::{EventKind, EventOrder, EventQuery, EventsDeploy, LifecycleEvents};
use rayito::secrets::{SecretCache, SecretCacheOptions};
use rayito::{Client, ErrorKind, SandboxError, SandboxLogging};

use crate::sdk_support;
use crate::sdk_support::moto::MotoServer;

/// The log group this file's sandboxes log to (the stack reads it).
const GROUP: &str = "/rayito/sdk-events-test";

fn invalid(err: &SandboxError, argument: &str, message: &str) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert_eq!(err.to_string(), message);
    let SandboxError::InvalidArgument { argument: got, .. } = err else {
        unreachable!()
    };
    assert_eq!(got.as_deref(), Some(argument));
}

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

/// Polls `events` until `sandbox_id` has an event of `kind` (the pipeline
/// is asynchronous: the agent's line reaches the store shortly after).
async fn wait_for(
    events: &LifecycleEvents,
    sandbox_id: &str,
    kind: EventKind,
) -> Vec<rayito::events::EventRecord> {
    let by = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let seen = events
            .get_events(
                EventQuery::new()
                    .sandbox_id(sandbox_id)
                    .order(EventOrder::Asc),
            )
            .await
            .expect("get_events");
        if seen.iter().any(|e| e.kind == kind) || tokio::time::Instant::now() >= by {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_local_stack_webhooks_events_and_refusals() {
    let client = Client::local().await.expect("the local backend");
    let events = client.events();
    assert_eq!(events.backend_name(), "local");

    // Refusals before any call.
    let err = events
        .register_webhook("ftp://127.0.0.1/hook", "receiver", &EventKind::ALL)
        .await
        .unwrap_err();
    invalid(
        &err,
        "url",
        "invalid url: register_webhook: url must be an http:// or https:// URL with a host and a port between 1 and 65535 (the local backend also delivers to loopback and plain http)",
    );
    let err = events
        .register_webhook("http://127.0.0.1:9/hook", "receiver", &[])
        .await
        .unwrap_err();
    invalid(
        &err,
        "types",
        "invalid types: register_webhook: types may not be empty; pass one or more of sandbox.lifecycle.created, paused, resumed, killed",
    );
    let err = events.delete_webhook("nope").await.unwrap_err();
    invalid(
        &err,
        "webhook_id",
        "invalid webhook_id: delete_webhook: a webhook id is 16 lower-case hex characters; pass an id that list_webhooks shows",
    );
    let err = events
        .get_events(EventQuery::new().limit(0))
        .await
        .unwrap_err();
    invalid(
        &err,
        "limit",
        "invalid limit: get_events: limit is 0; pass 1 to 100",
    );

    // The builder's checks, before anything is launched.
    let err = client
        .sandbox()
        .events(events.clone())
        .create()
        .await
        .unwrap_err();
    invalid(
        &err,
        "logging",
        "invalid logging: events need the sandbox to log to CloudWatch (SandboxLogging::cloudwatch() or cloudwatch_group(..)): the forwarder reads the event lines from the sandbox's logs; pass logging(...)",
    );
    let err = client
        .sandbox()
        .logging(SandboxLogging::cloudwatch_group(GROUP))
        .events(LifecycleEvents::new().region("us-east-1"))
        .create()
        .await
        .unwrap_err();
    invalid(
        &err,
        "events",
        "invalid events: the LifecycleEvents passed to events() is bound to the aws backend and this sandbox is created on the local backend; pass the events of the sandbox's client (client.events())",
    );

    // Deploy (idempotent) and status.
    let stack = events
        .deploy(EventsDeploy::new("", GROUP).reconciler_interval_minutes(2))
        .await
        .expect("deploy");
    assert!(stack.status.ends_with("_COMPLETE"), "{stack:?}");
    assert!(stack.outputs.contains_key("EventsTableName"), "{stack:?}");
    let again = events
        .deploy(EventsDeploy::new("", GROUP))
        .await
        .expect("deploy again");
    assert_eq!(again.outputs, stack.outputs);
    assert_eq!(
        events
            .status()
            .await
            .expect("status")
            .expect("deployed")
            .outputs,
        stack.outputs
    );
    assert!(events.dead_letters().await.is_ok());

    // A sandbox's events.
    let sbx = client
        .sandbox()
        .logging(SandboxLogging::cloudwatch_group(GROUP))
        .events(events.clone())
        .create()
        .await
        .expect("create with events");
    let id = sbx.id().to_owned();
    let seen = wait_for(&events, &id, EventKind::Created).await;
    let created = seen
        .iter()
        .find(|e| e.kind == EventKind::Created)
        .unwrap_or_else(|| panic!("no created event for {id}: {seen:?}"));
    assert_eq!(created.generation, 0);
    assert_eq!(created.sandbox_id, id);
    assert!(!created.image_arn.is_empty());

    // The agent's counters: one line (created), then a pause and a resume
    // add theirs (the resumed line is not waited for by the hook: polled).
    let before = sbx.events_status().await.expect("events_status");
    assert!(before.enabled, "{before:?}");
    assert_eq!((before.emitted, before.dropped), (1, 0), "{before:?}");
    assert_eq!(before.last_error_class, None);
    assert!(sbx.pause().await.expect("pause"));
    sbx.resume().await.expect("resume");
    let by = tokio::time::Instant::now() + Duration::from_secs(30);
    let after = loop {
        let status = sbx.events_status().await.expect("events_status");
        if status.emitted >= 3 || tokio::time::Instant::now() >= by {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(after.enabled, "{after:?}");
    assert_eq!((after.emitted, after.dropped), (3, 0), "{after:?}");
    assert_eq!(after.last_error_class, None);

    sbx.kill().await.expect("kill");
    let seen = wait_for(&events, &id, EventKind::Killed).await;
    let kinds: Vec<EventKind> = seen.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Created,
            EventKind::Paused,
            EventKind::Resumed,
            EventKind::Killed
        ],
        "{seen:?}"
    );
    let killed = events
        .get_events(EventQuery::new().sandbox_id(&id).types([EventKind::Killed]))
        .await
        .expect("only killed");
    assert_eq!(killed.len(), 1);
    assert_eq!(
        killed[0].kill_reason,
        Some(rayito::events::KillReason::Request)
    );

    // A webhook: its secret read through the cache from Secrets Manager.
    // (`MotoServer::start` prints the SKIPPED line when moto is absent.)
    let Some(moto) = moto().await else { return };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEVENTS");
    aws_sdk_secretsmanager::Client::new(&config)
        .create_secret()
        .name("rayito/webhooks/sdk-events")
        .secret_string("whsec-canary")
        .send()
        .await
        .expect("the webhook's secret");
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).expect("a cache");
    let events = events.secret_cache(cache);
    let hook = events
        .register_webhook(
            "http://127.0.0.1:9/hook",
            "sdk-events",
            &[EventKind::Killed, EventKind::Created],
        )
        .await
        .expect("register");
    assert_eq!(hook.webhook_id.len(), 16);
    assert_eq!(hook.types, [EventKind::Killed, EventKind::Created]);
    let listed = events.list_webhooks().await.expect("list");
    assert!(listed.contains(&hook), "{listed:?}");
    assert!(!format!("{listed:?}").contains("canary"));
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
    assert!(!events.list_webhooks().await.expect("list").contains(&hook));
}

/// The events of a TLS-mode local backend's client: the same API, reached
/// over the control plane's transport, with a webhook registered and a
/// sandbox's events read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_local_backend_serves_its_events() {
    let client = Client::builder()
        .local_tls()
        .build()
        .await
        .expect("the local backend in TLS mode");
    let events = client.events();
    assert_eq!(events.backend_name(), "local");
    events
        .deploy(EventsDeploy::new("", GROUP))
        .await
        .expect("deploy over the TLS backend's control plane");
    let sbx = client
        .sandbox()
        .logging(SandboxLogging::cloudwatch_group(GROUP))
        .events(events.clone())
        .create()
        .await
        .expect("create with events over TLS");
    let id = sbx.id().to_owned();
    // A sandbox without events: the agent holds no section.
    let plain = client
        .sandbox()
        .create()
        .await
        .expect("create without events");
    let quiet = plain.events_status().await.expect("events_status");
    assert!(!quiet.enabled, "{quiet:?}");
    assert_eq!((quiet.emitted, quiet.dropped), (0, 0));
    plain.kill().await.expect("kill the plain sandbox");
    sbx.kill().await.expect("kill");
    let seen = wait_for(&events, &id, EventKind::Killed).await;
    let kinds: Vec<EventKind> = seen.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Created, EventKind::Killed], "{seen:?}");

    let Some(moto) = moto().await else { return };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEVENTSTLS");
    aws_sdk_secretsmanager::Client::new(&config)
        .create_secret()
        .name("rayito/webhooks/sdk-events-tls")
        .secret_string("whsec-canary-tls")
        .send()
        .await
        .expect("the webhook's secret");
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).expect("a cache");
    let events = events.secret_cache(cache);
    let hook = events
        .register_webhook(
            "http://127.0.0.1:9/hook",
            "sdk-events-tls",
            &[EventKind::Killed],
        )
        .await
        .expect("register over TLS");
    assert!(events.list_webhooks().await.expect("list").contains(&hook));
    assert!(
        events
            .delete_webhook(&hook.webhook_id)
            .await
            .expect("delete")
    );
}
