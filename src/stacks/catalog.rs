//! The catalog of optional stacks: every component of docs/stacks.md,
//! as pure data, in the reference's order (its thirteen), then the two
//! that `rayito setup` deploys. A component whose code or template is not
//! here is listed with `supported = false` and the reason its deploy
//! returns, never with a template that points at code that does not exist.

use std::collections::BTreeMap;

use super::model::{CostStatement, StackArtifact, StackComponent, StackParameter};
use crate::error::SandboxError;

const IAM: &[&str] = &["CAPABILITY_IAM"];
const NAMED_IAM: &[&str] = &["CAPABILITY_NAMED_IAM"];
const IAM_ONLY_IDLE: &str = "$0 (IAM only)";

const fn param(name: &'static str, description: &'static str) -> StackParameter {
    StackParameter {
        name,
        description,
        required: false,
        default: None,
        no_echo: false,
    }
}

const fn required(name: &'static str, description: &'static str) -> StackParameter {
    StackParameter {
        required: true,
        ..param(name, description)
    }
}

const fn default(
    name: &'static str,
    value: &'static str,
    description: &'static str,
) -> StackParameter {
    StackParameter {
        default: Some(value),
        ..param(name, description)
    }
}

const fn cost(
    creates: &'static [&'static str],
    idle_monthly: &'static str,
    per_use: &'static [&'static str],
    removal: &'static str,
    source: &'static str,
) -> CostStatement {
    CostStatement {
        creates,
        idle_monthly,
        per_use,
        removal,
        source,
    }
}

const fn component(
    name: &'static str,
    description: &'static str,
    cost: CostStatement,
    parameters: &'static [StackParameter],
    capabilities: &'static [&'static str],
    template: fn() -> String,
) -> StackComponent {
    StackComponent {
        name,
        description,
        cost,
        parameters,
        artifacts: &[],
        capabilities,
        supported: true,
        unsupported_reason: None,
        template: Some(template),
        validate: None,
        render: None,
    }
}

const fn unsupported(
    name: &'static str,
    description: &'static str,
    cost: CostStatement,
    parameters: &'static [StackParameter],
    capabilities: &'static [&'static str],
    reason: &'static str,
) -> StackComponent {
    StackComponent {
        name,
        description,
        cost,
        parameters,
        artifacts: &[],
        capabilities,
        supported: false,
        unsupported_reason: Some(reason),
        template: None,
        validate: None,
        render: None,
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The efs-volumes row's description, cost and parameters (the row
/// depends on feature `efs`).
const EFS_VOLUMES_DESCRIPTION: &str = "EFS file system, mount targets, security groups and the VPC's egress connector in an existing VPC, for volumes=";
const EFS_VOLUMES_COST: CostStatement = cost(
    &[
        "AWS::EFS::FileSystem",
        "AWS::EFS::MountTarget (one per subnet)",
        "AWS::EC2::SecurityGroup (x2)",
        "network connector",
        "AWS::IAM::ManagedPolicy",
    ],
    "$0 while the file system is empty (EFS bills stored GB-months)",
    &["EFS storage and throughput per GB"],
    "destroy deletes the stack's resources; the file system goes only when empty or asked",
    "Amazon EFS pricing, us-east-1",
);
const EFS_VOLUMES_PARAMETERS: &[StackParameter] = &[
    required("VpcId", "The VPC"),
    required(
        "SubnetIds",
        "Subnets of the VPC for the mount targets (comma list)",
    ),
    default(
        "ConnectorName",
        "rayito-efs",
        "Name of the egress connector",
    ),
    default("AllowWrite", "true", "Clients may write"),
    param(
        "AccessPointArns",
        "Access points clients may use (comma list)",
    ),
    param(
        "ReadOnlyAccessPointArns",
        "Access points clients may only read (comma list)",
    ),
];

/// The functions' zip of the events-webhooks stack.
const EVENTS_ARTIFACTS: &[StackArtifact] = &[StackArtifact {
    name: "functions",
    parameter_key: "ArtifactS3Key",
    bucket_parameter_key: Some("ArtifactBucket"),
}];

/// The function's zip of the quota-alerts stack (the same `bootstrap` as
/// events-webhooks').
const QUOTA_ALERTS_ARTIFACTS: &[StackArtifact] = &[StackArtifact {
    name: "quota-alerts",
    parameter_key: "ArtifactS3Key",
    bucket_parameter_key: Some("ArtifactBucket"),
}];

/// `CriticalPercent` above `WarningPercent` (when both are numbers; the
/// template refuses one that is not).
fn thresholds_order(values: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    let percent = |key: &str| values.get(key).and_then(|v| v.trim().parse::<f64>().ok());
    match (percent("WarningPercent"), percent("CriticalPercent")) {
        (Some(warning), Some(critical)) if warning >= critical => {
            Err(SandboxError::invalid_argument(
                "parameters",
                super::quota_alerts_template::THRESHOLDS_ORDER,
            ))
        }
        _ => Ok(()),
    }
}

/// Refuses `key` (when given) unless a whole number in `range`.
fn whole_in(
    values: &BTreeMap<String, String>,
    key: &str,
    range: std::ops::RangeInclusive<u32>,
    reason: &'static str,
) -> Result<(), SandboxError> {
    let ok = values
        .get(key)
        .is_none_or(|v| v.parse::<u32>().is_ok_and(|n| range.contains(&n)));
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument("parameters", reason))
    }
}

