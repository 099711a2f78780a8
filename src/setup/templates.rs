//! The two CloudFormation templates `rayito setup` deploys, generated here
//! so that the code, the deployed stacks and docs/aws.md (which a test
//! compares) say the same thing. Names follow the reference's stacks, so
//! an account set up by either tool is recognised by both.
//!
//! Account, region and partition are CloudFormation pseudo parameters
//! (`${AWS::AccountId}` ...): the same template deploys anywhere. Only the
//! artifact bucket's name is written into the IAM template.

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The stack holding the artifact bucket.
pub const ARTIFACTS_STACK: &str = "rayito-m0-artifacts";
/// The stack holding the build role, the execution role and the policies.
pub const IAM_STACK: &str = "rayito-m0-iam";
/// The key prefix the image artifacts live under; expires after
/// [`IMAGE_ARTIFACT_DAYS`] days.
pub const IMAGE_ARTIFACT_PREFIX: &str = "rayito/images/";
/// How many days an image artifact is kept (a published image keeps its
/// own copy; the upload is only the build's input).
pub const IMAGE_ARTIFACT_DAYS: u32 = 7;

/// The outputs of the IAM stack, in the reference's names.
pub const IAM_OUTPUTS: [&str; 6] = [
    "BuildRoleArn",
    "ExecutionRoleArn",
    "CallerPolicyArn",
    "SandboxLauncherPolicyArn",
    "ImagePublisherPolicyArn",
    "TemplateFingerprint",
];

/// The artifact bucket the artifacts stack creates:
/// `rayito-artifacts-<account>-<region>`.
pub fn default_bucket(account: &str, region: &str) -> String {
    format!("rayito-artifacts-{account}-{region}")
}

/// The build role's name in `region`: `rayito-m0-build-<region>`.
pub fn build_role_name(region: &str) -> String {
    format!("rayito-m0-build-{region}")
}

/// `arn:<partition>:<rest>` with the pseudo parameters substituted by
/// CloudFormation.
fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

/// A trust policy letting Lambda assume a role for this account only.
fn lambda_trust() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Service": "lambda.amazonaws.com" },
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": { "StringEquals": { "aws:SourceAccount": { "Ref": "AWS::AccountId" } } }
        }]
    })
}

