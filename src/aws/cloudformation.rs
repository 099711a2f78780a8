//! CloudFormation stacks (features `setup` and `efs`): the few calls
//! `rayito setup`, `rayito doctor` and `EfsVolumes` make, as plain data. CloudFormation's texts (status
//! reasons, error messages) never leave this module: failures carry the
//! operation, the error code, a resource's logical id and its status.

use crate::quiet::Quiet as _;
use std::collections::BTreeMap;

use aws_sdk_cloudformation as cfn;
use aws_sdk_cloudformation::types::Capability;

use crate::aws::failure::{OperationError, SdkFailure, extract, map_sdk_error};
use crate::error::SandboxError;
use crate::error::map::aws::AwsFailure;

/// The most events read while looking for the failed resource (the newest
/// first; one operation of a small stack writes a few dozen).
const MAX_EVENT_PAGES: usize = 5;

/// A stack as DescribeStacks shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StackState {
    /// `CREATE_COMPLETE`, `UPDATE_IN_PROGRESS`, `ROLLBACK_COMPLETE`, ...
    pub(crate) status: String,
    /// The stack's outputs, key to value.
    pub(crate) outputs: BTreeMap<String, String>,
    /// The stack's parameters, key to value (`NoEcho` ones as `****`).
    pub(crate) parameters: BTreeMap<String, String>,
    /// The stack's tags, key to value.
    pub(crate) tags: BTreeMap<String, String>,
    /// Why the stack is in its status, as a short code-like text of
    /// CloudFormation's (kept only for `OptionalStacks`' status view,
    /// never put in an error).
    pub(crate) reason: Option<String>,
}

/// The IAM capability a stack's template needs acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IamCapability {
    /// IAM resources CloudFormation names (`CAPABILITY_IAM`).
    Iam,
    /// IAM resources with names of ours (`CAPABILITY_NAMED_IAM`).
    NamedIam,
}

impl IamCapability {
    fn of(self) -> Capability {
        match self {
            Self::Iam => Capability::CapabilityIam,
            Self::NamedIam => Capability::CapabilityNamedIam,
        }
    }
}

/// What a CreateStack or UpdateStack sends beside the template.
#[derive(Clone, Debug)]
pub(crate) struct StackInput<'a> {
    /// The template's parameters, key to value.
    pub(crate) parameters: &'a [(&'a str, String)],
    /// The capability its IAM resources need.
    pub(crate) capability: IamCapability,
    /// Tags for the stack (CloudFormation puts them on every resource
    /// that takes tags), key to value.
    pub(crate) tags: &'a [(String, String)],
}

impl StackInput<'_> {
    /// Setup's stacks: no parameter, named IAM resources.
    const SETUP: StackInput<'static> = StackInput {
        parameters: &[],
        capability: IamCapability::NamedIam,
        tags: &[],
    };

    fn tags(&self) -> Option<Vec<cfn::types::Tag>> {
        (!self.tags.is_empty()).then(|| {
            self.tags
                .iter()
                .map(|(k, v)| cfn::types::Tag::builder().key(k).value(v).build())
                .collect()
        })
    }

    fn parameters(&self) -> Option<Vec<cfn::types::Parameter>> {
        self.parameters_keeping(&[])
    }

    /// The parameters, plus `keep` sent as `UsePreviousValue` (an update
    /// keeps the deployed value of a parameter the caller left out).
    fn parameters_keeping(&self, keep: &[String]) -> Option<Vec<cfn::types::Parameter>> {
        let given = self.parameters.iter().map(|(k, v)| {
            cfn::types::Parameter::builder()
                .parameter_key(*k)
                .parameter_value(v)
                .build()
        });
        let kept = keep.iter().map(|k| {
            cfn::types::Parameter::builder()
                .parameter_key(k)
                .use_previous_value(true)
                .build()
        });
        let all: Vec<_> = given.chain(kept).collect();
        (!all.is_empty()).then_some(all)
    }
}

