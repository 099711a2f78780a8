//! Lifecycle events on the local backend: the emulator is the whole
//! pipeline and serves the events API on its control-plane port
//! (`/_rayito/events/...`, JSON in camelCase, SigV4-signed with the
//! emulator's access key like every control-plane call). The answers are
//! read here into the public types; the emulator's 404 "not deployed" is
//! the same `Webhook` error as on AWS.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::types::{
    DeadLetter, EventKind, EventQuery, EventRecord, EventsDeploy, EventsStack, KillReason,
    WebhookInfo,
};
use crate::aws::signed_http::{NoAnswer, SignedHttp};
use crate::error::SandboxError;
use crate::error::messages as m;

/// The API's prefix.
const PREFIX: &str = "/_rayito/events";
/// The stack name the local backend shows (it has one stack).
pub(super) const LOCAL_STACK: &str = "local";
/// The emulator's answer when the stack is not deployed.
const NOT_DEPLOYED: &str = "the events stack is not deployed";
/// The most of an error answer's message kept (our own emulator's text,
/// never a secret).
const MAX_DETAIL_CHARS: usize = 200;

/// The local events API of one emulator.
#[derive(Clone, Debug)]
pub(super) struct Local {
    http: SignedHttp,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StackAnswer {
    status: String,
    #[serde(default)]
    outputs: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyAnswer {
    stack_key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookAnswer {
    webhook_id: String,
    url: String,
    #[serde(default)]
    types: Vec<String>,
}

#[derive(Deserialize)]
struct WebhooksAnswer {
    webhooks: Vec<WebhookAnswer>,
}

#[derive(Deserialize)]
struct DeletedAnswer {
    deleted: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordAnswer {
    event_id: String,
    sandbox_id: String,
    kind: String,
    kill_reason: Option<String>,
    generation: u64,
    occurred_at_ms: u64,
    image_arn: String,
    image_version: String,
}

#[derive(Deserialize)]
struct RecordsAnswer {
    events: Vec<RecordAnswer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeadLetterAnswer {
    webhook_id: String,
    event_id: String,
    attempts: u32,
    reason: String,
    last_status: Option<u16>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeadLettersAnswer {
    dead_letters: Vec<DeadLetterAnswer>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    message: Option<String>,
}

/// A kind as the API spells it: `created` or `sandbox.lifecycle.created`.
fn kind(text: &str) -> Option<EventKind> {
    EventKind::parse(text).or_else(|| EventKind::from_type_name(text))
}

fn kill_reason(text: &str) -> Option<KillReason> {
    [
        KillReason::Request,
        KillReason::Timeout,
        KillReason::Unknown,
    ]
    .into_iter()
    .find(|r| r.as_str() == text)
}

impl Local {
    /// The API of the emulator at `endpoint` (plain http), signed with its
    /// key pair in `region`.
    pub(super) fn new(
        endpoint: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: crate::secret::Secret,
    ) -> Self {
        Self {
            http: SignedHttp::new(endpoint, region, access_key_id, secret_access_key),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        method: &'static str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, SandboxError> {
        let body = body.map(|b| serde_json::to_vec(&b).unwrap_or_default());
        let (status, answer) = self
            .http
            .call(method, &format!("{PREFIX}{path}"), body)
            .await
            .map_err(|why| unreachable_api(operation, why))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&answer).map_err(|_| {
                SandboxError::webhook(
                    None,
                    m::EVENTS_LOCAL.render(&[
                        ("operation", operation),
                        ("status", &status.to_string()),
                        ("detail", " that is not the expected JSON"),
                    ]),
                )
            });
        }
        let message = serde_json::from_slice::<ErrorAnswer>(&answer)
            .ok()
            .and_then(|e| e.message)
            .unwrap_or_default();
        if status == 404 && message == NOT_DEPLOYED {
            return Err(not_deployed(LOCAL_STACK));
        }
        let clean: String = message
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_DETAIL_CHARS)
            .collect();
        let detail = if clean.is_empty() {
            String::new()
        } else {
            format!(": {clean}")
        };
        Err(SandboxError::webhook(
            None,
            m::EVENTS_LOCAL.render(&[
                ("operation", operation),
                ("status", &status.to_string()),
                ("detail", &detail),
            ]),
        ))
    }

    pub(super) async fn deploy(&self, deploy: &EventsDeploy) -> Result<EventsStack, SandboxError> {
        let body = json!({
            "logGroupName": deploy.log_group_name,
            "reconcilerIntervalMinutes": deploy.reconciler_interval_minutes,
        });
        let answer: StackAnswer = self.call("deploy", "PUT", "/stack", Some(body)).await?;
        Ok(stack(answer))
    }

    pub(super) async fn status(&self) -> Result<Option<EventsStack>, SandboxError> {
        match self
            .call::<StackAnswer>("status", "GET", "/stack", None)
            .await
        {
            Ok(answer) => Ok(Some(stack(answer))),
            Err(e) if is_not_deployed(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn destroy(&self) -> Result<bool, SandboxError> {
        match self
            .call::<StackAnswer>("destroy", "DELETE", "/stack", None)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_deployed(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn stack_key(&self) -> Result<Vec<u8>, SandboxError> {
        let answer: KeyAnswer = self.call("stack_key", "GET", "/stack-key", None).await?;
        match STANDARD.decode(answer.stack_key) {
            Ok(key) if !key.is_empty() => Ok(key),
            _ => Err(SandboxError::webhook(
                None,
                m::EVENTS_STACK_KEY.render(&[("stack", LOCAL_STACK)]),
            )),
        }
    }

    pub(super) async fn register_webhook(
        &self,
        url: &str,
        secret_name: &str,
        secret: &[u8],
        types: &[EventKind],
    ) -> Result<WebhookInfo, SandboxError> {
        let body = json!({
            "url": url,
            "secretName": secret_name,
            "secret": STANDARD.encode(secret),
            "types": types.iter().map(|k| k.type_name()).collect::<Vec<_>>(),
        });
        let answer: WebhookAnswer = self
            .call("register_webhook", "POST", "/webhooks", Some(body))
            .await?;
        Ok(webhook(answer))
    }

    pub(super) async fn list_webhooks(&self) -> Result<Vec<WebhookInfo>, SandboxError> {
        let answer: WebhooksAnswer = self.call("list_webhooks", "GET", "/webhooks", None).await?;
        Ok(answer.webhooks.into_iter().map(webhook).collect())
    }

    pub(super) async fn delete_webhook(&self, id: &str) -> Result<bool, SandboxError> {
        let answer: DeletedAnswer = self
            .call("delete_webhook", "DELETE", &format!("/webhooks/{id}"), None)
            .await?;
        Ok(answer.deleted)
    }

    pub(super) async fn get_events(
        &self,
        query: &EventQuery,
    ) -> Result<Vec<EventRecord>, SandboxError> {
        let answer: RecordsAnswer = self
            .call("get_events", "GET", &records_path(query), None)
            .await?;
        Ok(answer.events.into_iter().filter_map(record).collect())
    }

    pub(super) async fn dead_letters(&self) -> Result<Vec<DeadLetter>, SandboxError> {
        let answer: DeadLettersAnswer = self
            .call("dead_letters", "GET", "/dead-letters", None)
            .await?;
        Ok(answer
            .dead_letters
            .into_iter()
            .map(|d| DeadLetter {
                webhook_id: d.webhook_id,
                event_id: d.event_id,
                attempts: d.attempts,
                reason: d.reason,
                last_status: d.last_status,
            })
            .collect())
    }
}

/// `/records?...` for `query` (already checked).
pub(super) fn records_path(query: &EventQuery) -> String {
    let mut params = vec![
        format!("limit={}", query.limit),
        format!("order={}", query.order.as_str()),
    ];
    if let Some(id) = &query.sandbox_id {
        params.push(format!("sandboxId={}", percent(id)));
    }
    for kind in &query.types {
        params.push(format!("type={}", kind.type_name()));
    }
    format!("/records?{}", params.join("&"))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn stack(answer: StackAnswer) -> EventsStack {
    EventsStack {
        stack_name: LOCAL_STACK.to_owned(),
        status: answer.status,
        outputs: answer.outputs,
    }
}

fn webhook(answer: WebhookAnswer) -> WebhookInfo {
    WebhookInfo {
        webhook_id: answer.webhook_id,
        url: answer.url,
        types: answer.types.iter().filter_map(|t| kind(t)).collect(),
    }
}

/// A record; one of a kind this SDK does not know is skipped.
fn record(answer: RecordAnswer) -> Option<EventRecord> {
    Some(EventRecord {
        kind: kind(&answer.kind)?,
        kill_reason: answer.kill_reason.as_deref().and_then(kill_reason),
        event_id: answer.event_id,
        sandbox_id: answer.sandbox_id,
        generation: answer.generation,
        occurred_at_ms: answer.occurred_at_ms,
        image_arn: answer.image_arn,
        image_version: answer.image_version,
    })
}

/// The stack-not-deployed error (`Webhook`, no AWS code).
pub(super) fn not_deployed(stack: &str) -> SandboxError {
    SandboxError::webhook(None, m::EVENTS_NOT_DEPLOYED.render(&[("stack", stack)]))
}

/// Whether `error` is [`not_deployed`]'s.
pub(super) fn is_not_deployed(error: &SandboxError) -> bool {
    matches!(error, SandboxError::Webhook { aws_code: None, .. })
        && error
            .to_string()
            .contains(" is not deployed; call deploy() first")
}

fn unreachable_api(operation: &'static str, why: NoAnswer) -> SandboxError {
    let why = match why {
        NoAnswer::Build => "the request could not be built",
        NoAnswer::Transport => "no connection",
        NoAnswer::Timeout => "no answer in time",
    };
    SandboxError::webhook(
        None,
        m::EVENTS_LOCAL_UNREACHABLE.render(&[("operation", operation), ("why", why)]),
    )
}