/// The log groups a build writes to.
fn build_log_groups() -> Value {
    json!([
        sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/rayito/*"),
        sub(
            "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/lambda-microvms/*"
        ),
        sub(
            "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/lambda/microvms/*"
        ),
    ])
}

/// The eight MicroVMs operations the SDK calls for sandboxes
/// (docs/aws.md, "The IAM policy").
const SANDBOX_ACTIONS: [&str; 8] = [
    "lambda:RunMicrovm",
    "lambda:GetMicrovm",
    "lambda:ListMicrovms",
    "lambda:TerminateMicrovm",
    "lambda:SuspendMicrovm",
    "lambda:ResumeMicrovm",
    "lambda:CreateMicrovmAuthToken",
    "lambda:GetMicrovmImage",
];

/// The policy documents of the IAM stack, by logical id, as the stack's
/// resources carry them (docs/aws.md transcribes each).
pub(crate) fn iam_policy_values(bucket: &str) -> Vec<(&'static str, Value)> {
    let objects = sub(&format!("arn:${{AWS::Partition}}:s3:::{bucket}/rayito/*"));
    let bucket_arn = sub(&format!("arn:${{AWS::Partition}}:s3:::{bucket}"));
    let images =
        sub("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:*");
    let build_role = json!({ "Fn::GetAtt": ["BuildRole", "Arn"] });
    let execution_role = json!({ "Fn::GetAtt": ["ExecutionRole", "Arn"] });
    let passed_to_lambda =
        json!({ "StringEquals": { "iam:PassedToService": "lambda.amazonaws.com" } });
    vec![
        (
            "BuildRole",
            json!({
                "Version": "2012-10-17",
                "Statement": [
                    { "Sid": "ReadArtifacts", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects },
                    {
                        "Sid": "WriteBuildLogs",
                        "Effect": "Allow",
                        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                        "Resource": build_log_groups()
                    }
                ]
            }),
        ),
        (
            "ExecutionRole",
            json!({
                "Version": "2012-10-17",
                "Statement": [{
                    "Sid": "WriteSandboxLogs",
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                    "Resource": sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/rayito/*")
                }]
            }),
        ),
        (
            "CallerPolicy",
            json!({
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "ReadSandboxesAndImages",
                        "Effect": "Allow",
                        "Action": [
                            "lambda:GetMicrovm",
                            "lambda:ListMicrovms",
                            "lambda:GetMicrovmImage",
                            "lambda:GetMicrovmImageVersion",
                            "lambda:ListMicrovmImages",
                            "lambda:ListMicrovmImageVersions"
                        ],
                        "Resource": "*"
                    },
                    {
                        "Sid": "ReadSetupStacks",
                        "Effect": "Allow",
                        "Action": ["cloudformation:DescribeStacks", "cloudformation:GetTemplate"],
                        "Resource": [
                            sub("arn:${AWS::Partition}:cloudformation:${AWS::Region}:${AWS::AccountId}:stack/rayito-m0-iam/*"),
                            sub("arn:${AWS::Partition}:cloudformation:${AWS::Region}:${AWS::AccountId}:stack/rayito-m0-artifacts/*")
                        ]
                    }
                ]
            }),
        ),
        (
            "SandboxLauncherPolicy",
            json!({
                "Version": "2012-10-17",
                "Statement": [
                    { "Sid": "RayitoSandboxes", "Effect": "Allow", "Action": SANDBOX_ACTIONS, "Resource": "*" },
                    {
                        "Sid": "RayitoExecutionRole",
                        "Effect": "Allow",
                        "Action": "iam:PassRole",
                        "Resource": execution_role,
                        "Condition": passed_to_lambda
                    }
                ]
            }),
        ),
        (
            "ImagePublisherPolicy",
            json!({
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "PublishImages",
                        "Effect": "Allow",
                        "Action": [
                            "lambda:CreateMicrovmImage",
                            "lambda:UpdateMicrovmImage",
                            "lambda:GetMicrovmImage",
                            "lambda:ListMicrovmImageVersions",
                            "lambda:GetMicrovmImageVersion",
                            "lambda:UpdateMicrovmImageVersion",
                            "lambda:DeleteMicrovmImageVersion",
                            "lambda:ListMicrovmImageBuilds",
                            "lambda:GetMicrovmImageBuild",
                            "lambda:TagResource",
                            "lambda:ListTags"
                        ],
                        "Resource": images
                    },
                    {
                        "Sid": "ListImages",
                        "Effect": "Allow",
                        "Action": ["lambda:ListMicrovmImages", "lambda:ListManagedMicrovmImageVersions"],
                        "Resource": "*"
                    },
                    {
                        "Sid": "PassBuildRole",
                        "Effect": "Allow",
                        "Action": "iam:PassRole",
                        "Resource": build_role,
                        "Condition": passed_to_lambda
                    },
                    {
                        "Sid": "ManagedNetworkConnectors",
                        "Effect": "Allow",
                        "Action": "lambda:PassNetworkConnector",
                        "Resource": sub("arn:${AWS::Partition}:lambda:${AWS::Region}:aws:network-connector:*")
                    },
                    {
                        "Sid": "Artifacts",
                        "Effect": "Allow",
                        "Action": ["s3:PutObject", "s3:GetObject"],
                        "Resource": objects
                    },
                    { "Sid": "ArtifactBucket", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn },
                    {
                        "Sid": "BuildLogs",
                        "Effect": "Allow",
                        "Action": ["logs:DescribeLogStreams", "logs:GetLogEvents"],
                        "Resource": sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/rayito/*")
                    }
                ]
            }),
        ),
    ]
}

/// The IAM stack's template for the artifact bucket `bucket`: the build
/// role (`rayito-m0-build-<region>`), the execution role
/// (`rayito-m0-exec-<region>`), three managed policies and the outputs
/// [`IAM_OUTPUTS`].
pub(crate) fn iam_template_value(bucket: &str) -> Value {
    let policies: serde_json::Map<String, Value> = iam_policy_values(bucket)
        .into_iter()
        .map(|(id, doc)| (id.to_owned(), doc))
        .collect();
    let managed = |id: &str, name: &str| {
        json!({
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "ManagedPolicyName": sub(&format!("{name}-${{AWS::Region}}")),
                "PolicyDocument": policies[id]
            }
        })
    };
    let resources = json!({
        "BuildRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": sub("rayito-m0-build-${AWS::Region}"),
                "AssumeRolePolicyDocument": lambda_trust(),
                "Policies": [{ "PolicyName": "rayito-build", "PolicyDocument": policies["BuildRole"] }]
            }
        },
        "ExecutionRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": sub("rayito-m0-exec-${AWS::Region}"),
                "AssumeRolePolicyDocument": lambda_trust(),
                "Policies": [{ "PolicyName": "rayito-sandbox-logs", "PolicyDocument": policies["ExecutionRole"] }]
            }
        },
        "CallerPolicy": managed("CallerPolicy", "rayito-m0-caller"),
        "SandboxLauncherPolicy": managed("SandboxLauncherPolicy", "rayito-m0-sandbox-launcher"),
        "ImagePublisherPolicy": managed("ImagePublisherPolicy", "rayito-m0-image-publisher"),
    });
    // What the template grants, in 12 hex digits: a deployed stack whose
    // fingerprint differs was made by another version of the template.
    let fingerprint: String = Sha256::digest(resources.to_string().as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rayito: the roles and policies to build images and run sandboxes (rayito setup)",
        "Resources": resources,
        "Outputs": {
            "BuildRoleArn": { "Value": { "Fn::GetAtt": ["BuildRole", "Arn"] } },
            "ExecutionRoleArn": { "Value": { "Fn::GetAtt": ["ExecutionRole", "Arn"] } },
            "CallerPolicyArn": { "Value": { "Ref": "CallerPolicy" } },
            "SandboxLauncherPolicyArn": { "Value": { "Ref": "SandboxLauncherPolicy" } },
            "ImagePublisherPolicyArn": { "Value": { "Ref": "ImagePublisherPolicy" } },
            "TemplateFingerprint": { "Value": fingerprint },
            "ArtifactBucketName": { "Value": bucket }
        }
    })
}

/// The TLS-only bucket policy of the artifact bucket.
pub(crate) fn bucket_policy_value() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyWithoutTls",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [
                { "Fn::GetAtt": ["ArtifactBucket", "Arn"] },
                sub("${ArtifactBucket.Arn}/*")
            ],
            "Condition": { "Bool": { "aws:SecureTransport": "false" } }
        }]
    })
}

/// The artifacts stack's template: the private, encrypted, TLS-only
/// bucket `rayito-artifacts-<account>-<region>`, kept when the stack is
/// deleted, whose `rayito/images/` objects expire after 7 days.
pub(crate) fn artifacts_template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rayito: the artifact bucket image and template builds read (rayito setup)",
        "Resources": {
            "ArtifactBucket": {
                "Type": "AWS::S3::Bucket",
                "DeletionPolicy": "Retain",
                "UpdateReplacePolicy": "Retain",
                "Properties": {
                    "BucketName": sub("rayito-artifacts-${AWS::AccountId}-${AWS::Region}"),
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            { "ServerSideEncryptionByDefault": { "SSEAlgorithm": "AES256" } }
                        ]
                    },
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": true,
                        "BlockPublicPolicy": true,
                        "IgnorePublicAcls": true,
                        "RestrictPublicBuckets": true
                    },
                    "OwnershipControls": { "Rules": [{ "ObjectOwnership": "BucketOwnerEnforced" }] },
                    "LifecycleConfiguration": {
                        "Rules": [{
                            "Id": "expire-image-artifacts",
                            "Status": "Enabled",
                            "Prefix": IMAGE_ARTIFACT_PREFIX,
                            "ExpirationInDays": IMAGE_ARTIFACT_DAYS
                        }]
                    }
                }
            },
            "ArtifactBucketPolicy": {
                "Type": "AWS::S3::BucketPolicy",
                "Properties": {
                    "Bucket": { "Ref": "ArtifactBucket" },
                    "PolicyDocument": bucket_policy_value()
                }
            }
        },
        "Outputs": {
            "BucketName": { "Value": { "Ref": "ArtifactBucket" } },
            "BucketArn": { "Value": { "Fn::GetAtt": ["ArtifactBucket", "Arn"] } }
        }
    })
}

/// The policy documents of the IAM stack, by logical id, as the stack's
/// resources carry them (docs/aws.md transcribes each), each as JSON text
/// (CloudFormation's `Fn::Sub` and `Fn::GetAtt` left in place).
pub fn iam_policies(bucket: &str) -> Vec<(&'static str, String)> {
    iam_policy_values(bucket)
        .into_iter()
        .map(|(id, doc)| (id, doc.to_string()))
        .collect()
}

/// The IAM stack's template for the artifact bucket `bucket`, as JSON
/// text: the build role (`rayito-m0-build-<region>`), the execution role
/// (`rayito-m0-exec-<region>`), three managed policies and the outputs
/// [`IAM_OUTPUTS`].
pub fn iam_template(bucket: &str) -> String {
    iam_template_value(bucket).to_string()
}

/// The TLS-only bucket policy of the artifact bucket, as JSON text.
pub fn bucket_policy() -> String {
    bucket_policy_value().to_string()
}

/// The artifacts stack's template, as JSON text: the private, encrypted,
/// TLS-only bucket `rayito-artifacts-<account>-<region>`, kept when the
/// stack is deleted, whose `rayito/images/` objects expire after 7 days.
pub fn artifacts_template() -> String {
    artifacts_template_value().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iam_template_has_the_reference_outputs_and_a_stable_fingerprint() {
        let t = iam_template_value("b");
        for key in IAM_OUTPUTS {
            assert!(t["Outputs"].get(key).is_some(), "{key}");
        }
        assert_eq!(iam_template_value("b"), t);
        let fp = t["Outputs"]["TemplateFingerprint"]["Value"]
            .as_str()
            .unwrap();
        assert_eq!(fp.len(), 12);
        assert_ne!(
            iam_template_value("other")["Outputs"]["TemplateFingerprint"],
            t["Outputs"]["TemplateFingerprint"]
        );
    }

    #[test]
    fn the_bucket_expires_image_artifacts_and_is_retained() {
        let t = artifacts_template_value();
        let bucket = &t["Resources"]["ArtifactBucket"];
        assert_eq!(bucket["DeletionPolicy"], "Retain");
        let rule = &bucket["Properties"]["LifecycleConfiguration"]["Rules"][0];
        assert_eq!(rule["Prefix"], "rayito/images/");
        assert_eq!(rule["ExpirationInDays"], 7);
    }
}

/// docs/aws.md transcribes every policy, resolved for account
/// `123456789012` in `us-east-1` with the default bucket; these tests keep
/// the page and the templates in step.
#[cfg(test)]
mod docs_tests {
    use super::*;

    const ACCOUNT: &str = "123456789012";
    const REGION: &str = "us-east-1";

    /// `value` as CloudFormation would resolve it in [`ACCOUNT`] and
    /// [`REGION`].
    fn resolve(value: &Value) -> Value {
        let bucket = default_bucket(ACCOUNT, REGION);
        match value {
            Value::Object(map) if map.len() == 1 => {
                if let Some(Value::String(text)) = map.get("Fn::Sub") {
                    return Value::String(
                        text.replace("${AWS::Partition}", "aws")
                            .replace("${AWS::Region}", REGION)
                            .replace("${AWS::AccountId}", ACCOUNT)
                            .replace("${ArtifactBucket.Arn}", &format!("arn:aws:s3:::{bucket}")),
                    );
                }
                if map.get("Ref") == Some(&json!("AWS::AccountId")) {
                    return json!(ACCOUNT);
                }
                if let Some(Value::Array(att)) = map.get("Fn::GetAtt") {
                    return match att[0].as_str() {
                        Some("BuildRole") => json!(format!(
                            "arn:aws:iam::{ACCOUNT}:role/{}",
                            build_role_name(REGION)
                        )),
                        Some("ExecutionRole") => {
                            json!(format!(
                                "arn:aws:iam::{ACCOUNT}:role/rayito-m0-exec-{REGION}"
                            ))
                        }
                        Some("ArtifactBucket") => json!(format!("arn:aws:s3:::{bucket}")),
                        _ => value.clone(),
                    };
                }
                Value::Object(map.iter().map(|(k, v)| (k.clone(), resolve(v))).collect())
            }
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), resolve(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(resolve).collect()),
            other => other.clone(),
        }
    }

    /// Every document the page shows, by its marker name.
    fn documents() -> Vec<(String, Value)> {
        let bucket = default_bucket(ACCOUNT, REGION);
        let mut docs: Vec<(String, Value)> = iam_policy_values(&bucket)
            .into_iter()
            .map(|(id, doc)| (id.to_owned(), resolve(&doc)))
            .collect();
        docs.push(("TrustPolicy".to_owned(), resolve(&lambda_trust())));
        docs.push(("BucketPolicy".to_owned(), resolve(&bucket_policy_value())));
        let bucket_props = &artifacts_template_value()["Resources"]["ArtifactBucket"]["Properties"];
        // The s3api form of the lifecycle rule: `Filter` instead of the
        // template's `Prefix`, `Expiration.Days`.
        let rule = &bucket_props["LifecycleConfiguration"]["Rules"][0];
        docs.push((
            "Lifecycle".to_owned(),
            json!({ "Rules": [{
                "ID": rule["Id"],
                "Status": rule["Status"],
                "Filter": { "Prefix": rule["Prefix"] },
                "Expiration": { "Days": rule["ExpirationInDays"] }
            }]}),
        ));
        docs
    }

    /// The JSON block after `<!-- setup-json: NAME -->` in docs/aws.md.
    fn documented(page: &str, name: &str) -> Option<Value> {
        let marker = format!("<!-- setup-json: {name} -->");
        let after = &page[page.find(&marker)? + marker.len()..];
        let start = after.find("```json\n")? + "```json\n".len();
        let end = after[start..].find("```")? + start;
        Some(serde_json::from_str(&after[start..end]).expect("the block is JSON"))
    }

    #[test]
    fn docs_aws_md_shows_every_policy_as_the_templates_make_it() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/aws.md"))
            .expect("docs/aws.md");
        let mut wrong = Vec::new();
        for (name, doc) in documents() {
            if documented(&page, &name).as_ref() != Some(&doc) {
                wrong.push(format!(
                    "<!-- setup-json: {name} -->\n```json\n{}\n```",
                    serde_json::to_string_pretty(&doc).unwrap()
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "docs/aws.md differs from the templates; the blocks should read:\n{}",
            wrong.join("\n\n")
        );
    }
}
