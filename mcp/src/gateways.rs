//! Secret gateways for the server's sandbox (docs/mcp.md, "Secret
//! gateways"): `RAYITO_MCP_GATEWAYS` names APIs the model's code may call
//! without their keys. The SDK reads each header's secret from Secrets
//! Manager when the sandbox is created and hands it to the agent only; the
//! `gateways` tool tells the model each gateway's URL inside the sandbox,
//! its upstream and its rules, never a secret's name or value.

use std::collections::BTreeMap;

use rayito::Sandbox;
use rayito::gateway::SecretGateway;
use serde::Deserialize;
use serde_json::{Value, json};

/// The variable: a JSON object of gateways by name.
pub const GATEWAYS_ENV: &str = "RAYITO_MCP_GATEWAYS";

/// What the variable accepts (its error's text; never the value).
pub const EXPECTED: &str = "a JSON object {\"<name>\": {\"upstream\": \"https://host\", \"headers\": {\"<header>\": \"<secret name>\"}, \"allow\": [[\"<METHOD>\", \"/path\"]], \"rate_per_minute\": <n>}} (docs/mcp.md)";

/// One gateway as the variable writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    upstream: String,
    headers: BTreeMap<String, String>,
    allow: Vec<(String, String)>,
    #[serde(default)]
    rate_per_minute: u32,
}

/// The gateways of `text`, by name (the SDK checks names, upstreams,
/// headers, rules and rates when the sandbox is created).
///
/// # Errors
/// Text that is not such an object (no detail: the caller names the
/// variable, never the value).
pub fn parse(text: &str) -> Result<Vec<(String, SecretGateway)>, ()> {
    let entries: BTreeMap<String, Entry> = serde_json::from_str(text).map_err(|_| ())?;
    Ok(entries
        .into_iter()
        .map(|(name, entry)| {
            let mut gateway =
                SecretGateway::new(entry.upstream).rate_per_minute(entry.rate_per_minute);
            for (header, secret) in entry.headers {
                gateway = gateway.header(header, secret);
            }
            for (method, path) in entry.allow {
                gateway = gateway.allow(method, path);
            }
            (name, gateway)
        })
        .collect())
}

/// The `gateways` tool's answer: each configured gateway's name, URL in
/// the sandbox, upstream, rules and last error class, as the agent reports
/// them now. The lease's handle keeps what it saw when it applied them
/// (its `refresh` would apply them again, and the agent rebind every
/// port), so a second handle on the same sandbox reads the status once.
///
/// # Errors
/// The connection's failure.
pub async fn listing(
    client: &rayito::Client,
    sandbox: &Sandbox,
    configured: &[(String, SecretGateway)],
) -> Result<Value, rayito::SandboxError> {
    let fresh = client
        .connect(sandbox.id(), sandbox.access_token().clone())
        .await?;
    let statuses = fresh.gateways().statuses();
    let rows: Vec<Value> = configured
        .iter()
        .map(|(name, gateway)| {
            let status = statuses.get(name);
            let allow: Vec<String> = gateway
                .rules()
                .into_iter()
                .map(|(method, path)| format!("{method} {path}"))
                .collect();
            json!({
                "name": name,
                "url": status.map(rayito::gateway::GatewayStatus::url),
                "upstream": gateway.upstream(),
                "allow": allow,
                "last_error_class": status.and_then(|s| s.last_error_class()),
            })
        })
        .collect();
    Ok(json!({ "gateways": rows }))
}
