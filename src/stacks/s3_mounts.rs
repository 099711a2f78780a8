//! The `s3-mounts` stack (`rayito mounts policy`): [`S3MountsPolicy`]
//! says which bucket, prefixes and access; [`S3MountsPolicies`] deploys,
//! reads and deletes its stack. The stack's output `PolicyArn` is the
//! managed policy to attach to the execution role of sandboxes that mount
//! the bucket (docs/aws.md, "S3 mounts: the s3-mounts stack").
//!
//! ```no_run
//! # async fn demo() -> Result<(), rayito::SandboxError> {
//! use rayito::stacks::S3MountsPolicy;
//! let client = rayito::Client::builder().build().await?;
//! let policy = S3MountsPolicy::new("my-datasets").prefix("team7/").read_only(true);
//! let deployed = policy.deploy(&client).await?;
//! println!("attach {:?} to the execution role", deployed.stack.policy_arn);
//! # Ok(())
//! # }
//! ```

use super::s3_mounts_template::{MAX_PREFIXES, S3_MOUNTS_OUTPUT, S3_MOUNTS_STACK, template_value};
use super::{StackOptions, stacks};
use crate::Client;
use crate::aws::cloudformation::{IamCapability, StackInput, Stacks, UpdateStarted};
use crate::error::SandboxError;
use crate::setup::{StepAction, failed, is_blocked, wait_stack};

/// The most characters of one prefix (S3 keys are at most 1,024 bytes).
const MAX_PREFIX_CHARS: usize = 1024;

/// Which bucket, key prefixes and access one `s3-mounts` stack grants.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3MountsPolicy {
    /// The one bucket granted.
    pub bucket: String,
    /// Key prefixes (at most 4; none: the whole bucket). A prefix not
    /// ending in `*` has it appended (`runs/42/` grants `runs/42/*`),
    /// since a mount reads a subtree, never one key.
    pub prefixes: Vec<String>,
    /// Reads only (default); `false` also grants writes and deletes.
    pub read_only: bool,
    /// The stack's name (default `rayito-s3-mounts`; one stack per bucket).
    pub stack_name: String,
}

impl S3MountsPolicy {
    /// A read-only policy for all of `bucket`, in the stack
    /// `rayito-s3-mounts`.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefixes: Vec::new(),
            read_only: true,
            stack_name: S3_MOUNTS_STACK.to_owned(),
        }
    }

    /// Grants the key prefix `prefix` too (at most 4).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Reads only (`true`, the default), or reads, writes and deletes.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The stack's name (another bucket needs another stack).
    #[must_use]
    pub fn stack_name(mut self, name: impl Into<String>) -> Self {
        self.stack_name = name.into();
        self
    }

    /// The prefixes as the stack's `Prefixes` takes them: `*` appended
    /// where missing, `*` alone when there are none.
    ///
    /// # Errors
    /// `InvalidArgument` (`bucket`, `prefixes`, `stack_name`) for a value
    /// the stack would refuse or misread.
    pub fn stack_prefixes(&self) -> Result<Vec<String>, SandboxError> {
        self.check()?;
        if self.prefixes.is_empty() {
            return Ok(vec!["*".to_owned()]);
        }
        Ok(self
            .prefixes
            .iter()
            .map(|p| {
                if p.ends_with('*') {
                    p.clone()
                } else {
                    format!("{p}*")
                }
            })
            .collect())
    }

    fn check(&self) -> Result<(), SandboxError> {
        check_stack_name(&self.stack_name)?;
        let b = self.bucket.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        if !(3..=63).contains(&b.len())
            || !b.first().is_some_and(edge)
            || !b.last().is_some_and(edge)
            || !b.iter().all(|c| edge(c) || *c == b'.' || *c == b'-')
        {
            return Err(SandboxError::invalid_argument(
                "bucket",
                "is not a bucket name: 3 to 63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
            ));
        }
        if self.prefixes.len() > MAX_PREFIXES {
            return Err(SandboxError::invalid_argument(
                "prefixes",
                "an s3-mounts stack grants at most 4 prefixes; deploy another stack (another stack name) for the others",
            ));
        }
        for (i, prefix) in self.prefixes.iter().enumerate() {
            if prefix.is_empty() || prefix.chars().count() > MAX_PREFIX_CHARS {
                return Err(SandboxError::invalid_argument(
                    "prefixes",
                    "a prefix is 1 to 1,024 characters; leave the prefixes out to grant the whole bucket",
                ));
            }
            if prefix.starts_with('/') {
                return Err(SandboxError::invalid_argument(
                    "prefixes",
                    "a prefix is relative to the bucket, without a leading '/'; drop it",
                ));
            }
            if prefix.contains(',') || prefix.chars().any(char::is_control) {
                return Err(SandboxError::invalid_argument(
                    "prefixes",
                    "a prefix has no ',' (the stack's list separator) and no control character; rename the prefix",
                ));
            }
            if self.prefixes[..i].contains(prefix) {
                return Err(SandboxError::invalid_argument(
                    "prefixes",
                    "a prefix is listed twice; list each prefix once",
                ));
            }
        }
        Ok(())
    }
}

