//! The doctor's IAM simulation: which of the SDK's actions the caller's
//! policies allow (`rayito::permissions`: STS's caller, then IAM's
//! SimulatePrincipalPolicy over the actions of the cargo features the
//! configuration uses), each denied one a line with the policy that grants
//! it. Advisory (the simulator sees no resource policy), so its own
//! verdict: the exit code does not change. A caller without
//! `iam:SimulatePrincipalPolicy` gets a line saying so, not a failure.
//! docs/doctor.md transcribes the lines; the tests below pin them.

use rayito::Client;
use rayito::permissions::{Decision, Simulation, SimulationOutcome, SimulationQuery};
use serde_json::Value;

use super::doctor::Check;

/// The simulation line's name.
pub(crate) const SIMULATION: &str = "iam:SimulatePrincipalPolicy of the SDK's actions";
/// A denied action's line name.
pub(crate) const DENIED: &str = "denied action";
/// The line of the actions left out.
pub(crate) const NOT_SIMULATED: &str = "not simulated";
/// The environment variable of IAM's endpoint (the AWS SDKs' name).
pub(crate) const IAM_ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_IAM";

/// What the lines are made from: the simulation as plain data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum View {
    Simulated {
        source: String,
        features: Vec<String>,
        /// Every action: (action, resource, feature, decision, denied by
        /// an SCP, the setup policies that grant it).
        results: Vec<Row>,
        skipped: Vec<String>,
        complete: bool,
    },
    NotSimulable {
        kind: String,
    },
    Denied,
}

/// One simulated action.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub action: String,
    pub resource: String,
    pub feature: String,
    pub decision: Decision,
    pub by_organizations: bool,
    pub granted_by: Vec<String>,
}

impl View {
    fn of(simulation: &Simulation) -> Self {
        match &simulation.outcome {
            SimulationOutcome::Simulated {
                policy_source_arn,
                results,
                skipped,
                complete,
            } => Self::Simulated {
                source: policy_source_arn.clone(),
                features: simulation
                    .features
                    .iter()
                    .map(|f| (*f).to_owned())
                    .collect(),
                results: results
                    .iter()
                    .map(|r| Row {
                        action: r.action.clone(),
                        resource: r.resource.clone(),
                        feature: r.feature.to_owned(),
                        decision: r.decision,
                        by_organizations: r.denied_by_organizations,
                        granted_by: r.granted_by.iter().map(|p| (*p).to_owned()).collect(),
                    })
                    .collect(),
                skipped: skipped.clone(),
                complete: *complete,
            },
            SimulationOutcome::NotSimulable { principal_kind } => Self::NotSimulable {
                kind: principal_kind.clone(),
            },
            _ => Self::Denied,
        }
    }
}

/// The fix of a denied action.
fn fix(row: &Row) -> String {
    if row.decision == Decision::ExplicitDeny || row.by_organizations {
        return "an explicit deny wins over any allow: ask the account's administrator to lift it (a policy, a permissions boundary or an SCP)".to_owned();
    }
    match row.granted_by.as_slice() {
        [] => format!(
            "grant {} on {} (docs/aws.md lists the actions of feature `{}`)",
            row.action, row.resource, row.feature
        ),
        [policy, ..] => format!(
            "attach the rayito-m0-iam stack's {policy} (its output {policy}Arn; `rayito setup --yes` deploys it), or grant {} as docs/aws.md shows",
            row.action
        ),
    }
}

/// Why a row is denied.
fn why(row: &Row) -> &'static str {
    if row.by_organizations {
        "an organization's SCP denies it"
    } else if row.decision == Decision::ExplicitDeny {
        "a policy denies it (explicitDeny)"
    } else {
        "no policy allows it (implicitDeny)"
    }
}

