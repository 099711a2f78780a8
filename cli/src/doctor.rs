//! `rayito doctor`: what the SDK would use on AWS, then live checks, each
//! with a verdict and, on failure, the fix. Exit 0 only when an AWS
//! `create` could work.
//!
//! Publishing (`rayito setup`, `rayito image publish`) is checked too,
//! without writing anything: the IAM stack `rayito-m0-iam` and its
//! outputs, the artifact bucket (HeadBucket, this account's), and a
//! launchable version of the image. Those checks have their own verdict
//! and do not change the exit code of `rayito doctor` (a caller of images
//! published elsewhere needs none of them); `rayito setup` requires both.

use std::path::PathBuf;

use futures_util::StreamExt as _;
use rayito::setup::SetupOptions;
use rayito::{AwsOptions, Client, ErrorKind, ListQuery, SandboxError};
use serde_json::{Value, json};

pub use crate::doctor_account::DoctorArgs;
use crate::output;
use crate::{Format, Global};

const POLICY_DOC: &str = "docs/aws.md (\"The IAM policy\")";

/// One line of the report.
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) ok: bool,
    pub(crate) detail: String,
    pub(crate) fix: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn aws_file(name: &str) -> Option<PathBuf> {
    let path = match name {
        "config" => env("AWS_CONFIG_FILE").map(PathBuf::from),
        _ => env("AWS_SHARED_CREDENTIALS_FILE").map(PathBuf::from),
    }
    .or_else(|| env("HOME").map(|home| PathBuf::from(home).join(".aws").join(name)))?;
    path.is_file().then_some(path)
}

/// Where the credential chain would find credentials first (as far as the
/// environment and files tell; roles from instance metadata are only seen
/// by the live check).
fn credential_source(global: &Global) -> String {
    if env("AWS_ACCESS_KEY_ID").is_some() {
        return "environment (AWS_ACCESS_KEY_ID)".to_owned();
    }
    if env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() {
        return "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)".to_owned();
    }
    let profile = global
        .profile
        .clone()
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_owned());
    if aws_file("credentials").is_some() || aws_file("config").is_some() {
        return format!("profile `{profile}` in ~/.aws");
    }
    "none found in the environment or ~/.aws (an instance or container role may still answer)"
        .to_owned()
}

fn region(global: &Global) -> Option<String> {
    global
        .region
        .clone()
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
}

pub(crate) fn fix_for(err: &SandboxError) -> String {
    match err.kind() {
        ErrorKind::Authentication => format!(
            "configure AWS credentials and a region: `aws configure` (or `aws sso login --profile NAME` and AWS_PROFILE=NAME), or set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION; the caller needs the IAM policy in {POLICY_DOC}"
        ),
        ErrorKind::RateLimit | ErrorKind::Capacity => {
            "throttled or out of capacity: run `rayito doctor` again in a minute".to_owned()
        }
        _ if err.is_retryable() => {
            "the MicroVMs API did not answer: check the network, and that the region offers Lambda MicroVMs (--region or AWS_REGION)".to_owned()
        }
        _ => format!("see the message above and {POLICY_DOC}"),
    }
}

/// Runs the doctor; returns the exit code.
pub async fn run(global: Global, args: DoctorArgs) -> i32 {
    let mut options = AwsOptions::new();
    if let Some(region) = &global.region {
        options = options.region(region);
    }
    if let Some(profile) = &global.profile {
        options = options.profile(profile);
    }
    // The SDK resolves credentials and the region (a profile's region
    // included); ListMicrovms, one page of one, then reaches the API and
    // proves one permission.
    let client = Client::builder().aws(options).build().await;
    let mut report = report(&global, client.clone(), None, None).await;
    if let Ok(client) = &client {
        report.account_checks(&global, client, &args).await;
    }
    report.print(global.output);
    report.exit_code()
}