/// Checks a stack name as CloudFormation takes one: a letter, then up to
/// 127 letters, digits and `-`.
fn check_stack_name(name: &str) -> Result<(), SandboxError> {
    let ok = name.len() <= 128
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "stack_name",
            "is not a stack name: a letter, then up to 127 letters, digits and '-'",
        ))
    }
}

/// An `s3-mounts` stack as CloudFormation shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3MountsStack {
    /// Its name.
    pub stack_name: String,
    /// `CREATE_COMPLETE`, `UPDATE_COMPLETE`, `ROLLBACK_COMPLETE`, ...
    pub status: String,
    /// The bucket it grants (its `BucketName`).
    pub bucket: Option<String>,
    /// The prefixes it grants (its `Prefixes`).
    pub prefixes: Vec<String>,
    /// Whether it grants reads only (its `ReadOnly`).
    pub read_only: Option<bool>,
    /// The managed policy's ARN (its output `PolicyArn`), to attach to the
    /// execution role.
    pub policy_arn: Option<String>,
}

/// What [`S3MountsPolicies::deploy`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3MountsDeployed {
    /// `create`, `update`, or `exists` when nothing changed.
    pub action: StepAction,
    /// The stack, settled.
    pub stack: S3MountsStack,
}

/// The `s3-mounts` stacks of one [`Client`]'s account and region. Made
/// with [`Client::s3_mounts_policies`]; cheap to clone.
#[derive(Clone, Debug)]
pub struct S3MountsPolicies {
    client: Client,
    options: StackOptions,
}

impl Client {
    /// The `s3-mounts` stacks of this client's account and region (feature
    /// `setup`).
    pub fn s3_mounts_policies(&self, options: StackOptions) -> S3MountsPolicies {
        S3MountsPolicies {
            client: self.clone(),
            options,
        }
    }
}

impl S3MountsPolicy {
    /// Deploys this policy's stack with the default [`StackOptions`]:
    /// [`S3MountsPolicies::deploy`].
    ///
    /// # Errors
    /// As [`S3MountsPolicies::deploy`].
    pub async fn deploy(&self, client: &Client) -> Result<S3MountsDeployed, SandboxError> {
        client
            .s3_mounts_policies(StackOptions::default())
            .deploy(self)
            .await
    }
}

/// A `CommaDelimitedList` parameter's items. CloudFormation echoes the
/// text it was given (`a/*,b/*`); moto echoes a Python list
/// (`['a/*', 'b/*']`), read too.
fn list_parameter(value: &str) -> Vec<String> {
    let inner = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .unwrap_or(value);
    inner
        .split(',')
        .map(|item| {
            let item = item.trim_matches(' ');
            let quoted = item.len() >= 2 && item.starts_with('\'') && item.ends_with('\'');
            if quoted && inner.len() != value.len() {
                item[1..item.len() - 1].to_owned()
            } else {
                item.to_owned()
            }
        })
        .collect()
}

/// The stack's view from DescribeStacks' parameters and outputs.
fn view(name: &str, state: crate::aws::cloudformation::StackState) -> S3MountsStack {
    S3MountsStack {
        stack_name: name.to_owned(),
        bucket: state.parameters.get("BucketName").cloned(),
        prefixes: state
            .parameters
            .get("Prefixes")
            .map(|p| list_parameter(p))
            .unwrap_or_default(),
        read_only: state.parameters.get("ReadOnly").map(|r| r != "false"),
        policy_arn: state.outputs.get(S3_MOUNTS_OUTPUT).cloned(),
        status: state.status,
    }
}

