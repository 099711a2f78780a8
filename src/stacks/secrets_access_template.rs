//! The `secrets-access` stack's template: two managed policies over the
//! secrets under one name prefix, the reader's (what `secrets=` resolves)
//! and the admin's (the secret store). Webhook signing secrets
//! (`rayito/webhooks/`) are denied to the reader: a sandbox given one could
//! forge deliveries. IAM only, no cost.

use serde_json::{Value, json};

fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

/// A KMS statement kept only when a key is given.
fn kms(sid: &str, actions: &[&str]) -> Value {
    json!({
        "Fn::If": [
            "HasKmsKey",
            {
                "Sid": sid,
                "Effect": "Allow",
                "Action": actions,
                "Resource": { "Ref": "KmsKeyArn" },
                "Condition": { "StringEquals": { "kms:ViaService": sub("secretsmanager.${AWS::Region}.amazonaws.com") } }
            },
            { "Ref": "AWS::NoValue" }
        ]
    })
}

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    let under_prefix = sub(
        "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${SecretPrefix}*",
    );
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): managed policies for the caller of secrets, scoped to the secrets under SecretPrefix. IAM only ($0). Delete the stack to remove the policies.",
        "Parameters": {
            "SecretPrefix": {
                "Type": "String",
                "Default": "rayito/",
                "MinLength": 1,
                "MaxLength": 256,
                "AllowedPattern": "^[A-Za-z0-9/_+=.@-]*/$",
                "Description": "Secrets Manager name prefix, ending in '/' (an empty prefix would grant every secret)"
            },
            "KmsKeyArn": {
                "Type": "String",
                "Default": "",
                "Description": "ARN of the customer managed KMS key of the secrets; empty: the AWS managed key"
            }
        },
        "Conditions": {
            "HasKmsKey": { "Fn::Not": [{ "Fn::Equals": [{ "Ref": "KmsKeyArn" }, ""] }] }
        },
        "Resources": {
            "RayitoSecretsReader": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "Rayito secrets reader: resolves secrets for sandboxes (GetSecretValue, DescribeSecret) under the prefix",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "ReadSecretsUnderPrefix",
                                "Effect": "Allow",
                                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                                "Resource": under_prefix
                            },
                            {
                                "Sid": "NeverWebhookSigningSecrets",
                                "Effect": "Deny",
                                "Action": ["secretsmanager:GetSecretValue"],
                                "Resource": sub("arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:rayito/webhooks/*")
                            },
                            kms("DecryptThroughSecretsManager", &["kms:Decrypt"])
                        ]
                    }
                }
            },
            "RayitoSecretsAdmin": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "Rayito secrets admin: the secret store (create, update, describe, list, destroy) plus what the reader does",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "ManageSecretsUnderPrefix",
                                "Effect": "Allow",
                                "Action": [
                                    "secretsmanager:GetSecretValue",
                                    "secretsmanager:DescribeSecret",
                                    "secretsmanager:CreateSecret",
                                    "secretsmanager:PutSecretValue",
                                    "secretsmanager:UpdateSecret",
                                    "secretsmanager:DeleteSecret"
                                ],
                                "Resource": under_prefix
                            },
                            {
                                "Sid": "ListSecretsNeedsStar",
                                "Effect": "Allow",
                                "Action": ["secretsmanager:ListSecrets"],
                                "Resource": "*"
                            },
                            kms("EncryptDecryptThroughSecretsManager", &["kms:Decrypt", "kms:GenerateDataKey"])
                        ]
                    }
                }
            }
        },
        "Outputs": {
            "ReaderPolicyArn": {
                "Description": "Attach to the principal that creates sandboxes with secrets",
                "Value": { "Ref": "RayitoSecretsReader" }
            },
            "AdminPolicyArn": {
                "Description": "Attach to the principal that creates, rotates and destroys secrets",
                "Value": { "Ref": "RayitoSecretsAdmin" }
            }
        }
    })
}