/// The checks of publishing, none of which writes; and the artifact
/// bucket they found (the IAM simulation's S3 resource).
async fn publishing_checks(
    client: &Client,
    image: Option<&str>,
    bucket: Option<String>,
) -> (Vec<Check>, Option<String>) {
    let mut checks = Vec::new();
    let setup = client.setup(SetupOptions::default());
    let setup_fix = "run `rayito setup` to see what is missing, then `rayito setup --yes`; see docs/aws.md (\"A new account in one command\")";
    let outputs = setup.outputs().await;
    checks.push(match &outputs {
        Ok(outputs) => Check {
            name: "stack rayito-m0-iam (build role, policies) and cloudformation:DescribeStacks",
            ok: true,
            detail: format!(
                "deployed; BuildRoleArn {}",
                outputs.get("BuildRoleArn").map_or("-", String::as_str)
            ),
            fix: None,
        },
        Err(err) => Check {
            name: "stack rayito-m0-iam (build role, policies) and cloudformation:DescribeStacks",
            ok: false,
            detail: crate::hints::detail(err),
            fix: Some(setup_fix.to_owned()),
        },
    });
    let bucket = bucket
        .or_else(|| env(rayito::template::BUCKET_ENV))
        .or_else(|| {
            outputs
                .ok()
                .and_then(|o| o.get("ArtifactBucketName").cloned())
        });
    let found = bucket.clone();
    checks.push(match bucket {
        None => Check {
            name: "artifact bucket",
            ok: false,
            detail: "no bucket is known (RAYITO_BUCKET, or the IAM stack's ArtifactBucketName)".to_owned(),
            fix: Some(setup_fix.to_owned()),
        },
        Some(bucket) => match setup.bucket_exists(&bucket).await {
            Ok(true) => Check {
                name: "artifact bucket and s3:ListBucket (HeadBucket)",
                ok: true,
                detail: format!("{bucket} exists and is this account's"),
                fix: None,
            },
            Ok(false) => Check {
                name: "artifact bucket and s3:ListBucket (HeadBucket)",
                ok: false,
                detail: format!("{bucket} does not exist"),
                fix: Some(setup_fix.to_owned()),
            },
            Err(err) => Check {
                name: "artifact bucket and s3:ListBucket (HeadBucket)",
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(format!(
                    "the bucket must be this account's and the caller needs s3:ListBucket on it (the ImagePublisherPolicy of {POLICY_DOC})"
                )),
            },
        },
    });
    let name = "launchable image version and lambda-microvms:ListMicrovmImageVersions";
    checks.push(match image {
        None => Check {
            name,
            ok: false,
            detail: "no image is configured".to_owned(),
            fix: Some("run `rayito setup --yes` (it publishes rayito-base) and set RAYITO_TEMPLATE to the ARN it prints".to_owned()),
        },
        Some(image) => match client.images().versions(image).await {
            Ok(versions) => match versions
                .iter()
                .find(|v| v.state == "SUCCESSFUL" && v.status == "ACTIVE")
            {
                Some(v) => Check {
                    name,
                    ok: true,
                    detail: format!("version {} is SUCCESSFUL and ACTIVE", v.version),
                    fix: None,
                },
                None => Check {
                    name,
                    ok: false,
                    detail: format!("no version of {image} is SUCCESSFUL and ACTIVE"),
                    fix: Some("publish it again: `rayito setup --yes` or `rayito image publish`; `rayito image list NAME` shows its versions".to_owned()),
                },
            },
            Err(err) => Check {
                name,
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(fix_for(&err)),
            },
        },
    });
    (checks, found)
}

/// What the doctor found.
pub struct Report {
    backend: String,
    region: Option<String>,
    credentials: String,
    template: Option<String>,
    checks: Vec<Check>,
    publishing: Vec<Check>,
    /// The quota lines (their own verdict); empty when not checked.
    quotas: Vec<Check>,
    quota_report: Option<rayito::quotas::QuotaReport>,
    /// The EFS network lines (their own verdict), with --efs-vpc-id.
    network: Vec<Check>,
    network_json: Option<Value>,
    /// The IAM simulation's lines (their own verdict).
    permissions: Vec<Check>,
    permissions_json: Option<Value>,
    /// The artifact bucket publishing found.
    bucket: Option<String>,
    launched: bool,
}

const UNPROVABLE: &str = "RunMicrovm, TerminateMicrovm, SuspendMicrovm, ResumeMicrovm, CreateMicrovmAuthToken: no harmless call proves them; grant the policy in docs/aws.md";
const UNPROVABLE_PUBLISHING: &str = "CreateMicrovmImage, UpdateMicrovmImage, iam:PassRole on the build role, s3:PutObject: publishing writes, no harmless call proves them; `rayito setup --yes` and `rayito image publish` use them";

