//! DynamoDB (feature `dynamodb`): the item and table calls of the pool's
//! shared store ([`crate::pool`]) and of the metadata index
//! ([`crate::index`]), as plain data. Which items and conditions mean what
//! is decided above; here only the calls are made.
//!
//! A failed condition is an answer ([`Conditional::Failed`]), never an
//! error. Every other failure is [`AwsFailure`] facts, mapped by the
//! caller through `crate::error::map`.

use std::collections::HashMap;

use aws_sdk_dynamodb as ddb;
use ddb::config::retry::RetryConfig;
use ddb::error::ProvideErrorMetadata;
use ddb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, KeysAndAttributes,
    ReturnValue, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};

use crate::aws::failure::{OperationError, SdkFailure, extract};
use crate::error::map::aws::AwsFailure;
use crate::quiet::Quiet as _;

/// An attribute value, as far as this crate reads and writes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attr {
    /// A string.
    S(String),
    /// A number, as DynamoDB spells it.
    N(String),
    /// A map.
    M(HashMap<String, Attr>),
    /// A list.
    #[cfg_attr(not(feature = "events"), allow(dead_code))]
    L(Vec<Attr>),
    /// Any other type (read only: never one of this crate's items).
    Other,
}

impl Attr {
    /// The string, if it is one.
    pub(crate) fn as_s(&self) -> Option<&String> {
        match self {
            Self::S(text) => Some(text),
            _ => None,
        }
    }

    /// The number's text, if it is one.
    pub(crate) fn as_n(&self) -> Option<&String> {
        match self {
            Self::N(text) => Some(text),
            _ => None,
        }
    }

    /// The map, if it is one.
    pub(crate) fn as_m(&self) -> Option<&HashMap<String, Attr>> {
        match self {
            Self::M(map) => Some(map),
            _ => None,
        }
    }

    fn into_sdk(self) -> AttributeValue {
        match self {
            Self::S(text) => AttributeValue::S(text),
            Self::N(text) => AttributeValue::N(text),
            Self::M(map) => AttributeValue::M(into_sdk_item(map)),
            Self::L(list) => AttributeValue::L(list.into_iter().map(Self::into_sdk).collect()),
            // Never written: an item of this crate holds no other type.
            Self::Other => AttributeValue::Null(true),
        }
    }

    fn from_sdk(value: AttributeValue) -> Self {
        match value {
            AttributeValue::S(text) => Self::S(text),
            AttributeValue::N(text) => Self::N(text),
            AttributeValue::M(map) => Self::M(from_sdk_item(map)),
            AttributeValue::L(list) => Self::L(list.into_iter().map(Self::from_sdk).collect()),
            _ => Self::Other,
        }
    }
}

/// An item: attribute name to value.
pub(crate) type Item = HashMap<String, Attr>;

fn into_sdk_item(item: Item) -> HashMap<String, AttributeValue> {
    item.into_iter().map(|(k, v)| (k, v.into_sdk())).collect()
}

fn from_sdk_item(item: HashMap<String, AttributeValue>) -> Item {
    item.into_iter()
        .map(|(k, v)| (k, Attr::from_sdk(v)))
        .collect()
}

/// The expression members of one call: a condition (or a filter), its
/// `#names` and `:values`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Expression {
    /// `ConditionExpression` (Query: `FilterExpression`).
    pub condition: Option<String>,
    /// `ExpressionAttributeNames`.
    pub names: Vec<(String, String)>,
    /// `ExpressionAttributeValues`.
    pub values: Vec<(String, Attr)>,
}

impl Expression {
    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.iter().cloned().collect())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| {
            self.values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into_sdk()))
                .collect()
        })
    }
}

/// `$call` with `$expression`'s condition, names and values (the three
/// writes take the same members).
macro_rules! with_expression {
    ($call:expr, $expression:expr) => {
        $call
            .set_condition_expression($expression.condition.clone())
            .set_expression_attribute_names($expression.names())
            .set_expression_attribute_values($expression.values())
    };
}

/// A conditional write's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Conditional<T> {
    /// The condition held; the write happened.
    Done(T),
    /// `ConditionalCheckFailedException` (its facts): nothing was written.
    Failed(AwsFailure),
}

/// One Query page.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueryPage {
    pub items: Vec<Item>,
    /// `LastEvaluatedKey`: where the next page starts.
    pub last_key: Option<Item>,
}

/// One BatchGetItem answer for one table.
#[derive(Clone, Debug, Default)]
pub(crate) struct BatchPage {
    pub items: Vec<Item>,
    /// The keys DynamoDB left unprocessed (empty: none).
    pub unprocessed: Vec<Item>,
}

impl Dynamo {
    /// DeleteItem of `key`, unconditionally (no item is fine).
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn delete_key(&self, table: &str, key: Item) -> Result<(), AwsFailure> {
        self.client
            .delete_item()
            .table_name(table)
            .set_key(Some(into_sdk_item(key)))
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| extract("DeleteItem", &e))
    }
}

