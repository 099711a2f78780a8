//! The events table (one table, on demand; extras §4.3's keys), read and
//! written with DynamoDB's conditional writes. The row shapes are the
//! reference's, so that either SDK's `get_events` and `list_webhooks` read
//! what these functions wrote:
//!
//! - `EVENT#<sandbox>` / `<occurred_at_ms:020>#<event_id>`: one event
//!   (`gsi1pk = "EVENT"`, `gsi1sk` = the same sort key), 7 days.
//! - `STATE#<sandbox>` / `STATE`: the last admitted event and the rate
//!   bucket, with a `revision` for optimistic concurrency; `open_pk =
//!   "OPEN"` while the sandbox is open (the sparse `open` index).
//! - `WEBHOOK` / `<webhook_id>`: `url`, `secret_name`, `types`.
//! - `DELIVERY#<sandbox>#<event_id>` / `<webhook_id>`: `delivery_status`
//!   (`attempting`, `delivered`, `failed`), 1 day.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use rayito_events::admission::SandboxState;
use rayito_events::{Event, EventKind, KillReason};

use crate::Failure;

/// How long an event (and a killed sandbox's tombstone) is kept.
pub const EVENT_TTL_S: u64 = 7 * 24 * 3600;
/// How long a delivery's dedupe row is kept.
pub const DELIVERY_TTL_S: u64 = 24 * 3600;

type Item = HashMap<String, AttributeValue>;

/// The sort key of an event row (and its `gsi1sk`).
pub fn event_sk(occurred_at_ms: u64, event_id: &str) -> String {
    format!("{occurred_at_ms:020}#{event_id}")
}

/// A sandbox's admission row as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateRow {
    /// The sandbox.
    pub sandbox_id: String,
    /// Its last admitted event's kind, generation and rate bucket.
    pub state: SandboxState,
    /// The last admitted event's id (a retried line is a duplicate).
    pub last_event_id: String,
    /// The image the sandbox runs (for a synthesized `killed`).
    pub image_arn: String,
    /// The image's version.
    pub image_version: String,
    /// The row's revision (0 = no row yet).
    pub revision: u64,
}

/// A registered webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// Its id (the row's sort key).
    pub webhook_id: String,
    /// Where deliveries go.
    pub url: String,
    /// The Secrets Manager secret holding its signing secret.
    pub secret_name: String,
    /// The event types it receives (`sandbox.lifecycle.<kind>`).
    pub types: Vec<String>,
}

