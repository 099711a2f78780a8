//! The deploy rules that need no AWS call: which component a name is,
//! which parameters a deploy sends (defaults only on create; on an update a
//! parameter left out keeps its deployed value through `UsePreviousValue`),
//! the artifact bucket's parameter, and the fixed tags. Every refusal is
//! made here, before any I/O.

use std::collections::BTreeMap;

use super::catalog::COMPONENTS;
use super::model::{ParameterChange, StackComponent, StackStatus};
use crate::error::SandboxError;

/// The tag naming the component a stack deploys.
pub const COMPONENT_TAG: &str = "rayito:component";
/// The tag saying which tool manages the stack.
pub const MANAGED_BY_TAG: &str = "rayito:managed-by";
/// Its value.
pub const MANAGED_BY: &str = "rayito-sdk";
/// The tag with the version of the SDK that deployed the stack last.
pub const SDK_VERSION_TAG: &str = "rayito:sdk-version";
/// The status CloudFormation cannot update a stack from.
pub(crate) const ROLLBACK_COMPLETE: &str = "ROLLBACK_COMPLETE";

/// The component called `name`.
///
/// # Errors
/// `InvalidArgument` (`component`) naming the components there are.
pub(crate) fn component(name: &str) -> Result<&'static StackComponent, SandboxError> {
    COMPONENTS.iter().find(|c| c.name == name).ok_or_else(|| {
        let mut names: Vec<&str> = COMPONENTS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        SandboxError::invalid_argument(
            "component",
            format!(
                "no component is called {}; pass one of {}",
                quoted(name),
                names.join(", ")
            ),
        )
    })
}

/// A caller's name, cut and quoted for a message (it may be anything).
fn quoted(name: &str) -> String {
    let cut: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    format!("'{cut}'")
}

/// Refuses a component `OptionalStacks` does not deploy, with its reason.
///
/// # Errors
/// `Unimplemented`.
pub(crate) fn require_supported(
    component: &StackComponent,
    operation: &str,
) -> Result<(), SandboxError> {
    if component.supported {
        return Ok(());
    }
    Err(SandboxError::unimplemented(
        format!("rayito stack {operation} {}", component.name),
        component.unsupported_reason.unwrap_or("it has no template"),
        Some("docs/stacks.md"),
    ))
}

/// `given` with each artifact's bucket parameter set to `artifact_bucket`.
///
/// # Errors
/// `InvalidArgument` (`artifact_bucket`) when the component has artifacts
/// and no bucket was given; (`parameters`) when the bucket parameter was
/// given with another bucket.
pub(crate) fn with_artifact_bucket(
    component: &StackComponent,
    mut given: BTreeMap<String, String>,
    artifact_bucket: Option<&str>,
) -> Result<BTreeMap<String, String>, SandboxError> {
    if component.artifacts.is_empty() {
        return Ok(given);
    }
    let Some(bucket) = artifact_bucket.filter(|b| !b.is_empty()) else {
        return Err(SandboxError::invalid_argument(
            "artifact_bucket",
            format!(
                "{} uploads its Lambda code to an artifact bucket and none was given; pass the artifact bucket (rayito setup's)",
                component.name
            ),
        ));
    };
    for artifact in component.artifacts {
        let Some(key) = artifact.bucket_parameter_key else {
            continue;
        };
        if given.get(key).is_some_and(|v| v != bucket) {
            return Err(SandboxError::invalid_argument(
                "parameters",
                format!(
                    "{}: {key} must be the artifact bucket (the code is uploaded there); leave {key} out",
                    component.name
                ),
            ));
        }
        given.insert(key.to_owned(), bucket.to_owned());
    }
    Ok(given)
}

