//! The deliverer: each new `EVENT#` row (the table's stream) sent to every
//! webhook subscribed to its type. Each (event, webhook) pair is claimed
//! first (`DELIVERY#`, conditional: a pair already `delivered` is skipped,
//! since the stream is at-least-once), then at most [`ATTEMPTS`] POSTs
//! signed with the webhook's secret (extras §4.3: 0.5 s then 1 s apart,
//! each at most 10 s; 2xx delivered; 5xx and transport failures retried;
//! 401/403 re-read the secret once and retry if it changed; anything else
//! permanent), then the outcome recorded. A failed delivery is logged with
//! its reason, never an invocation failure: only the table failing is.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use rand::RngCore as _;
use rayito_events::Event;
use rayito_events::webhook;
use serde::Serialize;
use serde_json::Value;

use crate::post::{ATTEMPT_TIMEOUT, PostError, UrlPolicy, post};
use crate::table::{Table, Webhook, event_from_item};
use crate::{Failure, secrets};

/// Attempts per delivery.
pub const ATTEMPTS: usize = 3;
/// The waits between attempts.
pub const BACKOFF: [Duration; ATTEMPTS - 1] = [Duration::from_millis(500), Duration::from_secs(1)];

/// How one (event, webhook) pair ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// The webhook.
    pub webhook_id: String,
    /// The event.
    pub event_id: String,
    /// POSTs made.
    pub attempts: usize,
    /// `delivered`, `skipped` (delivered before), or the failure's reason:
    /// `secret_unavailable`, `ssrf_blocked`, `invalid_url`, `rejected_<n>`,
    /// `attempts_exhausted`.
    pub outcome: String,
    /// The last HTTP status answered, if any.
    pub last_status: Option<u16>,
}

/// The deliverer's clients and settings.
#[derive(Clone, Debug)]
pub struct Deliverer {
    table: Table,
    secrets: aws_sdk_secretsmanager::Client,
    policy: UrlPolicy,
    backoff: [Duration; ATTEMPTS - 1],
    attempt_timeout: Duration,
}

/// A stream batch's answer (`ReportBatchItemFailures`): the first record
/// not finished, from which Lambda retries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BatchResponse {
    /// `[{"itemIdentifier": <sequence number>}]`.
    #[serde(rename = "batchItemFailures")]
    pub batch_item_failures: Vec<HashMap<&'static str, String>>,
}

fn new_delivery_id() -> String {
    let mut id = [0u8; 16];
    rand::rng().fill_bytes(&mut id);
    hex::encode(id)
}