/// The lines of a simulation.
pub(crate) fn lines(view: &View) -> Vec<Check> {
    match view {
        View::Denied => vec![Check {
            name: SIMULATION,
            ok: false,
            detail: "cannot simulate: needs iam:SimulatePrincipalPolicy".to_owned(),
            fix: Some("grant iam:SimulatePrincipalPolicy (and iam:GetRole, for a role) on the caller's own principal to see which of the SDK's actions it lacks; no other check needs them".to_owned()),
        }],
        View::NotSimulable { kind } if kind == "root" => vec![Check {
            name: SIMULATION,
            ok: true,
            detail: "not simulated: the caller is the account's root user, whom IAM policies do not limit (prefer an IAM user or role)".to_owned(),
            fix: None,
        }],
        View::NotSimulable { kind } => vec![Check {
            name: SIMULATION,
            ok: true,
            detail: format!(
                "not simulated: a {kind} principal (the simulator takes IAM users and roles)"
            ),
            fix: None,
        }],
        View::Simulated {
            source,
            features,
            results,
            skipped,
            complete,
        } => {
            let denied: Vec<&Row> = results
                .iter()
                .filter(|r| r.decision != Decision::Allowed || r.by_organizations)
                .collect();
            let mut detail = if denied.is_empty() {
                format!(
                    "{} actions allowed for {source} (features {})",
                    results.len(),
                    features.join(", ")
                )
            } else {
                format!(
                    "{} of {} actions denied for {source} (features {})",
                    denied.len(),
                    results.len(),
                    features.join(", ")
                )
            };
            if !complete {
                detail.push_str("; IAM had more pages than read: some actions are not shown");
            }
            let mut checks = vec![Check {
                name: SIMULATION,
                ok: denied.is_empty() && *complete,
                detail,
                fix: None,
            }];
            for row in denied {
                checks.push(Check {
                    name: DENIED,
                    ok: false,
                    detail: format!(
                        "{} on {}: {} (feature {})",
                        row.action,
                        row.resource,
                        why(row),
                        row.feature
                    ),
                    fix: Some(fix(row)),
                });
            }
            if !skipped.is_empty() {
                checks.push(Check {
                    name: NOT_SIMULATED,
                    ok: true,
                    detail: format!(
                        "{}: no artifact bucket is known (RAYITO_BUCKET, or the IAM stack's ArtifactBucketName)",
                        skipped.join(", ")
                    ),
                    fix: None,
                });
            }
            checks
        }
    }
}

/// The features simulated: `core`, `quotas` (the doctor reads them),
/// `templates` when publishing is configured (a bucket is known), and the
/// ones `--simulate` adds.
pub(crate) fn features(bucket_known: bool, extra: &[String]) -> Vec<String> {
    let mut features = vec!["quotas".to_owned()];
    if bucket_known {
        features.push("templates".to_owned());
    }
    for f in extra {
        if !features.contains(f) && f != "core" {
            features.push(f.clone());
        }
    }
    features
}

