//! Secret gateways in the CLI (docs/cli.md, docs/secrets.md "Gateways"):
//! `sandbox create --gateway NAME=FILE.toml` / `--gateway-json NAME=JSON`
//! read one [`SecretGateway`] each, and `sandbox gateways ID` prints what
//! the sandbox's agent reports of them. A file names secrets, never holds
//! a value: the SDK reads the values from Secrets Manager and hands them
//! to the agent only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayito::Sandbox;
use rayito::gateway::{GatewayStatus, SecretGateway};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::commands::{Backend, Failure};
use crate::{Format, output};

/// One `--gateway` or `--gateway-json` argument, read but not yet parsed.
#[derive(Debug, Clone)]
pub(crate) enum GatewayArg {
    /// `NAME=FILE.toml` (or `.json`).
    File(String, PathBuf),
    /// `NAME=JSON`.
    Json(String, String),
}

/// `--gateway NAME=FILE.toml`.
pub(crate) fn parse_file_arg(text: &str) -> Result<GatewayArg, String> {
    match text.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok(GatewayArg::File(name.to_owned(), PathBuf::from(path)))
        }
        _ => Err("expected NAME=FILE.toml".to_owned()),
    }
}

/// `--gateway-json NAME='{...}'`.
pub(crate) fn parse_json_arg(text: &str) -> Result<GatewayArg, String> {
    match text.split_once('=') {
        Some((name, body)) if !name.is_empty() && !body.is_empty() => {
            Ok(GatewayArg::Json(name.to_owned(), body.to_owned()))
        }
        _ => Err("expected NAME={\"upstream\": ...}".to_owned()),
    }
}

/// A gateway as a file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayFile {
    /// `https://host` or `https://host:port`.
    upstream: String,
    /// Header name -> the name (or ARN) of the secret holding its value.
    headers: BTreeMap<String, String>,
    /// `[method, path]` pairs.
    allow: Vec<(String, String)>,
    /// 0 (the agent's default, 600) or 1 to 6,000.
    #[serde(default)]
    rate_per_minute: u32,
}

impl GatewayFile {
    fn into_gateway(self) -> SecretGateway {
        let mut gateway = SecretGateway::new(self.upstream).rate_per_minute(self.rate_per_minute);
        for (header, secret) in self.headers {
            gateway = gateway.header(header, secret);
        }
        for (method, path) in self.allow {
            gateway = gateway.allow(method, path);
        }
        gateway
    }
}

/// Every gateway argument read into `(name, gateway)`; the SDK checks
/// them (names, upstream, headers, rules, rate) before any call.
///
/// # Errors
/// A file that cannot be read, or whose TOML or JSON is not a gateway
/// (`InvalidArgument` naming `gateway`, the file, line and column, and a
/// field, never a value).
pub(crate) fn read_all(args: Vec<GatewayArg>) -> Result<Vec<(String, SecretGateway)>, Failure> {
    args.into_iter()
        .map(|arg| match arg {
            GatewayArg::File(name, path) => {
                let gateway = read_file(&name, &path)?;
                Ok((name, gateway))
            }
            GatewayArg::Json(name, text) => {
                let file: GatewayFile = serde_json::from_str(&text)
                    .map_err(|err| json_error(&name, "--gateway-json", &err))?;
                Ok((name, file.into_gateway()))
            }
        })
        .collect()
}

fn read_file(name: &str, path: &Path) -> Result<SecretGateway, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Cli(format!("cannot read {}: {e}", path.display())))?;
    let what = path.display().to_string();
    let file: GatewayFile = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|err| json_error(name, &what, &err))?
    } else {
        toml::from_str(&text).map_err(|err| {
            let (at, reason) = crate::template::toml_position(&text, &err);
            not_a_gateway(name, &what, &at, &reason)
        })?
    };
    Ok(file.into_gateway())
}

/// A JSON gateway's error: its position and reason, values left out.
fn json_error(name: &str, what: &str, err: &serde_json::Error) -> Failure {
    let message = err.to_string();
    // serde_json ends its message with " at line L column C".
    let reason = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(reason, _)| reason);
    let at = format!(" (line {}, column {})", err.line(), err.column());
    not_a_gateway(
        name,
        what,
        &at,
        &crate::template::without_quoted_values(reason),
    )
}

/// `gateway NAME: WHAT is not a secret gateway (line L, column C): REASON`.
fn not_a_gateway(name: &str, what: &str, at: &str, reason: &str) -> Failure {
    Failure::Sdk(rayito::SandboxError::invalid_argument(
        "gateway",
        format!("gateway {name}: {what} is not a secret gateway{at}: {reason}"),
    ))
}

/// A gateway's row in JSON.
fn status_json(name: &str, status: &GatewayStatus) -> Value {
    json!({
        "name": name,
        "url": status.url(),
        "port": status.port(),
        "last_error_class": status.last_error_class(),
    })
}

/// The gateways of a new sandbox, for `create`'s JSON.
pub(crate) fn created_json(sandbox: &Sandbox) -> Value {
    let rows: Vec<Value> = sandbox
        .gateways()
        .statuses()
        .iter()
        .map(|(name, status)| status_json(name, status))
        .collect();
    Value::Array(rows)
}

/// `create` in text: each gateway's URL on stderr (stdout stays the id).
pub(crate) fn note_created(sandbox: &Sandbox) {
    for (name, status) in sandbox.gateways().statuses() {
        output::note(&format!("gateway {name}: {}", status.url()));
    }
}

/// `sandbox gateways ID`: name, URL, port and last error class of each
/// gateway the sandbox's agent reports.
pub(crate) async fn list(backend: &Backend, format: Format, id: &str) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let statuses = sandbox.gateways().statuses();
    match format {
        Format::Json => {
            let rows: Vec<Value> = statuses
                .iter()
                .map(|(name, status)| status_json(name, status))
                .collect();
            output::json(&json!({ "sandbox_id": sandbox.id(), "gateways": rows }));
        }
        Format::Text if statuses.is_empty() => {
            output::note(&format!("sandbox {} has no secret gateway", sandbox.id()));
        }
        Format::Text => {
            for (name, status) in &statuses {
                outln!(
                    "{name}\t{}\tport {}\tlast error: {}",
                    status.url(),
                    status.port(),
                    status.last_error_class().unwrap_or("none")
                );
            }
        }
    }
    Ok(0)
}

/// `builder` with `gateways`. On the local backend the secrets are read
/// through the environment's AWS configuration (the daemon has no Secrets
/// Manager: `AWS_ENDPOINT_URL_SECRETS_MANAGER` or a profile says where),
/// as `rayito secret` reads them; on AWS through the sandbox's own.
///
/// # Errors
/// A secret cache that cannot be made from the environment.
pub(crate) fn with_gateways(
    backend: &Backend,
    mut builder: rayito::SandboxBuilder,
    gateways: Vec<(String, SecretGateway)>,
) -> Result<rayito::SandboxBuilder, Failure> {
    if backend.local.is_some() {
        let cache = rayito::secrets::SecretCache::new(rayito::secrets::SecretCacheOptions::new())?;
        builder = builder.secret_cache(cache);
    }
    for (name, gateway) in gateways {
        builder = builder.gateway(name, gateway);
    }
    Ok(builder)
}
