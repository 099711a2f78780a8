//! [`OptionalStacks`]: the catalog's components deployed, read and
//! deleted through CloudFormation. Nothing is deployed implicitly: only an
//! explicit [`deploy`](OptionalStacks::deploy) (or `rayito stack deploy`)
//! creates or changes a stack. Every refusal of [`plan`](super::plan) comes
//! before the first AWS call.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::model::{ParameterChange, StackComponent, StackDeployed, StackStatus, UpdateOutcome};
use super::plan::{self, ParameterPlan, ROLLBACK_COMPLETE};
use super::{StackOptions, catalog, stacks};
use crate::Client;
use crate::aws::cloudformation::{IamCapability, StackInput, StackState, Stacks, UpdateStarted};
use crate::error::SandboxError;

/// How long a deploy or destroy waits by default (a stack without nested
/// stacks settles in seconds to minutes).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(600);
/// How often a stack is read while waiting, by default.
pub const DEFAULT_WAIT_POLL: Duration = Duration::from_millis(500);
/// The largest artifact a deploy reads and uploads (a Lambda zip uploaded
/// through S3 is at most 250 MiB unzipped; the zip is smaller).
const MAX_ARTIFACT_BYTES: usize = 256 * 1024 * 1024;

/// What one deploy sends: parameters, the artifact bucket and zip, tags.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StackDeploy {
    /// The stack's name (default `rayito-<component>`).
    pub stack_name: Option<String>,
    /// Template parameters, key to value.
    pub parameters: BTreeMap<String, String>,
    /// The bucket a component's Lambda code is uploaded to (needed by the
    /// components with artifacts; their bucket parameter is filled from
    /// it).
    pub artifact_bucket: Option<String>,
    /// The zip of a component's Lambda code (events-webhooks: the one
    /// `tools/build-events-lambda` writes). Needed to create such a
    /// stack; an update without it keeps the deployed code.
    pub artifact: Option<PathBuf>,
    /// Tags for the stack; the three fixed `rayito:` tags win over these.
    pub tags: BTreeMap<String, String>,
    /// Returns once CloudFormation accepted the change, without waiting.
    pub no_wait: bool,
}

impl StackDeploy {
    /// A deploy with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets parameter `key`.
    #[must_use]
    pub fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.insert(key.into(), value.into());
        self
    }

    /// Names the stack.
    #[must_use]
    pub fn stack_name(mut self, name: impl Into<String>) -> Self {
        self.stack_name = Some(name.into());
        self
    }

    /// The artifact bucket.
    #[must_use]
    pub fn artifact_bucket(mut self, bucket: impl Into<String>) -> Self {
        self.artifact_bucket = Some(bucket.into());
        self
    }

    /// The Lambda code's zip.
    #[must_use]
    pub fn artifact(mut self, path: impl Into<PathBuf>) -> Self {
        self.artifact = Some(path.into());
        self
    }

    /// Adds tag `key`.
    #[must_use]
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }
}

/// The optional stacks of one [`Client`]'s account and region (feature
/// `stacks`). Made with [`Client::optional_stacks`]; making it calls
/// nothing.
#[derive(Clone, Debug)]
pub struct OptionalStacks {
    client: Client,
    options: StackOptions,
}

impl Client {
    /// The optional stacks of this client's account and region, waiting
    /// up to 600 s and reading every 0.5 s (feature `stacks`).
    pub fn optional_stacks(&self) -> OptionalStacks {
        OptionalStacks {
            client: self.clone(),
            options: StackOptions {
                timeout: DEFAULT_WAIT_TIMEOUT,
                poll_interval: DEFAULT_WAIT_POLL,
                ..StackOptions::default()
            },
        }
    }
}

/// What a deploy decided before writing anything.
struct Planned {
    component: &'static StackComponent,
    name: String,
    current: Option<StackStatus>,
    parameters: ParameterPlan,
}

