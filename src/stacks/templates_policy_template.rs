//! The `templates` stack's template: one managed policy,
//! `RayitoTemplateBuilder`, for the principal that builds templates into
//! images (create and update images, never the protected base images; pass
//! the build role; the context zip under `rayito/templates/`; the build
//! log). Kept apart from any launching policy: whoever creates sandboxes
//! need not publish images. IAM only.

use serde_json::{Value, json};

fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

fn allow(sid: &str, actions: &[&str], resource: Value) -> Value {
    json!({ "Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource })
}

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    let images =
        sub("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:*");
    let mut pass_role = allow(
        "PassBuildRole",
        &["iam:PassRole"],
        json!({ "Ref": "BuildRoleArn" }),
    );
    pass_role["Condition"] =
        json!({ "StringEquals": { "iam:PassedToService": "lambda.amazonaws.com" } });
    let statements = vec![
        allow(
            "BuildMicrovmImages",
            &[
                "lambda:UpdateMicrovmImage",
                "lambda:GetMicrovmImage",
                "lambda:GetMicrovmImageVersion",
                "lambda:ListMicrovmImageVersions",
            ],
            images,
        ),
        allow(
            "CreateMicrovmImages",
            &["lambda:CreateMicrovmImage"],
            json!("*"),
        ),
        json!({
            "Sid": "NeverOverwriteBaseImages",
            "Effect": "Deny",
            "Action": ["lambda:UpdateMicrovmImage"],
            "Resource": sub("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:${ProtectedImageNamePrefix}*")
        }),
        allow(
            "PassManagedNetworkConnectors",
            &["lambda:PassNetworkConnector"],
            sub(
                "arn:${AWS::Partition}:lambda:${AWS::Region}:aws:network-connector:aws-network-connector:*",
            ),
        ),
        pass_role,
        allow(
            "ReadAndWriteArtifacts",
            &["s3:GetObject", "s3:PutObject"],
            sub("${ArtifactBucketArn}/rayito/templates/*"),
        ),
        allow(
            "ReadBaseImageArtifacts",
            &["s3:GetObject"],
            json!({ "Fn::If": [
                "HasBaseImageBucket",
                sub("${BaseImageBucketArn}/rayito/*"),
                sub("${ArtifactBucketArn}/rayito/*")
            ] }),
        ),
        allow(
            "ReadBuildLogsOnFailure",
            &["logs:DescribeLogStreams", "logs:GetLogEvents"],
            sub(
                "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${ImageLogGroupPrefix}/*",
            ),
        ),
    ];
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): the policy of the principal that builds templates into images. IAM only ($0).",
        "Parameters": {
            "ArtifactBucketArn": {
                "Type": "String",
                "MinLength": 1,
                "Description": "ARN of the bucket the build context zip is uploaded to"
            },
            "BuildRoleArn": {
                "Type": "String",
                "MinLength": 1,
                "Description": "ARN of the build role (rayito setup's BuildRoleArn output)"
            },
            "ImageLogGroupPrefix": {
                "Type": "String",
                "Default": "/rayito",
                "MinLength": 1,
                "Description": "Prefix of the images' log groups read when a build fails"
            },
            "BaseImageBucketArn": {
                "Type": "String",
                "Default": "",
                "Description": "ARN of the bucket holding the base image's code artifact, when not the artifact bucket"
            },
            "ProtectedImageNamePrefix": {
                "Type": "String",
                "Default": "rayito-base",
                "MinLength": 1,
                "Description": "Image names a template build may never update (the published base images)"
            }
        },
        "Conditions": {
            "HasBaseImageBucket": { "Fn::Not": [{ "Fn::Equals": [{ "Ref": "BaseImageBucketArn" }, ""] }] }
        },
        "Resources": {
            "RayitoTemplateBuilder": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "Rayito template builder: build templates into images, with the S3 and logs access a build needs",
                    "PolicyDocument": { "Version": "2012-10-17", "Statement": statements }
                }
            }
        },
        "Outputs": {
            "TemplateBuilderPolicyArn": {
                "Description": "Attach to the principal that builds templates",
                "Value": { "Ref": "RayitoTemplateBuilder" }
            }
        }
    })
}
