//! The `events-webhooks` stack's template (spec: extras §4.3): the
//! pipeline that turns each sandbox's signed event lines into stored,
//! queryable records and signed webhook deliveries. Generated here, like
//! setup's and s3-mounts', so that what is deployed, what cfn-lint checks
//! and what the tests pin are one text.
//!
//! Resources: the stack key (a Secrets Manager secret), the events table
//! (streams, TTL, the `gsi1` and sparse `open` indexes), the three
//! functions of crate `rayito-events-lambda` (one `bootstrap` binary on
//! `provided.al2023`, told apart by `RAYITO_EVENTS_FUNCTION`), each with its
//! own log group and least-privilege role, the forwarder's subscription
//! filter and async-invoke failure queue, the deliverer's stream mapping and
//! failure queue, the reconciler's schedule, and four caller policies.
//!
//! Parameters keep the reference's names (`ArtifactS3Key`, not a new one),
//! so that either SDK reads and updates a stack the other deployed.

use serde_json::{Value, json};

/// The stack's default name.
pub const EVENTS_WEBHOOKS_STACK: &str = "rayito-events-webhooks";
/// The reconciler's default schedule, in minutes (the template's default).
pub const DEFAULT_RECONCILER_INTERVAL_MINUTES: u32 = 5;
/// The shortest reconciler schedule the template takes (Scheduler's
/// `rate(1 minute)` is singular; the template always renders `minutes`).
pub const MIN_RECONCILER_INTERVAL_MINUTES: u32 = 2;
/// The longest reconciler schedule the template takes.
pub const MAX_RECONCILER_INTERVAL_MINUTES: u32 = 60;
/// The subscription filter's pattern: a line carrying an event.
pub const EVENT_FILTER_PATTERN: &str = "\"rayito.event.v1 \"";
/// The environment variable that tells the one `bootstrap` binary which
/// function it runs (`forwarder`, `deliverer` or `reconciler`).
pub const FUNCTION_ENV: &str = "RAYITO_EVENTS_FUNCTION";

/// The template's parameter names, as `deploy` passes them.
pub mod params {
    /// The log group the sandboxes write to (the filter reads it).
    pub const LOG_GROUP_NAME: &str = "LogGroupName";
    /// The bucket holding the functions' zip.
    pub const ARTIFACT_BUCKET: &str = "ArtifactBucket";
    /// The zip's key in that bucket.
    pub const ARTIFACT_S3_KEY: &str = "ArtifactS3Key";
    /// The reconciler's schedule, in minutes.
    pub const RECONCILER_INTERVAL_MINUTES: &str = "ReconcilerIntervalMinutes";
}

/// The stack's outputs, in the order the template lists them.
pub const EVENTS_WEBHOOKS_OUTPUTS: [&str; 9] = [
    "EventsTableName",
    "StackKeySecretArn",
    "LauncherPolicyArn",
    "ReaderPolicyArn",
    "WebhookAdminPolicyArn",
    "OperatorPolicyArn",
    "ReconcilerFunctionArn",
    "DelivererFailuresQueueUrl",
    "ForwarderFailuresQueueUrl",
];

fn get_att(resource: &str, attribute: &str) -> Value {
    json!({ "Fn::GetAtt": [resource, attribute] })
}

fn reference(name: &str) -> Value {
    json!({ "Ref": name })
}

fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

fn table_arn() -> Value {
    get_att("EventsTable", "Arn")
}