/// Refuses parameters the component's template does not have.
///
/// # Errors
/// `InvalidArgument` (`parameters`) naming them, sorted.
pub(crate) fn reject_unknown(
    component: &StackComponent,
    given: &BTreeMap<String, String>,
) -> Result<(), SandboxError> {
    let unknown: Vec<&str> = given
        .keys()
        .map(String::as_str)
        .filter(|k| component.parameter(k).is_none())
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let unknown: Vec<String> = unknown.iter().map(|k| quoted(k)).collect();
    Err(SandboxError::invalid_argument(
        "parameters",
        format!(
            "{} has no parameter {}; pass only its parameters (rayito stack list shows them)",
            component.name,
            unknown.join(", ")
        ),
    ))
}

/// The parameters a deploy sends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ParameterPlan {
    /// Sent with a value.
    pub(crate) values: BTreeMap<String, String>,
    /// Sent as `UsePreviousValue` (an update only).
    pub(crate) keep_previous: Vec<String>,
}

impl ParameterPlan {
    /// The values that differ from the deployed ones (kept ones never do).
    pub(crate) fn changes(&self, current: Option<&StackStatus>) -> Vec<ParameterChange> {
        let empty = BTreeMap::new();
        let before = current.map_or(&empty, |c| &c.parameters);
        self.values
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, v)| ParameterChange {
                name: k.clone(),
                before: before.get(k).cloned(),
                after: v.clone(),
            })
            .collect()
    }
}

/// The parameters of a deploy of `component` given `given` (known ones,
/// the artifact bucket filled) over `current` (the stack, `None` when
/// absent): defaults only when creating, or for a parameter the deployed
/// stack lacks; a parameter left out that the stack has keeps its value.
///
/// # Errors
/// `InvalidArgument` (`parameters`) for missing required ones (sorted);
/// the component's own cross-parameter check.
pub(crate) fn plan_parameters(
    component: &StackComponent,
    given: &BTreeMap<String, String>,
    current: Option<&StackStatus>,
) -> Result<ParameterPlan, SandboxError> {
    let previous = current.map(|c| &c.parameters);
    let mut plan = ParameterPlan {
        values: given.clone(),
        keep_previous: Vec::new(),
    };
    let mut missing = Vec::new();
    for parameter in component.parameters {
        if given.contains_key(parameter.name) {
            continue;
        }
        if previous.is_some_and(|p| p.contains_key(parameter.name)) {
            plan.keep_previous.push(parameter.name.to_owned());
        } else if let Some(default) = parameter.default {
            plan.values
                .insert(parameter.name.to_owned(), default.to_owned());
        } else if parameter.required {
            missing.push(parameter.name);
        }
    }
    if !missing.is_empty() {
        missing.sort_unstable();
        return Err(SandboxError::invalid_argument(
            "parameters",
            format!(
                "{} needs {}; pass each with --param KEY=VALUE",
                component.name,
                missing.join(", ")
            ),
        ));
    }
    if let Some(validate) = component.validate {
        let mut effective = plan.values.clone();
        if let Some(previous) = previous {
            for key in &plan.keep_previous {
                if let Some(v) = previous.get(key) {
                    effective.insert(key.clone(), v.clone());
                }
            }
        }
        validate(&effective)?;
    }
    plan.keep_previous.sort_unstable();
    Ok(plan)
}

/// The stack's tags: the caller's, then the three fixed ones, which win.
pub(crate) fn stack_tags(
    component: &StackComponent,
    user: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut tags = user.clone();
    tags.insert(COMPONENT_TAG.to_owned(), component.name.to_owned());
    tags.insert(MANAGED_BY_TAG.to_owned(), MANAGED_BY.to_owned());
    tags.insert(
        SDK_VERSION_TAG.to_owned(),
        env!("CARGO_PKG_VERSION").to_owned(),
    );
    tags.into_iter().collect()
}

/// The S3 key of an artifact: `rayito/stacks/<component>/<sha256>.zip`.
pub fn artifact_key(component: &str, sha256_hex: &str) -> String {
    format!("rayito/stacks/{component}/{sha256_hex}.zip")
}