/// The catalog: every component, pure data (no AWS call).
pub fn components() -> &'static [StackComponent] {
    catalog::COMPONENTS
}

/// The component called `name`.
///
/// # Errors
/// `InvalidArgument` (`component`) naming the components there are.
pub fn component(name: &str) -> Result<&'static StackComponent, SandboxError> {
    plan::component(name)
}

fn view(name: &str, state: StackState) -> StackStatus {
    StackStatus {
        name: name.to_owned(),
        state: state.status,
        outputs: state.outputs,
        reason_code: state.reason,
        parameters: state.parameters,
        tags: state.tags,
    }
}

impl OptionalStacks {
    /// Waits up to `options.timeout`, reading every `options.poll_interval`.
    #[must_use]
    pub fn with_options(mut self, options: StackOptions) -> Self {
        self.options = options;
        self
    }

    /// The catalog (as [`components`]).
    pub fn components(&self) -> &'static [StackComponent] {
        components()
    }

    async fn stacks(&self) -> Result<Stacks, SandboxError> {
        stacks(&self.client, &self.options).await
    }

    /// The stack of `component` (named `stack_name`, default
    /// `rayito-<component>`), `None` when it does not exist.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown component; `Unimplemented` for one
    /// this SDK does not deploy; CloudFormation failures.
    pub async fn status(
        &self,
        component: &str,
        stack_name: Option<&str>,
    ) -> Result<Option<StackStatus>, SandboxError> {
        boxed!(Result<Option<StackStatus>, SandboxError>, {
            let component = plan::component(component)?;
            plan::require_supported(component, "status")?;
            let name = stack_name.map_or_else(|| component.default_stack_name(), str::to_owned);
            let stacks = self.stacks().await?;
            Ok(stacks.describe(&name).await?.map(|s| view(&name, s)))
        })
    }

    /// What [`deploy`](Self::deploy) with the same arguments would change
    /// in the stack's parameters, reading only the stack (the CLI shows it
    /// before asking for confirmation). Parameters left out that the stack
    /// has are kept, so they never appear.
    ///
    /// # Errors
    /// As [`deploy`](Self::deploy)'s refusals before it writes.
    pub async fn parameter_changes(
        &self,
        component: &str,
        deploy: &StackDeploy,
    ) -> Result<Vec<ParameterChange>, SandboxError> {
        boxed!(Result<Vec<ParameterChange>, SandboxError>, {
            plan::require_supported(plan::component(component)?, "deploy")?;
            let stacks = self.stacks().await?;
            let planned = self.plan(&stacks, component, deploy).await?;
            Ok(planned.parameters.changes(planned.current.as_ref()))
        })
    }

    async fn plan(
        &self,
        stacks: &Stacks,
        component: &str,
        deploy: &StackDeploy,
    ) -> Result<Planned, SandboxError> {
        let component = plan::component(component)?;
        plan::require_supported(component, "deploy")?;
        let name = deploy
            .stack_name
            .clone()
            .unwrap_or_else(|| component.default_stack_name());
        let given = plan::with_artifact_bucket(
            component,
            deploy.parameters.clone(),
            deploy.artifact_bucket.as_deref(),
        )?;
        plan::reject_unknown(component, &given)?;
        let current = stacks.describe(&name).await?.map(|s| view(&name, s));
        if let Some(current) = &current {
            if current.state == ROLLBACK_COMPLETE || crate::setup::is_blocked(&current.state) {
                return Err(SandboxError::stack_blocked(&name, &current.state));
            }
            if current.state.ends_with("_IN_PROGRESS") {
                return Err(SandboxError::stack_in_progress(&name, &current.state));
            }
        }
        let mut parameters = plan::plan_parameters(component, &given, current.as_ref())?;
        // Refused here, before any write, when the values make no template.
        component.template_for(&parameters.values)?;
        for artifact in component.artifacts {
            if deploy.artifact.is_some() {
                continue;
            }
            let deployed = current
                .as_ref()
                .is_some_and(|c| c.parameters.contains_key(artifact.parameter_key));
            if !deployed {
                return Err(SandboxError::invalid_argument(
                    "artifact",
                    format!(
                        "{} runs Lambda code and no zip of it was given; build it (tools/{}) and pass its path",
                        component.name,
                        if component.name == "dashboard" {
                            "build-dashboard-lambda"
                        } else {
                            "build-events-lambda"
                        }
                    ),
                ));
            }
            parameters
                .keep_previous
                .push(artifact.parameter_key.to_owned());
        }
        Ok(Planned {
            component,
            name,
            current,
            parameters,
        })
    }

    /// Creates the stack of `component`, or updates it when it exists, and
    /// (unless [`StackDeploy::no_wait`]) waits until it settles. On create,
    /// parameters left out take the catalog's defaults; on update, those
    /// the stack has keep their deployed values (`UsePreviousValue`), so a
    /// deploy that does not repeat every parameter undoes nothing. A
    /// component's Lambda zip is uploaded to the artifact bucket first,
    /// once: an object already holding the same bytes is left alone.
    ///
    /// # Errors
    /// `InvalidArgument` (`component`, `parameters`, `artifact_bucket`,
    /// `artifact`) and `Unimplemented` before any AWS call;
    /// `Stack { blocked }` for a stack in `ROLLBACK_COMPLETE` (destroy it
    /// first); `Stack { in_progress }` for a stack still changing or past
    /// the wait; `Stack { failed }` naming the first failed resource;
    /// CloudFormation and S3 failures.
    pub async fn deploy(
        &self,
        component: &str,
        deploy: &StackDeploy,
    ) -> Result<StackDeployed, SandboxError> {
        boxed!(Result<StackDeployed, SandboxError>, {
            plan::require_supported(plan::component(component)?, "deploy")?;
            let stacks = self.stacks().await?;
            let planned = self.plan(&stacks, component, deploy).await?;
            let component = planned.component;
            let name = planned.name.as_str();
            let mut values = planned.parameters.values.clone();
            if let (Some(path), Some(bucket)) = (&deploy.artifact, &deploy.artifact_bucket) {
                let key = self.upload(component, path, bucket).await?;
                for artifact in component.artifacts {
                    values.insert(artifact.parameter_key.to_owned(), key.clone());
                }
            }
            // A template written from the parameters (efs-volumes) takes
            // them as values: the stack then has no parameter of its own.
            let body = component.template_for(&values)?.unwrap_or_default();
            let parameters: Vec<(&str, String)> = if component.renders_from_parameters() {
                Vec::new()
            } else {
                values.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
            };
            let tags = plan::stack_tags(component, &deploy.tags);
            let input = StackInput {
                parameters: &parameters,
                capability: if component.named_iam() {
                    IamCapability::NamedIam
                } else {
                    IamCapability::Iam
                },
                tags: &tags,
            };
            let outcome = if planned.current.is_none() {
                stacks.create_with(name, &body, &input).await?;
                None
            } else {
                let started = stacks
                    .update_keeping(name, &body, &input, &planned.parameters.keep_previous)
                    .await?;
                Some(match started {
                    UpdateStarted::Started => UpdateOutcome::Changed,
                    UpdateStarted::NothingToDo => UpdateOutcome::NoChanges,
                })
            };
            if !deploy.no_wait && outcome != Some(UpdateOutcome::NoChanges) {
                self.wait(&stacks, name, Target::Deployed).await?;
            }
            let status = stacks
                .describe(name)
                .await?
                .map(|s| view(name, s))
                .ok_or_else(|| SandboxError::stack_not_found(name))?;
            Ok(StackDeployed { status, outcome })
        })
    }

    /// Deletes the stack of `component` (named `stack_name`, default
    /// `rayito-<component>`) and, when `wait`, waits until it is gone. A
    /// stack that does not exist is no error.
    ///
    /// # Errors
    /// `InvalidArgument` / `Unimplemented` as [`status`](Self::status);
    /// `Stack { failed }` when the deletion failed; `Stack { in_progress
    /// }` past the wait; CloudFormation failures.
    pub async fn destroy(
        &self,
        component: &str,
        stack_name: Option<&str>,
        wait: bool,
    ) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            let component = plan::component(component)?;
            plan::require_supported(component, "destroy")?;
            let name = stack_name.map_or_else(|| component.default_stack_name(), str::to_owned);
            let stacks = self.stacks().await?;
            stacks.delete(&name).await?;
            if wait {
                self.wait(&stacks, &name, Target::Deleted).await?;
            }
            Ok(())
        })
    }

    /// Reads the stack every poll interval until it reaches `target`: a
    /// deploy succeeds at `CREATE_COMPLETE` / `UPDATE_COMPLETE`, a delete
    /// once the stack is gone or `DELETE_COMPLETE`; a failed or rolled
    /// back state is `Stack { failed }` naming the first failed resource;
    /// the timeout is `Stack { in_progress }`.
    async fn wait(&self, stacks: &Stacks, name: &str, target: Target) -> Result<(), SandboxError> {
        let by = Instant::now() + self.options.timeout;
        loop {
            let state = stacks.describe(name).await?.map(|s| s.status);
            match (target, state.as_deref()) {
                (Target::Deleted, None | Some("DELETE_COMPLETE")) => return Ok(()),
                (Target::Deployed, None) => return Err(SandboxError::stack_not_found(name)),
                (Target::Deployed, Some("CREATE_COMPLETE" | "UPDATE_COMPLETE")) => return Ok(()),
                (_, Some(status)) if is_failure(status) => {
                    return Err(crate::setup::failed(stacks, name, status).await);
                }
                (_, Some(status)) => {
                    if Instant::now() >= by {
                        return Err(SandboxError::stack_in_progress(name, status));
                    }
                }
            }
            tokio::time::sleep(self.options.poll_interval).await;
        }
    }

    /// Uploads `path` under `rayito/stacks/<component>/<sha256>.zip` unless
    /// the object there already holds these bytes; returns the key.
    async fn upload(
        &self,
        component: &StackComponent,
        path: &std::path::Path,
        bucket: &str,
    ) -> Result<String, SandboxError> {
        use base64::Engine as _;
        use sha2::{Digest as _, Sha256};
        let unreadable = || {
            SandboxError::invalid_argument(
                "artifact",
                "the Lambda code's zip could not be read; pass the path of the zip the project's build command wrote",
            )
        };
        let meta = tokio::fs::metadata(path).await.map_err(|_| unreadable())?;
        if !meta.is_file() || meta.len() > MAX_ARTIFACT_BYTES as u64 {
            return Err(unreadable());
        }
        let zip = tokio::fs::read(path).await.map_err(|_| unreadable())?;
        let digest = Sha256::digest(&zip);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let key = plan::artifact_key(component.name, &hex);
        let services = self.client.template_services().await?;
        let store = services.artifacts().await?;
        let stored = store.get(bucket, &key, MAX_ARTIFACT_BYTES).await?;
        if stored.is_some_and(|s| Sha256::digest(&s) == digest) {
            return Ok(key);
        }
        let checksum = base64::engine::general_purpose::STANDARD.encode(digest);
        store
            .put_with_sha256(bucket, &key, zip.into(), &checksum)
            .await?;
        Ok(key)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Deployed,
    Deleted,
}

/// The states a wait stops at with a failure.
fn is_failure(status: &str) -> bool {
    matches!(
        status,
        "CREATE_FAILED"
            | "ROLLBACK_COMPLETE"
            | "ROLLBACK_FAILED"
            | "UPDATE_FAILED"
            | "UPDATE_ROLLBACK_COMPLETE"
            | "UPDATE_ROLLBACK_FAILED"
            | "DELETE_FAILED"
    )
}
