//! The doctor's account checks beyond "can a `create` work": the quotas
//! with their warnings (Service Quotas and the memory in use), a test
//! launch (`--launch`: a sandbox's token and its agent answering a
//! command, killed at the end), and the network for EFS volumes
//! (`--efs-vpc-id`/`--efs-subnet-ids`, read-only). Each is a line with its
//! fix; the quota warnings and the network have their own verdict, the
//! launch counts toward the exit code (a `create` that fails is not
//! ready).

use std::time::Duration;

use rayito::quotas::{QuotaLevel, QuotaReport};
use rayito::{Client, SandboxError};
use serde_json::{Value, json};

use super::doctor::Check;

/// The test launch's timeout: the sandbox is killed at the end anyway.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(300);

/// `rayito doctor`'s options.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct DoctorArgs {
    /// Also launch a sandbox from RAYITO_TEMPLATE (300 s at most, about
    /// $0.002 on AWS) to prove the token and the agent; it is killed at
    /// the end.
    #[arg(long)]
    pub launch: bool,
    /// Also check, read-only, that this existing VPC can hold `rayito
    /// volumes deploy` (EFS volumes); with --efs-subnet-ids.
    #[arg(long, requires = "efs_subnet_ids")]
    pub efs_vpc_id: Option<String>,
    /// One to three subnets of --efs-vpc-id, comma-separated, each in
    /// another availability zone.
    #[arg(long, value_delimiter = ',', requires = "efs_vpc_id")]
    pub efs_subnet_ids: Vec<String>,
    /// Also simulate the IAM actions of these cargo features of the SDK
    /// (comma-separated, e.g. logs,secrets,s3); `core` and `quotas` always,
    /// `templates` when an artifact bucket is known.
    #[arg(long, value_delimiter = ',')]
    pub simulate: Vec<String>,
}

/// The quota check's name (pinned in the tests).
pub(crate) const QUOTAS: &str = "quotas (servicequotas:ListServiceQuotas) and memory in use";

/// The quota lines: the report's summary, then one line per warning with
/// the console page of the increase; and the report itself for --json.
pub(crate) async fn quota_checks(client: &Client) -> (Vec<Check>, Option<QuotaReport>) {
    let report = match client.quotas().report().await {
        Ok(report) => report,
        Err(err) => {
            let fix = match err.kind() {
                rayito::ErrorKind::Authentication => "grant servicequotas:ListServiceQuotas, lambda:ListMicrovms and lambda:GetMicrovmImageVersion (docs/quotas.md)".to_owned(),
                _ => super::doctor::fix_for(&err),
            };
            return (
                vec![Check {
                    name: QUOTAS,
                    ok: false,
                    detail: crate::hints::detail(&err),
                    fix: Some(fix),
                }],
                None,
            );
        }
    };
    let m = &report.memory;
    let mut detail = format!(
        "memory {:.1} of {} GB allocated ({:.0}%, {}) by {} sandbox(es)",
        m.allocated_gb,
        m.quota_gb,
        m.fraction * 100.0,
        m.level,
        m.sandboxes
    );
    if m.unresolved > 0 {
        detail.push_str(&format!(
            "; {} of unknown memory (the use can be higher)",
            m.unresolved
        ));
    }
    let mut checks = vec![Check {
        name: QUOTAS,
        ok: m.level == QuotaLevel::Ok,
        detail,
        fix: (m.level != QuotaLevel::Ok).then(|| {
            "terminate idle or suspended sandboxes (`rayito sandbox list`), or request a memory increase (the warning below links it)".to_owned()
        }),
    }];
    for warning in &report.warnings {
        checks.push(Check {
            name: "quota warning",
            ok: false,
            detail: format!(
                "{} ({}): {}",
                warning.quota_code, warning.code, warning.message
            ),
            fix: Some(format!("request an increase: {}", warning.console_url)),
        });
    }
    (checks, Some(report))
}

