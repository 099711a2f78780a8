//! The IAM simulation of the SDK's actions (feature `permissions`): which
//! of the actions the SDK's calls need (per cargo feature, the list
//! docs/aws.md's table shows) the caller's policies allow, as IAM's policy
//! simulator answers, each denied one with the policies of `rayito
//! setup`'s IAM stack that grant it. `rayito doctor` reports it.
//!
//! The caller comes from STS's GetCallerIdentity: a user is simulated as
//! itself; an assumed role as its role (its ARN, path included, from
//! `iam:GetRole`, or else built without a path); the root user and a
//! federated user are not simulated. Then IAM's SimulatePrincipalPolicy,
//! one call (every page, bounded) per resource the actions act on: the
//! image, the artifact bucket and its `rayito/` objects, the `/rayito/`
//! log groups, the stacks; `*` for the rest. Advisory: the simulator
//! cannot see resource policies or every condition.
//!
//! Reads only, none billed; the caller needs `iam:SimulatePrincipalPolicy`
//! on itself (a refusal is an answer, [`SimulationOutcome::Denied`], not an
//! error) and, for a role, `iam:GetRole`.

use std::collections::BTreeMap;

use crate::aws::iam;
use crate::aws::iam_simulator::IamSimulator;
use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, from_aws};

/// The operation name of this module's errors.
const OPERATION: &str = "permissions";
/// The policies of `rayito setup`'s IAM stack a denied action may name, in
/// the order they are suggested.
const SETUP_POLICIES: [&str; 3] = [
    "SandboxLauncherPolicy",
    "CallerPolicy",
    "ImagePublisherPolicy",
];
/// The image actions that act on an image (simulated on its ARN).
const IMAGE_ACTIONS: [&str; 7] = [
    "lambda:CreateMicrovmImage",
    "lambda:UpdateMicrovmImage",
    "lambda:GetMicrovmImage",
    "lambda:GetMicrovmImageVersion",
    "lambda:ListMicrovmImageVersions",
    "lambda:UpdateMicrovmImageVersion",
    "lambda:DeleteMicrovmImageVersion",
];
/// The S3 actions on objects (simulated on the bucket's `rayito/` keys).
const OBJECT_ACTIONS: [&str; 4] = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
];
/// The image simulated when none is given.
const DEFAULT_IMAGE: &str = "rayito-base";

/// The cargo features whose AWS calls can be simulated, in the order of
/// docs/aws.md's table (`core`: every build).
pub fn features() -> Vec<&'static str> {
    iam::features()
}

/// What to simulate: the cargo features whose actions (default: `core`),
/// the image and the artifact bucket the actions act on.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SimulationQuery {
    features: Vec<String>,
    image: Option<String>,
    bucket: Option<String>,
    iam_endpoint_url: Option<String>,
}

// The bucket and the endpoint are never printed: only whether they are set.
crate::secret::redacted_debug! {
    non_exhaustive SimulationQuery |o|
        features,
        image = o.image.is_some(),
        bucket = o.bucket.is_some(),
        iam_endpoint_url = o.iam_endpoint_url.is_some()
}

impl SimulationQuery {
    /// The actions of `core` only, on the image `rayito-base`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also the actions of the cargo feature `name` (one of [`features`]).
    #[must_use]
    pub fn feature(mut self, name: impl Into<String>) -> Self {
        self.features.push(name.into());
        self
    }

    /// The image the image actions act on (an ARN, or a name of the
    /// caller's account and region); default `rayito-base`.
    #[must_use]
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// The artifact bucket the S3 actions act on (its `rayito/` keys and
    /// the bucket itself); without one, the S3 actions are not simulated
    /// (they would be on `*`, which a bucket-scoped grant never matches).
    #[must_use]
    pub fn bucket(mut self, bucket: impl Into<String>) -> Self {
        self.bucket = Some(bucket.into());
        self
    }

    /// IAM's endpoint (a VPC endpoint, a test's server); default the
    /// partition's own (`https://iam.amazonaws.com/` on `aws`).
    #[must_use]
    pub fn iam_endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.iam_endpoint_url = Some(url.into());
        self
    }
}

/// IAM's decision on one action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Decision {
    /// A policy allows it.
    Allowed,
    /// No policy allows it.
    ImplicitDeny,
    /// A policy (or a boundary) denies it: no allow can override that.
    ExplicitDeny,
}

impl Decision {
    /// IAM's spelling (`allowed`, `implicitDeny`, `explicitDeny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::ImplicitDeny => "implicitDeny",
            Self::ExplicitDeny => "explicitDeny",
        }
    }
}

