//! The `events-webhooks` stack's template (`rayito::stacks`, extras §4.3):
//! its outputs, the grants of each caller policy and function role, and
//! the pipeline's wiring (the subscription filter, the stream mapping, the
//! schedule, the queues, the table) pinned; cfn-lint's check is with the
//! other templates' in `s3_mounts_stack`.

use std::collections::BTreeMap;

use rayito::stacks::{EVENTS_WEBHOOKS_OUTPUTS, EVENTS_WEBHOOKS_STACK, events_webhooks_template};
use serde_json::{Value, json};

fn template() -> Value {
    serde_json::from_str(&events_webhooks_template()).expect("the template is JSON")
}

/// Each statement's Sid with its actions, in the document's order.
fn grants(document: &Value) -> Vec<(String, Vec<String>)> {
    document["Statement"]
        .as_array()
        .expect("a statement list")
        .iter()
        .map(|s| {
            let actions = match &s["Action"] {
                Value::String(a) => vec![a.clone()],
                Value::Array(a) => a.iter().map(|v| v.as_str().unwrap().to_owned()).collect(),
                other => panic!("an action list, not {other}"),
            };
            (s["Sid"].as_str().unwrap_or("").to_owned(), actions)
        })
        .collect()
}

fn owned(pairs: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    pairs
        .iter()
        .map(|(sid, actions)| {
            (
                (*sid).to_owned(),
                actions.iter().map(|a| (*a).to_owned()).collect(),
            )
        })
        .collect()
}

#[test]
fn the_stack_has_the_references_name_parameters_and_outputs() {
    let t = template();
    assert_eq!(EVENTS_WEBHOOKS_STACK, "rayito-events-webhooks");
    let outputs: Vec<&String> = t["Outputs"].as_object().unwrap().keys().collect();
    let mut want: Vec<&str> = EVENTS_WEBHOOKS_OUTPUTS.to_vec();
    want.sort_unstable();
    assert_eq!(outputs, want);
    assert_eq!(
        want,
        [
            "DelivererFailuresQueueUrl",
            "EventsTableName",
            "ForwarderFailuresQueueUrl",
            "LauncherPolicyArn",
            "OperatorPolicyArn",
            "ReaderPolicyArn",
            "ReconcilerFunctionArn",
            "StackKeySecretArn",
            "WebhookAdminPolicyArn",
        ]
    );
    let params = &t["Parameters"];
    let names: Vec<&String> = params.as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        [
            "ArtifactBucket",
            "ArtifactS3Key",
            "LogGroupName",
            "ReconcilerIntervalMinutes"
        ]
    );
    let interval = &params["ReconcilerIntervalMinutes"];
    assert_eq!(
        (&interval["Default"], &interval["MinValue"]),
        (&json!(5), &json!(2))
    );
}

