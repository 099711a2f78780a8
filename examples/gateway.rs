//! A secret gateway (docs/secrets.md, "Gateways"): sandbox code calls an
//! API whose key it never holds. The agent listens on a loopback port
//! inside the sandbox, adds the key's header to each allowed request and
//! forwards it to the one HTTPS upstream; the key stays in Secrets Manager
//! and in the agent's memory.
//!
//! ```text
//! cargo run --example gateway --features secrets
//! ```
//!
//! What it needs: a Secrets Manager, as for `examples/secrets_and_git.rs`
//! (your account, or a moto server through
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER=http://127.0.0.1:5000`,
//! `AWS_REGION=us-east-1` and dummy keys). The example stores
//! `rayito/example/gateway-key` and destroys it at the end.
//!
//! The API here is a stand-in on this host: an HTTPS server with a CA of
//! its own (`rayito_emulator::TestUpstream`), which the embedded local
//! backend's agents are told to trust (`Client::local_gateway_upstreams`).
//! On AWS you give the real upstream (`https://api.openai.com`) and skip
//! both: the agent in the MicroVM trusts the image's roots.

use rayito::Client;
use rayito::gateway::SecretGateway;
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito_emulator::TestUpstream;

const KEY_SECRET: &str = "example/gateway-key";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = SecretStore::new(SecretStoreOptions::new())?;
    // A key only this run knows, kept in Secrets Manager.
    let key = format!("example-gateway-key-{}", std::process::id());
    if store.destroy(KEY_SECRET).await? {
        println!("removed a {KEY_SECRET} left by an earlier run");
    }
    store
        .create(KEY_SECRET, key.as_str(), &Default::default())
        .await?;
    let outcome = run(&key).await;
    store.destroy(KEY_SECRET).await?;
    outcome
}

async fn run(key: &str) -> Result<(), Box<dyn std::error::Error>> {
    // The stand-in API, and the embedded local backend told to trust it
    // (on AWS: neither; the upstream is the real API).
    let api = TestUpstream::start("api.example.test").await?;
    let client = Client::local().await?;
    let upstreams = client.local_gateway_upstreams()?;
    upstreams.trust_root_pem(api.ca_pem());
    upstreams.set_host(api.host(), api.addr());

    // The gateway: `authorization` from the secret, GETs under /v1/ only,
    // at most 60 requests a minute.
    let gateway = SecretGateway::new(api.url())
        .header("authorization", KEY_SECRET)
        .allow("GET", "/v1/*")
        .rate_per_minute(60);
    let sbx = client
        .sandbox()
        .secret_cache(SecretCache::new(SecretCacheOptions::new())?)
        .gateway("api", gateway)
        .create()
        .await?;
    let url = sbx.gateways().get("api").ok_or("no gateway")?.url();
    println!("gateway api: {url} (inside the sandbox)");

    // Sandbox code (a Python cell): one allowed call, one outside the rules, and a look
    // at its own environment for the key.
    let code = format!(
        r#"
import json, os, urllib.request, urllib.error
answer = json.load(urllib.request.urlopen("{url}/v1/models"))
print("the API saw an authorization header:", "authorization" in answer["header_names"])
try:
    urllib.request.urlopen("{url}/admin")
except urllib.error.HTTPError as e:
    print("a path outside the rules:", e.code)
print("variables in my environment that hold the key:", sum(1 for v in os.environ.values() if "{marker}" in v))
"#,
        marker = "example-gateway-key"
    );
    let execution = sbx.run_code(&code).await?;
    print!("{}", execution.logs.stdout.concat());
    if let Some(error) = &execution.error {
        return Err(format!("the sandbox code failed: {}", error.name).into());
    }

    // What the API received: the header, with the key (checked, not printed).
    let seen = api.requests();
    let delivered = seen
        .iter()
        .filter(|r| r.header("authorization") == [key])
        .count();
    println!(
        "the API received {} request(s), {delivered} with the key; the sandbox never saw it",
        seen.len()
    );
    sbx.kill().await?;
    Ok(())
}
