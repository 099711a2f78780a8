//! Canary: no proxy token, access token, AWS secret key or access key id
//! reaches any `tracing` subscriber, through the SDK's own events or through
//! anything it runs (the AWS SDK logs whole requests and responses at
//! TRACE, CreateMicrovmAuthToken's proxy token included).
//!
//! One test per binary: it installs the process-wide TRACE subscriber that
//! captures every event and span of every target, then runs create,
//! commands, code, files, a proxy-token re-mint (an injected proxy 403),
//! connect and kill with recognisable credentials (a session token
//! included), and looks for each.

use crate::sdk_support;

use sdk_support::captured::Captured;

use std::time::Duration;

use rayito::{AwsOptions, CommandOptions, RunCodeOptions, Sandbox};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig, Operation};

/// The sandbox access token (32 bytes, canonical base64url).
const ACCESS_CANARY: &str = "CANARYaccessTOKENcanaryACCESStokenCANARY0Ak";
/// The AWS access key id and secret key of the static credentials.
const KEY_ID_CANARY: &str = "AKIDCANARYKEYIDxyzw";
const SECRET_CANARY: &str = "CanarySecretAccessKeyValue0123456789abcd";
/// The session token of the (temporary) static credentials.
const SESSION_CANARY: &str = "CanarySessionTokenIQoJb3JpZ2luX2VjEJrCANARYsessionTOKEN0123";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_any_subscriber() {
    let captured = Captured::install_global_trace();

    // The emulator accepts the canary key (and session token) only.
    let emu = Emulator::start(EmulatorConfig {
        access_keys: vec![
            AccessKey::new(KEY_ID_CANARY, SECRET_CANARY).with_session_token(SESSION_CANARY),
        ],
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let aws = AwsOptions::new()
        .endpoint_url(emu.endpoint_url())
        .region("us-east-1")
        .static_credentials(KEY_ID_CANARY, SECRET_CANARY)
        .session_token(SESSION_CANARY);
    let sbx = Sandbox::builder()
        .aws(aws.clone())
        .template(emu.image_arn("rayito-base"))
        .access_token(ACCESS_CANARY)
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("created");

    let out = sbx
        .commands()
        .run_with(
            "echo out; echo err >&2",
            CommandOptions::new().env("NAME", "value"),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "out\n");
    let execution = sbx
        .run_code_with("print(6 * 7)", RunCodeOptions::new())
        .await
        .unwrap();
    assert_eq!(execution.logs.stdout, vec!["42\n".to_owned()]);
    sbx.files().write("canary.txt", "contents").await.unwrap();
    assert_eq!(
        sbx.files().read_to_string("canary.txt").await.unwrap(),
        "contents"
    );

    // A proxy 403: the SDK re-mints the proxy token and retries.
    let minted = emu.calls(Operation::CreateMicrovmAuthToken);
    assert!(emu.faults().proxy_status(1, 403));
    assert_eq!(
        sbx.commands().run("echo again").await.unwrap().stdout,
        "again\n"
    );
    assert_eq!(emu.calls(Operation::CreateMicrovmAuthToken), minted + 1);

    let other = Sandbox::builder()
        .aws(aws)
        .connect(sbx.id(), ACCESS_CANARY)
        .await
        .unwrap();
    assert!(other.is_running().await);
    other.get_info().await.unwrap();
    assert!(sbx.kill().await.unwrap());
    assert!(!other.kill().await.unwrap());

    let logged = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    // The capture works: the SDK's own events and the stack below it.
    assert!(logged.contains("rayito::control"), "nothing captured");
    assert!(logged.contains("rayito::retry"), "no retry event");
    assert!(
        logged.contains("CreateMicrovmAuthToken"),
        "no control event"
    );
    let proxy_tokens = emu.minted_proxy_tokens();
    assert!(
        proxy_tokens.len() >= 3,
        "{} tokens minted",
        proxy_tokens.len()
    );
    let mut canaries = vec![
        ACCESS_CANARY.to_owned(),
        KEY_ID_CANARY.to_owned(),
        SECRET_CANARY.to_owned(),
        SESSION_CANARY.to_owned(),
    ];
    canaries.extend(proxy_tokens);
    for canary in &canaries {
        if let Some(at) = logged.find(canary.as_str()) {
            let start = logged[..at].rfind('\n').map_or(0, |n| n + 1);
            let line = logged[start..].lines().next().unwrap_or_default();
            // Show where (the line's start: time, level, span, target),
            // without printing the secret itself.
            let shown: String = line
                .replace(canary.as_str(), "<CANARY>")
                .chars()
                .take(300)
                .collect();
            panic!("a secret reached the logs: {shown}");
        }
    }
}
