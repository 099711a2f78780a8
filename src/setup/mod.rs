//! A new account in one call (feature `setup`; `rayito setup`): the
//! artifact bucket and the IAM roles and policies that building images
//! and running sandboxes need, as two CloudFormation stacks with the
//! reference's names ([`ARTIFACTS_STACK`], [`IAM_STACK`]).
//!
//! [`Setup::plan`] only reads (DescribeStacks, GetTemplate, HeadBucket):
//! each step is `create` (absent), `update` (deployed with another
//! template) or `exists` (deployed with this one). [`Setup::apply`] runs
//! the plan in order and waits for each stack; applying a plan of
//! `exists` steps calls nothing. A failed stack is a
//! [`SandboxError::Stack`] naming the first failed resource and its
//! status, never CloudFormation's text.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rayito::SandboxError> {
//! let client = rayito::Client::builder().build().await?;
//! let setup = client.setup(rayito::setup::SetupOptions::default());
//! let plan = setup.plan().await?;
//! for step in plan.steps() {
//!     println!("{step}");
//! }
//! let done = setup.apply(&plan).await?;
//! println!("build role {}", done.build_role_arn);
//! # Ok(())
//! # }
//! ```

mod templates;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use templates::{
    ARTIFACTS_STACK, IAM_OUTPUTS, IAM_STACK, IMAGE_ARTIFACT_DAYS, IMAGE_ARTIFACT_PREFIX,
    artifacts_template, bucket_policy, build_role_name, default_bucket, iam_policies, iam_template,
};
use templates::{artifacts_template_value, iam_template_value};

use crate::Client;
use crate::aws::cloudformation::{StackState, Stacks, UpdateStarted};
use crate::aws::s3::artifacts::check_bucket;
use crate::error::SandboxError;
use crate::template::TemplateServices;

/// The AWS SDK's variable for CloudFormation's endpoint.
pub const CLOUDFORMATION_ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_CLOUDFORMATION";

/// How long [`Setup::apply`] waits for one stack by default.
pub const DEFAULT_STACK_TIMEOUT: Duration = Duration::from_secs(900);
/// How often a stack's status is read while waiting, by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// How a setup runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SetupOptions {
    /// An existing artifact bucket to use instead of the artifacts stack's
    /// (`rayito setup --bucket`); it must exist and be the caller's.
    pub bucket: Option<String>,
    /// CloudFormation's endpoint, when not AWS's (tests, emulators); else
    /// `AWS_ENDPOINT_URL_CLOUDFORMATION`, which here wins over
    /// [`AwsOptions::endpoint_url`](crate::AwsOptions::endpoint_url) (that
    /// one names the MicroVMs API's endpoint, e.g. an emulator, which
    /// serves no CloudFormation).
    pub cloudformation_endpoint_url: Option<String>,
    /// How long to wait for one stack (default 15 minutes).
    pub timeout: Duration,
    /// How often a stack's status is read while waiting (default 5 s).
    pub poll_interval: Duration,
}

impl Default for SetupOptions {
    fn default() -> Self {
        Self {
            bucket: None,
            cloudformation_endpoint_url: None,
            timeout: DEFAULT_STACK_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepAction {
    /// The resource is absent: it is created.
    Create,
    /// The stack is deployed with another template: it is updated.
    Update,
    /// The resource is there as wanted: nothing is done.
    Exists,
}

impl StepAction {
    /// `create`, `update` or `exists`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Exists => "exists",
        }
    }
}

/// What a step is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepTarget {
    /// A CloudFormation stack.
    Stack,
    /// An S3 bucket named with `--bucket` (never created by setup).
    Bucket,
    /// A MicroVM image (the base image `rayito setup` publishes).
    Image,
}

impl StepTarget {
    /// `stack` or `bucket`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stack => "stack",
            Self::Bucket => "bucket",
            Self::Image => "image",
        }
    }
}

