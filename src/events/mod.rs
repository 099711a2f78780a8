//! Lifecycle events and signed webhooks (feature `events`, docs/events.md).
//!
//! Each sandbox created with [`SandboxBuilder::events`](crate::SandboxBuilder::events)
//! gets a key derived from its stack's key and signs a line per lifecycle
//! event (created, paused, resumed, killed) into its logs; the
//! events-webhooks stack checks and keeps each event, and delivers it to
//! the registered webhooks, signed with each webhook's secret. A receiving
//! service checks every delivery with [`verify_webhook`].
//!
//! [`LifecycleEvents`] is the stack's handle: deploy, status and destroy,
//! the webhooks, the events kept. On AWS it works through CloudFormation,
//! DynamoDB and Secrets Manager with the caller's credentials; on the
//! local backend ([`Client::events`](crate::Client::events)) the emulator
//! is the whole pipeline and delivers over real HTTP.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rayito::SandboxError> {
//! use rayito::events::{EventKind, EventQuery, EventsDeploy};
//! let client = rayito::Client::builder().build().await?;
//! let events = client.events();
//! events.deploy(EventsDeploy::new("my-artifacts", "/rayito/rayito-base")).await?;
//! let hook = events
//!     .register_webhook("https://hooks.example.com/rayito", "receiver", &EventKind::ALL)
//!     .await?;
//! let sbx = client
//!     .sandbox()
//!     .logging(rayito::SandboxLogging::cloudwatch_group("/rayito/rayito-base"))
//!     .events(events.clone())
//!     .create()
//!     .await?;
//! sbx.kill().await?;
//! let seen = events.get_events(EventQuery::new().sandbox_id(sbx.id())).await?;
//! println!("{} events; webhook {}", seen.len(), hook.webhook_id);
//! # Ok(())
//! # }
//! ```

mod aws;
mod checks;
mod local;
mod stack_template;
mod steps;
#[cfg(test)]
mod tests;
// The shared moto helper (and its skip line) for the stack key's moto
// test; src/pool/dynamodb_store.rs includes the same files for its own.
#[cfg(test)]
#[allow(clippy::duplicate_mod)]
#[path = "../../tests/sdk_support/moto.rs"]
mod moto;
#[cfg(test)]
#[allow(clippy::duplicate_mod)]
#[path = "../../tests/skip_support/mod.rs"]
mod skip;
mod types;
mod verify;
mod view;

use std::sync::{Arc, OnceLock};

use tokio::sync::OnceCell;

pub use checks::parse_event_type;
pub use types::{
    DEFAULT_RECONCILER_INTERVAL_MINUTES, DEFAULT_STACK_NAME, DeadLetter, EventKind, EventOrder,
    EventQuery, EventRecord, EventsDeploy, EventsStack, KillReason, MAX_EVENTS_LIMIT,
    MIN_RECONCILER_INTERVAL_MINUTES, WEBHOOK_SECRET_PREFIX, WebhookInfo,
};
pub use verify::{
    DEFAULT_WEBHOOK_TOLERANCE, WebhookVerifyError, verify_webhook, verify_webhook_with,
};
pub use view::EventsHealth;

pub(crate) use steps::Steps;

use crate::error::SandboxError;
use crate::error::messages as m;
use crate::secrets::{SecretCache, SecretCacheOptions};

/// Which pipeline a [`LifecycleEvents`] talks to.
#[derive(Clone, Debug)]
enum Target {
    Aws(aws::AwsTarget),
    /// The local backend's API, and its endpoint (what tells one emulator
    /// from another).
    Local(local::Local, String),
}

/// The settings of one [`LifecycleEvents`].
#[derive(Clone, Debug)]
struct Config {
    target: Target,
    stack_name: String,
    secret_cache: Option<SecretCache>,
}

/// What one instance keeps: the AWS clients and the stack key, read once.
#[derive(Default)]
struct State {
    aws: OnceLock<aws::Aws>,
    stack_key: OnceCell<StackKey>,
}

/// The stack key's bytes: never printed.
struct StackKey(Vec<u8>);

