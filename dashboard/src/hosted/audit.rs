//! The audit of actions: append-only rows in the stack's DynamoDB table
//! (`pk` `AUDIT`, `sk` `<time>#<request id>#<kind>[#<n>]`).
//!
//! - One `requested` row per sandbox the run acts on, written *before* the
//!   run, all in transactions of at most 100: when they cannot be written
//!   the action does not run (503 `audit_unavailable`).
//! - One `outcome` row per run after it (its counts), best effort: the
//!   action already happened.
//! - Each put carries `attribute_not_exists(pk)`: a row is never
//!   overwritten, and the function's role has no UpdateItem or DeleteItem.
//! - Who (Cognito's `sub` and user name), what (action, sandbox), when,
//!   the Function URL's request id and source IP; never the token, a
//!   header or the body.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};

use super::token::Caller;

/// `TransactWriteItems` takes at most 100 items.
const TRANSACTION_MAX_ITEMS: usize = 100;
const NOT_EXISTS: &str = "attribute_not_exists(pk)";

/// Who acts, and the request it came in.
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    pub(crate) caller: Caller,
    pub(crate) request_id: String,
    pub(crate) source_ip: String,
}

/// The requested rows could not be written.
#[derive(Debug)]
pub(crate) struct AuditUnavailable;

#[derive(Debug, Clone)]
pub(crate) struct AuditLog {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

fn text(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// Now as RFC 3339 UTC with milliseconds (`2026-12-07T03:10:00.123Z`).
pub(crate) fn utc_now() -> String {
    rfc3339(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// A time since the epoch as RFC 3339 UTC with milliseconds.
fn rfc3339(d: std::time::Duration) -> String {
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

impl AuditLog {
    pub(crate) fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn row(
        &self,
        actor: &Actor,
        action: &str,
        resource: &str,
        at: &str,
        kind: &str,
    ) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_owned(), text("AUDIT")),
            ("kind".to_owned(), text(kind)),
            ("occurred_at".to_owned(), text(at)),
            ("subject".to_owned(), text(&actor.caller.subject)),
            ("username".to_owned(), text(&actor.caller.username)),
            ("action".to_owned(), text(action)),
            ("resource".to_owned(), text(resource)),
            ("request_id".to_owned(), text(&actor.request_id)),
            ("source_ip".to_owned(), text(&actor.source_ip)),
        ])
    }

    /// The `requested` rows, one per sandbox, before the run.
    pub(crate) async fn requested(
        &self,
        actor: &Actor,
        action: &str,
        sandbox_ids: &[&str],
    ) -> Result<(), AuditUnavailable> {
        let at = utc_now();
        let items: Vec<TransactWriteItem> = sandbox_ids
            .iter()
            .enumerate()
            .map(|(n, id)| {
                let mut item = self.row(actor, action, id, &at, "requested");
                item.insert(
                    "sk".to_owned(),
                    text(format!("{at}#{}#requested#{n:03}", actor.request_id)),
                );
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression(NOT_EXISTS)
                    .build()
                    .map_err(|_| AuditUnavailable)?;
                Ok(TransactWriteItem::builder().put(put).build())
            })
            .collect::<Result<_, AuditUnavailable>>()?;
        for chunk in items.chunks(TRANSACTION_MAX_ITEMS) {
            self.client
                .transact_write_items()
                .set_transact_items(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|_| AuditUnavailable)?;
        }
        Ok(())
    }

    /// The `outcome` row after the run (best effort: `false` when it could
    /// not be written).
    pub(crate) async fn outcome(
        &self,
        actor: &Actor,
        action: &str,
        http_status: u16,
        succeeded: usize,
        failed: usize,
    ) -> bool {
        let at = utc_now();
        let mut item = self.row(actor, action, "-", &at, "outcome");
        item.insert(
            "sk".to_owned(),
            text(format!("{at}#{}#outcome", actor.request_id)),
        );
        item.insert(
            "http_status".to_owned(),
            AttributeValue::N(http_status.to_string()),
        );
        item.insert(
            "succeeded".to_owned(),
            AttributeValue::N(succeeded.to_string()),
        );
        item.insert("failed".to_owned(), AttributeValue::N(failed.to_string()));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(NOT_EXISTS)
            .send()
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(
            super::rfc3339(Duration::from_millis(1_765_000_000_123)),
            "2025-12-06T05:46:40.123Z"
        );
        assert_eq!(
            super::rfc3339(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn utc_now_is_rfc3339() {
        let now = super::utc_now();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z'), "{now}");
        assert_eq!(&now[10..11], "T");
    }
}
