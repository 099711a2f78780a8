//! Sandbox logs (docs/sandbox-logs.md): RunMicrovm's `logging`, and
//! `Client::sandbox_logs` finding a sandbox's stream by its exact name.
//!
//! Against the emulator (in process): a sandbox created with
//! `SandboxLogging::cloudwatch()` gets the emulator's lifecycle lines in
//! `/rayito/<template>` under `YYYY/MM/DD[<version>]<id>`; one created
//! without logging has none (`no_logs`).
//!
//! Against moto's CloudWatch Logs: streams named by the convention, with
//! forged decoys (a name that only ends with the id, another version, an
//! earlier day, a longer name sharing the prefix) that must never be read,
//! the fallback scan over more than one page, the no-logs error for an
//! empty and a missing group, `since` and `limit`, and following a stream.
//! The SDK reaches moto through `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS` beside
//! `AWS_ENDPOINT_URL` (the emulator: the MicroVMs API); environment
//! variables are process-wide, so the SDK side runs in a child process,
//! this test binary started again with only the ignored `sdk_child` test.

use crate::sdk_support;

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatchlogs as cwl;
use cwl::primitives::{DateTime, DateTimeFormat};
use rayito::logs::LogsQuery;
use rayito::{AwsOptions, Client, Sandbox, SandboxError, SandboxLogging};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig, Operation};
use sdk_support::moto::MotoServer;
use sdk_support::recording_proxy::RecordingProxy;

/// moto's account (the emulator's too).
const MOTO_ACCOUNT: &str = "123456789012";
/// The child's sandbox id.
const ID_ENV: &str = "RAYITO_SANDBOX_LOGS_TEST_ID";
/// The default group of the emulator's `rayito-base` sandboxes.
const BASE_GROUP: &str = "/rayito/rayito-base";
/// A group whose only stream of the sandbox has a later day.
const FALLBACK_GROUP: &str = "/rayito-test/fallback";
/// A group with decoys only.
const DECOYS_GROUP: &str = "/rayito-test/decoys";
/// A group that does not exist.
const MISSING_GROUP: &str = "/rayito-test/missing";

fn no_logs_message(id: &str, group: &str) -> String {
    format!(
        "no logs (logging disabled, no execution role, or another group) for sandbox {id} in \
         log group {group}; create the sandbox with SandboxLogging::cloudwatch() and an \
         execution role that may write there, or pass the group it logs to"
    )
}

fn utc_day(t: SystemTime) -> String {
    let text = DateTime::from(t).fmt(DateTimeFormat::DateTime).unwrap();
    text[..10].replace('-', "/")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// RunMicrovm carries `logging` on every call: disabled by default, the
/// default group, or the caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_microvm_always_sends_logging() {
    let emu = sdk_support::emulator().await;
    let proxy = RecordingProxy::start(emu.addr()).await;
    let key = emu.access_key().clone();
    let builder = || {
        Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url(proxy.endpoint_url())
                    .region("us-east-1")
                    .static_credentials(key.id.clone(), key.secret.clone()),
            )
            .template(emu.image_arn("rayito-base"))
            .ready_timeout(Duration::from_secs(60))
    };
    for builder in [
        builder(),
        builder().logging(SandboxLogging::cloudwatch()),
        builder().logging(SandboxLogging::cloudwatch_group("/team/sandboxes")),
    ] {
        let sbx = builder.create().await.expect("a sandbox through the proxy");
        sbx.kill().await.unwrap();
    }
    let sent: Vec<serde_json::Value> = proxy
        .records()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/2025-09-09/microvms")
        .map(|r| r.json()["logging"].clone())
        .collect();
    assert_eq!(
        sent,
        [
            serde_json::json!({"disabled": {}}),
            serde_json::json!({"cloudWatch": {"logGroup": BASE_GROUP}}),
            serde_json::json!({"cloudWatch": {"logGroup": "/team/sandboxes"}}),
        ]
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emulator_serves_the_stream_of_a_sandbox_created_with_logging() {
    let emu = sdk_support::emulator().await;
    let client = Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .unwrap();

    // Refused before any call, naming the argument.
    let gets = emu.calls(Operation::GetMicrovm);
    for (query, argument) in [
        (LogsQuery::default().limit(0), "limit"),
        (LogsQuery::default().log_group("a group"), "log_group"),
        (
            LogsQuery::default().since(UNIX_EPOCH - Duration::from_secs(1)),
            "since",
        ),
    ] {
        let err = client.sandbox_logs("vm-x", &query).await.unwrap_err();
        match &err {
            SandboxError::InvalidArgument { argument: a, .. } => {
                assert_eq!(a.as_deref(), Some(argument))
            }
            other => panic!("not InvalidArgument: {other:?}"),
        }
    }
    let err = sdk_support::builder(&emu)
        .logging(SandboxLogging::cloudwatch_group("bad group"))
        .create()
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid log_group: "), "{err}");
    assert_eq!(emu.calls(Operation::GetMicrovm), gets);
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);

    // With logging: the stream by convention, the started line.
    let sbx = sdk_support::builder(&emu)
        .logging(SandboxLogging::cloudwatch())
        .create()
        .await
        .expect("a sandbox with logging");
    let id = sbx.id().to_owned();
    let info = client.get_info_by_id(&id).await.unwrap();
    let expected = format!(
        "{}[{}]{id}",
        utc_day(info.started_at.unwrap()),
        info.image_version
    );
    let logs = client
        .sandbox_logs(&id, &LogsQuery::default())
        .await
        .expect("the sandbox's logs");
    assert_eq!(logs.log_group, BASE_GROUP);
    assert_eq!(logs.stream, expected);
    assert!(!logs.used_fallback);
    let messages: Vec<&str> = logs.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [format!(
            "rayito emulator: MicroVM {id} started from rayito-base version {}",
            info.image_version
        )]
    );
    assert!(logs.events.iter().all(|e| e.stream == expected));

    // Its own group, and the terminated line after a kill.
    let team = sdk_support::builder(&emu)
        .logging(SandboxLogging::cloudwatch_group("/team/sandboxes"))
        .create()
        .await
        .expect("a sandbox with its own group");
    let team_id = team.id().to_owned();
    let query = LogsQuery::default().log_group("/team/sandboxes");
    // Not in the default group: no logs there.
    let err = client
        .sandbox_logs(&team_id, &LogsQuery::default())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), no_logs_message(&team_id, BASE_GROUP));
    team.kill().await.unwrap();
    let mut lines = Vec::new();
    for _ in 0..100 {
        let logs = client.sandbox_logs(&team_id, &query).await.unwrap();
        lines = logs.events.into_iter().map(|e| e.message).collect();
        if lines.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].starts_with(&format!("rayito emulator: MicroVM {team_id} terminated (")),
        "{lines:?}"
    );

    // Without logging: no stream, the no-logs error naming the group.
    let plain = sdk_support::sandbox(&emu).await;
    let err = client
        .sandbox_logs(plain.id(), &LogsQuery::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(err.to_string(), no_logs_message(plain.id(), BASE_GROUP));
    assert!(err.is_not_found() && !err.is_retryable());

    sbx.kill().await.unwrap();
    plain.kill().await.unwrap();
    emu.shutdown().await;
}