#[test]
fn each_caller_policy_grants_exactly_its_jobs_actions() {
    let t = template();
    let policy = |name: &str| {
        let r = &t["Resources"][name];
        assert_eq!(r["Type"], "AWS::IAM::ManagedPolicy", "{name}");
        grants(&r["Properties"]["PolicyDocument"])
    };
    let describe: (&str, &[&str]) = ("ResolveStackOutputs", &["cloudformation:DescribeStacks"]);
    let stack_key: (&str, &[&str]) = ("ReadStackKey", &["secretsmanager:GetSecretValue"]);
    let mut want = BTreeMap::new();
    want.insert("EventsLauncherPolicy", owned(&[stack_key, describe]));
    want.insert(
        "EventsReaderPolicy",
        owned(&[
            ("QueryEvents", &["dynamodb:Query"]),
            ("QueryAllEvents", &["dynamodb:Query"]),
            describe,
        ]),
    );
    want.insert(
        "EventsWebhookAdminPolicy",
        owned(&[
            (
                "ManageWebhooks",
                &["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"],
            ),
            describe,
        ]),
    );
    want.insert(
        "EventsOperatorPolicy",
        owned(&[
            stack_key,
            (
                "WriteWebhooks",
                &["dynamodb:PutItem", "dynamodb:DeleteItem"],
            ),
            ("ReadWebhooksAndEvents", &["dynamodb:Query"]),
            describe,
        ]),
    );
    for (name, grants) in &want {
        assert_eq!(&policy(name), grants, "{name}");
    }
    // The table rows each one may touch: the webhook admin WEBHOOK only,
    // the reader EVENT# only.
    let leading = |name: &str, sid: &str| {
        let doc = &t["Resources"][name]["Properties"]["PolicyDocument"];
        let s = doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["Sid"] == sid)
            .unwrap()
            .clone();
        s["Condition"].clone()
    };
    assert_eq!(
        leading("EventsWebhookAdminPolicy", "ManageWebhooks"),
        json!({ "ForAllValues:StringEquals": { "dynamodb:LeadingKeys": ["WEBHOOK"] } })
    );
    assert_eq!(
        leading("EventsReaderPolicy", "QueryEvents"),
        json!({ "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["EVENT#*"] } })
    );
}

#[test]
fn each_function_role_grants_only_what_its_function_calls() {
    let t = template();
    let role =
        |name: &str| grants(&t["Resources"][name]["Properties"]["Policies"][0]["PolicyDocument"]);
    let logs: (&str, &[&str]) = ("WriteLogs", &["logs:CreateLogStream", "logs:PutLogEvents"]);
    assert_eq!(
        role("ForwarderRole"),
        owned(&[
            ("WriteEvents", &["dynamodb:PutItem"]),
            ("ReadSandboxState", &["dynamodb:GetItem"]),
            ("SendToFailuresQueue", &["sqs:SendMessage"]),
            ("ReadStackKey", &["secretsmanager:GetSecretValue"]),
            logs,
        ])
    );
    assert_eq!(
        role("DelivererRole"),
        owned(&[
            (
                "ReadStream",
                &[
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                    "dynamodb:DescribeStream",
                    "dynamodb:ListStreams",
                ],
            ),
            ("ReadWebhooks", &["dynamodb:Query"]),
            ("WriteDeliveryDedupe", &["dynamodb:PutItem"]),
            ("ReadWebhookSecrets", &["secretsmanager:GetSecretValue"]),
            logs,
            ("SendToFailuresQueue", &["sqs:SendMessage"]),
        ])
    );
    assert_eq!(
        role("ReconcilerRole"),
        owned(&[
            ("QueryOpenSandboxes", &["dynamodb:Query"]),
            ("ReadSandboxState", &["dynamodb:GetItem"]),
            ("WriteSynthesizedEvents", &["dynamodb:PutItem"]),
            ("ListMicrovms", &["lambda:ListMicrovms"]),
            logs,
        ])
    );
}

#[test]
fn the_pipeline_is_wired_as_the_spec_says() {
    let t = template();
    let r = &t["Resources"];
    for (function, which, timeout) in [
        ("ForwarderFunction", "forwarder", 30),
        ("DelivererFunction", "deliverer", 60),
        ("ReconcilerFunction", "reconciler", 60),
    ] {
        let p = &r[function]["Properties"];
        assert_eq!(p["Runtime"], "provided.al2023", "{function}");
        assert_eq!(p["Handler"], "bootstrap", "{function}");
        assert_eq!(p["Timeout"], timeout, "{function}");
        assert_eq!(
            p["Code"],
            json!({ "S3Bucket": { "Ref": "ArtifactBucket" }, "S3Key": { "Ref": "ArtifactS3Key" } })
        );
        assert_eq!(
            p["Environment"]["Variables"]["RAYITO_EVENTS_FUNCTION"],
            which
        );
    }
    let filter = &r["ForwarderSubscription"]["Properties"];
    assert_eq!(filter["FilterPattern"], "\"rayito.event.v1 \"");
    assert_eq!(filter["LogGroupName"], json!({ "Ref": "LogGroupName" }));
    let invoke = &r["ForwarderEventInvokeConfig"]["Properties"];
    assert_eq!(invoke["MaximumRetryAttempts"], 2);
    let mapping = &r["DelivererEventSourceMapping"]["Properties"];
    assert_eq!(mapping["BatchSize"], 10);
    assert_eq!(mapping["MaximumRetryAttempts"], 2);
    assert_eq!(mapping["BisectBatchOnFunctionError"], true);
    assert_eq!(
        mapping["FunctionResponseTypes"],
        json!(["ReportBatchItemFailures"])
    );
    assert_eq!(
        mapping["DestinationConfig"]["OnFailure"]["Destination"],
        json!({ "Fn::GetAtt": ["DelivererFailuresQueue", "Arn"] })
    );
    assert_eq!(
        r["ReconcilerSchedule"]["Properties"]["ScheduleExpression"],
        json!({ "Fn::Sub": "rate(${ReconcilerIntervalMinutes} minutes)" })
    );
    for queue in ["ForwarderFailuresQueue", "DelivererFailuresQueue"] {
        assert_eq!(r[queue]["Properties"]["MessageRetentionPeriod"], 1_209_600);
    }
    let table = &r["EventsTable"]["Properties"];
    assert_eq!(
        table["TimeToLiveSpecification"],
        json!({ "AttributeName": "expires_at", "Enabled": true })
    );
    assert_eq!(table["StreamSpecification"]["StreamViewType"], "NEW_IMAGE");
    let indexes: Vec<&Value> = table["GlobalSecondaryIndexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["IndexName"])
        .collect();
    assert_eq!(indexes, [&json!("gsi1"), &json!("open")]);
    let log_groups = r
        .as_object()
        .unwrap()
        .values()
        .filter(|v| v["Type"] == "AWS::Logs::LogGroup")
        .count();
    assert_eq!(log_groups, 3);
}