/// `ReconcilerIntervalMinutes` is a whole number from 2 to 60.
fn reconciler_interval(values: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    whole_in(
        values,
        "ReconcilerIntervalMinutes",
        2..=60,
        "events-webhooks: ReconcilerIntervalMinutes is a whole number of minutes from 2 to 60; pass such a number",
    )
}

/// `MaxSessionSeconds` is a whole number from 3,600 to 43,200.
fn session_seconds(values: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    whole_in(
        values,
        "MaxSessionSeconds",
        3600..=43_200,
        "dashboard-read-role: MaxSessionSeconds is a whole number of seconds from 3,600 to 43,200 (IAM's 1 to 12 hours); pass such a number",
    )
}

/// The dashboard function's zip.
const DASHBOARD_ARTIFACTS: &[StackArtifact] = &[StackArtifact {
    name: "dashboard",
    parameter_key: "ArtifactS3Key",
    bucket_parameter_key: Some("ArtifactBucket"),
}];

/// `ThemeJson` is at most 4,096 bytes, and `AuthMode=aws-iam` is not
/// built yet.
fn dashboard_parameters(values: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    use super::dashboard_template::{AWS_IAM_REFUSED, THEME_JSON_MAX_BYTES, THEME_JSON_TOO_LONG};
    if values.get("AuthMode").is_some_and(|m| m == "aws-iam") {
        return Err(SandboxError::invalid_argument(
            "parameters",
            AWS_IAM_REFUSED,
        ));
    }
    if values
        .get("ThemeJson")
        .is_some_and(|t| t.len() > THEME_JSON_MAX_BYTES)
    {
        return Err(SandboxError::invalid_argument(
            "parameters",
            THEME_JSON_TOO_LONG,
        ));
    }
    Ok(())
}