/// One step of a plan: `create stack rayito-m0-iam`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetupStep {
    /// What is done.
    pub action: StepAction,
    /// What it is done to.
    pub target: StepTarget,
    /// The stack's or bucket's name.
    pub name: String,
}

impl SetupStep {
    /// A step (for callers that add their own, like the CLI's image step).
    pub fn new(action: StepAction, target: StepTarget, name: impl Into<String>) -> Self {
        Self {
            action,
            target,
            name: name.into(),
        }
    }
}

impl fmt::Display for SetupStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.action.as_str(),
            self.target.as_str(),
            self.name
        )
    }
}

/// What a setup would do, read without writing anything.
#[derive(Clone, Debug, PartialEq)]
pub struct SetupPlan {
    account: String,
    region: String,
    bucket: String,
    steps: Vec<SetupStep>,
}

impl SetupPlan {
    /// The steps, in the order [`Setup::apply`] runs them.
    pub fn steps(&self) -> &[SetupStep] {
        &self.steps
    }

    /// The artifact bucket images are published through.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The caller's account.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The region the stacks live in.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Whether applying the plan changes nothing.
    pub fn is_noop(&self) -> bool {
        self.steps.iter().all(|s| s.action == StepAction::Exists)
    }
}

/// What [`Setup::apply`] did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SetupOutcome {
    /// The steps as they were run (`exists` ones did nothing).
    pub steps: Vec<SetupStep>,
    /// The artifact bucket.
    pub bucket: String,
    /// The build role's ARN (the IAM stack's `BuildRoleArn`), for
    /// publishing.
    pub build_role_arn: String,
    /// Every output of the IAM stack.
    pub outputs: BTreeMap<String, String>,
}

/// A new account's setup through one [`Client`]'s AWS configuration.
/// Made with [`Client::setup`]; cheap to clone.
#[derive(Clone, Debug)]
pub struct Setup {
    client: Client,
    options: SetupOptions,
}

impl Client {
    /// The setup of this client's account and region (feature `setup`).
    pub fn setup(&self, options: SetupOptions) -> Setup {
        Setup {
            client: self.clone(),
            options,
        }
    }
}

/// A stack's template as it is sent: pretty JSON, so that the console shows it
/// readably.
fn body(template: &serde_json::Value) -> String {
    serde_json::to_string_pretty(template).unwrap_or_default()
}

/// Statuses CloudFormation cannot update from: the stack must be deleted.
pub(crate) fn is_blocked(status: &str) -> bool {
    matches!(
        status,
        "CREATE_FAILED"
            | "ROLLBACK_COMPLETE"
            | "ROLLBACK_FAILED"
            | "DELETE_FAILED"
            | "UPDATE_ROLLBACK_FAILED"
            | "IMPORT_ROLLBACK_FAILED"
    )
}

impl Setup {
    async fn services(&self) -> Result<Arc<TemplateServices>, SandboxError> {
        self.client.template_services().await
    }

    fn stacks(&self, services: &TemplateServices) -> Stacks {
        let endpoint = self
            .options
            .cloudformation_endpoint_url
            .clone()
            .or_else(|| {
                std::env::var(CLOUDFORMATION_ENDPOINT_ENV)
                    .ok()
                    .filter(|v| !v.is_empty())
            });
        Stacks::new(services.sdk_config(), endpoint.as_deref())
    }

