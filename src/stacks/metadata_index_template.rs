//! The `metadata-index` stack's template: the DynamoDB table of the
//! sandbox index (`SandboxIndex`, feature `dynamodb`; on-demand, TTL on
//! `expires_at`) and two managed policies, the writer's (PutItem) and the
//! reader's (BatchGetItem). An empty table costs nothing.

use serde_json::{Value, json};

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    let table_arn = json!({ "Fn::GetAtt": ["MetadataIndexTable", "Arn"] });
    let policy = |description: &str, sid: &str, action: &str| {
        json!({
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "Description": description,
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{ "Sid": sid, "Effect": "Allow", "Action": [action], "Resource": table_arn }]
                }
            }
        })
    };
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): the DynamoDB table of the sandbox metadata index and the writer's and reader's managed policies. On-demand billing and TTL on expires_at: an empty table costs $0. Delete the stack to remove the table and the policies.",
        "Parameters": {
            "TableName": {
                "Type": "String",
                "Default": "rayito-sandboxes",
                "MinLength": 3,
                "MaxLength": 255,
                "AllowedPattern": "^[A-Za-z0-9_.-]+$",
                "Description": "Name of the index table"
            },
            "PointInTimeRecovery": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["true", "false"],
                "Description": "Continuous backups (billed per GB-month)"
            },
            "DeletionProtection": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["true", "false"],
                "Description": "Blocks DeleteTable (and the stack's deletion) while true"
            }
        },
        // Booleans, not the parameters' strings: a reader that takes
        // "false" as a non-empty (true) string (moto does) gets it right.
        "Conditions": {
            "Backups": { "Fn::Equals": [{ "Ref": "PointInTimeRecovery" }, "true"] },
            "Protected": { "Fn::Equals": [{ "Ref": "DeletionProtection" }, "true"] }
        },
        "Resources": {
            "MetadataIndexTable": {
                "Type": "AWS::DynamoDB::Table",
                "DeletionPolicy": "Delete",
                "UpdateReplacePolicy": "Delete",
                "Properties": {
                    "TableName": { "Ref": "TableName" },
                    "BillingMode": "PAY_PER_REQUEST",
                    "AttributeDefinitions": [{ "AttributeName": "pk", "AttributeType": "S" }],
                    "KeySchema": [{ "AttributeName": "pk", "KeyType": "HASH" }],
                    "TimeToLiveSpecification": { "AttributeName": "expires_at", "Enabled": true },
                    "PointInTimeRecoverySpecification": {
                        "PointInTimeRecoveryEnabled": { "Fn::If": ["Backups", true, false] }
                    },
                    "DeletionProtectionEnabled": { "Fn::If": ["Protected", true, false] }
                }
            },
            "RayitoIndexWriter": policy(
                "Rayito metadata index writer: one row per sandbox created with an index (PutItem)",
                "PutIndexRows",
                "dynamodb:PutItem"
            ),
            "RayitoIndexReader": policy(
                "Rayito metadata index reader: listing sandboxes by metadata reads candidate rows (BatchGetItem)",
                "ReadIndexRows",
                "dynamodb:BatchGetItem"
            )
        },
        "Outputs": {
            "TableName": { "Description": "The index table", "Value": { "Ref": "MetadataIndexTable" } },
            "TableArn": { "Value": table_arn },
            "WriterPolicyArn": {
                "Description": "Attach to the identity that creates sandboxes or runs a pool",
                "Value": { "Ref": "RayitoIndexWriter" }
            },
            "ReaderPolicyArn": {
                "Description": "Attach to the identity that lists sandboxes with the index",
                "Value": { "Ref": "RayitoIndexReader" }
            }
        }
    })
}
