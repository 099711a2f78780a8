//! Bulk-action plans in the stack's DynamoDB cache table, so the POST that
//! runs a plan may reach another Lambda environment than the one that made
//! it. One item per plan: `pk` `PLAN#<id>` (cost cache items never start
//! so), the action, its timeout, the ids it acts on, its confirmation and
//! `expires_at` (epoch seconds, the table's TTL attribute) ten minutes
//! after it was made, like the local dashboard's plans. A run reads the
//! item, then deletes it on condition that it is still there and
//! unexpired: of two runs of one plan only one acts.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use crate::errors::ApiError;

/// The key of plan `id`'s item.
pub(crate) fn plan_key(id: &str) -> String {
    format!("PLAN#{id}")
}

/// What a run needs of a plan made elsewhere.
#[derive(Debug, Clone)]
pub(crate) struct StoredPlan {
    /// The action's name (`kill`, `pause`, `resume`, `set_timeout`).
    pub(crate) action: String,
    pub(crate) timeout_seconds: Option<u64>,
    /// The sandboxes the run acts on, in the plan's order.
    pub(crate) acting: Vec<String>,
    pub(crate) confirmation: String,
}

#[derive(Debug, Clone)]
pub(crate) struct PlanStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn text(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn number(n: u64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

fn get_text(item: &HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    item.get(name)?.as_s().ok().cloned()
}

fn get_number(item: &HashMap<String, AttributeValue>, name: &str) -> Option<u64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

impl PlanStore {
    pub(crate) fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Keeps `plan` as `id` for `lifetime_secs`.
    pub(crate) async fn keep(
        &self,
        id: &str,
        plan: &StoredPlan,
        lifetime_secs: u64,
    ) -> Result<(), ApiError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", text(plan_key(id)))
            .item("action", text(&plan.action))
            .item("confirmation", text(&plan.confirmation))
            .item("expires_at", number(now() + lifetime_secs))
            .condition_expression("attribute_not_exists(pk)");
        if !plan.acting.is_empty() {
            // Sandbox ids have no spaces; a string set would lose the order.
            put = put.item("acting", text(plan.acting.join(" ")));
        }
        if let Some(secs) = plan.timeout_seconds {
            put = put.item("timeout_seconds", number(secs));
        }
        put.send()
            .await
            .map(|_| ())
            .map_err(|_| ApiError::plans_unavailable())
    }

    /// Plan `id` when its confirmation is `confirmation`, taken out (one
    /// run per plan); a wrong confirmation leaves it in place.
    pub(crate) async fn take(&self, id: &str, confirmation: &str) -> Result<StoredPlan, ApiError> {
        let key = plan_key(id);
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", text(&key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|_| ApiError::plans_unavailable())?;
        let Some(item) = got.item else {
            return Err(ApiError::plan_not_found());
        };
        // The table's TTL deletes late: an expired item may still be read.
        if get_number(&item, "expires_at").is_none_or(|at| at <= now()) {
            return Err(ApiError::plan_not_found());
        }
        if get_text(&item, "confirmation").as_deref() != Some(confirmation) {
            return Err(ApiError::confirmation_required());
        }
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", text(&key))
            .condition_expression(
                "attribute_exists(pk) AND expires_at > :now AND confirmation = :c",
            )
            .expression_attribute_values(":now", number(now()))
            .expression_attribute_values(":c", text(confirmation))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        let item = match deleted {
            Ok(out) => out.attributes.unwrap_or(item),
            Err(e) => {
                let conditional = e
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception());
                return Err(if conditional {
                    // Another run took it (or it expired) meanwhile.
                    ApiError::plan_not_found()
                } else {
                    ApiError::plans_unavailable()
                });
            }
        };
        let acting = get_text(&item, "acting")
            .map(|o| {
                o.split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Ok(StoredPlan {
            action: get_text(&item, "action").unwrap_or_default(),
            timeout_seconds: get_number(&item, "timeout_seconds"),
            acting,
            confirmation: get_text(&item, "confirmation").unwrap_or_default(),
        })
    }
}