/// Every component, in the order `rayito stack list` prints them.
pub(crate) static COMPONENTS: &[StackComponent] = &[
    component(
        "metadata-index",
        "DynamoDB table (on-demand, TTL on expires_at) and the RayitoIndexWriter / RayitoIndexReader policies, for the sandbox index (SandboxIndex)",
        cost(
            &["AWS::DynamoDB::Table", "AWS::IAM::ManagedPolicy (x2)"],
            "$0 (on-demand, empty table; IAM is free)",
            &[
                "~1 write request unit per sandbox created with the index ($0.625 per million)",
                "~0.5 read request unit per candidate sandbox when listing ($0.125 per million)",
                "$0.25 per GB-month of storage past the first 25 GB",
            ],
            "destroy deletes the table (turn DeletionProtection off first when true) and both policies",
            "DynamoDB on-demand pricing, us-east-1, read 2026-09-30",
        ),
        &[
            default("TableName", "rayito-sandboxes", "Name of the index table"),
            default(
                "PointInTimeRecovery",
                "false",
                "Continuous backups (billed per GB-month): true or false",
            ),
            default(
                "DeletionProtection",
                "false",
                "Blocks DeleteTable (and destroy) while true",
            ),
        ],
        IAM,
        || pretty(&super::metadata_index_template::template_value()),
    ),
    component(
        "secrets-access",
        "RayitoSecretsReader / RayitoSecretsAdmin policies over one Secrets Manager name prefix, for secrets= and the secret store",
        cost(
            &["AWS::IAM::ManagedPolicy (x2)"],
            "$0 (IAM only; the secrets you create bill apart)",
            &[],
            "destroy deletes both policies; no secret is deleted",
            "IAM has no price of its own",
        ),
        &[
            default(
                "SecretPrefix",
                "rayito/",
                "Secrets Manager name prefix, ending in '/'; never empty",
            ),
            default(
                "KmsKeyArn",
                "",
                "ARN of your own KMS key; empty uses the AWS managed key aws/secretsmanager",
            ),
        ],
        IAM,
        || pretty(&super::secrets_access_template::template_value()),
    ),
    // efs-volumes: its template is written from the parameters by the
    // volumes' generator (feature `efs`), the same `rayito volumes deploy`
    // sends; a build without `efs` lists it unsupported.
    #[cfg(feature = "efs")]
    StackComponent {
        supported: true,
        unsupported_reason: None,
        render: Some(super::efs_volumes_template::render),
        ..unsupported(
            "efs-volumes",
            EFS_VOLUMES_DESCRIPTION,
            EFS_VOLUMES_COST,
            EFS_VOLUMES_PARAMETERS,
            IAM,
            "",
        )
    },
    #[cfg(not(feature = "efs"))]
    unsupported(
        "efs-volumes",
        EFS_VOLUMES_DESCRIPTION,
        EFS_VOLUMES_COST,
        EFS_VOLUMES_PARAMETERS,
        IAM,
        "its template is written by the volumes' generator, compiled with the cargo feature efs: build with it, or deploy with rayito volumes deploy",
    ),
    component(
        "s3-mounts",
        "RayitoS3MountAccess policy over one bucket and up to four key prefixes, for the execution role of sandboxes with mounts=",
        cost(
            &["AWS::IAM::ManagedPolicy"],
            IAM_ONLY_IDLE,
            &["S3 requests and transfer of the mounted bucket, billed to it"],
            "destroy deletes the policy; the bucket is never touched",
            "IAM has no price of its own",
        ),
        &[
            required(
                "BucketName",
                "The one bucket the policy grants (one stack per bucket)",
            ),
            default(
                "Prefixes",
                "*",
                "Up to four key prefixes (comma list, IAM wildcards); * is the whole bucket",
            ),
            default(
                "ReadOnly",
                "true",
                "true grants reads only; false also writes and deletes",
            ),
        ],
        IAM,
        || pretty(&super::s3_mounts_template::template_value()),
    ),
    component(
        "sizes-guard",
        "RayitoRunAllowedSizes policy: RunMicrovm denied outside the listed image ARNs, and no image publishing, whatever else the identity is granted",
        cost(
            &["AWS::IAM::ManagedPolicy"],
            IAM_ONLY_IDLE,
            &[],
            "destroy deletes the policy; no image is touched",
            "IAM has no price of its own",
        ),
        &[required(
            "ImageArns",
            "The ARN (without a version) of each image allowed, comma separated, as rayito image list prints it",
        )],
        IAM,
        || pretty(&super::sizes_guard_template::template_value()),
    ),
    StackComponent {
        artifacts: EVENTS_ARTIFACTS,
        validate: Some(reconciler_interval),
        ..component(
            "events-webhooks",
            "Lifecycle events pipeline: log subscription, forwarder, deliverer and reconciler functions, DynamoDB events and webhooks tables, SQS failure queues, the stack key secret and the callers' policies, for events=",
            cost(
                &[
                    "AWS::Lambda::Function (x3)",
                    "AWS::DynamoDB::Table",
                    "AWS::SQS::Queue (x2)",
                    "AWS::SecretsManager::Secret",
                    "AWS::Logs::SubscriptionFilter",
                    "AWS::Events::Rule",
                    "AWS::IAM::ManagedPolicy (x4)",
                ],
                "~$0.40 (the stack key secret; the functions and tables idle at $0)",
                &[
                    "Lambda invocations per event and webhook delivery",
                    "DynamoDB on-demand requests per event",
                ],
                "destroy deletes everything the stack created, the events table included",
                "Secrets Manager, Lambda and DynamoDB pricing, us-east-1",
            ),
            &[
                required(
                    "LogGroupName",
                    "The log group the sandboxes write to (the subscription reads it)",
                ),
                required(
                    "ArtifactBucket",
                    "The bucket the functions' zip is uploaded to (filled from the artifact bucket)",
                ),
                default(
                    "ReconcilerIntervalMinutes",
                    "5",
                    "How often the reconciler runs, in minutes (2 to 60)",
                ),
            ],
            NAMED_IAM,
            super::events_webhooks_template::events_webhooks_template,
        )
    },
    component(
        "otlp-export",
        "RayitoOtlpExport policy (PutMetricData on the account's default OTLP dataset), for sandboxes exporting telemetry with their execution role",
        cost(
            &["AWS::IAM::ManagedPolicy"],
            IAM_ONLY_IDLE,
            &["exported metrics bill as CloudWatch OTLP ingestion ($0.50 per GB), not this policy"],
            "destroy deletes the policy; exported metrics stay",
            "CloudWatch pricing, us-east-1",
        ),
        &[],
        IAM,
        || pretty(&super::otlp_export_template::template_value()),
    ),
    component(
        "templates",
        "RayitoTemplateBuilder policy: build templates into images (never the protected base images), pass the build role, the context zip and the build log",
        cost(
            &["AWS::IAM::ManagedPolicy"],
            IAM_ONLY_IDLE,
            &["snapshot storage of each new image version, billed to the image"],
            "destroy deletes the policy; no image version or S3 object is deleted",
            "IAM has no price of its own",
        ),
        &[
            required(
                "ArtifactBucketArn",
                "ARN of the bucket the build context zip is uploaded to",
            ),
            required(
                "BuildRoleArn",
                "ARN of the build role (rayito setup's BuildRoleArn output)",
            ),
            default(
                "ImageLogGroupPrefix",
                "/rayito",
                "Prefix of the images' log groups, read when a build fails",
            ),
            default(
                "BaseImageBucketArn",
                "",
                "ARN of the bucket with the base image's code artifact when not the artifact bucket; empty: the artifact bucket",
            ),
            default(
                "ProtectedImageNamePrefix",
                "rayito-base",
                "Image names a template build may never update",
            ),
        ],
        IAM,
        || pretty(&super::templates_policy_template::template_value()),
    ),
    unsupported(
        "custom-domain",
        "CloudFront distribution with a wildcard alias, its routing function and a KeyValueStore, for domain=",
        cost(
            &[
                "AWS::CloudFront::Distribution",
                "AWS::CloudFront::Function",
                "AWS::CloudFront::KeyValueStore",
            ],
            "~$0 idle (CloudFront without traffic bills nothing)",
            &[
                "CloudFront: ~$0.085 per GB and $0.0075 per 10,000 HTTPS requests",
                "CloudFront Functions: ~$0.10 per million invocations",
                "KeyValueStore: ~$0.50 per million reads, ~$5 per million management calls",
            ],
            "destroy deletes the distribution (disabled first, ~15 min), the function and the store",
            "CloudFront pricing, launch figures",
        ),
        &[
            required(
                "PublicDomain",
                "Your domain; the alias is *.<PublicDomain> unless AlternateDomainNames",
            ),
            required(
                "CertificateArn",
                "ARN of an ACM certificate in us-east-1 covering the names",
            ),
            param(
                "AlternateDomainNames",
                "Explicit names instead of the wildcard (comma list)",
            ),
        ],
        &[],
        "the routing function at the distribution's edge (custom domains, domain=) is not built in this SDK yet",
    ),
    StackComponent {
        artifacts: DASHBOARD_ARTIFACTS,
        validate: Some(dashboard_parameters),
        ..component(
            "dashboard",
            "Hosted dashboard: Cognito sign-in, DynamoDB cache and audit, read (and actions) roles, a Lambda behind a function URL",
            cost(
                &[
                    "AWS::Cognito::UserPool + UserPoolDomain + UserPoolClient (+ UserPoolGroup with AllowActions=true, + UserPoolUser with InitialUserEmail)",
                    "AWS::DynamoDB::Table (x2: audit and cost cache, on-demand)",
                    "AWS::Lambda::Function + AWS::Lambda::Url + AWS::Logs::LogGroup",
                    "AWS::IAM::Role (read; + actions with AllowActions=true)",
                    "AWS::SSM::Parameter (Standard, free; only with ThemeJson)",
                ],
                "~$0 idle (on-demand tables, Lambda without requests)",
                &[
                    "Lambda invocations per page load and API call (the page polls every 15 s while open); the URL is public, so unauthenticated requests bill invocations too: set ReservedConcurrency to cap them",
                    "DynamoDB: one write per sandbox acted on and one per action (audit)",
                    "Cost Explorer: $0.01 per request when enabled",
                ],
                "destroy deletes everything the stack created, the audit table included",
                "Lambda, DynamoDB and Cognito pricing, us-east-1",
            ),
            &[
                required(
                    "ArtifactBucket",
                    "The bucket the dashboard's Lambda zip is uploaded to",
                ),
                default(
                    "AuthMode",
                    "cognito-jwt",
                    "cognito-jwt (aws-iam is not built in this SDK yet)",
                ),
                default("AllowActions", "false", "Bulk actions on sandboxes"),
                default(
                    "EnableCostExplorer",
                    "false",
                    "Billed cost through Cost Explorer ($0.01 per request)",
                ),
                default(
                    "ImageNamePrefix",
                    "rayito-",
                    "The actions role acts only on sandboxes of images named with this prefix",
                ),
                default("InitialUserEmail", "", "The first user's email"),
                default("DomainPrefix", "", "The Cognito domain's prefix"),
                default("ThemeJson", "", "Theme (at most 4,096 bytes of JSON)"),
                default("ThemeParameterName", "", "SSM parameter holding the theme"),
                default("LogoParameterName", "", "SSM parameter holding the logo"),
                default(
                    "ReservedConcurrency",
                    "",
                    "The Lambda's reserved concurrency",
                ),
                default("LogRetentionDays", "30", "Days the Lambda's logs are kept"),
            ],
            IAM,
            super::dashboard_template::dashboard_template,
        )
    },
    component(
        "dashboard-cloudwatch",
        "CloudWatch dashboard of the sandboxes' logs (Logs Insights over /rayito/*) and, when asked, their OTLP metrics and the memory quota's use",
        cost(
            &["AWS::CloudWatch::Dashboard"],
            "$0 within the account's 3 free dashboards (up to 50 metrics each); $3 per month per dashboard past them",
            &[
                "Logs Insights: each log widget runs its query when the dashboard opens or refreshes, billed per GB scanned ($0.005 per GB); keep the time range short",
                "OTLP charts: PromQL queries from the console are not billed; ingestion bills to telemetry",
            ],
            "destroy deletes the dashboard; no log or metric is deleted",
            "CloudWatch pricing, us-east-1, read 2026-10-13",
        ),
        &[
            default(
                "DashboardName",
                "",
                "Name of the dashboard (unique per account and region); empty: the stack's name",
            ),
            default(
                "LogGroupPrefix",
                "/rayito/",
                "Prefix of the log groups the widgets query; keep the trailing slash",
            ),
            default(
                "IncludeOtlp",
                "false",
                "true adds CPU, memory and disk charts of the OTLP metrics",
            ),
            default(
                "IncludeQuota",
                "false",
                "true adds the memory quota chart (the quota-alerts stack's metric)",
            ),
        ],
        &[],
        || pretty(&super::dashboard_cloudwatch_template::template_value()),
    ),
    StackComponent {
        validate: Some(session_seconds),
        ..component(
            "dashboard-read-role",
            "Read-only role of a target account for a dashboard running in another account; deploy it in the account to be seen",
            cost(
                &["AWS::IAM::Role (with one read-only inline policy)"],
                "$0 (IAM bills nothing)",
                &["each dashboard session is one sts:AssumeRole (free) and the dashboard's reads"],
                "destroy deletes the role; the dashboard's access ends at once",
                "IAM has no price of its own",
            ),
            &[
                required(
                    "TrustedPrincipalArn",
                    "ARN of the role or user, in the dashboard's account, that may assume this role (never an account root)",
                ),
                StackParameter {
                    no_echo: true,
                    ..default(
                        "ExternalId",
                        "",
                        "Optional: the role is assumed only with this same value",
                    )
                },
                default(
                    "MaxSessionSeconds",
                    "3600",
                    "Longest session (3,600 to 43,200 s); the dashboard asks for 3,600 s",
                ),
            ],
            IAM,
            || pretty(&super::dashboard_read_role_template::template_value()),
        )
    },
    StackComponent {
        artifacts: QUOTA_ALERTS_ARTIFACTS,
        validate: Some(thresholds_order),
        ..component(
            "quota-alerts",
            "Hourly check of the memory quota's use: SNS topic (and email), DynamoDB state, a Lambda, an EventBridge rule and the metric Rayito/Dashboard MemoryAllocatedFraction",
            cost(
                &[
                    "AWS::SNS::Topic (without TopicArn) and AWS::SNS::Subscription (with NotificationEmail)",
                    "AWS::DynamoDB::Table (on-demand, one state row)",
                    "AWS::Lambda::Function and AWS::Logs::LogGroup",
                    "AWS::Events::Rule and AWS::Lambda::Permission",
                    "AWS::IAM::Role (reads, sns:Publish, the metric and the state row)",
                ],
                "~$0.30 (the metric; the function's hourly runs fit the free tier)",
                &[
                    "one run per schedule (~720 a month at rate(1 hour)): ListServiceQuotas, ListMicrovms, one PutMetricData, one DynamoDB read and one write",
                    "SNS: one message per crossing of a threshold, not per run",
                ],
                "destroy deletes everything the stack created, the topic included (not a given TopicArn); the metric stops",
                "CloudWatch, Lambda, EventBridge, DynamoDB and SNS pricing, us-east-1",
            ),
            &[
                required(
                    "ArtifactBucket",
                    "The bucket the function's zip is uploaded to (filled from the artifact bucket)",
                ),
                default(
                    "ScheduleExpression",
                    "rate(1 hour)",
                    "How often the check runs (rate(...) or cron(...))",
                ),
                default("WarningPercent", "80", "Warning threshold, percent"),
                default(
                    "CriticalPercent",
                    "95",
                    "Critical threshold, percent (above the warning)",
                ),
                default(
                    "NotificationEmail",
                    "",
                    "Optional: an email subscribed to the stack's topic (ignored with TopicArn)",
                ),
                default(
                    "TopicArn",
                    "",
                    "Optional: an existing SNS topic of this account and region instead of a new one",
                ),
                default(
                    "LogRetentionDays",
                    "30",
                    "Days the function's logs are kept",
                ),
            ],
            IAM,
            || pretty(&super::quota_alerts_template::template_value()),
        )
    },
    unsupported(
        "iam",
        "Build and execution roles and the SandboxLauncher, ImagePublisher and Caller policies of a new account",
        cost(
            &["AWS::IAM::Role (x2)", "AWS::IAM::ManagedPolicy (x3)"],
            IAM_ONLY_IDLE,
            &[],
            "delete the stack rayito-m0-iam to remove the roles and policies",
            "IAM has no price of its own",
        ),
        &[],
        NAMED_IAM,
        "rayito setup deploys it (stack rayito-m0-iam) with its plan and apply",
    ),
    unsupported(
        "artifact-bucket",
        "The S3 artifact bucket images and stacks' code are uploaded to (rayito/images/ expires after 7 days)",
        cost(
            &["AWS::S3::Bucket", "AWS::S3::BucketPolicy"],
            "~$0 (S3 storage of the artifacts kept)",
            &["S3 storage and requests of the uploads"],
            "delete the stack rayito-m0-artifacts once the bucket is empty",
            "S3 pricing, us-east-1",
        ),
        &[],
        &[],
        "rayito setup deploys it (stack rayito-m0-artifacts) with its plan and apply",
    ),
];