/// The test launch: create, one command, kill (always, whatever failed).
pub(crate) async fn launch_checks(client: &Client, template: &str) -> Vec<Check> {
    const CREATE: &str =
        "test launch: RunMicrovm, CreateMicrovmAuthToken and the agent's readiness";
    const AGENT: &str = "test launch: the agent runs a command";
    let sandbox = client
        .sandbox()
        .template(template)
        .timeout(LAUNCH_TIMEOUT)
        .create()
        .await;
    let sandbox = match sandbox {
        Ok(sandbox) => sandbox,
        Err(err) => {
            return vec![Check {
                name: CREATE,
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(launch_fix(&err)),
            }];
        }
    };
    let mut checks = vec![Check {
        name: CREATE,
        ok: true,
        detail: format!(
            "sandbox {} started and its token was accepted",
            sandbox.id()
        ),
        fix: None,
    }];
    let ran = sandbox.commands().run("echo rayito-doctor").await;
    checks.push(match ran {
        Ok(result) if result.exit_code == 0 && result.stdout.trim() == "rayito-doctor" => Check {
            name: AGENT,
            ok: true,
            detail: "`echo rayito-doctor` answered".to_owned(),
            fix: None,
        },
        Ok(result) => Check {
            name: AGENT,
            ok: false,
            detail: format!("`echo rayito-doctor` exited {}", result.exit_code),
            fix: Some(
                "the image's agent misbehaves: publish the image again (`rayito image publish`)"
                    .to_owned(),
            ),
        },
        Err(err) => Check {
            name: AGENT,
            ok: false,
            detail: crate::hints::detail(&err),
            fix: Some(launch_fix(&err)),
        },
    });
    let id = sandbox.id().to_owned();
    checks.push(match sandbox.kill().await {
        Ok(_) => Check {
            name: "test launch: TerminateMicrovm",
            ok: true,
            detail: format!("sandbox {id} killed"),
            fix: None,
        },
        Err(err) => Check {
            name: "test launch: TerminateMicrovm",
            ok: false,
            detail: crate::hints::detail(&err),
            fix: Some(format!(
                "kill it by hand: `rayito sandbox kill {id}`; the caller needs lambda:TerminateMicrovm"
            )),
        },
    });
    checks
}

fn launch_fix(err: &SandboxError) -> String {
    match err.kind() {
        rayito::ErrorKind::QuotaExceeded => {
            "a quota refused the launch: see the quota lines above and request an increase"
                .to_owned()
        }
        _ => super::doctor::fix_for(err),
    }
}

/// The read-only network check of an existing VPC for EFS volumes.
pub(crate) async fn network_checks(
    global: &crate::Global,
    vpc_id: &str,
    subnet_ids: &[String],
) -> (Vec<Check>, Value) {
    const NAME: &str =
        "network for EFS volumes (ec2:DescribeVpcs, DescribeSubnets, DescribeRouteTables)";
    let efs = crate::volume::efs_volumes(global).await;
    match efs.check(vpc_id, subnet_ids).await {
        Ok(report) => {
            let mut checks = vec![Check {
                name: NAME,
                ok: report.ok(),
                detail: format!(
                    "{vpc_id} with {} subnet(s) in {}",
                    report.subnet_ids.len(),
                    report.availability_zones.join(", ")
                ),
                fix: (!report.ok()).then(|| {
                    "fix the findings below, then `rayito volumes deploy`; see docs/volumes.md"
                        .to_owned()
                }),
            }];
            for finding in &report.findings {
                let ok = finding.level != rayito::volumes::FindingLevel::Fail;
                checks.push(Check {
                    name: "network finding",
                    ok,
                    detail: format!(
                        "{} {}: {}",
                        finding.level.as_str(),
                        finding.code,
                        finding.message
                    ),
                    fix: None,
                });
            }
            let findings: Vec<Value> = report
                .findings
                .iter()
                .map(|f| json!({"level": f.level.as_str(), "code": f.code, "message": f.message}))
                .collect();
            (checks, json!({"vpc_id": vpc_id, "findings": findings}))
        }
        Err(err) => (
            vec![Check {
                name: NAME,
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(super::doctor::fix_for(&err)),
            }],
            json!({"vpc_id": vpc_id, "error": crate::hints::detail(&err)}),
        ),
    }
}
