//! The `quota-alerts` stack's template (extras §6, §7): an EventBridge
//! schedule runs one Lambda (the `quota-alerts` function of crate
//! `rayito-events-lambda`, the same `bootstrap` the events-webhooks stack
//! runs, told apart by `RAYITO_EVENTS_FUNCTION`) that measures the memory
//! allocated to MicroVMs against the region's quota, publishes the fraction
//! as the metric `Rayito/Dashboard` `MemoryAllocatedFraction` and publishes
//! to SNS once per rise of its level. One DynamoDB row keeps the last
//! level. Its role reads MicroVMs and Service Quotas and writes only the
//! alert, the metric (its namespace only) and the row.
//!
//! Parameters keep the reference's names and the function's environment
//! its variables, so that either SDK reads and updates a stack the other
//! deployed.

use serde_json::{Value, json};

use super::cloudwatch_board::QUOTA_METRIC_NAMESPACE;

/// The function's environment variable that names it in the `bootstrap`.
const FUNCTION_ENV: &str = "RAYITO_EVENTS_FUNCTION";
/// Its value for this stack's function.
const FUNCTION: &str = "quota-alerts";

/// The stack's outputs, in the order the template lists them.
#[cfg(test)]
pub(crate) const OUTPUTS: [&str; 3] = ["TopicArn", "StateTableName", "FunctionName"];

/// `CriticalPercent` must be above `WarningPercent` (the function refuses
/// the other order on every run, which would leave the alert dead).
pub(crate) const THRESHOLDS_ORDER: &str = "quota-alerts: CriticalPercent must be greater than WarningPercent; pass a critical threshold above the warning one";

fn reference(name: &str) -> Value {
    json!({ "Ref": name })
}

fn get_att(resource: &str, attribute: &str) -> Value {
    json!({ "Fn::GetAtt": [resource, attribute] })
}

/// The topic the alerts go to: the stack's, or the given one.
fn topic() -> Value {
    json!({ "Fn::If": ["CreateTopic", reference("AlertTopic"), reference("TopicArn")] })
}

fn statement(sid: &str, actions: &[&str], resource: Value) -> Value {
    json!({ "Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource })
}

fn role() -> Value {
    let mut metric = statement(
        "PublishUsageMetric",
        &["cloudwatch:PutMetricData"],
        json!("*"),
    );
    metric["Condition"] =
        json!({ "StringEquals": { "cloudwatch:namespace": QUOTA_METRIC_NAMESPACE } });
    json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Principal": { "Service": "lambda.amazonaws.com" },
                    "Action": "sts:AssumeRole"
                }]
            },
            "Policies": [{
                "PolicyName": "quota-alerts",
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        statement(
                            "WriteOwnLogs",
                            &["logs:CreateLogStream", "logs:PutLogEvents"],
                            json!({ "Fn::Sub": "${FunctionLogGroup.Arn}:*" }),
                        ),
                        // List* operations authorize on "*".
                        statement("ListMicrovms", &["lambda:ListMicrovms"], json!("*")),
                        statement(
                            "ReadImageVersions",
                            &["lambda:GetMicrovmImageVersion"],
                            json!({ "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:*" }),
                        ),
                        statement("ReadQuotas", &["servicequotas:ListServiceQuotas"], json!("*")),
                        statement("PublishAlert", &["sns:Publish"], topic()),
                        statement(
                            "KeepLastLevel",
                            &["dynamodb:GetItem", "dynamodb:PutItem"],
                            get_att("StateTable", "Arn"),
                        ),
                        metric,
                    ]
                }
            }]
        }
    })
}