    /// Reads what exists and says what [`apply`](Self::apply) would do.
    /// Writes nothing.
    ///
    /// # Errors
    /// `InvalidArgument` (`bucket`) when `--bucket` names a bucket that
    /// does not exist; `Stack { blocked }` / `Stack { in_progress }` for a
    /// stack that cannot be updated now; STS, S3 and CloudFormation
    /// failures.
    pub async fn plan(&self) -> Result<SetupPlan, SandboxError> {
        boxed!(Result<SetupPlan, SandboxError>, {
            if let Some(bucket) = &self.options.bucket {
                check_bucket(bucket)?;
            }
            let services = self.services().await?;
            let (account, _) = services.account().await?;
            let region = services.region().to_owned();
            let stacks = self.stacks(&services);
            let mut steps = Vec::new();
            let bucket = match &self.options.bucket {
                Some(bucket) => {
                    if !services.artifacts().await?.bucket_exists(bucket).await? {
                        return Err(SandboxError::invalid_argument(
                            "bucket",
                            "no such bucket in this account; create it, or leave --bucket out to create rayito-artifacts-<account>-<region>",
                        ));
                    }
                    steps.push(SetupStep {
                        action: StepAction::Exists,
                        target: StepTarget::Bucket,
                        name: bucket.clone(),
                    });
                    bucket.clone()
                }
                None => {
                    let action = stack_action(&stacks, ARTIFACTS_STACK, &artifacts_template_value()).await?;
                    steps.push(SetupStep {
                        action,
                        target: StepTarget::Stack,
                        name: ARTIFACTS_STACK.to_owned(),
                    });
                    default_bucket(&account, &region)
                }
            };
            let action = stack_action(&stacks, IAM_STACK, &iam_template_value(&bucket)).await?;
            steps.push(SetupStep {
                action,
                target: StepTarget::Stack,
                name: IAM_STACK.to_owned(),
            });
            Ok(SetupPlan {
                account,
                region,
                bucket,
                steps,
            })
        })
    }

    /// Runs `plan` in order: each stack created or updated and waited for.
    /// `exists` steps call nothing; the IAM stack's outputs are read either
    /// way.
    ///
    /// # Errors
    /// `Stack { failed }` naming the first failed resource and its status
    /// (or CloudFormation's error code when it refused the call);
    /// `Stack { in_progress }` when a stack did not settle within the
    /// timeout; `Stack { output_missing }` for an IAM stack without
    /// `BuildRoleArn`; other AWS failures.
    pub async fn apply(&self, plan: &SetupPlan) -> Result<SetupOutcome, SandboxError> {
        boxed!(Result<SetupOutcome, SandboxError>, {
            let services = self.services().await?;
            let stacks = self.stacks(&services);
            let mut done = Vec::new();
            for step in &plan.steps {
                if step.target == StepTarget::Stack {
                    let template = if step.name == ARTIFACTS_STACK {
                        artifacts_template_value()
                    } else {
                        iam_template_value(&plan.bucket)
                    };
                    let action = self
                        .deploy(&stacks, &step.name, step.action, &template)
                        .await?;
                    done.push(SetupStep {
                        action,
                        ..step.clone()
                    });
                } else {
                    done.push(step.clone());
                }
            }
            let outputs = self.read_outputs(&stacks).await?;
            Ok(SetupOutcome {
                steps: done,
                bucket: plan.bucket.clone(),
                build_role_arn: outputs["BuildRoleArn"].clone(),
                outputs,
            })
        })
    }