fn statement(sid: &str, actions: &[&str], resource: Value) -> Value {
    json!({ "Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource })
}

/// A statement on the table limited to rows whose partition key matches
/// `keys` (`dynamodb:LeadingKeys`): `like` takes wildcards, else exact.
fn keyed(sid: &str, actions: &[&str], keys: &[&str], like: bool) -> Value {
    let op = if like {
        "ForAllValues:StringLike"
    } else {
        "ForAllValues:StringEquals"
    };
    let mut s = statement(sid, actions, table_arn());
    s["Condition"] = json!({ op: { "dynamodb:LeadingKeys": keys } });
    s
}

fn document(statements: Vec<Value>) -> Value {
    json!({ "Version": "2012-10-17", "Statement": statements })
}

fn resolve_outputs() -> Value {
    statement(
        "ResolveStackOutputs",
        &["cloudformation:DescribeStacks"],
        reference("AWS::StackId"),
    )
}

fn read_stack_key() -> Value {
    statement(
        "ReadStackKey",
        &["secretsmanager:GetSecretValue"],
        reference("StackKeySecret"),
    )
}

/// Each function writes to its own log group only (never another
/// function's, nor the sandboxes' that the forwarder reads).
fn write_logs(log_group: &str) -> Value {
    statement(
        "WriteLogs",
        &["logs:CreateLogStream", "logs:PutLogEvents"],
        get_att(log_group, "Arn"),
    )
}

fn lambda_role(policy_name: &str, statements: Vec<Value>) -> Value {
    json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": document(vec![json!({
                "Effect": "Allow",
                "Principal": { "Service": "lambda.amazonaws.com" },
                "Action": "sts:AssumeRole"
            })]),
            "Policies": [{ "PolicyName": policy_name, "PolicyDocument": document(statements) }]
        }
    })
}

fn forwarder_role() -> Value {
    lambda_role(
        "forwarder",
        vec![
            keyed(
                "WriteEvents",
                &["dynamodb:PutItem"],
                &["EVENT#*", "STATE#*"],
                true,
            ),
            keyed(
                "ReadSandboxState",
                &["dynamodb:GetItem"],
                &["STATE#*"],
                true,
            ),
            statement(
                "SendToFailuresQueue",
                &["sqs:SendMessage"],
                get_att("ForwarderFailuresQueue", "Arn"),
            ),
            read_stack_key(),
            write_logs("ForwarderLogGroup"),
        ],
    )
}

fn deliverer_role() -> Value {
    lambda_role(
        "deliverer",
        vec![
            statement(
                "ReadStream",
                &[
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                    "dynamodb:DescribeStream",
                    "dynamodb:ListStreams",
                ],
                get_att("EventsTable", "StreamArn"),
            ),
            keyed("ReadWebhooks", &["dynamodb:Query"], &["WEBHOOK"], false),
            // A claim is a conditional PutItem, its outcome another PutItem
            // of the same DELIVERY# row.
            keyed(
                "WriteDeliveryDedupe",
                &["dynamodb:PutItem"],
                &["DELIVERY#*"],
                true,
            ),
            statement(
                "ReadWebhookSecrets",
                &["secretsmanager:GetSecretValue"],
                sub(
                    "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:rayito/webhooks/*",
                ),
            ),
            write_logs("DelivererLogGroup"),
            statement(
                "SendToFailuresQueue",
                &["sqs:SendMessage"],
                get_att("DelivererFailuresQueue", "Arn"),
            ),
        ],
    )
}

fn reconciler_role() -> Value {
    lambda_role(
        "reconciler",
        vec![
            statement(
                "QueryOpenSandboxes",
                &["dynamodb:Query"],
                sub("${EventsTable.Arn}/index/open"),
            ),
            keyed(
                "ReadSandboxState",
                &["dynamodb:GetItem"],
                &["STATE#*"],
                true,
            ),
            keyed(
                "WriteSynthesizedEvents",
                &["dynamodb:PutItem"],
                &["EVENT#*", "STATE#*"],
                true,
            ),
            statement("ListMicrovms", &["lambda:ListMicrovms"], json!("*")),
            write_logs("ReconcilerLogGroup"),
        ],
    )
}

/// One of the three functions: the one zip, `bootstrap` on
/// `provided.al2023` (x86_64: the binary the project's command builds),
/// `function` chosen by [`FUNCTION_ENV`].
fn function(function: &str, role: &str, log_group: &str, timeout_s: u32, env: Value) -> Value {
    let mut variables = json!({
        "EVENTS_TABLE_NAME": reference("EventsTable"),
        FUNCTION_ENV: function,
    });
    if let (Some(vars), Some(extra)) = (variables.as_object_mut(), env.as_object()) {
        vars.extend(extra.clone());
    }
    json!({
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Runtime": "provided.al2023",
            "Handler": "bootstrap",
            "Architectures": ["x86_64"],
            "Role": get_att(role, "Arn"),
            "LoggingConfig": { "LogGroup": reference(log_group) },
            "Timeout": timeout_s,
            "MemorySize": 256,
            "Code": {
                "S3Bucket": reference(params::ARTIFACT_BUCKET),
                "S3Key": reference(params::ARTIFACT_S3_KEY)
            },
            "Environment": { "Variables": variables }
        }
    })
}