impl S3MountsPolicies {
    async fn stacks(&self) -> Result<Stacks, SandboxError> {
        stacks(&self.client, &self.options).await
    }

    /// Creates `policy`'s stack, or updates it when it is deployed with
    /// other prefixes or access (or another template), and waits until it
    /// settles; a stack that already grants exactly this is left alone. A stack of
    /// that name granting another bucket is left alone (one stack per
    /// bucket: updating it would take the grant from that bucket's
    /// sandboxes).
    ///
    /// # Errors
    /// `InvalidArgument` for the policy's values, or (`bucket`) when the
    /// stack grants another bucket; `Stack { blocked }` / `Stack {
    /// in_progress }` for a stack that cannot be updated now; `Stack {
    /// failed }` naming the first failed resource; CloudFormation failures.
    pub async fn deploy(&self, policy: &S3MountsPolicy) -> Result<S3MountsDeployed, SandboxError> {
        boxed!(Result<S3MountsDeployed, SandboxError>, {
            let prefixes = policy.stack_prefixes()?;
            let name = policy.stack_name.as_str();
            let stacks = self.stacks().await?;
            let body = serde_json::to_string_pretty(&template_value()).unwrap_or_default();
            let parameters = [
                ("BucketName", policy.bucket.clone()),
                ("Prefixes", prefixes.join(",")),
                ("ReadOnly", policy.read_only.to_string()),
            ];
            let input = StackInput {
                parameters: &parameters,
                capability: IamCapability::Iam,
                tags: &[],
            };
            let action = match stacks.describe(name).await? {
                None => {
                    stacks.create_with(name, &body, &input).await?;
                    StepAction::Create
                }
                Some(state) => {
                    if state.status.ends_with("_IN_PROGRESS") {
                        return Err(SandboxError::stack_in_progress(name, &state.status));
                    }
                    if is_blocked(&state.status) {
                        return Err(SandboxError::stack_blocked(name, &state.status));
                    }
                    let deployed = view(name, state);
                    if deployed.bucket.as_deref().is_some_and(|b| b != policy.bucket) {
                        return Err(SandboxError::invalid_argument(
                            "bucket",
                            format!(
                                "the stack {name} grants another bucket (one stack per bucket); deploy this bucket under its own stack name"
                            ),
                        ));
                    }
                    let same = deployed.bucket.as_deref() == Some(policy.bucket.as_str())
                        && deployed.prefixes == prefixes
                        && deployed.read_only == Some(policy.read_only)
                        && stacks.template(name).await? == Some(template_value());
                    if same {
                        StepAction::Exists
                    } else {
                        match stacks.update_with(name, &body, &input).await? {
                            UpdateStarted::NothingToDo => StepAction::Exists,
                            UpdateStarted::Started => StepAction::Update,
                        }
                    }
                }
            };
            if action != StepAction::Exists {
                wait_stack(&stacks, name, self.options.timeout, self.options.poll_interval).await?;
            }
            let state = stacks
                .describe(name)
                .await?
                .ok_or_else(|| SandboxError::stack_not_found(name))?;
            let stack = view(name, state);
            if stack.policy_arn.is_none() {
                return Err(SandboxError::stack_output_missing(name, S3_MOUNTS_OUTPUT));
            }
            Ok(S3MountsDeployed { action, stack })
        })
    }

    /// The stack `name` (`None` when it does not exist).
    ///
    /// # Errors
    /// `InvalidArgument` (`stack_name`) for a name CloudFormation would
    /// refuse; CloudFormation failures.
    pub async fn status(&self, name: &str) -> Result<Option<S3MountsStack>, SandboxError> {
        boxed!(Result<Option<S3MountsStack>, SandboxError>, {
            check_stack_name(name)?;
            let stacks = self.stacks().await?;
            Ok(stacks.describe(name).await?.map(|state| view(name, state)))
        })
    }