/// A table's key attribute (always a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRole {
    /// The partition key.
    Hash,
    /// The sort key.
    Range,
}

/// The DynamoDB client of one store or index, with the AWS SDK's standard
/// retries (throttling, 5xx, connection failures; a failed condition is
/// never retried).
#[derive(Clone, Debug)]
pub(crate) struct Dynamo {
    client: ddb::Client,
}

impl Dynamo {
    /// The client over `config`, each call tried `attempts` times.
    pub(crate) fn new(config: &aws_types::SdkConfig, attempts: u32) -> Self {
        let config = ddb::config::Builder::from(config)
            .retry_config(RetryConfig::standard().with_max_attempts(attempts))
            .build();
        Self {
            client: ddb::Client::from_conf(config),
        }
    }

    /// PutItem of `item`, under `expression`'s condition when it has one.
    ///
    /// # Errors
    /// Any failure but a failed condition.
    pub(crate) async fn put_item(
        &self,
        table: &str,
        item: Item,
        expression: Expression,
    ) -> Result<Conditional<()>, AwsFailure> {
        let put = self.client.put_item();
        let put = with_expression!(put, expression)
            .table_name(table)
            .set_item(Some(into_sdk_item(item)))
            .send()
            .quiet()
            .await;
        conditional("PutItem", put.map(|_| ()))
    }

    /// UpdateItem of `key` with `update` (an `UpdateExpression`), under
    /// `expression`'s condition.
    ///
    /// # Errors
    /// Any failure but a failed condition.
    pub(crate) async fn update_item(
        &self,
        table: &str,
        key: Item,
        update: String,
        expression: Expression,
    ) -> Result<Conditional<()>, AwsFailure> {
        let updated = self.client.update_item();
        let updated = with_expression!(updated, expression)
            .table_name(table)
            .set_key(Some(into_sdk_item(key)))
            .update_expression(update)
            .send()
            .quiet()
            .await;
        conditional("UpdateItem", updated.map(|_| ()))
    }

    /// DeleteItem of `key` under `expression`'s condition, returning the
    /// item as it was (`ReturnValues=ALL_OLD`; `None` when there was none).
    ///
    /// # Errors
    /// Any failure but a failed condition.
    pub(crate) async fn delete_item(
        &self,
        table: &str,
        key: Item,
        expression: Expression,
    ) -> Result<Conditional<Option<Item>>, AwsFailure> {
        let deleted = self.client.delete_item();
        let deleted = with_expression!(deleted, expression)
            .table_name(table)
            .set_key(Some(into_sdk_item(key)))
            .return_values(ReturnValue::AllOld)
            .send()
            .quiet()
            .await;
        conditional(
            "DeleteItem",
            deleted.map(|out| out.attributes.map(from_sdk_item)),
        )
    }

    /// One consistent Query page: `key_condition` over the key, `filter`
    /// (its condition is the `FilterExpression`) over the items, from
    /// `start` (`ExclusiveStartKey`).
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn query(
        &self,
        table: &str,
        key_condition: &str,
        filter: Expression,
        start: Option<Item>,
    ) -> Result<QueryPage, AwsFailure> {
        let page = self
            .client
            .query()
            .table_name(table)
            .consistent_read(true)
            .key_condition_expression(key_condition)
            .set_filter_expression(filter.condition.clone())
            .set_expression_attribute_names(filter.names())
            .set_expression_attribute_values(filter.values())
            .set_exclusive_start_key(start.map(into_sdk_item))
            .send()
            .quiet()
            .await
            .map_err(|e| extract("Query", &e))?;
        Ok(query_page(page))
    }