/// Runs the simulation; its lines and, for --json, the simulation.
pub(crate) async fn permission_checks(
    client: &Client,
    features: &[String],
    image: Option<&str>,
    bucket: Option<&str>,
) -> (Vec<Check>, Option<Value>) {
    let mut query = SimulationQuery::new();
    for f in features {
        query = query.feature(f);
    }
    if let Some(image) = image.filter(|i| i.starts_with("arn:")) {
        query = query.image(image);
    }
    if let Some(bucket) = bucket {
        query = query.bucket(bucket);
    }
    if let Some(url) = std::env::var(IAM_ENDPOINT_ENV)
        .ok()
        .filter(|u| !u.is_empty())
    {
        query = query.iam_endpoint_url(url);
    }
    match client.permissions().simulate(&query).await {
        Ok(simulation) => (
            lines(&View::of(&simulation)),
            serde_json::to_value(&simulation).ok(),
        ),
        Err(err) => (
            vec![Check {
                name: SIMULATION,
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(super::doctor::fix_for(&err)),
            }],
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(action: &str, decision: Decision, scp: bool, granted: &[&str]) -> Row {
        Row {
            action: action.to_owned(),
            resource: "*".to_owned(),
            feature: "core".to_owned(),
            decision,
            by_organizations: scp,
            granted_by: granted.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    fn text(checks: &[Check]) -> Vec<String> {
        checks
            .iter()
            .map(|c| {
                format!(
                    "{} | {} | {} | {}",
                    c.name,
                    c.ok,
                    c.detail,
                    c.fix.as_deref().unwrap_or("-")
                )
            })
            .collect()
    }

    /// The lines' exact strings (docs/doctor.md transcribes them).
    #[test]
    fn the_lines_of_a_simulation_are_pinned() {
        let view = View::Simulated {
            source: "arn:aws:iam::123456789012:role/dev".to_owned(),
            features: vec!["core".to_owned(), "quotas".to_owned()],
            results: vec![
                row(
                    "lambda:RunMicrovm",
                    Decision::ImplicitDeny,
                    false,
                    &["SandboxLauncherPolicy"],
                ),
                row("lambda:ListMicrovms", Decision::Allowed, false, &[]),
                row(
                    "lambda:TerminateMicrovm",
                    Decision::ExplicitDeny,
                    false,
                    &[],
                ),
                row("lambda:ResumeMicrovm", Decision::Allowed, true, &[]),
                row(
                    "servicequotas:ListServiceQuotas",
                    Decision::ImplicitDeny,
                    false,
                    &[],
                ),
            ],
            skipped: vec!["s3:GetObject".to_owned()],
            complete: true,
        };
        assert_eq!(
            text(&lines(&view)),
            [
                "iam:SimulatePrincipalPolicy of the SDK's actions | false | 4 of 5 actions denied for arn:aws:iam::123456789012:role/dev (features core, quotas) | -",
                "denied action | false | lambda:RunMicrovm on *: no policy allows it (implicitDeny) (feature core) | attach the rayito-m0-iam stack's SandboxLauncherPolicy (its output SandboxLauncherPolicyArn; `rayito setup --yes` deploys it), or grant lambda:RunMicrovm as docs/aws.md shows",
                "denied action | false | lambda:TerminateMicrovm on *: a policy denies it (explicitDeny) (feature core) | an explicit deny wins over any allow: ask the account's administrator to lift it (a policy, a permissions boundary or an SCP)",
                "denied action | false | lambda:ResumeMicrovm on *: an organization's SCP denies it (feature core) | an explicit deny wins over any allow: ask the account's administrator to lift it (a policy, a permissions boundary or an SCP)",
                "denied action | false | servicequotas:ListServiceQuotas on *: no policy allows it (implicitDeny) (feature core) | grant servicequotas:ListServiceQuotas on * (docs/aws.md lists the actions of feature `core`)",
                "not simulated | true | s3:GetObject: no artifact bucket is known (RAYITO_BUCKET, or the IAM stack's ArtifactBucketName) | -",
            ]
        );
        let allowed = View::Simulated {
            source: "arn:aws:iam::123456789012:user/dev".to_owned(),
            features: vec!["core".to_owned()],
            results: vec![row("lambda:ListMicrovms", Decision::Allowed, false, &[])],
            skipped: Vec::new(),
            complete: false,
        };
        assert_eq!(
            text(&lines(&allowed)),
            [
                "iam:SimulatePrincipalPolicy of the SDK's actions | false | 1 actions allowed for arn:aws:iam::123456789012:user/dev (features core); IAM had more pages than read: some actions are not shown | -"
            ]
        );
        assert_eq!(
            text(&lines(&View::Denied)),
            [
                "iam:SimulatePrincipalPolicy of the SDK's actions | false | cannot simulate: needs iam:SimulatePrincipalPolicy | grant iam:SimulatePrincipalPolicy (and iam:GetRole, for a role) on the caller's own principal to see which of the SDK's actions it lacks; no other check needs them"
            ]
        );
        assert_eq!(
            text(&lines(&View::NotSimulable {
                kind: "root".to_owned()
            })),
            [
                "iam:SimulatePrincipalPolicy of the SDK's actions | true | not simulated: the caller is the account's root user, whom IAM policies do not limit (prefer an IAM user or role) | -"
            ]
        );
        assert_eq!(
            text(&lines(&View::NotSimulable {
                kind: "federated-user".to_owned()
            })),
            [
                "iam:SimulatePrincipalPolicy of the SDK's actions | true | not simulated: a federated-user principal (the simulator takes IAM users and roles) | -"
            ]
        );
    }

    #[test]
    fn the_features_follow_the_configuration() {
        assert_eq!(features(false, &[]), ["quotas"]);
        assert_eq!(
            features(true, &["logs".to_owned(), "core".to_owned()]),
            ["quotas", "templates", "logs"]
        );
    }

    /// docs/doctor.md transcribes every pinned line.
    #[test]
    fn docs_doctor_md_transcribes_the_lines() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/doctor.md"))
                .expect("docs/doctor.md");
        // Prose wraps: compared with its whitespace folded.
        let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
        for needle in [
            SIMULATION,
            "cannot simulate: needs iam:SimulatePrincipalPolicy",
            "no policy allows it (implicitDeny)",
            "a policy denies it (explicitDeny)",
            "an organization's SCP denies it",
            "an explicit deny wins over any allow: ask the account's administrator to lift it (a policy, a permissions boundary or an SCP)",
            "its output SandboxLauncherPolicyArn; `rayito setup --yes` deploys it",
            "no artifact bucket is known (RAYITO_BUCKET, or the IAM stack's ArtifactBucketName)",
            IAM_ENDPOINT_ENV,
        ] {
            assert!(doc.contains(needle), "docs/doctor.md lacks: {needle}");
        }
    }
}