    /// Deletes the stack `name` (its policy; no bucket or object is
    /// touched) and waits until it is gone: `false` when there was none.
    /// Delete fails while the policy is attached to a role: detach it
    /// first.
    ///
    /// # Errors
    /// `InvalidArgument` (`stack_name`); `Stack { failed }` naming the
    /// resource that could not be deleted; `Stack { in_progress }` past
    /// the timeout; CloudFormation failures.
    pub async fn destroy(&self, name: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            check_stack_name(name)?;
            let stacks = self.stacks().await?;
            match stacks.describe(name).await? {
                None => return Ok(false),
                Some(state) if state.status == "DELETE_COMPLETE" => return Ok(false),
                Some(_) => {}
            }
            stacks.delete(name).await?;
            let by = tokio::time::Instant::now() + self.options.timeout;
            loop {
                let Some(state) = stacks.describe(name).await? else {
                    return Ok(true);
                };
                match state.status.as_str() {
                    "DELETE_COMPLETE" => return Ok(true),
                    "DELETE_FAILED" => return Err(failed(&stacks, name, &state.status).await),
                    status if tokio::time::Instant::now() >= by => {
                        return Err(SandboxError::stack_in_progress(name, status));
                    }
                    _ => {}
                }
                tokio::time::sleep(self.options.poll_interval).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(policy: &S3MountsPolicy) -> String {
        policy.stack_prefixes().unwrap_err().to_string()
    }

    #[test]
    fn prefixes_get_their_star_and_every_refusal_names_its_argument() {
        let p = S3MountsPolicy::new("data.set-1");
        assert_eq!(p.stack_prefixes().unwrap(), ["*"]);
        let p = p.prefix("team7/").prefix("runs/*");
        assert_eq!(p.stack_prefixes().unwrap(), ["team7/*", "runs/*"]);
        assert!(p.read_only);
        assert_eq!(p.stack_name, "rayito-s3-mounts");

        for bucket in ["ab", "Data", "-data", "data-", "da_ta", &"a".repeat(64)] {
            assert_eq!(
                refusal(&S3MountsPolicy::new(bucket)),
                "invalid bucket: is not a bucket name: 3 to 63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
                "{bucket}"
            );
        }
        let five = (0..5).fold(S3MountsPolicy::new("data"), |p, i| {
            p.prefix(format!("p{i}/"))
        });
        assert_eq!(
            refusal(&five),
            "invalid prefixes: an s3-mounts stack grants at most 4 prefixes; deploy another stack (another stack name) for the others"
        );
        assert_eq!(
            refusal(&S3MountsPolicy::new("data").prefix("/abs")),
            "invalid prefixes: a prefix is relative to the bucket, without a leading '/'; drop it"
        );
        assert_eq!(
            refusal(&S3MountsPolicy::new("data").prefix("a,b")),
            "invalid prefixes: a prefix has no ',' (the stack's list separator) and no control character; rename the prefix"
        );
        assert_eq!(
            refusal(&S3MountsPolicy::new("data").prefix("")),
            "invalid prefixes: a prefix is 1 to 1,024 characters; leave the prefixes out to grant the whole bucket"
        );
        assert_eq!(
            refusal(&S3MountsPolicy::new("data").prefix("a/").prefix("a/")),
            "invalid prefixes: a prefix is listed twice; list each prefix once"
        );
        assert_eq!(
            refusal(&S3MountsPolicy::new("data").stack_name("9lives")),
            "invalid stack_name: is not a stack name: a letter, then up to 127 letters, digits and '-'"
        );
    }

    #[test]
    fn a_list_parameter_reads_as_cloudformation_and_moto_echo_it() {
        assert_eq!(list_parameter("team7/*,runs/*"), ["team7/*", "runs/*"]);
        assert_eq!(
            list_parameter("['team7/*', 'runs/*']"),
            ["team7/*", "runs/*"]
        );
        assert_eq!(list_parameter("*"), ["*"]);
    }

    #[test]
    fn stack_errors_name_the_mounts_policy_command_not_setup() {
        assert_eq!(
            SandboxError::stack_blocked("rayito-s3-mounts", "ROLLBACK_COMPLETE").to_string(),
            "stack rayito-s3-mounts is ROLLBACK_COMPLETE and cannot be updated; delete the stack, then run rayito mounts policy deploy again"
        );
        assert_eq!(
            SandboxError::stack_not_found("rayito-s3-mounts-two").to_string(),
            "stack rayito-s3-mounts-two does not exist in this account and region; create it with rayito mounts policy deploy"
        );
        assert_eq!(
            SandboxError::stack_failed("my-stack", "X", "CREATE_FAILED").to_string(),
            "stack my-stack failed: resource X ended CREATE_FAILED; read the stack's events in CloudFormation, fix the cause, then deploy it again"
        );
    }
}