/// How an UpdateStack ended at the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpdateStarted {
    /// An update is running: wait for it.
    Started,
    /// CloudFormation found nothing to change.
    NothingToDo,
}

/// The CloudFormation client of one setup.
#[derive(Debug)]
pub(crate) struct Stacks {
    client: cfn::Client,
}

impl Stacks {
    /// The client over `config`; `endpoint` overrides CloudFormation's.
    pub(crate) fn new(config: &aws_types::SdkConfig, endpoint: Option<&str>) -> Self {
        let mut builder = cfn::config::Builder::from(config);
        if let Some(endpoint) = endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Self {
            client: cfn::Client::from_conf(builder.build()),
        }
    }

    /// The stack called `name`, `None` when it does not exist.
    ///
    /// # Errors
    /// DescribeStacks failed for another reason (mapped).
    pub(crate) async fn describe(&self, name: &str) -> Result<Option<StackState>, SandboxError> {
        let out = match self
            .client
            .describe_stacks()
            .stack_name(name)
            .send()
            .quiet()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let absent = validation_says(&extract("DescribeStacks", &e), "does not exist");
                return if absent {
                    Ok(None)
                } else {
                    Err(map_sdk_error("DescribeStacks", &e))
                };
            }
        };
        let Some(stack) = out.stacks().first() else {
            return Ok(None);
        };
        let outputs = stack
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect();
        let parameters = stack
            .parameters()
            .iter()
            .filter_map(|p| {
                Some((
                    p.parameter_key()?.to_owned(),
                    p.parameter_value()?.to_owned(),
                ))
            })
            .collect();
        let tags = stack
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
            .collect();
        Ok(Some(StackState {
            tags,
            reason: stack.stack_status_reason().map(str::to_owned),
            status: stack
                .stack_status()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            outputs,
            parameters,
        }))
    }

    /// The deployed template's body, parsed as JSON (`None` when it is not
    /// JSON, e.g. a YAML template someone deployed by hand).
    ///
    /// # Errors
    /// GetTemplate failed (mapped).
    #[cfg(feature = "setup")]
    pub(crate) async fn template(
        &self,
        name: &str,
    ) -> Result<Option<serde_json::Value>, SandboxError> {
        let out = self
            .client
            .get_template()
            .stack_name(name)
            .send()
            .quiet()
            .await
            .map_err(|e| map_sdk_error("GetTemplate", &e))?;
        Ok(out
            .template_body()
            .and_then(|body| serde_json::from_str(body).ok()))
    }

    /// CreateStack with `body`, allowing named IAM resources.
    ///
    /// # Errors
    /// `Stack { failed }` when CloudFormation refused it (its error code
    /// kept); other failures mapped.
    #[cfg_attr(not(feature = "setup"), allow(dead_code))] // efs sends its tags
    pub(crate) async fn create(&self, name: &str, body: &str) -> Result<(), SandboxError> {
        self.create_with(name, body, &StackInput::SETUP).await
    }

    /// CreateStack with `body` and `input`'s parameters and capability.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub(crate) async fn create_with(
        &self,
        name: &str,
        body: &str,
        input: &StackInput<'_>,
    ) -> Result<(), SandboxError> {
        self.client
            .create_stack()
            .stack_name(name)
            .template_body(body)
            .set_parameters(input.parameters())
            .set_tags(input.tags())
            .capabilities(input.capability.of())
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| refused(name, "CreateStack", &e))
    }

    /// UpdateStack with `body`. "No updates are to be performed" is
    /// [`UpdateStarted::NothingToDo`], not an error.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    #[cfg_attr(not(feature = "setup"), allow(dead_code))] // efs sends its tags
    pub(crate) async fn update(
        &self,
        name: &str,
        body: &str,
    ) -> Result<UpdateStarted, SandboxError> {
        self.update_with(name, body, &StackInput::SETUP).await
    }

    /// UpdateStack with `body` and `input`'s parameters and capability.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub(crate) async fn update_with(
        &self,
        name: &str,
        body: &str,
        input: &StackInput<'_>,
    ) -> Result<UpdateStarted, SandboxError> {
        self.update_keeping(name, body, input, &[]).await
    }

    /// As [`update_with`](Self::update_with), with `keep` sent as
    /// `UsePreviousValue` parameters.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub(crate) async fn update_keeping(
        &self,
        name: &str,
        body: &str,
        input: &StackInput<'_>,
        keep: &[String],
    ) -> Result<UpdateStarted, SandboxError> {
        match self
            .client
            .update_stack()
            .stack_name(name)
            .template_body(body)
            .set_parameters(input.parameters_keeping(keep))
            .set_tags(input.tags())
            .capabilities(input.capability.of())
            .send()
            .quiet()
            .await
        {
            Ok(_) => Ok(UpdateStarted::Started),
            Err(e) => {
                let nothing = validation_says(
                    &extract("UpdateStack", &e),
                    "No updates are to be performed",
                );
                if nothing {
                    Ok(UpdateStarted::NothingToDo)
                } else {
                    Err(refused(name, "UpdateStack", &e))
                }
            }
        }
    }

    /// DeleteStack (CloudFormation deletes the stack's resources in the
    /// background; a stack that does not exist is no error).
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub(crate) async fn delete(&self, name: &str) -> Result<(), SandboxError> {
        self.client
            .delete_stack()
            .stack_name(name)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| refused(name, "DeleteStack", &e))
    }

    /// The first resource that failed in the stack's latest operation: its
    /// logical id and status (e.g. `BuildRole`, `CREATE_FAILED`).
    ///
    /// # Errors
    /// DescribeStackEvents failed (mapped).
    pub(crate) async fn first_failure(
        &self,
        name: &str,
    ) -> Result<Option<(String, String)>, SandboxError> {
        let mut first = None;
        let mut token: Option<String> = None;
        for _ in 0..MAX_EVENT_PAGES {
            let out = self
                .client
                .describe_stack_events()
                .stack_name(name)
                .set_next_token(token.take())
                .send()
                .quiet()
                .await
                .map_err(|e| map_sdk_error("DescribeStackEvents", &e))?;
            // Newest first: the operation began at the stack's own
            // *_IN_PROGRESS event; the last failure seen before it is the
            // first that happened.
            for event in out.stack_events() {
                let logical = event.logical_resource_id().unwrap_or_default();
                let status = event
                    .resource_status()
                    .map(|s| s.as_str())
                    .unwrap_or_default();
                let is_stack = logical == name;
                if is_stack
                    && matches!(
                        status,
                        "CREATE_IN_PROGRESS" | "UPDATE_IN_PROGRESS" | "DELETE_IN_PROGRESS"
                    )
                {
                    return Ok(first);
                }
                if !is_stack && status.ends_with("_FAILED") {
                    first = Some((logical.to_owned(), status.to_owned()));
                }
            }
            match out.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(first)
    }
}

/// A CreateStack / UpdateStack rejection: `Stack { failed }` with the
/// error code when CloudFormation answered, else the general mapping (no
/// response, throttling).
/// Whether CloudFormation's answer is a `ValidationError` saying `text`: it
/// says "does not exist" and "No updates are to be performed" only so. The
/// one place its text is read, and it is never kept.
fn validation_says(failure: &AwsFailure, text: &str) -> bool {
    failure.code.as_deref() == Some("ValidationError")
        && failure.message.as_deref().is_some_and(|m| m.contains(text))
}

fn refused<E: OperationError>(
    stack: &str,
    operation: &'static str,
    err: &SdkFailure<E>,
) -> SandboxError {
    let failure = extract(operation, err);
    match failure.code.as_deref() {
        Some(code) if failure.no_response.is_none() && code != "Throttling" => {
            SandboxError::stack_refused(stack, operation, code)
        }
        _ => map_sdk_error(operation, err),
    }
}