/// A standard queue keeping what failed for 14 days (SQS's maximum); no
/// consumer ships: an operator reads it or alarms on its depth.
fn failures_queue() -> Value {
    json!({
        "Type": "AWS::SQS::Queue",
        "Properties": { "MessageRetentionPeriod": 1_209_600 }
    })
}

fn caller_policy(description: &str, statements: Vec<Value>) -> Value {
    json!({
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": { "Description": description, "PolicyDocument": document(statements) }
    })
}

fn events_table() -> Value {
    let key = |name: &str, kind: &str| json!({ "AttributeName": name, "KeyType": kind });
    let attr = |name: &str| json!({ "AttributeName": name, "AttributeType": "S" });
    json!({
        "Type": "AWS::DynamoDB::Table",
        "DeletionPolicy": "Delete",
        "UpdateReplacePolicy": "Delete",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [attr("pk"), attr("sk"), attr("gsi1pk"), attr("gsi1sk"), attr("open_pk")],
            "KeySchema": [key("pk", "HASH"), key("sk", "RANGE")],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": "gsi1",
                    "KeySchema": [key("gsi1pk", "HASH"), key("gsi1sk", "RANGE")],
                    "Projection": { "ProjectionType": "ALL" }
                },
                // Sparse: only an open sandbox's STATE# row carries
                // open_pk, so the reconciler reads the open ones without a
                // scan.
                {
                    "IndexName": "open",
                    "KeySchema": [key("open_pk", "HASH"), key("pk", "RANGE")],
                    "Projection": { "ProjectionType": "ALL" }
                }
            ],
            "TimeToLiveSpecification": { "AttributeName": "expires_at", "Enabled": true },
            "StreamSpecification": { "StreamViewType": "NEW_IMAGE" }
        }
    })
}