/// The events-webhooks stack of one backend: deploy, status and destroy,
/// its webhooks, its events (extras §4.1). Cheap to clone (clones share
/// the stack key and the AWS clients); a setter makes a new instance.
///
/// Made with [`LifecycleEvents::new`] (AWS, the environment's credentials
/// and region) or [`Client::events`](crate::Client::events) (the client's
/// backend, local included).
#[derive(Clone)]
pub struct LifecycleEvents {
    config: Config,
    state: Arc<State>,
}

impl std::fmt::Debug for LifecycleEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleEvents")
            .field("backend", &self.backend_name())
            .field("stack_name", &self.config.stack_name)
            .finish_non_exhaustive()
    }
}

impl Default for LifecycleEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl LifecycleEvents {
    /// The stack `rayito-events-webhooks` on AWS, with the environment's
    /// credentials and region (set them with the setters below).
    pub fn new() -> Self {
        Self::with_target(Target::Aws(aws::AwsTarget::default()))
    }

    fn with_target(target: Target) -> Self {
        Self {
            config: Config {
                target,
                stack_name: DEFAULT_STACK_NAME.to_owned(),
                secret_cache: None,
            },
            state: Arc::new(State::default()),
        }
    }

    /// The local backend's events API at `endpoint`, signed with its key.
    pub(crate) fn local(
        endpoint: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: crate::secret::Secret,
    ) -> Self {
        let endpoint = endpoint.trim_end_matches('/');
        let api = local::Local::new(endpoint, region, access_key_id, secret_access_key);
        let mut events = Self::with_target(Target::Local(api, endpoint.to_owned()));
        events.config.stack_name = local::LOCAL_STACK.to_owned();
        events
    }

    /// The events API of a local emulator reached as a remote control
    /// plane (the CLI's `rayito local` daemon): its control-plane endpoint
    /// (`http://127.0.0.1:<port>`), region and access key. An embedded
    /// local backend's client gives its own with
    /// [`Client::events`](crate::Client::events).
    pub fn local_emulator(
        endpoint_url: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: &str,
    ) -> Self {
        Self::local(
            endpoint_url,
            region,
            access_key_id,
            crate::secret::Secret::new(secret_access_key.to_owned()),
        )
    }

    /// The AWS stack of a client's configuration.
    pub(crate) fn aws_of(region: Option<&str>, sdk_config: Option<aws_types::SdkConfig>) -> Self {
        Self::with_target(Target::Aws(aws::AwsTarget {
            region: region.map(str::to_owned),
            endpoint_url: None,
            sdk_config,
        }))
    }

    fn changed(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self.state = Arc::new(State::default());
        self
    }

    fn aws_target(self, change: impl FnOnce(&mut aws::AwsTarget)) -> Self {
        self.changed(|c| {
            if let Target::Aws(target) = &mut c.target {
                change(target);
            }
        })
    }

    /// The stack's name (AWS; default `rayito-events-webhooks`).
    pub fn stack_name(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.changed(|c| {
            if matches!(c.target, Target::Aws(_)) {
                c.stack_name = name;
            }
        })
    }

    /// The AWS region (AWS; default: the environment's).
    pub fn region(self, region: impl Into<String>) -> Self {
        let region = region.into();
        self.aws_target(|t| t.region = Some(region))
    }

    /// The AWS configuration to start from (AWS; default: the
    /// environment's chain).
    pub fn sdk_config(self, config: aws_types::SdkConfig) -> Self {
        self.aws_target(|t| t.sdk_config = Some(config))
    }

    /// One endpoint for CloudFormation, DynamoDB, Secrets Manager and S3
    /// (AWS; tests and emulators such as moto).
    pub fn endpoint_url(self, url: impl Into<String>) -> Self {
        let url = url.into();
        self.aws_target(|t| t.endpoint_url = Some(url))
    }

    /// The cache the local backend reads a webhook's secret value through
    /// (the emulator delivers with the value; AWS's deliverer reads the
    /// secret itself). Default: a cache over the environment's Secrets
    /// Manager.
    pub fn secret_cache(self, cache: SecretCache) -> Self {
        self.changed(|c| c.secret_cache = Some(cache))
    }

