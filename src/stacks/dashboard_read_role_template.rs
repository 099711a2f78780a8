//! The `dashboard-read-role` stack's template: a read-only role a target
//! account creates so that a dashboard running in another account can show
//! its sandboxes, images and quotas (`sts:AssumeRole` by one trusted
//! principal, optionally with an external id). IAM only.

use serde_json::{Value, json};

/// The session length the dashboard asks for, in seconds (the role's
/// default maximum).
pub const DASHBOARD_SESSION_SECONDS: u32 = 3600;

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): a read-only role of this account for a dashboard running in another account. IAM only ($0). Delete the stack to revoke the access at once.",
        "Parameters": {
            "TrustedPrincipalArn": {
                "Type": "String",
                "AllowedPattern": "^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$",
                "Description": "ARN of the role or user, in the dashboard's account, that may assume this role (never an account root)"
            },
            "ExternalId": {
                "Type": "String",
                "Default": "",
                "NoEcho": true,
                "AllowedPattern": "^$|^[A-Za-z0-9+=,.@:/-]{2,1224}$",
                "Description": "When set, the role is assumed only by callers passing this same value"
            },
            "MaxSessionSeconds": {
                "Type": "Number",
                "Default": DASHBOARD_SESSION_SECONDS,
                "MinValue": 3600,
                "MaxValue": 43200,
                "Description": "Longest session a caller may request (IAM allows 1 to 12 hours)"
            }
        },
        "Conditions": {
            "RequireExternalId": { "Fn::Not": [{ "Fn::Equals": [{ "Ref": "ExternalId" }, ""] }] }
        },
        "Resources": {
            "ReadRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "Description": "Rayito dashboard, read-only view of this account",
                    "MaxSessionDuration": { "Ref": "MaxSessionSeconds" },
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [{
                            "Effect": "Allow",
                            "Principal": { "AWS": { "Ref": "TrustedPrincipalArn" } },
                            "Action": "sts:AssumeRole",
                            "Condition": { "Fn::If": [
                                "RequireExternalId",
                                { "StringEquals": { "sts:ExternalId": { "Ref": "ExternalId" } } },
                                { "Ref": "AWS::NoValue" }
                            ] }
                        }]
                    },
                    "Policies": [{
                        "PolicyName": "dashboard-read",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Sid": "ListMicrovms",
                                    "Effect": "Allow",
                                    "Action": ["lambda:ListMicrovms", "lambda:ListMicrovmImages"],
                                    "Resource": "*"
                                },
                                {
                                    "Sid": "ReadImageVersions",
                                    "Effect": "Allow",
                                    "Action": ["lambda:ListMicrovmImageVersions", "lambda:GetMicrovmImageVersion"],
                                    "Resource": { "Fn::Sub": "arn:${AWS::Partition}:lambda:*:${AWS::AccountId}:microvm-image:*" }
                                },
                                {
                                    "Sid": "ReadQuotas",
                                    "Effect": "Allow",
                                    "Action": ["servicequotas:ListServiceQuotas"],
                                    "Resource": "*"
                                }
                            ]
                        }
                    }]
                }
            }
        },
        "Outputs": {
            "RoleArn": {
                "Description": "Pass it to the dashboard of the other account",
                "Value": { "Fn::GetAtt": ["ReadRole", "Arn"] }
            }
        }
    })
}
