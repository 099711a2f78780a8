//! Build logs against moto's CloudWatch Logs, not only our emulator's:
//! BuildKit-shaped lines written with PutLogEvents into `/rayito/<name>`
//! streams of a moto server, read back by `Templates::logs` (the newest
//! stream by last event time, its last lines) and by a failed build's
//! error (the failed step, its command, exit code and log tail). A group
//! that does not exist (DescribeLogStreams fails) gives no lines.
//!
//! The SDK reaches CloudWatch Logs where the AWS SDKs' own per-service
//! setting says: `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS` (moto) beside
//! `AWS_ENDPOINT_URL` (the emulator: MicroVMs API and STS). Environment
//! variables are process-wide, so the SDK side runs in a child process:
//! this test binary started again with only the ignored `sdk_child` test.
//! The emulator fails the child's builds at once (their artifacts are in
//! moto's S3, not in its store), and writes its own log lines to its own
//! store: every line the SDK shows came from moto.

use crate::sdk_support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_sdk_cloudwatchlogs as cwl;
use rayito::error::BuildReason;
use rayito::template::{BuildEvent, BuildOptions, Template};
use rayito::{AwsOptions, Client, SandboxError};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};
use sdk_support::moto::MotoServer;
use sdk_support::moto_seed::{BUCKET, s3_client, seed_moto};

/// moto's account (the emulator's too, so that moto's bucket is ours).
const MOTO_ACCOUNT: &str = "123456789012";
/// The child's S3 endpoint (moto), path style.
const S3_ENV: &str = "RAYITO_MOTO_LOGS_TEST_S3";
/// The template whose log group holds the streams.
const FAILING: &str = "moto-logs";
/// A template with no log group in moto.
const UNLOGGED: &str = "moto-no-logs";

/// The newest stream's lines: a failed BuildKit build, 22 lines (the
/// error keeps the last 20).
fn failing_lines() -> Vec<String> {
    let mut lines: Vec<String> = [
        "#1 [internal] load build definition from Dockerfile",
        "#1 transferring dockerfile: 512B done",
        "#1 DONE 0.0s",
        "#4 [1/3] FROM public.ecr.aws/lambda-microvms/al2023-1:1",
        "#4 DONE 0.9s",
        "#5 [2/3] COPY rayd /opt/rayito/rayd",
        "#5 DONE 0.1s",
        "#6 [3/3] RUN make -j2 install",
        "#6 0.412 cc -O2 -c main.c",
        "#6 0.913 main.c:3:1: error: expected ';' before '}' token",
        "#6 0.914 make: *** [Makefile:4: main.o] Error 1",
        "#6 ERROR: process \"/bin/sh -c make -j2 install\" did not complete successfully: exit code: 2",
        "------",
        " > [3/3] RUN make -j2 install:",
        "------",
        "Dockerfile:9",
        "--------------------",
        "   8 |     # >>> rayito template layer (m15-templates), no editar a mano",
        "   9 | >>> RUN make -j2 install",
        "--------------------",
        "ERROR: failed to solve: process \"/bin/sh -c make -j2 install\" did not complete successfully: exit code: 2",
    ]
    .map(str::to_owned)
    .to_vec();
    lines.push("rayito build: done".to_owned());
    lines
}

