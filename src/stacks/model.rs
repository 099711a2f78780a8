//! What an optional stack is, as plain data: a component of the catalog
//! ([`StackComponent`] with its [`StackParameter`]s, [`StackArtifact`]s and
//! [`CostStatement`]), what reading one gives ([`StackStatus`]) and what a
//! deploy would change ([`ParameterChange`], [`UpdateOutcome`]). Nothing here
//! calls AWS.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::SandboxError;

/// One parameter of a component's template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StackParameter {
    /// The template's parameter name (`TableName`).
    pub name: &'static str,
    /// What it sets.
    pub description: &'static str,
    /// A deploy that creates the stack refuses to go without it.
    pub required: bool,
    /// The value a create takes when the caller gives none.
    pub default: Option<&'static str>,
    /// CloudFormation masks it (`NoEcho`): a status shows `****`.
    pub no_echo: bool,
}

/// A file (a Lambda function's zip) a deploy uploads to the artifact
/// bucket before the stack, under `rayito/stacks/<component>/<sha256>.zip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StackArtifact {
    /// What it is (`functions`).
    pub name: &'static str,
    /// The parameter the uploaded key is passed in (`ArtifactS3Key`).
    pub parameter_key: &'static str,
    /// The parameter the artifact bucket is passed in, filled by the
    /// deploy (`ArtifactBucket`); a different value given for it is
    /// refused.
    pub bucket_parameter_key: Option<&'static str>,
}

/// What a component costs and leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CostStatement {
    /// The resources the stack creates.
    pub creates: &'static [&'static str],
    /// What it costs idle, per month.
    pub idle_monthly: &'static str,
    /// What each use costs (empty when nothing).
    pub per_use: &'static [&'static str],
    /// What a destroy deletes or keeps.
    pub removal: &'static str,
    /// Where the figures come from, with a date.
    pub source: &'static str,
}

/// A check across a component's effective parameters that the template
/// cannot express (CloudFormation compares no numbers); runs before any
/// AWS call.
pub(crate) type Validate = fn(&BTreeMap<String, String>) -> Result<(), SandboxError>;

/// A template written from a deploy's effective parameters (efs-volumes:
/// the volumes' generator, which takes values, not CloudFormation
/// parameters); runs before any AWS call.
pub(crate) type Render = fn(&BTreeMap<String, String>) -> Result<String, SandboxError>;

/// One optional stack of the catalog ([`components`](super::components)).
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct StackComponent {
    /// Its name (`metadata-index`).
    pub name: &'static str,
    /// What it deploys, for whom.
    pub description: &'static str,
    /// What it costs.
    pub cost: CostStatement,
    /// The template's parameters.
    pub parameters: &'static [StackParameter],
    /// The files a deploy uploads first.
    pub artifacts: &'static [StackArtifact],
    /// The capabilities CloudFormation needs acknowledged
    /// (`CAPABILITY_IAM`, `CAPABILITY_NAMED_IAM`), none for a stack
    /// without IAM resources.
    pub capabilities: &'static [&'static str],
    /// Whether `OptionalStacks` deploys it; a component that is not
    /// supported is listed with the reason its deploy returns.
    pub supported: bool,
    /// Why it is not supported (what deploys it instead, or what is
    /// missing), `None` when it is.
    pub unsupported_reason: Option<&'static str>,
    #[serde(skip)]
    pub(crate) template: Option<fn() -> String>,
    #[serde(skip)]
    pub(crate) validate: Option<Validate>,
    /// Set for a component whose template is written from the parameters
    /// (then `template` is `None` and the stack has no CloudFormation
    /// parameter).
    #[serde(skip)]
    pub(crate) render: Option<Render>,
}

impl StackComponent {
    /// The stack's name when the caller names none: `rayito-<name>`.
    pub fn default_stack_name(&self) -> String {
        format!("rayito-{}", self.name)
    }

    /// The template's JSON body, `None` for a component that is not
    /// supported or whose template is written from the parameters (see
    /// [`template_for`](Self::template_for)).
    pub fn template(&self) -> Option<String> {
        self.template.map(|t| t())
    }

    /// The template a deploy with `parameters` (the defaults filled in)
    /// sends: the fixed template, or the one written from them
    /// (efs-volumes); `None` for a component that is not supported.
    ///
    /// # Errors
    /// `InvalidArgument` when the parameters cannot make a template.
    pub fn template_for(
        &self,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Option<String>, SandboxError> {
        match self.render {
            Some(render) => render(parameters).map(Some),
            None => Ok(self.template()),
        }
    }

    /// Whether its template is written from the parameters (its stack has
    /// no CloudFormation parameter: an update repeats the required ones).
    pub fn renders_from_parameters(&self) -> bool {
        self.render.is_some()
    }

    /// The parameter called `name`.
    pub fn parameter(&self, name: &str) -> Option<&'static StackParameter> {
        self.parameters.iter().find(|p| p.name == name)
    }

    /// Whether its template has named IAM resources.
    pub(crate) fn named_iam(&self) -> bool {
        self.capabilities.contains(&"CAPABILITY_NAMED_IAM")
    }
}

/// A stack as DescribeStacks shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StackStatus {
    /// The stack's name.
    pub name: String,
    /// `CREATE_COMPLETE`, `UPDATE_IN_PROGRESS`, `ROLLBACK_COMPLETE`, ...
    pub state: String,
    /// Its outputs, key to value.
    pub outputs: BTreeMap<String, String>,
    /// CloudFormation's reason for the state, when it gives one.
    pub reason_code: Option<String>,
    /// The values it is deployed with (`NoEcho` ones as `****`).
    pub parameters: BTreeMap<String, String>,
    /// Its tags, the fixed ones included (`rayito:sdk-version` is the
    /// version of the SDK that deployed it last).
    pub tags: BTreeMap<String, String>,
}

/// A parameter whose value a deploy would change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ParameterChange {
    /// The parameter.
    pub name: String,
    /// Its deployed value, `None` when the stack does not exist or lacks it.
    pub before: Option<String>,
    /// The value the deploy sends.
    pub after: String,
}

/// What CloudFormation said of an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpdateOutcome {
    /// The stack was updated.
    Changed,
    /// "No updates are to be performed": nothing differed.
    NoChanges,
}

impl UpdateOutcome {
    /// `changed` or `no_changes`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Changed => "changed",
            Self::NoChanges => "no_changes",
        }
    }
}

/// What [`OptionalStacks::deploy`](super::OptionalStacks::deploy) did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StackDeployed {
    /// The stack after the deploy (settled when the deploy waited).
    pub status: StackStatus,
    /// `None` when the stack was created; what the update did otherwise.
    pub outcome: Option<UpdateOutcome>,
}
