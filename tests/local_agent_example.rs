//! `examples/agent.rs` run as a new user would, on the local backend: a
//! scripted OpenAI-compatible model (tests/sdk_support/model_server.rs)
//! given by the example's variables (its URL, its CA and where it listens),
//! the key in moto's Secrets Manager. The example prints the streamed
//! events, the answer and the usage; the model got the key, no output
//! shows it. Without a model the example says what to set and exits 0.
//!
//! Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...` without it.

use crate::example_support;

use crate::sdk_support;

use std::collections::BTreeMap;

use rayito::secrets::{SecretStore, SecretStoreOptions};
use sdk_support::model_server::{ModelServer, Reply};
use sdk_support::moto::MotoServer;

const KEY: &str = "example-agent-key-3e1d";
const HOST: &str = "llm.agent-example.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_example_streams_a_scripted_models_answer_and_usage() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDEXAMPLETEST");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config))
        .expect("a store")
        .create(
            "example/model-key",
            format!("Bearer {KEY}"),
            &BTreeMap::new(),
        )
        .await
        .expect("the secret");
    let model = ModelServer::start(
        HOST,
        vec![Reply::Text(
            "A microVM is a very small virtual machine.".to_owned(),
            (21, 9),
        )],
    )
    .await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let ca = dir.path().join("model-ca.pem");
    std::fs::write(&ca, model.ca_pem()).expect("the CA file");

    let mut env = example_support::secrets_manager_env(moto.endpoint_url());
    env.extend([
        ("RAYITO_AGENT_MODEL_URL", model.url()),
        ("RAYITO_AGENT_MODEL_CA", ca.display().to_string()),
        ("RAYITO_AGENT_MODEL_ADDR", model.addr().to_string()),
        ("RAYITO_AGENT_MODEL_ID", "scripted-1".to_owned()),
    ]);
    let (stdout, stderr) = example_support::run_example("agent", env).await;
    for text in [&stdout, &stderr] {
        assert!(!text.contains(KEY), "the key was printed");
    }
    let events: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("event: "))
        .collect();
    assert_eq!(events.len(), 4, "{stdout}");
    assert_eq!(events[0], "event: step 1 started");
    assert_eq!(events[1], "event: text (42 bytes)");
    assert_eq!(events[2], "event: step 1 finished, 30 tokens");
    assert!(
        events[3].starts_with("event: done (session rda_"),
        "{stdout}"
    );
    for line in [
        "answer: A microVM is a very small virtual machine.",
        "usage: 21 input + 9 output = 30 tokens",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "scripted-1");
    assert_eq!(
        requests[0].header("authorization"),
        [format!("Bearer {KEY}").as_str()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_agent_example_says_what_to_set() {
    let (stdout, _) = example_support::run_example("agent", Vec::new()).await;
    assert!(
        stdout.starts_with(
            "this example needs a model: set RAYITO_AGENT_MODEL_URL to an OpenAI-compatible upstream"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("Nothing was created."), "{stdout}");
}
