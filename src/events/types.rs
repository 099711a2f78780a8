//! The values lifecycle events read and return: the stack's deploy options
//! and status, a webhook, an event record, a query, a dead letter.

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use rayito_events::{EventKind, KillReason};

/// The stack's default name.
pub const DEFAULT_STACK_NAME: &str = "rayito-events-webhooks";
/// `deploy`'s default reconciler interval (minutes).
pub const DEFAULT_RECONCILER_INTERVAL_MINUTES: u32 = 5;
/// The smallest reconciler interval: EventBridge Scheduler's
/// `rate(N minutes)` (1 would need the singular form).
pub const MIN_RECONCILER_INTERVAL_MINUTES: u32 = 2;
/// `get_events`' default and largest `limit`.
pub const MAX_EVENTS_LIMIT: u32 = 100;
/// Where a webhook's secret name is resolved (an ARN is taken as is).
pub const WEBHOOK_SECRET_PREFIX: &str = "rayito/webhooks/";

/// How the events-webhooks stack is deployed ([`super::LifecycleEvents::deploy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsDeploy {
    /// The bucket the stack's functions' zip is read from (AWS).
    pub artifact_bucket: String,
    /// The log group the sandboxes log to: its subscription filter feeds
    /// the forwarder (a sandbox with events must log there).
    pub log_group_name: String,
    /// How often the reconciler looks for sandboxes that ended unseen
    /// (minutes, at least 2; default 5).
    pub reconciler_interval_minutes: u32,
    /// Tags of the stack (AWS).
    pub tags: Vec<(String, String)>,
    /// The functions' zip to upload to the artifact bucket first (AWS);
    /// `None`: it is already there, at [`Self::ARTIFACT_KEY`].
    pub artifact: Option<PathBuf>,
}

impl EventsDeploy {
    /// The zip's key in the artifact bucket.
    pub const ARTIFACT_KEY: &'static str = "rayito/events-webhooks/events-webhooks.zip";

    /// A deploy reading the functions from `artifact_bucket` and the event
    /// lines from `log_group_name`.
    pub fn new(artifact_bucket: impl Into<String>, log_group_name: impl Into<String>) -> Self {
        Self {
            artifact_bucket: artifact_bucket.into(),
            log_group_name: log_group_name.into(),
            reconciler_interval_minutes: DEFAULT_RECONCILER_INTERVAL_MINUTES,
            tags: Vec::new(),
            artifact: None,
        }
    }

    /// The reconciler's interval (minutes, at least 2).
    pub fn reconciler_interval_minutes(mut self, minutes: u32) -> Self {
        self.reconciler_interval_minutes = minutes;
        self
    }

    /// Tags the stack (the same key again replaces the value).
    pub fn tags<K: Into<String>, V: Into<String>>(
        mut self,
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in tags {
            let k = k.into();
            self.tags.retain(|(key, _)| *key != k);
            self.tags.push((k, v.into()));
        }
        self
    }

    /// Uploads the functions' zip at `path` before deploying (AWS).
    pub fn artifact(mut self, path: impl Into<PathBuf>) -> Self {
        self.artifact = Some(path.into());
        self
    }
}

/// The events-webhooks stack as its backend shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsStack {
    /// Its name.
    pub stack_name: String,
    /// `CREATE_COMPLETE`, `UPDATE_COMPLETE`, `DELETE_COMPLETE`, ...
    pub status: String,
    /// Its outputs (`EventsTableName`, `StackKeySecretArn`, the policies'
    /// ARNs on AWS, ...).
    pub outputs: BTreeMap<String, String>,
}

/// A registered webhook (never its secret, nor the secret's name).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebhookInfo {
    /// Its id: 16 lower-case hex characters.
    pub webhook_id: String,
    /// Where deliveries go.
    pub url: String,
    /// The kinds it receives.
    pub types: Vec<EventKind>,
}

/// One lifecycle event as the stack keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventRecord {
    /// 32 lower-case hex characters.
    pub event_id: String,
    /// The sandbox.
    pub sandbox_id: String,
    /// What happened.
    pub kind: EventKind,
    /// Why it was killed (`killed` only).
    pub kill_reason: Option<KillReason>,
    /// 0 at create, one more per resume.
    pub generation: u64,
    /// When, in milliseconds since the Unix epoch (the agent's clock).
    pub occurred_at_ms: u64,
    /// The sandbox's image ARN (the webhook's `sandbox_template_id`).
    pub image_arn: String,
    /// The image's version.
    pub image_version: String,
}

impl EventRecord {
    /// `sandbox.lifecycle.<kind>`.
    pub fn event_type(&self) -> &'static str {
        self.kind.type_name()
    }

    /// `<sandbox_id>#<generation>`: one life of the sandbox between resumes.
    pub fn sandbox_execution_id(&self) -> String {
        format!("{}#{}", self.sandbox_id, self.generation)
    }
}

/// Newest or oldest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventOrder {
    /// Oldest first.
    Asc,
    /// Newest first (the default).
    #[default]
    Desc,
}

impl EventOrder {
    /// `asc` or `desc`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asc => "asc",
            Self::Desc => "desc",
        }
    }
}

/// What [`super::LifecycleEvents::get_events`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventQuery {
    /// One sandbox's events; `None`: every sandbox's.
    pub sandbox_id: Option<String>,
    /// Only these kinds; empty: every kind.
    pub types: Vec<EventKind>,
    /// At most this many (1 to 100; default 100).
    pub limit: u32,
    /// Newest first by default.
    pub order: EventOrder,
}

impl Default for EventQuery {
    fn default() -> Self {
        Self {
            sandbox_id: None,
            types: Vec::new(),
            limit: MAX_EVENTS_LIMIT,
            order: EventOrder::Desc,
        }
    }
}

impl EventQuery {
    /// Every sandbox's events, newest first, at most 100.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only `sandbox_id`'s events.
    pub fn sandbox_id(mut self, sandbox_id: impl Into<String>) -> Self {
        self.sandbox_id = Some(sandbox_id.into());
        self
    }

    /// Only events of these kinds.
    pub fn types(mut self, types: impl IntoIterator<Item = EventKind>) -> Self {
        self.types = types.into_iter().collect();
        self
    }

    /// At most `limit` events (1 to 100).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// The order.
    pub fn order(mut self, order: EventOrder) -> Self {
        self.order = order;
        self
    }
}

/// A delivery that failed for good (the local backend's list; on AWS the
/// stack's `DelivererFailuresQueue`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The webhook.
    pub webhook_id: String,
    /// The event.
    pub event_id: String,
    /// Attempts made.
    pub attempts: u32,
    /// The deliverer's reason: `attempts_exhausted`, `rejected_<status>`, ...
    pub reason: String,
    /// The last HTTP status received, if any.
    pub last_status: Option<u16>,
}