/// One simulated action.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct SimulatedAction {
    /// The IAM action (`lambda:RunMicrovm`).
    pub action: String,
    /// The first of the asked cargo features that needs it.
    pub feature: &'static str,
    /// The resource it was simulated on (`*` for none).
    pub resource: String,
    /// IAM's decision.
    pub decision: Decision,
    /// An organization's service control policy does not allow it.
    pub denied_by_organizations: bool,
    /// The policies of `rayito setup`'s IAM stack (`rayito-m0-iam`) that
    /// grant it: `SandboxLauncherPolicy`, `CallerPolicy`,
    /// `ImagePublisherPolicy`; empty when none does.
    pub granted_by: Vec<&'static str>,
}

impl SimulatedAction {
    /// Allowed, and by the organizations too.
    pub fn allowed(&self) -> bool {
        self.decision == Decision::Allowed && !self.denied_by_organizations
    }
}

/// What the simulation found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SimulationOutcome {
    /// Simulated: every action of the asked features that could be.
    Simulated {
        /// The IAM ARN simulated (a user's, or an assumed role's role).
        policy_source_arn: String,
        /// Every action, in the order of the features and the actions.
        results: Vec<SimulatedAction>,
        /// The actions not simulated: the S3 ones when no bucket is known.
        skipped: Vec<String>,
        /// `false`: IAM still answered more pages after the bound.
        complete: bool,
    },
    /// The caller is the root user, a federated user or another
    /// principal the simulator does not take.
    NotSimulable {
        /// `root`, `federated-user` or `other`.
        principal_kind: String,
    },
    /// IAM refused the simulation itself: the caller lacks
    /// `iam:SimulatePrincipalPolicy` on itself.
    Denied,
}

/// The simulation of one caller.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Simulation {
    /// The caller's ARN, as STS answered it.
    pub caller_arn: String,
    /// The features whose actions were simulated.
    pub features: Vec<&'static str>,
    /// What IAM said.
    pub outcome: SimulationOutcome,
}

/// The IAM simulation of one client's credentials: get one from
/// [`Client::permissions`](crate::Client::permissions). Making it calls
/// nothing.
#[derive(Clone)]
pub struct Permissions {
    client: crate::Client,
}

crate::secret::redacted_debug!(non_exhaustive Permissions);

impl crate::Client {
    /// The IAM simulation of the SDK's actions for this client's
    /// credentials (feature `permissions`).
    pub fn permissions(&self) -> Permissions {
        Permissions {
            client: self.clone(),
        }
    }
}

/// `user`, `assumed-role`, `root`, `federated-user` or `other`, from the
/// resource part of an STS ARN.
fn principal_kind(arn: &str) -> &'static str {
    let resource = arn.splitn(6, ':').nth(5).unwrap_or(arn);
    match resource.split('/').next().unwrap_or_default() {
        "user" => "user",
        "assumed-role" => "assumed-role",
        "root" => "root",
        "federated-user" => "federated-user",
        _ => "other",
    }
}