fn checks_json(checks: &[Check]) -> Vec<Value> {
    checks
        .iter()
        .map(|c| json!({ "name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix }))
        .collect()
}

fn print_checks(checks: &[Check]) {
    for c in checks {
        outln!(
            "[{}] {}: {}",
            if c.ok { " ok " } else { "FAIL" },
            c.name,
            c.detail
        );
        if let Some(fix) = &c.fix {
            outln!("       fix: {fix}");
        }
    }
}

impl Report {
    /// The account checks, once the MicroVMs API answered: the quotas,
    /// then `--launch`'s test launch (into the checks: a launch that fails
    /// means not ready), then `--efs-vpc-id`'s network.
    async fn account_checks(&mut self, global: &Global, client: &Client, args: &DoctorArgs) {
        if !self.checks.first().is_some_and(|c| c.ok) {
            return;
        }
        let (quotas, report) = crate::doctor_account::quota_checks(client).await;
        self.quotas = quotas;
        self.quota_report = report;
        let features = crate::doctor_permissions::features(self.bucket.is_some(), &args.simulate);
        let (permissions, simulation) = crate::doctor_permissions::permission_checks(
            client,
            &features,
            self.template.as_deref(),
            self.bucket.as_deref(),
        )
        .await;
        self.permissions = permissions;
        self.permissions_json = simulation;
        if args.launch {
            self.launched = true;
            match &self.template {
                Some(template) => {
                    let launch = crate::doctor_account::launch_checks(client, template).await;
                    self.checks.extend(launch);
                }
                None => self.checks.push(Check {
                    name: "test launch",
                    ok: false,
                    detail: "no image is configured".to_owned(),
                    fix: Some("set RAYITO_TEMPLATE to an image ARN, then run `rayito doctor --launch` again".to_owned()),
                }),
            }
        }
        if let Some(vpc_id) = &args.efs_vpc_id {
            let (network, json) =
                crate::doctor_account::network_checks(global, vpc_id, &args.efs_subnet_ids).await;
            self.network = network;
            self.network_json = Some(json);
        }
    }

    /// Whether an AWS `create` could work.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// Whether publishing could work (as far as reads tell).
    pub fn publishing_ready(&self) -> bool {
        self.publishing.iter().all(|c| c.ok)
    }

    /// `rayito doctor`'s exit code: 0 when a `create` could work.
    pub fn exit_code(&self) -> i32 {
        if self.ready() {
            0
        } else {
            output::EXIT_FAILURE
        }
    }

    /// The report as one JSON value.
    pub fn to_json(&self) -> Value {
        json!({
            "backend": self.backend,
            "region": self.region,
            "credentials": self.credentials,
            "image": self.template,
            "checks": checks_json(&self.checks),
            "not_checked": UNPROVABLE,
            "ready": self.ready(),
            "publishing": {
                "checks": checks_json(&self.publishing),
                "not_checked": UNPROVABLE_PUBLISHING,
                "ready": self.publishing_ready(),
            },
            "quotas": {
                "checks": checks_json(&self.quotas),
                "ok": self.quotas.iter().all(|c| c.ok),
                "report": self.quota_report,
            },
            "permissions": {
                "checks": checks_json(&self.permissions),
                "ok": self.permissions.iter().all(|c| c.ok),
                "simulation": self.permissions_json,
            },
            "launch": self.launched,
            "network": {
                "checks": checks_json(&self.network),
                "ok": self.network.iter().all(|c| c.ok),
                "report": self.network_json,
            },
        })
    }

    /// Prints the report in `format`.
    pub fn print(&self, format: Format) {
        match format {
            Format::Json => output::json(&self.to_json()),
            Format::Text => self.print_text(),
        }
    }

    fn print_text(&self) {
        outln!("backend:     {} (the doctor checks AWS)", self.backend);
        outln!(
            "region:      {}",
            self.region
                .as_deref()
                .unwrap_or("not set (--region, AWS_REGION, or the profile's region)")
        );
        outln!("credentials: {}", self.credentials);
        outln!(
            "image:       {}",
            self.template
                .as_deref()
                .unwrap_or("not set (RAYITO_TEMPLATE)")
        );
        outln!();
        print_checks(&self.checks);
        outln!("[ -- ] {UNPROVABLE}");
        outln!();
        outln!("publishing (rayito setup, rayito image publish; read-only checks):");
        print_checks(&self.publishing);
        outln!("[ -- ] {UNPROVABLE_PUBLISHING}");
        outln!();
        if !self.quotas.is_empty() {
            outln!("quotas (their own verdict; the exit code does not change):");
            print_checks(&self.quotas);
            outln!();
        }
        if !self.permissions.is_empty() {
            outln!(
                "permissions (IAM's simulation of the SDK's actions; advisory, its own verdict):"
            );
            print_checks(&self.permissions);
            outln!();
        }
        if !self.network.is_empty() {
            outln!("network for EFS volumes (read-only; its own verdict):");
            print_checks(&self.network);
            outln!();
        }
        if !self.launched {
            outln!(
                "[ -- ] test launch: not run (`rayito doctor --launch` starts a sandbox for 300 s at most, about $0.002, and kills it)"
            );
            outln!();
        }
        if self.ready() {
            outln!("verdict: ready: `rayito sandbox create` can work on AWS");
        } else {
            outln!("verdict: NOT ready: fix the failures above");
        }
        if self.publishing_ready() {
            outln!("publishing: ready: the stacks, the bucket and a launchable image are there");
        } else {
            outln!("publishing: NOT ready: fix the publishing failures above (rayito setup)");
        }
    }
}

/// Runs every check over `client`; `template` and `bucket` override
/// RAYITO_TEMPLATE and RAYITO_BUCKET (setup passes what it made).
pub async fn report(
    global: &Global,
    client: Result<Client, SandboxError>,
    template: Option<String>,
    bucket: Option<String>,
) -> Report {
    let region = region(global);
    let template = template.or_else(|| env(rayito::TEMPLATE_ENV));
    let backend = env(rayito::BACKEND_ENV).unwrap_or_else(|| "aws".to_owned());
    let credentials = credential_source(global);
    let mut checks = Vec::new();
    let region = match &client {
        Ok(client) => client.region().map(str::to_owned),
        Err(_) => region,
    };
    let listed = match &client {
        Ok(client) => client
            .list(ListQuery::new().page_size(1))
            .next()
            .await
            .transpose(),
        Err(err) => Err(err.clone()),
    };
    let reachable = listed.is_ok();
    checks.push(match &listed {
        Ok(_) => Check {
            name: "credentials, region and lambda-microvms:ListMicrovms",
            ok: true,
            detail: "the MicroVMs API answered".to_owned(),
            fix: None,
        },
        Err(err) => Check {
            name: "credentials, region and lambda-microvms:ListMicrovms",
            ok: false,
            detail: crate::hints::detail(err),
            fix: Some(fix_for(err)),
        },
    });
    if let (true, Ok(client)) = (reachable, &client) {
        // GetMicrovm on an id that cannot exist: any answer about the id
        // (not found, or the service refusing its form) proves the
        // permission; access denied disproves it.
        let probe = match client.get_info_by_id("rayito-doctor-probe").await {
            Err(err)
                if matches!(err, SandboxError::SandboxNotFound { .. })
                    || err.meta().aws_code() == Some("ValidationException") =>
            {
                Ok(())
            }
            other => other.map(|_| ()),
        };
        checks.push(match probe {
            Ok(()) => Check {
                name: "lambda-microvms:GetMicrovm",
                ok: true,
                detail: "allowed".to_owned(),
                fix: None,
            },
            Err(err) => Check {
                name: "lambda-microvms:GetMicrovm",
                ok: false,
                detail: crate::hints::detail(&err),
                fix: Some(fix_for(&err)),
            },
        });
    }
    checks.push(match &template {
        Some(t) if t.starts_with("arn:") && t.contains(":microvm-image:") => {
            // GetMicrovmImage: the image exists (and the caller may read it).
            let info = match &client {
                Ok(client) => client.template_info(Some(t)).await,
                Err(err) => Err(err.clone()),
            };
            match info {
                Ok(info) => Check {
                    name: "image (RAYITO_TEMPLATE) and lambda-microvms:GetMicrovmImage",
                    ok: true,
                    detail: format!("{} exists (state {})", info.arn, info.state),
                    fix: None,
                },
                Err(err) => Check {
                    name: "image (RAYITO_TEMPLATE) and lambda-microvms:GetMicrovmImage",
                    ok: false,
                    detail: crate::hints::detail(&err),
                    fix: Some(match &err {
                        SandboxError::SandboxNotFound { .. } => format!(
                            "publish the image or set RAYITO_TEMPLATE to an image that exists in this account and region; `{t}` was not found"
                        ),
                        other => fix_for(other),
                    }),
                },
            }
        }
        Some(t) => Check {
            name: "image (RAYITO_TEMPLATE)",
            ok: false,
            detail: format!("`{t}` is not a MicroVM image ARN"),
            fix: Some("set RAYITO_TEMPLATE=arn:aws:lambda:REGION:ACCOUNT:microvm-image:NAME (or pass --template to create)".to_owned()),
        },
        None => Check {
            name: "image (RAYITO_TEMPLATE)",
            ok: false,
            detail: "no image is configured".to_owned(),
            fix: Some(
                "set RAYITO_TEMPLATE to an image ARN (arn:aws:lambda:REGION:ACCOUNT:microvm-image:NAME) or pass --template to `rayito sandbox create`; see docs/aws.md (\"Choosing an image and a region\")".to_owned(),
            ),
        },
    });
    let (publishing, bucket) = match (&client, reachable) {
        (Ok(client), true) => publishing_checks(client, template.as_deref(), bucket).await,
        _ => (
            vec![Check {
                name: "publishing",
                ok: false,
                detail: "not checked: the MicroVMs API did not answer".to_owned(),
                fix: Some("fix the first failure above".to_owned()),
            }],
            None,
        ),
    };
    Report {
        backend,
        region,
        credentials,
        template,
        checks,
        publishing,
        quotas: Vec::new(),
        quota_report: None,
        network: Vec::new(),
        network_json: None,
        permissions: Vec::new(),
        permissions_json: None,
        bucket,
        launched: false,
    }
}