    /// `local` or `aws`.
    pub fn backend_name(&self) -> &'static str {
        match self.config.target {
            Target::Aws(_) => "aws",
            Target::Local(..) => "local",
        }
    }

    /// The local endpoint (None on AWS): what the sandbox builder compares.
    pub(crate) fn local_endpoint(&self) -> Option<&str> {
        match &self.config.target {
            Target::Local(_, endpoint) => Some(endpoint),
            Target::Aws(_) => None,
        }
    }

    fn aws(&self) -> Option<&aws::Aws> {
        match &self.config.target {
            Target::Aws(target) => Some(
                self.state
                    .aws
                    .get_or_init(|| aws::Aws::new(target.clone(), self.config.stack_name.clone())),
            ),
            Target::Local(..) => None,
        }
    }

    fn local_api(&self) -> Option<&local::Local> {
        match &self.config.target {
            Target::Local(api, _) => Some(api),
            Target::Aws(_) => None,
        }
    }

    /// Deploys the stack (or updates it) and waits until it settles; its
    /// outputs (`EventsTableName`, `StackKeySecretArn`) are kept for the
    /// calls below. On AWS the functions' zip ([`EventsDeploy::artifact`])
    /// is uploaded to the artifact bucket first. Idempotent.
    ///
    /// # Errors
    /// `InvalidArgument` for the deploy's values (before any call);
    /// `Stack` for CloudFormation's failures; `Webhook` for the local
    /// API's.
    pub async fn deploy(&self, deploy: EventsDeploy) -> Result<EventsStack, SandboxError> {
        boxed!(Result<EventsStack, SandboxError>, {
            checks::deploy(&deploy, self.aws().is_some())?;
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.deploy(&deploy).await,
                (_, Some(local)) => local.deploy(&deploy).await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// The stack; `None` when it is not deployed.
    ///
    /// # Errors
    /// `Stack` (CloudFormation) or `Webhook` (local API) failures.
    pub async fn status(&self) -> Result<Option<EventsStack>, SandboxError> {
        boxed!(Result<Option<EventsStack>, SandboxError>, {
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.status().await,
                (_, Some(local)) => local.status().await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// Deletes the stack with its events, webhooks and key (the webhooks'
    /// own secrets are left alone) and waits: `false` when there was none.
    /// On AWS a stack policy still attached to a user or role makes it
    /// `DELETE_FAILED`: detach it and retry.
    ///
    /// # Errors
    /// `Stack` (CloudFormation) or `Webhook` (local API) failures.
    pub async fn destroy(&self) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.destroy().await,
                (_, Some(local)) => local.destroy().await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// Registers a webhook: every event of `types` is POSTed to `url`,
    /// signed with the value of the secret `secret_name` (a name under
    /// `rayito/webhooks/`, or an ARN). On AWS the URL must be deliverable
    /// (https to a public host); the local backend also delivers to
    /// loopback and plain http, and reads the secret's value now (through
    /// [`Self::secret_cache`]) to sign with.
    ///
    /// # Errors
    /// `InvalidArgument` (`url`, `types`, `secret_name`) before any call;
    /// `Webhook` when the stack is not deployed or refuses the write; the
    /// secret cache's errors (local).
    pub async fn register_webhook(
        &self,
        url: &str,
        secret_name: &str,
        types: &[EventKind],
    ) -> Result<WebhookInfo, SandboxError> {
        boxed!(Result<WebhookInfo, SandboxError>, {
            checks::webhook_url(url, self.aws().is_some())?;
            let types = checks::webhook_types(types)?;
            let secret_id = checks::webhook_secret_id(secret_name)?;
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => {
                    let id = format!("{:016x}", rand::random::<u64>());
                    aws.register_webhook(id, url, secret_id, &types).await
                }
                (_, Some(local)) => {
                    let cache = match &self.config.secret_cache {
                        Some(cache) => cache.clone(),
                        None => SecretCache::new(SecretCacheOptions::new())?,
                    };
                    let value = cache.get_webhook_secret(secret_id.clone()).await?;
                    local
                        .register_webhook(url, &secret_id, value.expose().as_bytes(), &types)
                        .await
                }
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// Every registered webhook (on AWS, up to 100 pages of 100).
    ///
    /// # Errors
    /// `Webhook` when the stack is not deployed or refuses the read, or
    /// when the table still pages after 100 pages (`events.webhook_pages`).
    pub async fn list_webhooks(&self) -> Result<Vec<WebhookInfo>, SandboxError> {
        boxed!(Result<Vec<WebhookInfo>, SandboxError>, {
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.list_webhooks().await,
                (_, Some(local)) => local.list_webhooks().await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// Deletes the webhook `webhook_id`: `true` when it existed.
    ///
    /// # Errors
    /// `InvalidArgument` (`webhook_id`) for an id that is not 16 hex
    /// characters; `Webhook` when the stack is not deployed or refuses.
    pub async fn delete_webhook(&self, webhook_id: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            checks::webhook_id(webhook_id)?;
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.delete_webhook(webhook_id).await,
                (_, Some(local)) => local.delete_webhook(webhook_id).await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// The events kept (7 days on AWS), one sandbox's or all, of some
    /// kinds or all, newest first unless asked: up to `limit`, reading at
    /// most 25 pages.
    ///
    /// # Errors
    /// `InvalidArgument` (`limit`) before any call; `Webhook` when the
    /// stack is not deployed or refuses the read.
    pub async fn get_events(&self, query: EventQuery) -> Result<Vec<EventRecord>, SandboxError> {
        boxed!(Result<Vec<EventRecord>, SandboxError>, {
            checks::query(&query)?;
            match (self.aws(), self.local_api()) {
                (Some(aws), _) => aws.get_events(&query).await,
                (_, Some(local)) => local.get_events(&query).await,
                _ => unreachable!("a target is AWS or local"),
            }
        })
    }

    /// The deliveries that failed for good (the local backend). On AWS
    /// they go to the stack's SQS queue `DelivererFailuresQueue`.
    ///
    /// # Errors
    /// `Unimplemented` (`dead_letters`) on AWS, naming the queue's output
    /// to read instead; `Webhook` when the stack is not deployed.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, SandboxError> {
        boxed!(Result<Vec<DeadLetter>, SandboxError>, {
            match self.local_api() {
                Some(local) => local.dead_letters().await,
                None => Err(SandboxError::unimplemented(
                    "dead_letters",
                    m::EVENTS_DEAD_LETTERS_AWS.render(&[]),
                    Some("docs/events.md"),
                )),
            }
        })
    }

    /// The stack key, read once per instance (AWS: GetSecretValue of
    /// `StackKeySecretArn`; local: the API's).
    pub(crate) async fn stack_key(&self) -> Result<&[u8], SandboxError> {
        let key = self
            .state
            .stack_key
            .get_or_try_init(|| async {
                let bytes = match (self.aws(), self.local_api()) {
                    (Some(aws), _) => aws.stack_key().await?,
                    (_, Some(local)) => local.stack_key().await?,
                    _ => unreachable!("a target is AWS or local"),
                };
                Ok::<_, SandboxError>(StackKey(bytes))
            })
            .await?;
        Ok(&key.0)
    }
}

impl crate::Client {
    /// The lifecycle events of this client's backend (feature `events`):
    /// the local backend's own pipeline, or on AWS the stack
    /// `rayito-events-webhooks` with this client's configuration.
    pub fn events(&self) -> LifecycleEvents {
        let backend = self.backend();
        if let Some(local) = &backend.local {
            return local_events(local);
        }
        LifecycleEvents::aws_of(backend.region.as_deref(), backend.sdk_config.clone())
    }
}

#[cfg(feature = "local")]
fn local_events(local: &crate::local::LocalBackend) -> LifecycleEvents {
    LifecycleEvents::local(
        local.endpoint_url(),
        local.region(),
        local.access_key_id(),
        local.secret_access_key().clone(),
    )
}

#[cfg(not(feature = "local"))]
fn local_events(local: &crate::local::LocalBackend) -> LifecycleEvents {
    match *local {}
}