fn resources() -> Value {
    let log_group = json!({ "Type": "AWS::Logs::LogGroup" });
    json!({
        "StackKeySecret": {
            "Type": "AWS::SecretsManager::Secret",
            "Properties": {
                "Description": "rayito events-webhooks stack key: HMAC-SHA256(key, \"rayito.events.v1|\" + sandbox_id) is each sandbox's event key; read by the forwarder and the launching SDK, never sent to a guest",
                "GenerateSecretString": { "PasswordLength": 32, "ExcludePunctuation": true }
            }
        },
        "EventsTable": events_table(),
        "ForwarderRole": forwarder_role(),
        "DelivererRole": deliverer_role(),
        "ReconcilerRole": reconciler_role(),
        "ForwarderLogGroup": log_group,
        "DelivererLogGroup": log_group,
        "ReconcilerLogGroup": log_group,
        "ForwarderFunction": function(
            "forwarder", "ForwarderRole", "ForwarderLogGroup", 30,
            json!({ "STACK_KEY_SECRET_ID": reference("StackKeySecret") }),
        ),
        "ForwarderFailuresQueue": failures_queue(),
        // CloudWatch Logs invokes the forwarder asynchronously: a batch
        // whose writes kept failing lands in the queue, not nowhere.
        "ForwarderEventInvokeConfig": {
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {
                "FunctionName": reference("ForwarderFunction"),
                "Qualifier": "$LATEST",
                "MaximumRetryAttempts": 2,
                "DestinationConfig": {
                    "OnFailure": { "Destination": get_att("ForwarderFailuresQueue", "Arn") }
                }
            }
        },
        "ForwarderLogPermission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "FunctionName": reference("ForwarderFunction"),
                "Action": "lambda:InvokeFunction",
                "Principal": sub("logs.${AWS::Region}.amazonaws.com"),
                "SourceArn": sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${LogGroupName}:*")
            }
        },
        "ForwarderSubscription": {
            "Type": "AWS::Logs::SubscriptionFilter",
            "DependsOn": "ForwarderLogPermission",
            "Properties": {
                "LogGroupName": reference(params::LOG_GROUP_NAME),
                "DestinationArn": get_att("ForwarderFunction", "Arn"),
                "FilterPattern": EVENT_FILTER_PATTERN
            }
        },
        "DelivererFunction": function("deliverer", "DelivererRole", "DelivererLogGroup", 60, json!({})),
        "DelivererFailuresQueue": failures_queue(),
        "DelivererEventSourceMapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": get_att("EventsTable", "StreamArn"),
                "FunctionName": reference("DelivererFunction"),
                "StartingPosition": "LATEST",
                "BatchSize": 10,
                "MaximumRetryAttempts": 2,
                // A failing batch is halved until the one poison record is
                // alone: the others still get through.
                "BisectBatchOnFunctionError": true,
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                // Only new EVENT# rows invoke the deliverer (its own
                // DELIVERY# writes and the STATE# moves never do); the
                // function checks the same.
                "FilterCriteria": {
                    "Filters": [{
                        "Pattern": "{\"eventName\": [\"INSERT\"], \"dynamodb\": {\"NewImage\": {\"pk\": {\"S\": [{\"prefix\": \"EVENT#\"}]}}}}"
                    }]
                },
                "DestinationConfig": {
                    "OnFailure": { "Destination": get_att("DelivererFailuresQueue", "Arn") }
                }
            }
        },
        "ReconcilerFunction": function(
            "reconciler", "ReconcilerRole", "ReconcilerLogGroup", 60,
            // The schedule's own value: the synthetic event's window can
            // never drift from the schedule.
            json!({ "RECONCILER_INTERVAL_MINUTES": reference(params::RECONCILER_INTERVAL_MINUTES) }),
        ),
        "ReconcilerSchedulerRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": document(vec![json!({
                    "Effect": "Allow",
                    "Principal": { "Service": "scheduler.amazonaws.com" },
                    "Action": "sts:AssumeRole",
                    "Condition": { "StringEquals": { "aws:SourceAccount": reference("AWS::AccountId") } }
                })]),
                "Policies": [{
                    "PolicyName": "invoke-reconciler",
                    "PolicyDocument": document(vec![json!({
                        "Effect": "Allow",
                        "Action": "lambda:InvokeFunction",
                        "Resource": get_att("ReconcilerFunction", "Arn")
                    })])
                }]
            }
        },
        "ReconcilerSchedule": {
            "Type": "AWS::Scheduler::Schedule",
            "Properties": {
                "ScheduleExpression": sub("rate(${ReconcilerIntervalMinutes} minutes)"),
                "FlexibleTimeWindow": { "Mode": "OFF" },
                "Target": {
                    "Arn": get_att("ReconcilerFunction", "Arn"),
                    "RoleArn": get_att("ReconcilerSchedulerRole", "Arn")
                }
            }
        },
        "EventsLauncherPolicy": caller_policy(
            "rayito events: for the identity that creates sandboxes with events (reads the stack key to derive each sandbox's key, resolves the stack's outputs); nothing on the table",
            vec![read_stack_key(), resolve_outputs()],
        ),
        "EventsReaderPolicy": caller_policy(
            "rayito events: for the identity that only reads events (get_events): EVENT# rows and the gsi1 index; no webhooks, no stack key",
            vec![
                keyed("QueryEvents", &["dynamodb:Query"], &["EVENT#*"], true),
                statement("QueryAllEvents", &["dynamodb:Query"], sub("${EventsTable.Arn}/index/gsi1")),
                resolve_outputs(),
            ],
        ),
        "EventsWebhookAdminPolicy": caller_policy(
            "rayito events: for the identity that registers, lists and deletes webhooks: WEBHOOK rows only (webhooks are stack-wide: an operator's policy)",
            vec![
                keyed(
                    "ManageWebhooks",
                    &["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"],
                    &["WEBHOOK"],
                    false,
                ),
                resolve_outputs(),
            ],
        ),
        // Deprecated: the union of the three above, kept so that an
        // identity that has it attached keeps working.
        "EventsOperatorPolicy": caller_policy(
            "rayito events (deprecated: prefer the launcher, reader or webhook admin policy): the union of the three",
            vec![
                read_stack_key(),
                keyed("WriteWebhooks", &["dynamodb:PutItem", "dynamodb:DeleteItem"], &["WEBHOOK"], false),
                statement(
                    "ReadWebhooksAndEvents",
                    &["dynamodb:Query"],
                    json!([table_arn(), sub("${EventsTable.Arn}/index/gsi1")]),
                ),
                resolve_outputs(),
            ],
        ),
    })
}

