//! The `otlp-export` stack's template: one managed policy,
//! `RayitoOtlpExport`, allowing `cloudwatch:PutMetricData` on the
//! account's default OTLP dataset, for the execution role of sandboxes
//! that export telemetry with the role's credentials. IAM only.

use serde_json::{Value, json};

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): PutMetricData on the account's default OTLP dataset, for sandboxes exporting telemetry with their execution role. IAM only ($0).",
        "Resources": {
            "RayitoOtlpExport": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "Rayito OTLP export: PutMetricData on the default OTLP dataset",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [{
                            "Sid": "PutOtlpMetricsOnTheDefaultDataset",
                            "Effect": "Allow",
                            "Action": ["cloudwatch:PutMetricData"],
                            "Resource": { "Fn::Sub": "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:dataset/default" }
                        }]
                    }
                }
            }
        },
        "Outputs": {
            "PolicyArn": {
                "Description": "Attach to the execution role of sandboxes that export telemetry with the role",
                "Value": { "Ref": "RayitoOtlpExport" }
            }
        }
    })
}
