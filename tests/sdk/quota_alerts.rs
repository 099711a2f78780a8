//! The quota-alerts stack: its function (crate `rayito-events-lambda`,
//! `quota_alerts`) as a library, reading the emulator's MicroVMs and its
//! Service Quotas (a sandbox of ours running on it, the memory quota set
//! with `Faults::applied_quota`) and writing moto's CloudWatch, DynamoDB
//! and SNS, whose topic delivers to a real HTTP receiver here: below the
//! warning only the metric; the first crossing one message; the same level
//! again none; critical one more; back to ok none, and the next rise
//! alerts again. Its measure agrees with `Client::quotas()` on the same
//! backend. The stack deploys through `OptionalStacks` on moto.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use rayito::stacks::{OptionalStacks, StackDeploy, StackOptions};
use rayito::{AwsOptions, Client};
use rayito_events_lambda::quota_alerts::{self, Level, QuotaAlerts, Settings, Thresholds};
use rayito_events_lambda::signed::{SignedPost, form};
use sdk_support::moto::MotoServer;

use crate::sdk_support;

const MEMORY: &str = "L-CD1C0CC4";
const TABLE: &str = "rayito-quota-state";

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

/// One awsQuery call to moto (the test's own setup and reads).
async fn query(moto: &MotoServer, service: &'static str, pairs: &[(&str, &str)]) -> String {
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDQUOTAALERTS");
    let post = SignedPost::new(&config, service, "us-east-1", service).unwrap();
    let answer = post
        .post(
            "setup",
            &[("content-type", "application/x-www-form-urlencoded")],
            &form(pairs),
        )
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    assert_eq!(answer.status, 200, "{text}");
    text
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    text.split(open)
        .skip(1)
        .filter_map(|rest| rest.split_once(close).map(|(v, _)| v))
        .collect()
}