    /// One Query page in key order (`forward`: ascending), on `index` when
    /// given (eventually consistent there, as DynamoDB allows on a global
    /// index; consistent on the table), `filter` over the items.
    ///
    /// # Errors
    /// Any failure.
    #[cfg(feature = "events")]
    #[allow(
        clippy::too_many_arguments,
        reason = "the members of one Query, each a different one of its fields"
    )]
    pub(crate) async fn query_ordered(
        &self,
        table: &str,
        index: Option<&str>,
        key_condition: &str,
        filter: Expression,
        forward: bool,
        limit: i32,
        start: Option<Item>,
    ) -> Result<QueryPage, AwsFailure> {
        let page = self
            .client
            .query()
            .table_name(table)
            .limit(limit)
            .set_index_name(index.map(str::to_owned))
            .consistent_read(index.is_none())
            .scan_index_forward(forward)
            .key_condition_expression(key_condition)
            .set_filter_expression(filter.condition.clone())
            .set_expression_attribute_names(filter.names())
            .set_expression_attribute_values(filter.values())
            .set_exclusive_start_key(start.map(into_sdk_item))
            .send()
            .quiet()
            .await
            .map_err(|e| extract("Query", &e))?;
        Ok(query_page(page))
    }

    /// One consistent BatchGetItem of `keys` (at most 100) in `table`.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn batch_get_item(
        &self,
        table: &str,
        keys: Vec<Item>,
    ) -> Result<BatchPage, AwsFailure> {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys.into_iter().map(into_sdk_item).collect()))
            .consistent_read(true)
            .build()
            // Only a request without keys fails to build: none is made.
            .map_err(|_| AwsFailure::new("BatchGetItem"))?;
        let mut answer = self
            .client
            .batch_get_item()
            .request_items(table, request)
            .send()
            .quiet()
            .await
            .map_err(|e| extract("BatchGetItem", &e))?;
        let items = answer
            .responses
            .as_mut()
            .and_then(|r| r.remove(table))
            .unwrap_or_default()
            .into_iter()
            .map(from_sdk_item)
            .collect();
        let unprocessed = answer
            .unprocessed_keys
            .as_mut()
            .and_then(|u| u.remove(table))
            .map(|pending| pending.keys.into_iter().map(from_sdk_item).collect())
            .unwrap_or_default();
        Ok(BatchPage { items, unprocessed })
    }

    /// CreateTable `table` with string `keys`, on-demand billing.
    ///
    /// # Errors
    /// Any failure (`ResourceInUseException` when the table exists).
    pub(crate) async fn create_table(
        &self,
        table: &str,
        keys: &[(&str, KeyRole)],
    ) -> Result<(), AwsFailure> {
        let internal = || AwsFailure::new("CreateTable");
        let mut call = self
            .client
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest);
        for (name, role) in keys {
            let kind = match role {
                KeyRole::Hash => KeyType::Hash,
                KeyRole::Range => KeyType::Range,
            };
            call = call
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(*name)
                        .key_type(kind)
                        .build()
                        .map_err(|_| internal())?,
                )
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(*name)
                        .attribute_type(ScalarAttributeType::S)
                        .build()
                        .map_err(|_| internal())?,
                );
        }
        call.send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| extract("CreateTable", &e))
    }

    /// DescribeTable: whether `table` is ACTIVE.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn table_active(&self, table: &str) -> Result<bool, AwsFailure> {
        let described = self
            .client
            .describe_table()
            .table_name(table)
            .send()
            .quiet()
            .await
            .map_err(|e| extract("DescribeTable", &e))?;
        Ok(described.table.and_then(|t| t.table_status) == Some(TableStatus::Active))
    }

    /// UpdateTimeToLive: `attribute` becomes `table`'s TTL attribute.
    ///
    /// # Errors
    /// Any failure.
    pub(crate) async fn enable_ttl(&self, table: &str, attribute: &str) -> Result<(), AwsFailure> {
        let ttl = TimeToLiveSpecification::builder()
            .attribute_name(attribute)
            .enabled(true)
            .build()
            .map_err(|_| AwsFailure::new("UpdateTimeToLive"))?;
        self.client
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(ttl)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| extract("UpdateTimeToLive", &e))
    }
}

/// A write's outcome: done, a failed condition, or the failure's facts
/// (returned once, to the store's mapping: never carried further).
#[allow(clippy::result_large_err)]
fn conditional<T, E: OperationError>(
    operation: &'static str,
    outcome: Result<T, SdkFailure<E>>,
) -> Result<Conditional<T>, AwsFailure> {
    match outcome {
        Ok(value) => Ok(Conditional::Done(value)),
        Err(e)
            if e.as_service_error()
                .and_then(ProvideErrorMetadata::code)
                .is_some_and(|code| code == "ConditionalCheckFailedException") =>
        {
            Ok(Conditional::Failed(extract(operation, &e)))
        }
        Err(e) => Err(extract(operation, &e)),
    }
}

/// Reads the tests need and the crate never makes./// A Query answer as a page: its items, and the key to go on from (none
/// when DynamoDB says the listing is done).
fn query_page(page: aws_sdk_dynamodb::operation::query::QueryOutput) -> QueryPage {
    QueryPage {
        items: page
            .items
            .unwrap_or_default()
            .into_iter()
            .map(from_sdk_item)
            .collect(),
        last_key: page
            .last_evaluated_key
            .filter(|key| !key.is_empty())
            .map(from_sdk_item),
    }
}

#[cfg(test)]
pub(crate) mod test_calls {
    use super::*;

    impl Dynamo {
        /// A consistent GetItem of `key`.
        pub(crate) async fn get_item(&self, table: &str, key: Item) -> Option<Item> {
            self.client
                .get_item()
                .table_name(table)
                .set_key(Some(into_sdk_item(key)))
                .consistent_read(true)
                .send()
                .quiet()
                .await
                .unwrap()
                .item
                .map(from_sdk_item)
        }
    }
}