impl Permissions {
    /// Simulates the actions `query` asks for with this client's
    /// credentials.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown feature; STS's failures mapped
    /// (`Authentication` without credentials); IAM's other failures mapped
    /// (a refused simulation is [`SimulationOutcome::Denied`], not an
    /// error); `Unimplemented` (`permissions`) for a client without an AWS
    /// configuration (an injected control plane).
    pub async fn simulate(&self, query: &SimulationQuery) -> Result<Simulation, SandboxError> {
        boxed!(Result<Simulation, SandboxError>, {
            let known = iam::features();
            let mut features: Vec<&'static str> = vec!["core"];
            for name in &query.features {
                let Some(feature) = known.iter().find(|f| **f == name.as_str()) else {
                    return Err(SandboxError::invalid_argument(
                        OPERATION,
                        format!(
                            "unknown cargo feature {name:?} (known: {})",
                            known.join(", ")
                        ),
                    ));
                };
                if !features.contains(feature) {
                    features.push(*feature);
                }
            }
            let backend = self.client.backend();
            let (Some(config), Some(region)) = (&backend.sdk_config, &backend.region) else {
                return Err(SandboxError::unimplemented(
                    OPERATION,
                    "the IAM simulation reads STS and IAM; this client has no AWS configuration",
                    Some("docs/doctor.md"),
                ));
            };
            let caller = crate::aws::sts::caller(config).await?;
            let kind = principal_kind(&caller.arn);
            let partition = caller.partition();
            let iam = IamSimulator::new(
                config,
                &partition,
                query.iam_endpoint_url.as_deref(),
                &backend.root_certificates,
            )?;
            let source = match kind {
                "user" => caller.arn.clone(),
                "assumed-role" => {
                    let role = caller.arn.split('/').nth(1).unwrap_or_default().to_owned();
                    // The session's ARN loses the role's path (SSO roles
                    // live under /aws-reserved/...): IAM knows it. Without
                    // iam:GetRole, the ARN of a role at `/`.
                    match iam.role_arn(&role).await {
                        Ok(arn) => arn,
                        Err(_) => format!("arn:{partition}:iam::{}:role/{role}", caller.account),
                    }
                }
                other => {
                    return Ok(Simulation {
                        caller_arn: caller.arn,
                        features,
                        outcome: SimulationOutcome::NotSimulable {
                            principal_kind: other.to_owned(),
                        },
                    });
                }
            };
            let scope = Scope {
                partition: &partition,
                region,
                account: &caller.account,
                image: query.image.as_deref(),
                bucket: query.bucket.as_deref(),
            };
            let (groups, order, skipped) = plan(&features, &scope);
            let mut decided: BTreeMap<(String, String), (String, Option<bool>)> = BTreeMap::new();
            let mut complete = true;
            for (resource, actions) in &groups {
                let resources: Vec<String> = if resource == "*" {
                    Vec::new()
                } else {
                    vec![resource.clone()]
                };
                match iam.simulate(&source, actions, &resources).await {
                    Ok((evaluations, done)) => {
                        complete &= done;
                        for e in evaluations {
                            decided.insert(
                                (e.action, resource.clone()),
                                (e.decision, e.allowed_by_organizations),
                            );
                        }
                    }
                    Err(failure) if access_denied(&failure) => {
                        return Ok(Simulation {
                            caller_arn: caller.arn,
                            features,
                            outcome: SimulationOutcome::Denied,
                        });
                    }
                    Err(failure) => return Err(from_aws(failure)),
                }
            }
            let granting = granting_policies();
            let results = order
                .into_iter()
                .map(|(action, feature, resource)| {
                    let (decision, organizations) = decided
                        .get(&(action.to_owned(), resource.clone()))
                        .cloned()
                        .unwrap_or_else(|| ("implicitDeny".to_owned(), None));
                    SimulatedAction {
                        action: action.to_owned(),
                        feature,
                        resource,
                        decision: match decision.as_str() {
                            "allowed" => Decision::Allowed,
                            "explicitDeny" => Decision::ExplicitDeny,
                            _ => Decision::ImplicitDeny,
                        },
                        denied_by_organizations: organizations == Some(false),
                        granted_by: granting
                            .iter()
                            .filter(|entry| entry.1.iter().any(|a| a.as_str() == action))
                            .map(|entry| entry.0)
                            .collect(),
                    }
                })
                .collect();
            Ok(Simulation {
                caller_arn: caller.arn,
                features,
                outcome: SimulationOutcome::Simulated {
                    policy_source_arn: source,
                    results,
                    skipped,
                    complete,
                },
            })
        })
    }
}

/// AccessDenied (IAM's Query spelling) or AccessDeniedException.
fn access_denied(failure: &AwsFailure) -> bool {
    matches!(
        failure.code.as_deref(),
        Some("AccessDenied" | "AccessDeniedException")
    )
}

/// Where the actions act.
struct Scope<'a> {
    partition: &'a str,
    region: &'a str,
    account: &'a str,
    image: Option<&'a str>,
    bucket: Option<&'a str>,
}

impl Scope<'_> {
    /// The resource `action` of `feature` is simulated on; `None`: not
    /// simulated (an S3 action without a bucket).
    fn resource(&self, feature: &str, action: &str) -> Option<String> {
        let (p, r, a) = (self.partition, self.region, self.account);
        if IMAGE_ACTIONS.contains(&action) {
            let image = self.image.unwrap_or(DEFAULT_IMAGE);
            return Some(if image.starts_with("arn:") {
                image.to_owned()
            } else {
                format!("arn:{p}:lambda:{r}:{a}:microvm-image:{image}")
            });
        }
        if OBJECT_ACTIONS.contains(&action) {
            return self.bucket.map(|b| format!("arn:{p}:s3:::{b}/rayito/*"));
        }
        if action == "s3:ListBucket" {
            return self.bucket.map(|b| format!("arn:{p}:s3:::{b}"));
        }
        if action.starts_with("logs:") {
            return Some(format!("arn:{p}:logs:{r}:{a}:log-group:/rayito/*"));
        }
        if action.starts_with("cloudformation:") {
            let stack = match feature {
                "efs" => "rayito-efs-volumes",
                _ => "rayito-m0-iam",
            };
            return Some(format!("arn:{p}:cloudformation:{r}:{a}:stack/{stack}/*"));
        }
        Some("*".to_owned())
    }
}