/// An HTTP receiver subscribed to the topic: the notifications moto
/// delivers (subject, message).
async fn receiver() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post({
            let seen = seen.clone();
            move |body: String| async move {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                if v["Type"] == "Notification" {
                    seen.lock().unwrap().push((
                        v["Subject"].as_str().unwrap_or_default().to_owned(),
                        v["Message"].as_str().unwrap_or_default().to_owned(),
                    ));
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

async fn state_table(config: &aws_types::SdkConfig) -> aws_sdk_dynamodb::Client {
    let client = aws_sdk_dynamodb::Client::new(config);
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("check")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("check")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("the state table");
    client
}

async fn stored_level(client: &aws_sdk_dynamodb::Client) -> Option<String> {
    let out = client
        .get_item()
        .table_name(TABLE)
        .key("check", AttributeValue::S("memory".into()))
        .send()
        .await
        .unwrap();
    out.item()
        .and_then(|i| i.get("level"))
        .and_then(|v| v.as_s().ok())
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_alerts_once_per_rise_on_moto_and_the_emulator() {
    let Some(moto) = moto().await else { return };
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    let key = emu.access_key();
    let reads = aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            aws_sdk_s3::config::Credentials::new(
                key.id.clone(),
                key.secret.clone(),
                key.session_token.clone(),
                None,
                "emulator",
            ),
        ))
        .endpoint_url(emu.endpoint_url())
        .build();
    let writes = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDQUOTAALERTS");
    let dynamodb = state_table(&writes).await;
    let created = query(
        &moto,
        "sns",
        &[("Action", "CreateTopic"), ("Name", "quota-alerts")],
    )
    .await;
    let topic_arn = between(&created, "<TopicArn>", "</TopicArn>")[0].to_owned();
    let (url, seen) = receiver().await;
    query(
        &moto,
        "sns",
        &[
            ("Action", "Subscribe"),
            ("TopicArn", &topic_arn),
            ("Protocol", "http"),
            ("Endpoint", &url),
        ],
    )
    .await;

    let check = QuotaAlerts::new(
        Settings {
            region: "us-east-1".into(),
            topic_arn,
            state_table: TABLE.into(),
            thresholds: Thresholds::from_percents("80", "95").unwrap(),
        },
        &reads,
        &writes,
    )
    .unwrap();

    // The quota not listed: the region's default, and the same figures as
    // the SDK's own report on this backend.
    emu.faults().applied_quota(MEMORY, None);
    let memory = check.measure().await.expect("measured");
    assert!(!memory.quota_listed);
    assert_eq!(memory.quota_gb, 1024.0, "us-east-1's default");
    assert_eq!((memory.sandboxes, memory.unresolved), (1, 0), "{memory:?}");
    assert!(memory.allocated_gb > 0.0, "{memory:?}");
    let sdk = Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .unwrap();
    let report = sdk.quotas().report().await.unwrap().memory;
    assert_eq!(
        (report.allocated_gb, report.quota_gb, report.sandboxes),
        (memory.allocated_gb, memory.quota_gb, memory.sandboxes)
    );
    let allocated = memory.allocated_gb;
    let at = |fraction: f64| {
        emu.faults()
            .applied_quota(MEMORY, Some(allocated / fraction))
    };

    // Below the warning: the metric, no alert; the row says ok. (The
    // run's future is Send: a multi-threaded runtime may move it.)
    fn send<F: std::future::Future + Send>(f: F) -> F {
        f
    }
    at(0.5);
    let run = send(check.run()).await.expect("a run");
    assert_eq!((run.level, run.notified), (Level::Ok, false));
    assert!(run.memory.quota_listed);
    assert_eq!(stored_level(&dynamodb).await.as_deref(), Some("ok"));
    assert!(seen.lock().unwrap().is_empty());
    let line: serde_json::Value = serde_json::from_str(&run.to_log_line()).unwrap();
    let line = &line["quota_alerts"];
    assert_eq!(
        (
            &line["level"],
            &line["previous"],
            &line["notified"],
            &line["sandboxes"],
            &line["unresolved"]
        ),
        (
            &"ok".into(),
            &"ok".into(),
            &false.into(),
            &1.into(),
            &0.into()
        ),
        "{line}"
    );
    assert!(
        (line["fraction"].as_f64().unwrap() - 0.5).abs() < 1e-9,
        "{line}"
    );
    assert_eq!(line["allocated_gb"].as_f64(), Some(allocated));

    // Crossing the warning: one message.
    at(0.85);
    let run = check.run().await.expect("a run");
    assert_eq!(
        (run.previous, run.level, run.notified),
        (Level::Ok, Level::Warning, true)
    );
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen[0].0,
            "Rayito: MicroVM memory at the warning level (85% of the quota, us-east-1)"
        );
        let quota = allocated / 0.85;
        let gb = |v: f64| {
            let t = format!("{v:.2}");
            t.trim_end_matches('0').trim_end_matches('.').to_owned()
        };
        assert_eq!(
            seen[0].1,
            format!(
                "The memory allocated to MicroVMs in us-east-1 is at the warning level: 85% of the quota.\n\
                 Allocated: {} GB of {} GB (1 sandboxes, RUNNING plus suspended).\n\
                 Request an increase of quota L-CD1C0CC4 before launching more sandboxes, or terminate the ones no longer used: https://us-east-1.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/L-CD1C0CC4",
                gb(allocated),
                gb(quota)
            )
        );
        assert!(!seen[0].1.contains(sbx.id()), "no sandbox id in the alert");
    }
    assert_eq!(stored_level(&dynamodb).await.as_deref(), Some("warning"));

    // The same level again: nothing new.
    let run = check.run().await.expect("a run");
    assert_eq!((run.level, run.notified), (Level::Warning, false));
    assert_eq!(seen.lock().unwrap().len(), 1);

    // Critical: one more.
    at(0.97);
    let run = check.run().await.expect("a run");
    assert_eq!(
        (run.previous, run.level, run.notified),
        (Level::Warning, Level::Critical, true)
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(
        seen.lock().unwrap()[1]
            .0
            .starts_with("Rayito: MicroVM memory at the critical level (97% "),
        "{:?}",
        seen.lock().unwrap()[1]
    );

    // Down to warning: the row keeps critical, no alert; back to ok
    // resets it, and the next rise alerts again.
    at(0.85);
    let run = check.run().await.expect("a run");
    assert_eq!((run.level, run.notified), (Level::Warning, false));
    assert_eq!(stored_level(&dynamodb).await.as_deref(), Some("critical"));
    at(0.5);
    assert!(!check.run().await.unwrap().notified);
    assert_eq!(stored_level(&dynamodb).await.as_deref(), Some("ok"));
    at(0.85);
    assert!(check.run().await.unwrap().notified);
    assert_eq!(seen.lock().unwrap().len(), 3);

    // One data point per run, in the namespace and dimension the
    // dashboard's chart reads.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let iso = |s: u64| {
        let t = std::time::UNIX_EPOCH + Duration::from_secs(s);
        let d = aws_sdk_dynamodb::primitives::DateTime::from(t);
        d.fmt(aws_sdk_dynamodb::primitives::DateTimeFormat::DateTime)
            .unwrap()
    };
    let (start, end) = (iso(now - 600), iso(now + 600));
    let stats = query(
        &moto,
        "monitoring",
        &[
            ("Action", "GetMetricStatistics"),
            ("Version", "2010-08-01"),
            ("Namespace", quota_alerts::METRIC_NAMESPACE),
            ("MetricName", quota_alerts::METRIC_NAME),
            ("Dimensions.member.1.Name", "Region"),
            ("Dimensions.member.1.Value", "us-east-1"),
            ("StartTime", &start),
            ("EndTime", &end),
            ("Period", "3600"),
            ("Statistics.member.1", "SampleCount"),
            ("Statistics.member.2", "Maximum"),
        ],
    )
    .await;
    let counts: f64 = between(&stats, "<SampleCount>", "</SampleCount>")
        .iter()
        .map(|c| c.parse::<f64>().unwrap())
        .sum();
    assert_eq!(counts, 7.0, "seven runs: {stats}");
    let max = between(&stats, "<Maximum>", "</Maximum>")
        .iter()
        .map(|c| c.parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    assert!((max - 0.97).abs() < 1e-9, "{stats}");
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_alert_fails_the_run_and_keeps_the_level_for_the_next() {
    let Some(moto) = moto().await else { return };
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    let key = emu.access_key();
    let reads = aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            aws_sdk_s3::config::Credentials::new(
                key.id.clone(),
                key.secret.clone(),
                key.session_token.clone(),
                None,
                "emulator",
            ),
        ))
        .endpoint_url(emu.endpoint_url())
        .build();
    let writes = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDQUOTAALERTS");
    let dynamodb = state_table(&writes).await;
    // A topic that does not exist: Publish is refused.
    let check = QuotaAlerts::new(
        Settings {
            region: "us-east-1".into(),
            topic_arn: "arn:aws:sns:us-east-1:123456789012:gone".into(),
            state_table: TABLE.into(),
            thresholds: Thresholds::from_percents("80", "95").unwrap(),
        },
        &reads,
        &writes,
    )
    .unwrap();
    emu.faults().applied_quota(MEMORY, Some(1e-6));
    let err = check.run().await.unwrap_err();
    assert_eq!(err.to_string(), "Publish failed: NotFound");
    assert_eq!(
        stored_level(&dynamodb).await,
        None,
        "not saved: the next run alerts again"
    );
    sbx.kill().await.unwrap();
}

/// The stack on moto's CloudFormation through `OptionalStacks`: the zip
/// uploaded, every resource created, the three outputs, then destroyed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_deploys_and_destroys_on_moto() {
    let Some(moto) = moto().await else { return };
    let endpoint = moto.endpoint_url();
    let client = Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(&endpoint)
                .s3_endpoint_url(&endpoint)
                .region("us-east-1")
                .static_credentials("testing", "testing"),
        )
        .build()
        .await
        .unwrap();
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk_support::moto_config::sdk_config(
            &endpoint,
            "AKIDQUOTAALERTS",
        ))
        .force_path_style(true)
        .build(),
    )
    .create_bucket()
    .bucket("sdk-artifacts")
    .send()
    .await
    .expect("the artifact bucket");
    let mut options = StackOptions::default();
    options.poll_interval = Duration::from_millis(50);
    options.timeout = Duration::from_secs(60);
    let stacks: OptionalStacks = client.optional_stacks().with_options(options);
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("functions.zip");
    {
        use std::io::Write as _;
        let mut z = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
        z.start_file("bootstrap", zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(b"#!/bin/sh\n").unwrap();
        z.finish().unwrap();
    }
    let deploy = StackDeploy::new()
        .artifact_bucket("sdk-artifacts")
        .artifact(&zip)
        .param("NotificationEmail", "ops@example.com");
    let done = stacks
        .deploy("quota-alerts", &deploy)
        .await
        .expect("deployed");
    let status = &done.status;
    assert_eq!(status.state, "CREATE_COMPLETE");
    assert!(
        status.outputs["TopicArn"].starts_with("arn:aws:sns:us-east-1:123456789012:"),
        "{:?}",
        status.outputs
    );
    assert!(!status.outputs["StateTableName"].is_empty());
    assert!(!status.outputs["FunctionName"].is_empty());
    stacks.destroy("quota-alerts", None, true).await.unwrap();
}

/// docs/stacks.md transcribes the alert's subject and how the function is
/// chosen in the one `bootstrap`.
#[test]
fn docs_stacks_md_transcribes_the_quota_alerts_function() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/stacks.md"))
        .expect("docs/stacks.md");
    let subject = quota_alerts::subject(Level::Warning, "us-east-1", 0.85);
    assert!(doc.contains(&format!("`{subject}`")), "{subject}");
    assert!(doc.contains(&format!(
        "`RAYITO_EVENTS_FUNCTION={}`",
        quota_alerts::FUNCTION
    )));
    assert!(doc.contains(&format!(
        "`{}`\n   `{}`, dimension `{}`",
        quota_alerts::METRIC_NAMESPACE,
        quota_alerts::METRIC_NAME,
        quota_alerts::REGION_DIMENSION
    )));
}