/// The events table of the stack.
#[derive(Clone, Debug)]
pub struct Table {
    client: Client,
    name: String,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn get_s<'a>(item: &'a Item, key: &str) -> Option<&'a str> {
    item.get(key)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n(item: &Item, key: &str) -> Option<u64> {
    item.get(key)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

/// Whether a PutItem failed only because its condition did not hold.
fn is_condition_failed(e: &SdkError<PutItemError>) -> bool {
    e.as_service_error()
        .is_some_and(PutItemError::is_conditional_check_failed_exception)
}

/// The item of an event row.
pub fn event_item(event: &Event, now_s: u64) -> Item {
    let sk = event_sk(event.occurred_at_ms, &event.event_id);
    let mut item = Item::from([
        ("pk".into(), s(format!("EVENT#{}", event.sandbox_id))),
        ("sk".into(), s(sk.clone())),
        ("gsi1pk".into(), s("EVENT")),
        ("gsi1sk".into(), s(sk)),
        ("event_id".into(), s(&event.event_id)),
        ("sandbox_id".into(), s(&event.sandbox_id)),
        ("kind".into(), s(event.kind.as_str())),
        ("generation".into(), n(event.generation)),
        ("occurred_at_ms".into(), n(event.occurred_at_ms)),
        ("image_arn".into(), s(&event.image_arn)),
        ("image_version".into(), s(&event.image_version)),
        ("expires_at".into(), n(now_s + EVENT_TTL_S)),
    ]);
    if let Some(reason) = event.kill_reason {
        item.insert("kill_reason".into(), s(reason.as_str()));
    }
    item
}

/// An event back from its row (a stream's new image or a query's item);
/// `None` when the row is not a well-formed event.
pub fn event_from_item(item: &Item) -> Option<Event> {
    let kill_reason = match get_s(item, "kill_reason") {
        None => None,
        Some("request") => Some(KillReason::Request),
        Some("timeout") => Some(KillReason::Timeout),
        Some("unknown") => Some(KillReason::Unknown),
        Some(_) => return None,
    };
    Some(Event {
        event_id: get_s(item, "event_id")?.to_owned(),
        sandbox_id: get_s(item, "sandbox_id")?.to_owned(),
        kill_reason,
        kind: EventKind::parse(get_s(item, "kind")?)?,
        generation: get_n(item, "generation")?,
        occurred_at_ms: get_n(item, "occurred_at_ms")?,
        image_arn: get_s(item, "image_arn")?.to_owned(),
        image_version: get_s(item, "image_version")?.to_owned(),
    })
}

fn state_item(row: &StateRow, now_s: u64) -> Item {
    let mut item = Item::from([
        ("pk".into(), s(format!("STATE#{}", row.sandbox_id))),
        ("sk".into(), s("STATE")),
        ("sandbox_id".into(), s(&row.sandbox_id)),
        ("last_kind".into(), s(row.state.last.as_str())),
        ("last_seen_ms".into(), n(now_s * 1000)),
        ("generation".into(), n(row.state.generation)),
        ("image_arn".into(), s(&row.image_arn)),
        ("image_version".into(), s(&row.image_version)),
        ("last_event_id".into(), s(&row.last_event_id)),
        ("rate_tat_ms".into(), n(row.state.tat_ms)),
        ("revision".into(), n(row.revision)),
    ]);
    // Open: in the sparse index. Killed: a tombstone (a late line never
    // reopens the sandbox) that expires with the events it closes.
    if row.state.is_open() {
        item.insert("open_pk".into(), s("OPEN"));
    } else {
        item.insert("expires_at".into(), n(now_s + EVENT_TTL_S));
    }
    item
}

fn state_from_item(item: &Item) -> Option<StateRow> {
    Some(StateRow {
        sandbox_id: get_s(item, "sandbox_id")?.to_owned(),
        state: SandboxState {
            last: EventKind::parse(get_s(item, "last_kind")?)?,
            generation: get_n(item, "generation").unwrap_or(0),
            tat_ms: get_n(item, "rate_tat_ms").unwrap_or(0),
        },
        last_event_id: get_s(item, "last_event_id").unwrap_or("").to_owned(),
        image_arn: get_s(item, "image_arn").unwrap_or("").to_owned(),
        image_version: get_s(item, "image_version").unwrap_or("").to_owned(),
        revision: get_n(item, "revision").unwrap_or(0),
    })
}

impl Table {
    /// The table `name` through `client`.
    pub fn new(client: Client, name: impl Into<String>) -> Self {
        Self {
            client,
            name: name.into(),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A conditional PutItem: `Ok(false)` when only its condition failed.
    async fn put_if(
        &self,
        item: Item,
        condition: &str,
        values: Option<Item>,
    ) -> Result<bool, Failure> {
        let out = self
            .client
            .put_item()
            .table_name(&self.name)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(Failure::aws("PutItem", &e)),
        }
    }

    /// The sandbox's admission row, if any.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn state(&self, sandbox_id: &str) -> Result<Option<StateRow>, Failure> {
        let out = self
            .client
            .get_item()
            .table_name(&self.name)
            .key("pk", s(format!("STATE#{sandbox_id}")))
            .key("sk", s("STATE"))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Failure::aws("GetItem", &e))?;
        Ok(out.item().and_then(state_from_item))
    }

    /// Moves the sandbox's row from revision `row.revision - 1` to `row`;
    /// `Ok(false)` when another writer moved it first.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn put_state(&self, row: &StateRow, now_s: u64) -> Result<bool, Failure> {
        let previous = row.revision.saturating_sub(1);
        let (condition, values) = if previous == 0 {
            ("attribute_not_exists(pk)", None)
        } else {
            (
                "revision = :revision",
                Some(Item::from([(":revision".into(), n(previous))])),
            )
        };
        self.put_if(state_item(row, now_s), condition, values).await
    }

    /// Writes the event's row unless it is already there (a retried line);
    /// `Ok(false)` when it was.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn put_event(&self, event: &Event, now_s: u64) -> Result<bool, Failure> {
        self.put_if(event_item(event, now_s), "attribute_not_exists(pk)", None)
            .await
    }

    /// Every registered webhook (all pages).
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn webhooks(&self) -> Result<Vec<Webhook>, Failure> {
        let items = self
            .query_all(|q| {
                q.key_condition_expression("pk = :pk")
                    .expression_attribute_values(":pk", s("WEBHOOK"))
            })
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let types = item.get("types")?.as_l().ok()?;
                Some(Webhook {
                    webhook_id: get_s(item, "sk")?.to_owned(),
                    url: get_s(item, "url")?.to_owned(),
                    secret_name: get_s(item, "secret_name")?.to_owned(),
                    types: types
                        .iter()
                        .filter_map(|t| t.as_s().ok().cloned())
                        .collect(),
                })
            })
            .collect())
    }

    /// Every open sandbox's admission row (the sparse `open` index).
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn open_sandboxes(&self) -> Result<Vec<StateRow>, Failure> {
        let items = self
            .query_all(|q| {
                q.index_name("open")
                    .key_condition_expression("open_pk = :open")
                    .expression_attribute_values(":open", s("OPEN"))
            })
            .await?;
        Ok(items.iter().filter_map(state_from_item).collect())
    }

    async fn query_all(
        &self,
        shape: impl Fn(
            aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    ) -> Result<Vec<Item>, Failure> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = shape(self.client.query().table_name(&self.name))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| Failure::aws("Query", &e))?;
            items.extend(out.items().iter().cloned());
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// Claims the delivery of `event` to `webhook_id` (`attempting`) unless
    /// it was already delivered; `Ok(false)` when it was.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn claim_delivery(
        &self,
        event: &Event,
        webhook_id: &str,
        now_s: u64,
    ) -> Result<bool, Failure> {
        self.put_if(
            delivery_item(event, webhook_id, "attempting", now_s),
            "attribute_not_exists(pk) OR delivery_status <> :delivered",
            Some(Item::from([(":delivered".into(), s("delivered"))])),
        )
        .await
    }

    /// Records a delivery's outcome (`delivered` or `failed`).
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn finish_delivery(
        &self,
        event: &Event,
        webhook_id: &str,
        delivered: bool,
        now_s: u64,
    ) -> Result<(), Failure> {
        let status = if delivered { "delivered" } else { "failed" };
        self.client
            .put_item()
            .table_name(&self.name)
            .set_item(Some(delivery_item(event, webhook_id, status, now_s)))
            .send()
            .await
            .map_err(|e| Failure::aws("PutItem", &e))?;
        Ok(())
    }

    /// A delivery's status (`attempting`, `delivered`, `failed`), if any.
    ///
    /// # Errors
    /// When DynamoDB fails.
    pub async fn delivery_status(
        &self,
        event: &Event,
        webhook_id: &str,
    ) -> Result<Option<String>, Failure> {
        let out = self
            .client
            .get_item()
            .table_name(&self.name)
            .key(
                "pk",
                s(format!("DELIVERY#{}#{}", event.sandbox_id, event.event_id)),
            )
            .key("sk", s(webhook_id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Failure::aws("GetItem", &e))?;
        Ok(out
            .item()
            .and_then(|i| get_s(i, "delivery_status"))
            .map(str::to_owned))
    }
}

fn delivery_item(event: &Event, webhook_id: &str, status: &str, now_s: u64) -> Item {
    Item::from([
        (
            "pk".into(),
            s(format!("DELIVERY#{}#{}", event.sandbox_id, event.event_id)),
        ),
        ("sk".into(), s(webhook_id)),
        ("delivery_status".into(), s(status)),
        ("expires_at".into(), n(now_s + DELIVERY_TTL_S)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_row_reads_back_as_the_event() {
        let event = Event {
            event_id: "0".repeat(32),
            sandbox_id: "sbx".into(),
            kill_reason: Some(KillReason::Unknown),
            kind: EventKind::Killed,
            generation: 3,
            occurred_at_ms: 42,
            image_arn: "arn:aws:lambda:us-east-1:123456789012:microvm-image:x".into(),
            image_version: "1".into(),
        };
        let item = event_item(&event, 100);
        assert_eq!(
            get_s(&item, "sk"),
            Some(format!("00000000000000000042#{}", "0".repeat(32)).as_str())
        );
        assert_eq!(get_n(&item, "expires_at"), Some(100 + EVENT_TTL_S));
        assert_eq!(event_from_item(&item), Some(event));
    }
}
