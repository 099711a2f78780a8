//! `RAYITO_MCP_GATEWAYS` end to end: the server on an emulator this test
//! owns (reached as AWS), the secret in a moto Secrets Manager, the API a
//! test HTTPS server whose CA the emulator's agents trust. The model's
//! `gateways` tool gives the URL; code in the sandbox calls it with curl
//! and no key: the header reaches the API, a path outside the rules is 403
//! and never reaches it, and no tool result, the sandbox's environment or
//! the server's log holds the value (or the secret's name).
//!
//! Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...` without it.

use crate::support;

use crate::moto;

use rayito_emulator::{Emulator, EmulatorConfig, TestUpstream};
use serde_json::{Value, json};
use support::Server;

const VALUE: &str = "mcp-gateway-canary-2b9e";
const SECRET_NAME: &str = "mcp/api-key";
const HOST: &str = "api.example.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_an_api_through_a_gateway_without_its_key() {
    let Some(moto) = tokio::task::spawn_blocking(moto::MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let port = moto.port();
    let created = tokio::task::spawn_blocking(move || {
        let body = json!({"Name": format!("rayito/{SECRET_NAME}"), "SecretString": VALUE});
        moto::http_post(
            port,
            "/",
            &[
                ("X-Amz-Target", "secretsmanager.CreateSecret"),
                // moto reads the region from the credential scope.
                (
                    "Authorization",
                    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=00",
                ),
                ("Content-Type", "application/x-amz-json-1.1"),
            ],
            body.to_string().as_bytes(),
        )
    })
    .await
    .expect("the post task")
    .expect("moto answers");
    assert_eq!(created.0, 200, "{}", created.1);

    let upstream = TestUpstream::start(HOST).await.expect("the upstream");
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    upstream.trust_on(emulator.gateway_upstreams());
    let gateways = json!({"api": {
        "upstream": upstream.url(),
        "headers": {"authorization": SECRET_NAME},
        "allow": [["GET", "/v1/*"]],
        "rate_per_minute": 60,
    }})
    .to_string();
    let env = [
        ("AWS_ENDPOINT_URL", emulator.endpoint_url()),
        ("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.endpoint_url()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", emulator.access_key().id.clone()),
        (
            "AWS_SECRET_ACCESS_KEY",
            emulator.access_key().secret.clone(),
        ),
        ("RAYITO_TEMPLATE", emulator.image_arn("rayito-base")),
        ("RAYITO_MCP_GATEWAYS", gateways),
        ("RAYITO_MCP_LOG_LEVEL", "DEBUG".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::with_env(&env, &[]).await;
    let mut answers = Vec::new();

    let listed = server.json("gateways", json!({})).await;
    answers.push(listed.clone());
    let gateway = &listed["gateways"][0];
    assert_eq!(gateway["name"], "api", "{listed}");
    assert_eq!(gateway["upstream"], format!("https://{HOST}"));
    assert_eq!(gateway["allow"], json!(["GET /v1/*"]));
    assert_eq!(gateway["last_error_class"], Value::Null);
    let url = gateway["url"].as_str().expect("a URL").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let called = server
        .json(
            "run_command",
            json!({"cmd": format!("curl -s {url}/v1/models; echo; curl -s -o /dev/null -w '%{{http_code}}' {url}/admin")}),
        )
        .await;
    answers.push(called.clone());
    let stdout = called["stdout"].as_str().unwrap();
    assert!(stdout.contains("\"target\":\"/v1/models\""), "{called}");
    assert!(stdout.contains("\"authorization\""), "{called}");
    assert!(stdout.ends_with("\n403"), "{called}");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("authorization"), vec![VALUE]);

    let env_out = server.json("run_command", json!({"cmd": "env"})).await;
    answers.push(env_out);
    let listed = server.json("gateways", json!({})).await;
    assert_eq!(listed["gateways"][0]["last_error_class"], "not_allowed");
    answers.push(listed);

    let log = server.close().await;
    for text in answers.iter().map(Value::to_string).chain([log]) {
        assert!(!text.contains(VALUE), "the value leaked: {text}");
        assert!(
            !text.contains(SECRET_NAME),
            "the secret's name leaked: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_gateways_the_tool_lists_none_and_creates_nothing() {
    let server = Server::local(&[]).await;
    assert_eq!(
        server.json("gateways", json!({})).await,
        json!({"gateways": []})
    );
    assert_eq!(
        server.json("list_sandboxes", json!({})).await,
        json!({"sandboxes": [], "truncated": false})
    );
}