/// The simulation calls (resource, its actions), the order of the results
/// (action, feature, resource) and the skipped actions.
#[allow(clippy::type_complexity)]
fn plan(
    features: &[&'static str],
    scope: &Scope<'_>,
) -> (
    Vec<(String, Vec<&'static str>)>,
    Vec<(&'static str, &'static str, String)>,
    Vec<String>,
) {
    let mut groups: Vec<(String, Vec<&'static str>)> = Vec::new();
    let mut order: Vec<(&'static str, &'static str, String)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for feature in features {
        for action in iam::actions(feature) {
            let Some(resource) = scope.resource(feature, action) else {
                if !skipped.iter().any(|s| s == action) {
                    skipped.push(action.to_owned());
                }
                continue;
            };
            if order.iter().any(|(a, _, r)| *a == action && *r == resource) {
                continue;
            }
            match groups.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, actions)) => actions.push(action),
                None => groups.push((resource.clone(), vec![action])),
            }
            order.push((action, feature, resource));
        }
    }
    (groups, order, skipped)
}

/// The Allow actions of each policy of `rayito setup`'s IAM stack a
/// caller attaches.
fn granting_policies() -> Vec<(&'static str, Vec<String>)> {
    let documents: Vec<(&'static str, serde_json::Value)> = crate::setup::iam_policies("bucket")
        .into_iter()
        .filter_map(|(id, text)| serde_json::from_str(&text).ok().map(|doc| (id, doc)))
        .collect();
    SETUP_POLICIES
        .iter()
        .map(|name| {
            let mut actions = Vec::new();
            if let Some((_, doc)) = documents.iter().find(|(id, _)| id == name) {
                for statement in doc["Statement"].as_array().into_iter().flatten() {
                    if statement["Effect"] != "Allow" {
                        continue;
                    }
                    match &statement["Action"] {
                        serde_json::Value::String(a) => actions.push(a.clone()),
                        serde_json::Value::Array(list) => actions
                            .extend(list.iter().filter_map(|a| a.as_str().map(str::to_owned))),
                        _ => {}
                    }
                }
            }
            (*name, actions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_principal_kind_comes_from_the_arn() {
        assert_eq!(principal_kind("arn:aws:iam::123456789012:user/dev"), "user");
        assert_eq!(
            principal_kind("arn:aws:sts::123456789012:assumed-role/R/s"),
            "assumed-role"
        );
        assert_eq!(principal_kind("arn:aws:iam::123456789012:root"), "root");
        assert_eq!(
            principal_kind("arn:aws:sts::123456789012:federated-user/b"),
            "federated-user"
        );
    }

    #[test]
    fn every_action_has_its_resource_and_s3_waits_for_a_bucket() {
        let scope = Scope {
            partition: "aws",
            region: "us-east-1",
            account: "123456789012",
            image: None,
            bucket: None,
        };
        let (groups, order, skipped) = plan(&["core", "templates"], &scope);
        assert_eq!(skipped, ["s3:GetObject", "s3:PutObject"]);
        let run = order
            .iter()
            .find(|(a, ..)| *a == "lambda:RunMicrovm")
            .unwrap();
        assert_eq!((run.1, run.2.as_str()), ("core", "*"));
        let image = order
            .iter()
            .find(|(a, ..)| *a == "lambda:CreateMicrovmImage")
            .unwrap();
        assert_eq!(
            image.2,
            "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base"
        );
        assert_eq!(
            groups.iter().map(|(_, a)| a.len()).sum::<usize>(),
            order.len()
        );
    }

    #[test]
    fn the_setup_policies_grant_what_they_list() {
        let granting = granting_policies();
        let launcher = &granting[0];
        assert_eq!(launcher.0, "SandboxLauncherPolicy");
        assert!(launcher.1.iter().any(|a| a == "lambda:RunMicrovm"));
        let caller = &granting[1];
        assert!(
            caller
                .1
                .iter()
                .any(|a| a == "cloudformation:DescribeStacks")
        );
    }
}