/// An older build's stream: it succeeded, and names a step of its own.
fn older_lines() -> Vec<String> {
    ["#5 [2/2] RUN echo older", "#5 0.101 older", "#5 DONE 0.2s"]
        .map(str::to_owned)
        .to_vec()
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

/// Writes `lines` into a new stream of `group`, stamped from `at_ms` on
/// (one millisecond apart).
async fn write_stream(logs: &cwl::Client, group: &str, stream: &str, at_ms: i64, lines: &[String]) {
    logs.create_log_stream()
        .log_group_name(group)
        .log_stream_name(stream)
        .send()
        .await
        .expect("moto creates the stream");
    let mut put = logs
        .put_log_events()
        .log_group_name(group)
        .log_stream_name(stream);
    for (i, line) in lines.iter().enumerate() {
        put = put.log_events(
            cwl::types::InputLogEvent::builder()
                .timestamp(at_ms + i as i64)
                .message(line)
                .build()
                .unwrap(),
        );
    }
    put.send().await.expect("moto takes the events");
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_logs_and_a_failed_builds_step_are_read_from_moto() {
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
    seed_moto(&s3_client(&moto.endpoint_url(), &key), &emu).await;

    // Three streams in the group: the newest by last event is neither the
    // first nor the last by name (the SDK orders by LastEventTime).
    let logs = logs_client(&moto.endpoint_url(), &key);
    let group = format!("/rayito/{FAILING}");
    logs.create_log_group()
        .log_group_name(&group)
        .send()
        .await
        .expect("moto creates the group");
    let now = now_ms();
    write_stream(
        &logs,
        &group,
        "2026/12/31[1]build-a",
        now - 60_000,
        &older_lines(),
    )
    .await;
    write_stream(
        &logs,
        &group,
        "2026/06/30[2]build-b",
        now - 1_000,
        &failing_lines(),
    )
    .await;
    write_stream(
        &logs,
        &group,
        "2026/01/01[1]0123456789abcdef",
        now - 30_000,
        &older_lines(),
    )
    .await;

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
        .env(S3_ENV, moto.endpoint_url())
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
    // The emulator's own lines for those builds stayed in its store.
    assert!(
        emu.build_log_lines(FAILING)
            .iter()
            .flat_map(|(_, lines)| lines)
            .any(|l| l.contains("build FAILED")),
        "the emulator failed the build and logged it itself"
    );
    emu.shutdown().await;
}

/// The SDK side, in the environment its parent gives.
#[test]
#[ignore = "a helper: run as a child process by the test above, with the endpoints in its environment"]
fn sdk_child() {
    let s3 = std::env::var(S3_ENV)
        .expect("run by build_logs_and_a_failed_builds_step_are_read_from_moto");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        // Endpoint, region and credentials from the environment.
        let client = Client::builder()
            .aws(AwsOptions::new().s3_endpoint_url(s3))
            .build()
            .await
            .expect("a client from the environment");
        let templates = client.templates();

        // The newest stream, whole, and its last lines.
        assert_eq!(templates.logs(FAILING, 500).await.unwrap(), failing_lines());
        assert_eq!(
            templates.logs(FAILING, 2).await.unwrap(),
            failing_lines()[20..].to_vec()
        );
        // No group: DescribeLogStreams fails, no lines.
        assert_eq!(
            templates.logs(UNLOGGED, 500).await.unwrap(),
            Vec::<String>::new()
        );

        // A failed build: the step, command and exit code the newest
        // stream names, its last 20 lines, each line reported as an event.
        let dir = tempfile::tempdir().unwrap();
        let logged = Arc::new(Mutex::new(Vec::new()));
        let seen = logged.clone();
        let options = || BuildOptions {
            bucket: Some(BUCKET.to_owned()),
            context_dir: Some(dir.path().to_path_buf()),
            poll_interval: Some(Duration::from_millis(50)),
            timeout: Duration::from_secs(60),
            ..BuildOptions::default()
        };
        let err = templates
            .build(
                &Template::new().run_cmd("make -j2 install"),
                FAILING,
                options().on_event(move |event| {
                    if let BuildEvent::Log(line) = event {
                        seen.lock().unwrap().push(line.clone());
                    }
                }),
            )
            .await
            .expect_err("the emulator fails the build");
        match &err {
            SandboxError::Build {
                reason,
                step,
                command,
                exit_code,
                log_tail,
                ..
            } => {
                assert_eq!(*reason, None::<BuildReason>);
                assert_eq!(*step, Some(3));
                assert_eq!(command.as_deref(), Some("RUN make -j2 install"));
                assert_eq!(*exit_code, Some(2));
                assert_eq!(log_tail.as_str(), failing_lines()[2..].join("\n"));
            }
            other => panic!("not a build error: {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "template build step 3 failed with exit code 2; fix that step (its command and \
             the end of the build log are in the error)"
        );
        assert_eq!(*logged.lock().unwrap(), failing_lines());

        // A failed build whose log group does not exist: no step, no tail.
        let err = templates
            .build(&Template::new().run_cmd("true"), UNLOGGED, options())
            .await
            .expect_err("the emulator fails the build");
        match &err {
            SandboxError::Build {
                reason: None,
                step: None,
                command: None,
                exit_code: None,
                log_tail,
                ..
            } => assert_eq!(log_tail.as_str(), ""),
            other => panic!("not a build error without a step: {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "template build failed; the end of the build log is in the error"
        );
    });
}