fn outputs() -> Value {
    let out =
        |value: Value, description: &str| json!({ "Description": description, "Value": value });
    json!({
        "EventsTableName": out(reference("EventsTable"), "The events table (webhooks, events, sandbox states, deliveries)"),
        "StackKeySecretArn": out(reference("StackKeySecret"), "The stack key's secret: each sandbox's event key is derived from it"),
        "LauncherPolicyArn": out(reference("EventsLauncherPolicy"), "Attach to the identity that creates sandboxes with events"),
        "ReaderPolicyArn": out(reference("EventsReaderPolicy"), "Attach to the identity that only reads events"),
        "WebhookAdminPolicyArn": out(reference("EventsWebhookAdminPolicy"), "Attach to the identity that registers, lists and deletes webhooks"),
        "OperatorPolicyArn": out(reference("EventsOperatorPolicy"), "Deprecated union of the three policies above"),
        "ReconcilerFunctionArn": out(get_att("ReconcilerFunction", "Arn"), "The reconciler (synthesizes killed for sandboxes no longer listed)"),
        "DelivererFailuresQueueUrl": out(reference("DelivererFailuresQueue"), "Stream batches the deliverer could not finish (empty in normal operation)"),
        "ForwarderFailuresQueueUrl": out(reference("ForwarderFailuresQueue"), "Forwarder invocations that failed after Lambda's retries (empty in normal operation)"),
    })
}

/// The stack's template.
pub(crate) fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rayito events-webhooks: lifecycle events (created, paused, resumed, killed) read from the sandboxes' log group, stored 7 days and delivered to registered webhooks with signed requests; one secret, one on-demand table, three functions, two SQS queues, one schedule and four caller policies",
        "Parameters": {
            params::LOG_GROUP_NAME: {
                "Type": "String",
                "MinLength": 1,
                "Description": "The sandboxes' CloudWatch Logs log group (logging to CloudWatch); the subscription filter reads it, the stack never creates it"
            },
            params::ARTIFACT_BUCKET: {
                "Type": "String",
                "MinLength": 3,
                "Description": "The bucket holding the functions' zip"
            },
            params::ARTIFACT_S3_KEY: {
                "Type": "String",
                "MinLength": 1,
                "Description": "The functions' zip's key in ArtifactBucket (one bootstrap for the three functions)"
            },
            params::RECONCILER_INTERVAL_MINUTES: {
                "Type": "Number",
                "Default": DEFAULT_RECONCILER_INTERVAL_MINUTES,
                "MinValue": MIN_RECONCILER_INTERVAL_MINUTES,
                "MaxValue": MAX_RECONCILER_INTERVAL_MINUTES,
                "Description": "How often the reconciler runs, in minutes"
            }
        },
        "Resources": resources(),
        "Outputs": outputs(),
    })
}

/// The `events-webhooks` stack's template, as JSON text.
pub(crate) fn template() -> String {
    serde_json::to_string_pretty(&template_value()).unwrap_or_default()
}

/// The `events-webhooks` stack's template, as JSON text (what `deploy`
/// sends; cfn-lint checks it in the tests).
pub fn events_webhooks_template() -> String {
    template()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_is_listed() {
        let t = template_value();
        let outputs: Vec<&str> = t["Outputs"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = EVENTS_WEBHOOKS_OUTPUTS.to_vec();
        want.sort_unstable();
        let mut got = outputs.clone();
        got.sort_unstable();
        assert_eq!(got, want);
    }
}
