//! Lifecycle events on AWS (extras §4.1): the events-webhooks stack through
//! CloudFormation, its webhooks and events in its DynamoDB table, its key
//! in Secrets Manager. The table's layout is the stack functions' own:
//! `WEBHOOK` / `<id>` for a webhook, `EVENT#<sandbox>` /
//! `<occurred_at_ms:020>#<event_id>` for an event, index `gsi1`
//! (`gsi1pk = EVENT`) across sandboxes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::OnceCell;

use super::types::{
    EventKind, EventQuery, EventRecord, EventsDeploy, EventsStack, KillReason, WebhookInfo,
};
use crate::aws::cloudformation::{IamCapability, StackInput, Stacks, UpdateStarted};
use crate::aws::dynamodb::{Attr, Dynamo, Expression, Item};
use crate::aws::s3::objects::Objects;
use crate::aws::secretsmanager::{SecretsManager, Version};
use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;
use crate::error::messages as m;

/// The table output.
pub(super) const TABLE_OUTPUT: &str = "EventsTableName";
/// The stack key secret output.
pub(super) const KEY_OUTPUT: &str = "StackKeySecretArn";
/// The webhooks' partition.
const WEBHOOK_PK: &str = "WEBHOOK";
/// The cross-sandbox index and its partition value.
const GSI1: &str = "gsi1";
const GSI1_PK: &str = "EVENT";
/// The most Query pages one `get_events` reads.
const MAX_PAGES: usize = 25;
/// The most Query pages one `list_webhooks` reads (100 webhooks a page):
/// a table that keeps paging past them (or a peer that repeats its
/// `LastEvaluatedKey`) ends in an error, never in an endless loop. The
/// reference pages without bound.
const MAX_WEBHOOK_PAGES: usize = 100;
/// Webhooks asked for per page.
const WEBHOOK_PAGE: i32 = 100;
/// Attempts of each DynamoDB call (the AWS SDK's standard retries).
const ATTEMPTS: u32 = 3;
/// How long a deploy or destroy waits for the stack to settle.
const STACK_TIMEOUT: Duration = Duration::from_secs(900);
/// How often the stack is read meanwhile.
const STACK_POLL: Duration = Duration::from_secs(5);

/// Where the AWS calls go.
#[derive(Clone, Debug, Default)]
pub(super) struct AwsTarget {
    pub(super) region: Option<String>,
    pub(super) endpoint_url: Option<String>,
    pub(super) sdk_config: Option<aws_types::SdkConfig>,
}

struct Clients {
    stacks: Stacks,
    dynamo: Dynamo,
    secrets: SecretsManager,
    objects: Objects,
}

/// The stack's outputs the calls need, read once.
#[derive(Clone, Debug, Default)]
struct Outputs {
    table: Option<String>,
    key_secret: Option<String>,
}

/// The AWS side of one `LifecycleEvents`.
pub(super) struct Aws {
    target: AwsTarget,
    stack_name: String,
    clients: OnceCell<Clients>,
    outputs: Mutex<Outputs>,
}

impl std::fmt::Debug for Aws {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aws")
            .field("stack_name", &self.stack_name)
            .finish_non_exhaustive()
    }
}

/// A DynamoDB, Secrets Manager or S3 failure of `operation` as the
/// reference's `WebhookException`: its AWS code, never AWS's text; a call
/// that got no answer as the transport maps it.
fn aws_error(operation: &'static str, failure: AwsFailure) -> SandboxError {
    match failure.code.clone() {
        Some(code) => {
            let code = crate::error::map::aws::sanitize_aws_code(&code).to_owned();
            let text = m::EVENTS_AWS.render(&[("operation", operation), ("aws_code", &code)]);
            SandboxError::webhook(Some(code), text)
        }
        None => crate::error::map::aws::from_aws(failure),
    }
}

impl Aws {
    pub(super) fn new(target: AwsTarget, stack_name: String) -> Self {
        Self {
            target,
            stack_name,
            clients: OnceCell::new(),
            outputs: Mutex::new(Outputs::default()),
        }
    }

