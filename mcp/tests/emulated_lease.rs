//! The lease against an emulator of the Lambda MicroVMs API that this test
//! owns: the server reaches it as it would reach AWS (endpoint, region and
//! credentials from the environment), and the test kills the server's
//! sandbox behind its back, or stops the server, then looks at the
//! emulator.

use crate::support;

use rayito::{AwsOptions, Client};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState};
use serde_json::json;
use support::Server;

/// The environment of a server on `emulator`.
fn env_for(emulator: &Emulator) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", emulator.endpoint_url()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", emulator.access_key().id.clone()),
        (
            "AWS_SECRET_ACCESS_KEY",
            emulator.access_key().secret.clone(),
        ),
        ("RAYITO_TEMPLATE", emulator.image_arn("rayito-base")),
    ]
}

async fn server_on(emulator: &Emulator) -> Server {
    let env = env_for(emulator);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Server::with_env(&env, &[]).await
}

/// The emulator ended (or is ending) the MicroVM `id`.
fn assert_ended(emulator: &Emulator, id: &str) {
    let state = emulator.state(id);
    assert!(
        matches!(
            state,
            Some(MicrovmState::Terminating | MicrovmState::Terminated)
        ),
        "{id}: {state:?}"
    );
}

/// The server's current sandbox, as `list_sandboxes` says.
async fn current(server: &Server) -> String {
    let listed = server.json("list_sandboxes", json!({})).await;
    listed["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == true)
        .unwrap_or_else(|| panic!("no current sandbox: {listed}"))["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_lease_is_forgotten_and_the_next_call_creates_a_new_sandbox() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let server = server_on(&emulator).await;
    let ran = server.json("run_command", json!({"cmd": "echo one"})).await;
    assert_eq!(ran["stdout"], "one\n");
    let first = current(&server).await;

    // Someone else kills it (another client, the console, its timeout).
    let client = Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emulator.endpoint_url())
                .region("us-east-1")
                .static_credentials(
                    emulator.access_key().id.clone(),
                    emulator.access_key().secret.clone(),
                ),
        )
        .build()
        .await
        .unwrap();
    assert!(client.kill_by_id(&first).await.unwrap());

    assert_eq!(
        server
            .error("run_command", json!({"cmd": "echo two"}))
            .await,
        "the sandbox is gone; a new sandbox will be created on the next call"
    );
    let ran = server
        .json("run_command", json!({"cmd": "echo three"}))
        .await;
    assert_eq!(ran["stdout"], "three\n");
    let second = current(&server).await;
    assert_ne!(second, first);
    assert_eq!(emulator.state(&second), Some(MicrovmState::Running));

    // The client closing stdin stops the server, which kills its sandbox.
    let log = server.close().await;
    assert!(log.contains("sandbox killed"), "{log}");
    assert_ended(&emulator, &second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_kills_the_lease() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let server = server_on(&emulator).await;
    server.json("run_command", json!({"cmd": "true"})).await;
    let id = current(&server).await;
    assert_eq!(emulator.state(&id), Some(MicrovmState::Running));
    let log = server.terminate().await;
    assert!(log.contains("SIGTERM"), "{log}");
    assert_ended(&emulator, &id);
}

/// Ctrl-C in the terminal that started the server (SIGINT) ends it as
/// SIGTERM does: its sandbox is killed, not left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_kills_the_lease() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let server = server_on(&emulator).await;
    server.json("run_command", json!({"cmd": "true"})).await;
    let id = current(&server).await;
    assert_eq!(emulator.state(&id), Some(MicrovmState::Running));
    let log = server.interrupt().await;
    assert!(log.contains("SIGINT"), "{log}");
    assert_ended(&emulator, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_template_is_a_sentence_and_nothing_is_created() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut env = env_for(&emulator);
    env.retain(|(k, _)| *k != "RAYITO_TEMPLATE");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::with_env(&env, &[]).await;
    let expected = "no sandbox could be created: the template is not set, not valid or not found (RAYITO_TEMPLATE in the server's environment)";
    assert_eq!(
        server.error("run_command", json!({"cmd": "true"})).await,
        expected
    );
    // The operator's log says why (the SDK's message) and what kind.
    let log = server.close().await;
    let line = log
        .lines()
        .find(|l| l.contains("sandbox creation failed"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("error_kind=\"invalid_argument\""), "{line}");
    assert!(line.contains("set RAYITO_TEMPLATE"), "{line}");

    // An image the account does not have.
    let mut env = env_for(&emulator);
    for (k, v) in &mut env {
        if *k == "RAYITO_TEMPLATE" {
            *v = emulator.image_arn("no-such-image");
        }
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::with_env(&env, &[]).await;
    assert_eq!(
        server.error("run_code", json!({"code": "1"})).await,
        expected
    );
    server.close().await;
    assert!(
        emulator.microvm_ids().is_empty(),
        "{:?}",
        emulator.microvm_ids()
    );
}