impl Deliverer {
    /// A deliverer on `table` reading secrets through `secrets`, with the
    /// stack's settings ([`UrlPolicy::Public`], [`BACKOFF`], 10 s).
    pub fn new(table: Table, secrets: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            table,
            secrets,
            policy: UrlPolicy::Public,
            backoff: BACKOFF,
            attempt_timeout: ATTEMPT_TIMEOUT,
        }
    }

    /// Which URLs are posted to ([`UrlPolicy::AnyHost`] for tests only).
    #[must_use]
    pub fn url_policy(mut self, policy: UrlPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The waits between attempts.
    #[must_use]
    pub fn backoff(mut self, backoff: [Duration; ATTEMPTS - 1]) -> Self {
        self.backoff = backoff;
        self
    }

    /// Delivers `event` to every webhook subscribed to its type.
    ///
    /// # Errors
    /// When the table fails (the record is retried; delivered pairs are
    /// skipped then).
    pub async fn deliver_event(
        &self,
        event: &Event,
        now_s: impl Fn() -> u64,
    ) -> Result<Vec<Delivery>, Failure> {
        let type_name = event.kind.type_name();
        let mut out = Vec::new();
        for hook in self.table.webhooks().await? {
            if !hook.types.iter().any(|t| t == type_name) {
                continue;
            }
            if !self
                .table
                .claim_delivery(event, &hook.webhook_id, now_s())
                .await?
            {
                out.push(Delivery {
                    webhook_id: hook.webhook_id,
                    event_id: event.event_id.clone(),
                    attempts: 0,
                    outcome: "skipped".into(),
                    last_status: None,
                });
                continue;
            }
            let delivery = self.send(&hook, event, &now_s).await;
            let delivered = delivery.outcome == "delivered";
            self.table
                .finish_delivery(event, &hook.webhook_id, delivered, now_s())
                .await?;
            out.push(delivery);
        }
        Ok(out)
    }

    /// The attempts of one pair.
    async fn send(&self, hook: &Webhook, event: &Event, now_s: &impl Fn() -> u64) -> Delivery {
        let mut delivery = Delivery {
            webhook_id: hook.webhook_id.clone(),
            event_id: event.event_id.clone(),
            attempts: 0,
            outcome: "attempts_exhausted".into(),
            last_status: None,
        };
        let Ok(mut secret) = secrets::read(&self.secrets, &hook.secret_name).await else {
            delivery.outcome = "secret_unavailable".into();
            return delivery;
        };
        let body = webhook::body(event);
        let mut reread = false;
        while delivery.attempts < ATTEMPTS {
            if let Some(wait) = delivery
                .attempts
                .checked_sub(1)
                .and_then(|i| self.backoff.get(i))
            {
                tokio::time::sleep(*wait).await;
            }
            delivery.attempts += 1;
            let headers = webhook::headers(
                &secret,
                &hook.webhook_id,
                &new_delivery_id(),
                &body,
                now_s(),
            );
            let status = match post(
                &hook.url,
                &headers,
                body.clone(),
                self.policy,
                self.attempt_timeout,
            )
            .await
            {
                Ok(status) => status,
                Err(PostError::Transport) => continue,
                Err(PostError::Blocked) => {
                    delivery.outcome = "ssrf_blocked".into();
                    return delivery;
                }
                Err(PostError::InvalidUrl) => {
                    delivery.outcome = "invalid_url".into();
                    return delivery;
                }
            };
            delivery.last_status = Some(status);
            match status {
                200..=299 => {
                    delivery.outcome = "delivered".into();
                    return delivery;
                }
                500..=599 => {}
                // The receiver may have rotated the secret: read it once
                // more, and retry only with a different one.
                401 | 403 if !reread => {
                    reread = true;
                    match secrets::read(&self.secrets, &hook.secret_name).await {
                        Ok(fresh) if fresh != secret => secret = fresh,
                        _ => {
                            delivery.outcome = format!("rejected_{status}");
                            return delivery;
                        }
                    }
                }
                _ => {
                    delivery.outcome = format!("rejected_{status}");
                    return delivery;
                }
            }
        }
        delivery
    }

    /// Delivers a stream invocation's records (`{"Records": [...]}`), in
    /// order; only `INSERT`s of `EVENT#` rows are delivered. Each pair's
    /// outcome is one JSON log line on stdout.
    ///
    /// # Errors
    /// When the invocation is not a stream batch.
    pub async fn deliver_stream(&self, invocation: &Value) -> Result<BatchResponse, Failure> {
        let records = invocation["Records"]
            .as_array()
            .ok_or_else(|| Failure::other("decode", "not_a_stream_batch"))?;
        let mut response = BatchResponse::default();
        for record in records {
            let Some(event) = stream_event(record) else {
                continue;
            };
            match self.deliver_event(&event, crate::now_s).await {
                Ok(deliveries) => {
                    for d in deliveries.iter().filter(|d| d.outcome != "delivered") {
                        println!("{}", serde_json::json!({ "deliverer": d }));
                    }
                }
                Err(failure) => {
                    println!(
                        "{}",
                        serde_json::json!({ "deliverer": { "event_id": event.event_id, "outcome": "internal_error", "failure": failure.to_string() } })
                    );
                    let sequence = record["dynamodb"]["SequenceNumber"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    response
                        .batch_item_failures
                        .push(HashMap::from([("itemIdentifier", sequence)]));
                    return Ok(response);
                }
            }
        }
        Ok(response)
    }
}

/// The event of a stream record, when it is the insert of an `EVENT#` row.
pub fn stream_event(record: &Value) -> Option<Event> {
    if record["eventName"] != "INSERT" {
        return None;
    }
    let image = record["dynamodb"]["NewImage"].as_object()?;
    let item: HashMap<String, AttributeValue> = image
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), attribute(v)?)))
        .collect();
    let pk = item.get("pk")?.as_s().ok()?;
    if !pk.starts_with("EVENT#") {
        return None;
    }
    event_from_item(&item)
}

/// A stream image's attribute (`{"S": ..}`, `{"N": ..}`, `{"L": [..]}`);
/// the other types are not in event rows.
fn attribute(v: &Value) -> Option<AttributeValue> {
    if let Some(s) = v["S"].as_str() {
        return Some(AttributeValue::S(s.to_owned()));
    }
    if let Some(n) = v["N"].as_str() {
        return Some(AttributeValue::N(n.to_owned()));
    }
    let list = v["L"].as_array()?;
    Some(AttributeValue::L(
        list.iter().filter_map(attribute).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_event_rows_insert_is_delivered() {
        let image = serde_json::json!({
            "pk": {"S": "EVENT#sbx"}, "sk": {"S": "x"}, "event_id": {"S": "e"},
            "sandbox_id": {"S": "sbx"}, "kind": {"S": "created"}, "generation": {"N": "0"},
            "occurred_at_ms": {"N": "7"}, "image_arn": {"S": "arn"}, "image_version": {"S": "1"}
        });
        let record =
            serde_json::json!({ "eventName": "INSERT", "dynamodb": { "NewImage": image } });
        let event = stream_event(&record).unwrap();
        assert_eq!(
            (event.sandbox_id.as_str(), event.occurred_at_ms),
            ("sbx", 7)
        );
        let modify = serde_json::json!({ "eventName": "MODIFY", "dynamodb": { "NewImage": record["dynamodb"]["NewImage"] } });
        assert_eq!(stream_event(&modify), None);
        let mut delivery = record.clone();
        delivery["dynamodb"]["NewImage"]["pk"] = serde_json::json!({"S": "DELIVERY#sbx#e"});
        assert_eq!(stream_event(&delivery), None);
    }
}
