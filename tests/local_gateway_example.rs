//! `examples/gateway.rs` run as a new user would, on the local backend
//! with a moto server as Secrets Manager (through
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER`, the documented variable): sandbox
//! code calls the stand-in API through the gateway, the API receives the
//! key, the sandbox's environment holds none, a path outside the rules is
//! 403, no output shows the key, and the example leaves no secret behind.
//!
//! Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...` without it.

use crate::example_support;

use crate::sdk_support;

use sdk_support::moto::MotoServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_example_calls_the_api_without_seeing_the_key() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let (stdout, stderr) = example_support::run_example(
        "gateway",
        example_support::secrets_manager_env(moto.endpoint_url()),
    )
    .await;
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains("example-gateway-key-"),
            "the key was printed"
        );
    }
    for line in [
        "the API saw an authorization header: True",
        "a path outside the rules: 403",
        "variables in my environment that hold the key: 0",
        "the API received 1 request(s), 1 with the key; the sandbox never saw it",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
    // The example destroyed its secret.
    let raw = aws_sdk_secretsmanager::Client::new(&sdk_support::moto_config::sdk_config(
        &moto.endpoint_url(),
        "AKID",
    ));
    let listed = raw.list_secrets().send().await.expect("list");
    assert!(listed.secret_list().is_empty(), "a secret was left behind");
}