fn resources() -> Value {
    json!({
        "AlertTopic": {
            "Type": "AWS::SNS::Topic",
            "Condition": "CreateTopic",
            "Properties": { "DisplayName": "Rayito quota alerts" }
        },
        "EmailSubscription": {
            "Type": "AWS::SNS::Subscription",
            "Condition": "SubscribeEmail",
            "Properties": {
                "TopicArn": reference("AlertTopic"),
                "Protocol": "email",
                "Endpoint": reference("NotificationEmail")
            }
        },
        // One row (key `check`) holds the last level.
        "StateTable": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [{ "AttributeName": "check", "AttributeType": "S" }],
                "KeySchema": [{ "AttributeName": "check", "KeyType": "HASH" }]
            }
        },
        "FunctionLogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": { "RetentionInDays": reference("LogRetentionDays") }
        },
        "FunctionRole": role(),
        "CheckFunction": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Description": "Rayito scheduled quota check (publishes to SNS when the memory use crosses a threshold)",
                "Runtime": "provided.al2023",
                "Handler": "bootstrap",
                "Architectures": ["x86_64"],
                "Role": get_att("FunctionRole", "Arn"),
                "Timeout": 120,
                "MemorySize": 256,
                "LoggingConfig": { "LogGroup": reference("FunctionLogGroup") },
                "Code": {
                    "S3Bucket": reference("ArtifactBucket"),
                    "S3Key": reference("ArtifactS3Key")
                },
                "Environment": { "Variables": {
                    FUNCTION_ENV: FUNCTION,
                    "RAYITO_ALERTS_TOPIC_ARN": topic(),
                    "RAYITO_ALERTS_STATE_TABLE": reference("StateTable"),
                    "RAYITO_ALERTS_WARNING_PERCENT": reference("WarningPercent"),
                    "RAYITO_ALERTS_CRITICAL_PERCENT": reference("CriticalPercent")
                }}
            }
        },
        "CheckSchedule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Description": "Runs the Rayito quota check",
                "ScheduleExpression": reference("ScheduleExpression"),
                "State": "ENABLED",
                "Targets": [{ "Id": "quota-check", "Arn": get_att("CheckFunction", "Arn") }]
            }
        },
        "ScheduleInvokePermission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Action": "lambda:InvokeFunction",
                "FunctionName": reference("CheckFunction"),
                "Principal": "events.amazonaws.com",
                "SourceArn": get_att("CheckSchedule", "Arn")
            }
        }
    })
}

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): scheduled quota alerts. An EventBridge schedule runs one Lambda that measures the memory allocated to MicroVMs against the region's quota, publishes the fraction as the metric Rayito/Dashboard MemoryAllocatedFraction, and publishes to SNS once per crossing of a threshold. Read-only on MicroVMs and Service Quotas. One stack watches one region; delete it to remove everything it created.",
        "Parameters": {
            "ArtifactBucket": {
                "Type": "String",
                "MinLength": 3,
                "Description": "The bucket holding the function's zip (filled from the deploy's artifact bucket)"
            },
            "ArtifactS3Key": {
                "Type": "String",
                "MinLength": 1,
                "Description": "The function's zip's key in ArtifactBucket (rayito/stacks/quota-alerts/<sha256>.zip, filled by the deploy)"
            },
            "ScheduleExpression": {
                "Type": "String",
                "Default": "rate(1 hour)",
                "AllowedPattern": "^(rate|cron)\\(.+\\)$",
                "Description": "EventBridge schedule of the check; each run lists the region's MicroVMs and writes one metric data point"
            },
            "WarningPercent": {
                "Type": "Number",
                "Default": 80,
                "MinValue": 1,
                "MaxValue": 100,
                "Description": "Percent of the memory quota at which the first alert is published"
            },
            "CriticalPercent": {
                "Type": "Number",
                "Default": 95,
                "MinValue": 1,
                "MaxValue": 100,
                "Description": "Percent of the memory quota at which the critical alert is published; above WarningPercent"
            },
            "NotificationEmail": {
                "Type": "String",
                "Default": "",
                "AllowedPattern": "^$|^[^@\\s]+@[^@\\s]+$",
                "Description": "Optional: subscribes this address to the stack's topic (the recipient confirms it); ignored with TopicArn"
            },
            "TopicArn": {
                "Type": "String",
                "Default": "",
                "AllowedPattern": "^$|^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$",
                "Description": "Optional: an existing SNS topic of this account and region to publish to instead of a new one (its policy must let the function's role publish)"
            },
            "LogRetentionDays": {
                "Type": "Number",
                "Default": 30,
                "AllowedValues": [1, 3, 5, 7, 14, 30, 60, 90, 180, 365],
                "Description": "Days the function's log group keeps its lines"
            }
        },
        "Conditions": {
            "CreateTopic": { "Fn::Equals": [reference("TopicArn"), ""] },
            "SubscribeEmail": { "Fn::And": [
                { "Condition": "CreateTopic" },
                { "Fn::Not": [{ "Fn::Equals": [reference("NotificationEmail"), ""] }] }
            ]}
        },
        "Resources": resources(),
        "Outputs": {
            "TopicArn": {
                "Description": "The SNS topic the alerts go to (subscribe to it)",
                "Value": topic()
            },
            "StateTableName": {
                "Description": "The table holding the last alert level",
                "Value": reference("StateTable")
            },
            "FunctionName": {
                "Description": "The scheduled check; invoke it by hand to test the wiring",
                "Value": reference("CheckFunction")
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_is_listed_and_the_function_is_the_bootstraps() {
        let t = template_value();
        let got: Vec<&str> = t["Outputs"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = OUTPUTS.to_vec();
        want.sort_unstable();
        assert_eq!(got, want);
        let vars = &t["Resources"]["CheckFunction"]["Properties"]["Environment"]["Variables"];
        assert_eq!(vars[FUNCTION_ENV], FUNCTION);
    }
}