    /// Whether `bucket` exists and is this account's (HeadBucket with the
    /// expected owner; nothing is written).
    ///
    /// # Errors
    /// `InvalidArgument` (`bucket`) for a name that is not a bucket's; an
    /// S3 failure other than "no such bucket" (a bucket of another
    /// account is a 403: `Authentication`).
    pub async fn bucket_exists(&self, bucket: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            check_bucket(bucket)?;
            let services = self.services().await?;
            services.artifacts().await?.bucket_exists(bucket).await
        })
    }

    /// The IAM stack's outputs (for `rayito doctor` and publishing).
    ///
    /// # Errors
    /// `Stack { not_found }` when the stack does not exist;
    /// `Stack { output_missing }` when it lacks one of [`IAM_OUTPUTS`];
    /// CloudFormation failures.
    pub async fn outputs(&self) -> Result<BTreeMap<String, String>, SandboxError> {
        boxed!(Result<BTreeMap<String, String>, SandboxError>, {
            let services = self.services().await?;
            self.read_outputs(&self.stacks(&services)).await
        })
    }

    async fn read_outputs(
        &self,
        stacks: &Stacks,
    ) -> Result<BTreeMap<String, String>, SandboxError> {
        let state = stacks
            .describe(IAM_STACK)
            .await?
            .ok_or_else(|| SandboxError::stack_not_found(IAM_STACK))?;
        for key in IAM_OUTPUTS {
            if !state.outputs.contains_key(key) {
                return Err(SandboxError::stack_output_missing(IAM_STACK, key));
            }
        }
        Ok(state.outputs)
    }

    /// Creates or updates `name` and waits; the action it really took
    /// (`exists` when CloudFormation found nothing to change).
    async fn deploy(
        &self,
        stacks: &Stacks,
        name: &str,
        planned: StepAction,
        template: &serde_json::Value,
    ) -> Result<StepAction, SandboxError> {
        match planned {
            StepAction::Exists => return Ok(StepAction::Exists),
            StepAction::Create => stacks.create(name, &body(template)).await?,
            StepAction::Update => {
                if stacks.update(name, &body(template)).await? == UpdateStarted::NothingToDo {
                    return Ok(StepAction::Exists);
                }
            }
        }
        self.wait(stacks, name).await?;
        Ok(planned)
    }

    /// Waits until `name` settles: `Ok` on CREATE/UPDATE_COMPLETE.
    async fn wait(&self, stacks: &Stacks, name: &str) -> Result<(), SandboxError> {
        wait_stack(
            stacks,
            name,
            self.options.timeout,
            self.options.poll_interval,
        )
        .await
    }
}

/// Waits until stack `name` settles, reading it every `poll` for at most
/// `timeout`: `Ok` on CREATE/UPDATE_COMPLETE.
///
/// # Errors
/// `Stack { failed }` naming the first failed resource, `Stack {
/// in_progress }` past the timeout, `Stack { not_found }` when the stack
/// is gone.
pub(crate) async fn wait_stack(
    stacks: &Stacks,
    name: &str,
    timeout: Duration,
    poll: Duration,
) -> Result<(), SandboxError> {
    let by = Instant::now() + timeout;
    loop {
        let state = stacks
            .describe(name)
            .await?
            .ok_or_else(|| SandboxError::stack_not_found(name))?;
        match state.status.as_str() {
            "CREATE_COMPLETE" | "UPDATE_COMPLETE" => return Ok(()),
            status if status.ends_with("_IN_PROGRESS") => {
                if Instant::now() >= by {
                    return Err(SandboxError::stack_in_progress(name, status));
                }
            }
            status => return Err(failed(stacks, name, status).await),
        }
        tokio::time::sleep(poll).await;
    }
}

/// The error of a stack that ended in `status`: its first failed resource
/// when the events name one, else the stack itself.
pub(crate) async fn failed(stacks: &Stacks, name: &str, status: &str) -> SandboxError {
    match stacks.first_failure(name).await {
        Ok(Some((resource, resource_status))) => {
            SandboxError::stack_failed(name, &resource, &resource_status)
        }
        Ok(None) => SandboxError::stack_failed(name, name, status),
        Err(e) => e,
    }
}

/// What a stack needs: `create` when absent, `exists` when it carries
/// `template`, `update` otherwise.
async fn stack_action(
    stacks: &Stacks,
    name: &str,
    template: &serde_json::Value,
) -> Result<StepAction, SandboxError> {
    let Some(StackState { status, .. }) = stacks.describe(name).await? else {
        return Ok(StepAction::Create);
    };
    if status.ends_with("_IN_PROGRESS") {
        return Err(SandboxError::stack_in_progress(name, &status));
    }
    if is_blocked(&status) {
        return Err(SandboxError::stack_blocked(name, &status));
    }
    Ok(match stacks.template(name).await? {
        Some(deployed) if &deployed == template => StepAction::Exists,
        _ => StepAction::Update,
    })
}