fn logs_client(endpoint: &str, key: &AccessKey) -> cwl::Client {
    let config = cwl::Config::builder()
        .behavior_version(cwl::config::BehaviorVersion::latest())
        .region(cwl::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(cwl::config::Credentials::new(
            key.id.clone(),
            key.secret.clone(),
            None,
            None,
            "test",
        ))
        .build();
    cwl::Client::from_conf(config)
}

/// Writes `lines` into a new stream of `group`, the i-th at `at_ms[i]`.
async fn write_stream(logs: &cwl::Client, group: &str, stream: &str, events: &[(i64, &str)]) {
    logs.create_log_stream()
        .log_group_name(group)
        .log_stream_name(stream)
        .send()
        .await
        .expect("moto creates the stream");
    append(logs, group, stream, events).await;
}

async fn append(logs: &cwl::Client, group: &str, stream: &str, events: &[(i64, &str)]) {
    let mut put = logs
        .put_log_events()
        .log_group_name(group)
        .log_stream_name(stream);
    for (at, line) in events {
        put = put.log_events(
            cwl::types::InputLogEvent::builder()
                .timestamp(*at)
                .message(*line)
                .build()
                .unwrap(),
        );
    }
    put.send().await.expect("moto takes the events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_read_from_moto_by_exact_name_and_decoys_never() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let key = AccessKey::generate();
    let emu = Emulator::start(EmulatorConfig {
        account_id: MOTO_ACCOUNT.to_owned(),
        access_keys: vec![key.clone()],
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    // The sandbox itself lives in the emulator (GetMicrovm); its logs in moto.
    let sbx = sdk_support::sandbox(&emu).await;
    let id = sbx.id().to_owned();
    let info = sbx.get_info().await.unwrap();
    let started = info.started_at.unwrap();
    let (day, v) = (utc_day(started), info.image_version.clone());
    let next_day = utc_day(started + Duration::from_secs(86_400));
    let prev_day = utc_day(started - Duration::from_secs(86_400));
    let expected = format!("{day}[{v}]{id}");

    let logs = logs_client(&moto.endpoint_url(), &key);
    for group in [BASE_GROUP, FALLBACK_GROUP, DECOYS_GROUP] {
        logs.create_log_group()
            .log_group_name(group)
            .send()
            .await
            .expect("moto creates the group");
    }
    let base = now_ms() - 60_000;
    // Decoys are written last (the most recent streams): the scan meets
    // them first.
    let decoys = [
        format!("evil/{day}[{v}]{id}"),
        format!("{day}[{v}]x{id}"),
        format!("{day}[{v}9]{id}"),
        format!("{prev_day}[{v}]{id}"),
        format!("{expected}-2"),
        format!("{day}-[{v}]{id}"),
    ];
    // The base group: the stream by convention, five lines a second apart.
    let lines: Vec<String> = (0..5).map(|i| format!("line {i}")).collect();
    let events: Vec<(i64, &str)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (base + 1_000 * i as i64, l.as_str()))
        .collect();
    write_stream(&logs, BASE_GROUP, &expected, &events).await;
    for decoy in &decoys {
        write_stream(&logs, BASE_GROUP, decoy, &[(base + 10_000, "DECOY")]).await;
    }
    // The fallback group: the sandbox's stream has a later day, and 60
    // newer streams of others put it on the scan's second page.
    write_stream(
        &logs,
        FALLBACK_GROUP,
        &format!("{next_day}[{v}]{id}"),
        &[(base, "fallback line")],
    )
    .await;
    for i in 0..60 {
        write_stream(
            &logs,
            FALLBACK_GROUP,
            &format!("{day}[{v}]other-{i}"),
            &[(base + 1_000 + i, "OTHER")],
        )
        .await;
    }
    for decoy in &decoys {
        write_stream(&logs, FALLBACK_GROUP, decoy, &[(base + 20_000, "DECOY")]).await;
        write_stream(&logs, DECOYS_GROUP, decoy, &[(base + 20_000, "DECOY")]).await;
    }

    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_path(module_path!(), "sdk_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("AWS_CONFIG_FILE", home.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("no-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", &key.id)
        .env("AWS_SECRET_ACCESS_KEY", &key.secret)
        .env("AWS_ENDPOINT_URL", emu.endpoint_url())
        .env("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", moto.endpoint_url())
        .env(ID_ENV, &id)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the child finishes")
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "the child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    sbx.kill().await.unwrap();
    emu.shutdown().await;
}

/// The SDK side, in the environment its parent gives.
#[test]
#[ignore = "a helper: run as a child process by the moto test above, with the endpoints in its environment"]
fn sdk_child() {
    let id = std::env::var(ID_ENV).expect("run by the moto test");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let client = Client::builder()
            .build()
            .await
            .expect("a client from the environment");
        let info = client.get_info_by_id(&id).await.unwrap();
        let started = info.started_at.unwrap();
        let v = &info.image_version;
        let expected = format!("{}[{v}]{id}", utc_day(started));
        let messages = |logs: &rayito::logs::SandboxLogs| -> Vec<String> {
            logs.events.iter().map(|e| e.message.clone()).collect()
        };

        // The stream by its exact name; the decoys beside it are never read.
        let logs = client
            .sandbox_logs(&id, &LogsQuery::default())
            .await
            .expect("the base group's stream");
        assert_eq!(logs.log_group, BASE_GROUP);
        assert_eq!(logs.stream, expected);
        assert!(!logs.used_fallback);
        assert_eq!(
            messages(&logs),
            ["line 0", "line 1", "line 2", "line 3", "line 4"]
        );
        assert!(
            logs.events
                .windows(2)
                .all(|w| w[0].timestamp < w[1].timestamp)
        );

        // limit, since.
        let logs = client
            .sandbox_logs(&id, &LogsQuery::default().limit(2))
            .await
            .unwrap();
        assert_eq!(messages(&logs), ["line 0", "line 1"]);
        let since = logs.events[0].timestamp + Duration::from_millis(2_500);
        let logs = client
            .sandbox_logs(&id, &LogsQuery::default().since(since))
            .await
            .unwrap();
        assert_eq!(messages(&logs), ["line 3", "line 4"]);
        let logs = client
            .sandbox_logs(&id, &LogsQuery::default().since(since).limit(1))
            .await
            .unwrap();
        assert_eq!(messages(&logs), ["line 3"]);

        // Following: a reader returns only what was written since.
        let mut reader = client
            .open_sandbox_logs(&id, &LogsQuery::default())
            .await
            .unwrap();
        assert_eq!(reader.read(1_000).await.unwrap().len(), 5);
        assert!(reader.read(1_000).await.unwrap().is_empty());
        let key = AccessKey {
            id: std::env::var("AWS_ACCESS_KEY_ID").unwrap(),
            secret: std::env::var("AWS_SECRET_ACCESS_KEY").unwrap(),
            session_token: None,
        };
        let cw = logs_client(
            &std::env::var("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS").unwrap(),
            &key,
        );
        append(&cw, BASE_GROUP, &expected, &[(now_ms(), "line 5")]).await;
        let new: Vec<String> = reader
            .read(1_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(new, ["line 5"]);

        // The fallback scan: a later day, on the second page, past decoys.
        let logs = client
            .sandbox_logs(&id, &LogsQuery::default().log_group(FALLBACK_GROUP))
            .await
            .expect("the fallback stream");
        assert!(logs.used_fallback);
        assert_eq!(
            logs.stream,
            format!(
                "{}[{v}]{id}",
                utc_day(started + Duration::from_secs(86_400))
            )
        );
        assert_eq!(messages(&logs), ["fallback line"]);

        // Decoys only, and no group: no logs, naming the group.
        for group in [DECOYS_GROUP, MISSING_GROUP] {
            let err = client
                .sandbox_logs(&id, &LogsQuery::default().log_group(group))
                .await
                .unwrap_err();
            assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
            assert_eq!(err.to_string(), no_logs_message(&id, group));
        }
    });
}