    async fn clients(&self) -> Result<&Clients, SandboxError> {
        self.clients
            .get_or_try_init(|| async {
                let settings = crate::aws::config::AwsSettings {
                    region: self.target.region.clone(),
                    endpoint_url: self.target.endpoint_url.clone(),
                    sdk_config: self.target.sdk_config.clone().map(Box::new),
                    ..Default::default()
                };
                let (config, region) = crate::aws::config::load(&settings).await?;
                let cfn_endpoint = self.target.endpoint_url.clone().or_else(|| {
                    std::env::var(crate::setup::CLOUDFORMATION_ENDPOINT_ENV)
                        .ok()
                        .filter(|v| !v.is_empty())
                });
                let secrets = crate::aws::secretsmanager::connect(
                    Some(&region),
                    Some(&config),
                    self.target.endpoint_url.as_deref(),
                )
                .await?;
                Ok::<_, SandboxError>(Clients {
                    stacks: Stacks::new(&config, cfn_endpoint.as_deref()),
                    dynamo: Dynamo::new(&config, ATTEMPTS),
                    secrets: secrets.client,
                    objects: Objects::new(
                        &config,
                        Some(&region),
                        self.target.endpoint_url.as_deref(),
                    ),
                })
            })
            .await
    }

    fn outputs(&self) -> Outputs {
        self.outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn remember(&self, stack: &EventsStack) {
        let mut held = self
            .outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.table = stack.outputs.get(TABLE_OUTPUT).cloned();
        held.key_secret = stack.outputs.get(KEY_OUTPUT).cloned();
    }

    pub(super) async fn deploy(&self, deploy: &EventsDeploy) -> Result<EventsStack, SandboxError> {
        let body = super::stack_template::body();
        let clients = self.clients().await?;
        if let Some(path) = &deploy.artifact {
            let zip = tokio::fs::read(path).await.map_err(|_| {
                SandboxError::invalid_argument(
                    "artifact",
                    "the functions' zip could not be read; pass the path of the zip the project's command built",
                )
            })?;
            clients
                .objects
                .put_object(
                    &deploy.artifact_bucket,
                    EventsDeploy::ARTIFACT_KEY,
                    zip.into(),
                )
                .await
                .map_err(|f| aws_error("deploy", f))?;
        }
        let name = self.stack_name.as_str();
        use super::stack_template::params;
        let parameters = [
            (params::ARTIFACT_BUCKET, deploy.artifact_bucket.clone()),
            (
                params::ARTIFACT_S3_KEY,
                EventsDeploy::ARTIFACT_KEY.to_owned(),
            ),
            (params::LOG_GROUP_NAME, deploy.log_group_name.clone()),
            (
                params::RECONCILER_INTERVAL_MINUTES,
                deploy.reconciler_interval_minutes.to_string(),
            ),
        ];
        let tags = stack_tags(&deploy.tags);
        let input = StackInput {
            parameters: &parameters,
            capability: IamCapability::NamedIam,
            tags: &tags,
        };
        let stacks = &clients.stacks;
        let started = match stacks.describe(name).await? {
            None => {
                stacks.create_with(name, &body, &input).await?;
                true
            }
            Some(state) if state.status.ends_with("_IN_PROGRESS") => {
                return Err(SandboxError::stack_in_progress(name, &state.status));
            }
            Some(state) if crate::setup::is_blocked(&state.status) => {
                return Err(SandboxError::stack_blocked(name, &state.status));
            }
            Some(_) => stacks.update_with(name, &body, &input).await? == UpdateStarted::Started,
        };
        if started {
            crate::setup::wait_stack(stacks, name, STACK_TIMEOUT, STACK_POLL).await?;
        }
        let stack = self
            .status()
            .await?
            .ok_or_else(|| SandboxError::stack_not_found(name))?;
        Ok(stack)
    }

    pub(super) async fn status(&self) -> Result<Option<EventsStack>, SandboxError> {
        let clients = self.clients().await?;
        let Some(state) = clients.stacks.describe(&self.stack_name).await? else {
            return Ok(None);
        };
        let stack = EventsStack {
            stack_name: self.stack_name.clone(),
            status: state.status,
            outputs: state.outputs,
        };
        self.remember(&stack);
        Ok(Some(stack))
    }

    pub(super) async fn destroy(&self) -> Result<bool, SandboxError> {
        let clients = self.clients().await?;
        let name = self.stack_name.as_str();
        match clients.stacks.describe(name).await? {
            None => return Ok(false),
            Some(state) if state.status == "DELETE_COMPLETE" => return Ok(false),
            Some(_) => {}
        }
        clients.stacks.delete(name).await?;
        *self
            .outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Outputs::default();
        let by = tokio::time::Instant::now() + STACK_TIMEOUT;
        loop {
            let Some(state) = clients.stacks.describe(name).await? else {
                return Ok(true);
            };
            match state.status.as_str() {
                "DELETE_COMPLETE" => return Ok(true),
                "DELETE_FAILED" => {
                    return Err(crate::setup::failed(&clients.stacks, name, &state.status).await);
                }
                status if tokio::time::Instant::now() >= by => {
                    return Err(SandboxError::stack_in_progress(name, status));
                }
                _ => {}
            }
            tokio::time::sleep(STACK_POLL).await;
        }
    }

    /// The table's name: the cached output, else the stack's.
    async fn table(&self) -> Result<String, SandboxError> {
        if let Some(table) = self.outputs().table {
            return Ok(table);
        }
        self.status().await?;
        self.outputs()
            .table
            .ok_or_else(|| super::local::not_deployed(&self.stack_name))
    }

    /// The stack key (one GetSecretValue; the caller caches it).
    pub(super) async fn stack_key(&self) -> Result<Vec<u8>, SandboxError> {
        let secret = match self.outputs().key_secret {
            Some(arn) => arn,
            None => {
                self.status().await?;
                self.outputs()
                    .key_secret
                    .ok_or_else(|| super::local::not_deployed(&self.stack_name))?
            }
        };
        let clients = self.clients().await?;
        // The key as the stack's secret holds it: SecretString (what the
        // template's GenerateSecretString writes), else SecretBinary (a key
        // put by hand or by another tool), as the reference reads it.
        match clients
            .secrets
            .get_secret_bytes(&secret, Version::Stage(crate::secrets::AWSCURRENT))
            .await
        {
            Ok(Some(value)) if !value.is_empty() => Ok(value),
            Ok(_) => Err(SandboxError::webhook(
                None,
                m::EVENTS_STACK_KEY.render(&[("stack", &self.stack_name)]),
            )),
            Err(f) => Err(aws_error("stack_key", f)),
        }
    }

    pub(super) async fn register_webhook(
        &self,
        webhook_id: String,
        url: &str,
        secret_id: String,
        types: &[EventKind],
    ) -> Result<WebhookInfo, SandboxError> {
        let table = self.table().await?;
        let clients = self.clients().await?;
        let item = webhook_item(&webhook_id, url, &secret_id, types);
        clients
            .dynamo
            .put_item(&table, item, Expression::default())
            .await
            .map_err(|f| aws_error("register_webhook", f))?;
        Ok(WebhookInfo {
            webhook_id,
            url: url.to_owned(),
            types: types.to_vec(),
        })
    }

    pub(super) async fn list_webhooks(&self) -> Result<Vec<WebhookInfo>, SandboxError> {
        let table = self.table().await?;
        let clients = self.clients().await?;
        let mut found = Vec::new();
        let mut start = None;
        for _ in 0..MAX_WEBHOOK_PAGES {
            let filter = Expression {
                condition: None,
                names: Vec::new(),
                values: vec![(":pk".to_owned(), Attr::S(WEBHOOK_PK.to_owned()))],
            };
            let page = clients
                .dynamo
                .query_ordered(&table, None, "pk = :pk", filter, true, WEBHOOK_PAGE, start)
                .await
                .map_err(|f| aws_error("list_webhooks", f))?;
            found.extend(
                page.items
                    .iter()
                    .take(usize::try_from(WEBHOOK_PAGE).unwrap_or(100))
                    .filter_map(webhook_of),
            );
            match page.last_key {
                Some(key) => start = Some(key),
                None => return Ok(found),
            }
        }
        Err(SandboxError::webhook(
            None,
            m::EVENTS_WEBHOOK_PAGES.render(&[("pages", &MAX_WEBHOOK_PAGES.to_string())]),
        ))
    }

    pub(super) async fn delete_webhook(&self, id: &str) -> Result<bool, SandboxError> {
        let table = self.table().await?;
        let clients = self.clients().await?;
        let key: Item = HashMap::from([
            ("pk".to_owned(), Attr::S(WEBHOOK_PK.to_owned())),
            ("sk".to_owned(), Attr::S(id.to_owned())),
        ]);
        match clients
            .dynamo
            .delete_item(&table, key, Expression::default())
            .await
            .map_err(|f| aws_error("delete_webhook", f))?
        {
            crate::aws::dynamodb::Conditional::Done(old) => Ok(old.is_some()),
            crate::aws::dynamodb::Conditional::Failed(f) => Err(aws_error("delete_webhook", f)),
        }
    }

    pub(super) async fn get_events(
        &self,
        query: &EventQuery,
    ) -> Result<Vec<EventRecord>, SandboxError> {
        let table = self.table().await?;
        let clients = self.clients().await?;
        let (index, key_condition, pk) = events_key(query);
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        let mut start = None;
        for _ in 0..MAX_PAGES {
            let mut filter = kinds_filter(&query.types);
            filter.values.push((":pk".to_owned(), Attr::S(pk.clone())));
            let page = clients
                .dynamo
                .query_ordered(
                    &table,
                    index,
                    key_condition,
                    filter,
                    query.order == super::types::EventOrder::Asc,
                    i32::try_from(query.limit).unwrap_or(100),
                    start,
                )
                .await
                .map_err(|f| aws_error("get_events", f))?;
            records.extend(page.items.iter().filter_map(record_of));
            match page.last_key {
                Some(key) if records.len() < limit => start = Some(key),
                _ => break,
            }
        }
        records.truncate(limit);
        Ok(records)
    }
}

/// The component the fixed tags name (the reference's optional stack).
const COMPONENT: &str = "events-webhooks";
/// Who manages the stack, as the reference tags its optional stacks.
const MANAGED_BY: &str = "rayito-sdk";

/// The stack's tags: the caller's, then the three fixed ones, which
/// always win (a caller's tag with a fixed key is dropped), as the
/// reference tags every optional stack.
fn stack_tags(caller: &[(String, String)]) -> Vec<(String, String)> {
    let fixed = [
        ("rayito:component", COMPONENT),
        ("rayito:managed-by", MANAGED_BY),
        ("rayito:sdk-version", env!("CARGO_PKG_VERSION")),
    ];
    caller
        .iter()
        .filter(|(key, _)| !fixed.iter().any(|(fixed, _)| fixed == key))
        .cloned()
        .chain(
            fixed
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
        .collect()
}

/// The index, key condition and partition value of `query`.
pub(super) fn events_key(query: &EventQuery) -> (Option<&'static str>, &'static str, String) {
    match &query.sandbox_id {
        Some(id) => (None, "pk = :pk", format!("EVENT#{id}")),
        None => (Some(GSI1), "gsi1pk = :pk", GSI1_PK.to_owned()),
    }
}

/// `kind IN (:kind0, ...)` over `types` (none: no filter), the kinds
/// sorted as the reference sorts them.
pub(super) fn kinds_filter(types: &[EventKind]) -> Expression {
    let mut kinds: Vec<&str> = types.iter().map(|k| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Expression::default();
    }
    let names: Vec<String> = (0..kinds.len()).map(|i| format!(":kind{i}")).collect();
    Expression {
        condition: Some(format!("kind IN ({})", names.join(", "))),
        names: Vec::new(),
        values: names
            .into_iter()
            .zip(kinds)
            .map(|(n, k)| (n, Attr::S(k.to_owned())))
            .collect(),
    }
}

/// The webhook's item, as the reference writes it.
pub(super) fn webhook_item(id: &str, url: &str, secret_id: &str, types: &[EventKind]) -> Item {
    HashMap::from([
        ("pk".to_owned(), Attr::S(WEBHOOK_PK.to_owned())),
        ("sk".to_owned(), Attr::S(id.to_owned())),
        ("url".to_owned(), Attr::S(url.to_owned())),
        ("secret_name".to_owned(), Attr::S(secret_id.to_owned())),
        (
            "types".to_owned(),
            Attr::L(
                types
                    .iter()
                    .map(|k| Attr::S(k.type_name().to_owned()))
                    .collect(),
            ),
        ),
    ])
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(Attr::as_s).map(String::as_str)
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|a| a.as_n().or_else(|| a.as_s()))
        .and_then(|n| n.parse().ok())
}

/// A webhook of a `WEBHOOK` item (never its secret's name).
pub(super) fn webhook_of(item: &Item) -> Option<WebhookInfo> {
    let types = match item.get("types") {
        Some(Attr::L(list)) => list
            .iter()
            .filter_map(Attr::as_s)
            .filter_map(|t| EventKind::from_type_name(t))
            .collect(),
        _ => Vec::new(),
    };
    Some(WebhookInfo {
        webhook_id: text(item, "sk")?.to_owned(),
        url: text(item, "url")?.to_owned(),
        types,
    })
}

/// An event of an `EVENT#` item; one this SDK cannot read is skipped.
pub(super) fn record_of(item: &Item) -> Option<EventRecord> {
    let kill_reason = text(item, "kill_reason").and_then(|r| {
        [
            KillReason::Request,
            KillReason::Timeout,
            KillReason::Unknown,
        ]
        .into_iter()
        .find(|k| k.as_str() == r)
    });
    Some(EventRecord {
        event_id: text(item, "event_id")?.to_owned(),
        sandbox_id: text(item, "sandbox_id")?.to_owned(),
        kind: EventKind::parse(text(item, "kind")?)?,
        kill_reason,
        generation: number(item, "generation")?,
        occurred_at_ms: number(item, "occurred_at_ms")?,
        image_arn: text(item, "image_arn").unwrap_or_default().to_owned(),
        image_version: text(item, "image_version").unwrap_or_default().to_owned(),
    })
}

#[cfg(test)]
#[path = "aws_key_tests.rs"]
mod key_tests;
