//! `examples/events.rs` run as a new user would, on the local backend with
//! a moto server as Secrets Manager (through
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER`, the documented variable): its
//! receiver verifies the sandbox's four deliveries, in order, and refuses
//! none; `get_events` gives the same records; no secret is printed or left
//! behind. And the Rust snippet docs/events.md shows is the example's own
//! code, so the page cannot drift from code that runs.
//!
//! Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...` without it.

use crate::example_support;

use crate::sdk_support;

use sdk_support::moto::MotoServer;

#[test]
fn the_docs_rust_snippet_is_the_examples_code() {
    let root = sdk_support::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/events.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/events.rs")).unwrap();
    let snippet = doc
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(code, _)| code)
        .expect("a rust block in docs/events.md");
    assert!(
        snippet.contains("verify_webhook"),
        "the first rust block is the verification snippet"
    );
    assert!(
        example.contains(snippet),
        "docs/events.md's Rust snippet is not in examples/events.rs:\n{snippet}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_example_verifies_every_delivery() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let (stdout, stderr) = example_support::run_example(
        "events",
        example_support::secrets_manager_env(moto.endpoint_url()),
    )
    .await;
    for text in [&stdout, &stderr] {
        assert!(!text.contains("whsec-"), "the secret was printed");
    }
    assert!(
        !stdout.contains("refused"),
        "a delivery was refused:\n{stdout}"
    );
    let verified: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("verified delivery: "))
        .collect();
    assert_eq!(
        verified,
        [
            "verified delivery: sandbox.lifecycle.created (generation 0)",
            "verified delivery: sandbox.lifecycle.paused (generation 0)",
            "verified delivery: sandbox.lifecycle.resumed (generation 1)",
            "verified delivery: sandbox.lifecycle.killed (generation 1, kill_reason request)",
        ],
        "in:\n{stdout}"
    );
    assert!(
        stdout.contains("get_events: 4 records, the same as delivered: true"),
        "in:\n{stdout}"
    );
    // The example destroyed its secret.
    let raw = aws_sdk_secretsmanager::Client::new(&sdk_support::moto_config::sdk_config(
        &moto.endpoint_url(),
        "AKID",
    ));
    let listed = raw.list_secrets().send().await.expect("list");
    assert!(listed.secret_list().is_empty(), "a secret was left behind");
}
