//! What a run sends into the sandbox, decided before any I/O: the run
//! script (the busy lock, the runtime's check, its launch), the command's
//! environment, the run request line and the files to write first.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::builtin;
use super::runtime::{AgentRuntime, CustomProtocol, HttpApp};
use super::spec::{
    AgentLimits, AgentSpec, McpServer, ModelProvider, PermissionAction, ToolPermission,
};
use crate::error::SandboxError;

/// The tag of every run's command (`commands.list()` shows it; a second
/// run finds the first by it: `busy`).
pub const AGENT_RUN_TAG: &str = "rayito-agent-run";
/// The key the runtime sees: the real one stays in the gateway.
pub const MODEL_KEY_PLACEHOLDER: &str = "placeholder-not-a-secret";
/// Where the SDK keeps its per-sandbox agent files.
pub const AGENT_STATE_DIR: &str = "/home/user/.rayito/agent";
/// The lock a run holds while its runtime runs (a second run is `busy`).
const LOCK_PATH: &str = "/tmp/rayito-agent-run.lock";
/// The HTTP app driver (src/agent/http_app.py), written on first use.
const HTTP_DRIVER_PATH: &str = "/home/user/.rayito/agent/http_app_driver.py";
const HTTP_DRIVER: &[u8] = include_bytes!("http_app.py");

/// What the runtime writes on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    V1,
    Text,
}

/// A resolved runtime: the pieces of the run script.
pub(crate) struct Runtime {
    pub(crate) check: Option<String>,
    pub(crate) install: Vec<String>,
    pub(crate) launch: String,
    pub(crate) files: Vec<(String, Vec<u8>, u32)>,
    pub(crate) mode: Mode,
    pub(crate) envs: BTreeMap<String, String>,
}

/// Resolves `runtime` (no I/O).
///
/// # Errors
/// `Unimplemented` for a built-in runtime not shipped, or an HTTP protocol
/// not supported.
pub(crate) fn resolve(runtime: &AgentRuntime) -> Result<Runtime, SandboxError> {
    Ok(match runtime {
        AgentRuntime::Builtin(name) => {
            let b = builtin::builtin(name)?;
            Runtime {
                check: Some(b.check),
                install: b.install,
                launch: b.launch,
                files: b.files,
                mode: Mode::V1,
                envs: BTreeMap::new(),
            }
        }
        AgentRuntime::Custom(custom) => {
            let (check, launch, files) = custom.parts();
            Runtime {
                check,
                install: custom.install.clone(),
                launch,
                files,
                mode: match custom.protocol {
                    CustomProtocol::RayitoV1 => Mode::V1,
                    CustomProtocol::Text => Mode::Text,
                },
                envs: custom.envs.clone(),
            }
        }
        AgentRuntime::Http(app) => http_runtime(app)?,
    })
}

fn http_runtime(app: &HttpApp) -> Result<Runtime, SandboxError> {
    if app.protocol == super::runtime::HttpProtocol::LanggraphApi {
        return Err(SandboxError::unimplemented(
            "HttpApp protocol langgraph-api",
            "the LangGraph Platform API is not driven by this version; use json or openai-chat",
            Some("docs/agent.md"),
        ));
    }
    let config = json!({
        "command": app.command,
        "port": app.port,
        "health_path": app.health_path,
        "invoke_path": app.invoke_path,
        "protocol": app.protocol.as_str(),
        "request_field": app.request_field,
        "response_field": app.response_field,
        "port_env": app.port_env,
    });
    let mut files = app.files.clone();
    files.push((HTTP_DRIVER_PATH.to_owned(), HTTP_DRIVER.to_vec(), 0o644));
    let mut envs = BTreeMap::new();
    envs.insert("RAYITO_HTTP_APP".to_owned(), config.to_string());
    Ok(Runtime {
        check: Some("command -v python3".to_owned()),
        install: Vec::new(),
        launch: format!("python3 {HTTP_DRIVER_PATH}"),
        files,
        mode: Mode::V1,
        envs,
    })
}

/// Everything one run sends.
pub(crate) struct Plan {
    pub(crate) script: String,
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) stdin: Vec<u8>,
    pub(crate) files: Vec<(String, Vec<u8>, u32)>,
    pub(crate) mode: Mode,
    pub(crate) limits: AgentLimits,
    pub(crate) reasoning: bool,
    pub(crate) workdir: String,
    /// The session of the run (the spec's, else a new one for a text
    /// runtime; a v1 runtime names its own).
    pub(crate) session_id: String,
    /// This run's id, in the runtime's environment (`RAYITO_AGENT_RUN_ID`):
    /// where kill_tree is not available, the processes that carry it are
    /// the run's tree.
    pub(crate) run_id: String,
}

/// The plan of running `prompt` with `spec`, the gateways' URLs by name.
pub(crate) fn plan(
    spec: &AgentSpec,
    runtime: Runtime,
    prompt: &str,
    gateway_urls: &BTreeMap<String, String>,
) -> Plan {
    let model = &spec.model;
    let gateway = gateway_urls
        .get(&model.gateway)
        .cloned()
        .unwrap_or_default();
    let base_url = format!(
        "{gateway}{}",
        provider_base_path(model.provider, &model.base_path)
    );
    let session_id = spec.session_id.clone().unwrap_or_else(new_session_id);
    let run_id = new_session_id().replacen("rda_", "run_", 1);
    let mut envs = runtime.envs.clone();
    envs.extend(spec.envs.clone());
    envs.insert(RUN_ID_ENV.to_owned(), run_id.clone());
    let model_envs = [
        ("RAYITO_MODEL_PROVIDER", model.provider.as_str().to_owned()),
        ("RAYITO_MODEL_BASE_URL", base_url.clone()),
        ("RAYITO_MODEL_API_KEY", MODEL_KEY_PLACEHOLDER.to_owned()),
        ("RAYITO_MODEL_ID", model.id.clone().unwrap_or_default()),
        (
            "RAYITO_MODEL_REGION",
            model.region.clone().unwrap_or_default(),
        ),
        ("RAYITO_SESSION_ID", session_id.clone()),
        ("RAYITO_MODEL", model.id.clone().unwrap_or_default()),
        (
            "RAYITO_REASONING",
            if spec.reasoning { "1" } else { "0" }.to_owned(),
        ),
    ];
    for (name, value) in model_envs {
        envs.insert(name.to_owned(), value);
    }
    for (name, value) in standard_envs(model.provider, &gateway, &base_url) {
        envs.insert(name.to_owned(), value);
    }
    for (name, value) in [
        (&model.id_env, model.id.clone().unwrap_or_default()),
        (&model.base_url_env, base_url.clone()),
        (&model.api_key_env, MODEL_KEY_PLACEHOLDER.to_owned()),
    ] {
        if let Some(name) = name {
            envs.insert(name.clone(), value);
        }
    }
    let stdin = match runtime.mode {
        Mode::Text => prompt.as_bytes().to_vec(),
        Mode::V1 => {
            let mut line = request(spec, prompt, &base_url, gateway_urls).to_string();
            line.push('\n');
            line.into_bytes()
        }
    };
    Plan {
        script: script(&runtime),
        envs,
        stdin,
        files: runtime.files,
        mode: runtime.mode,
        limits: spec.limits,
        reasoning: spec.reasoning,
        workdir: spec.workdir.clone(),
        session_id,
        run_id,
    }
}

/// The environment variable naming the run in its processes.
pub(crate) const RUN_ID_ENV: &str = "RAYITO_AGENT_RUN_ID";

/// A script that kills every process whose environment names run `run_id`
/// (the run's tree, where kill_tree is not available).
pub(crate) fn sweep_script(run_id: &str) -> String {
    format!(
        "for p in /proc/[0-9]*; do if tr '\\0' '\\n' < \"$p/environ\" 2>/dev/null | grep -qx '{RUN_ID_ENV}={run_id}'; then kill -9 \"${{p#/proc/}}\" 2>/dev/null; fi; done; true"
    )
}

/// The run script: the lock (busy), the check (runtime_missing), then the
/// runtime with the lock's descriptor closed (so nothing it leaves behind
/// keeps the lock).
fn script(runtime: &Runtime) -> String {
    let mut s = String::from("exec 9>>");
    s.push_str(LOCK_PATH);
    s.push_str(
        "\nif command -v flock >/dev/null 2>&1 && ! flock -n 9; then printf '%s\\n' '{\"v\":1,\"type\":\"rayito.busy\"}'; exit 0; fi\n",
    );
    if let Some(check) = &runtime.check {
        s.push_str("if ! ( ");
        s.push_str(check);
        s.push_str(
            "\n) </dev/null >/dev/null 2>&1; then printf '%s\\n' '{\"v\":1,\"type\":\"rayito.runtime_missing\"}'; exit 0; fi\n",
        );
    }
    s.push_str("{ ");
    s.push_str(&runtime.launch);
    s.push_str("\n} 9>&-\n");
    s
}

/// The install script of `prepare()`: nothing when the check passes.
pub(crate) fn install_script(runtime: &Runtime) -> Option<String> {
    if runtime.install.is_empty() {
        return None;
    }
    let mut s = String::from("set -e\n");
    if let Some(check) = &runtime.check {
        s.push_str("if ( ");
        s.push_str(check);
        s.push_str("\n) </dev/null >/dev/null 2>&1; then exit 0; fi\n");
    }
    for step in &runtime.install {
        s.push_str(step);
        s.push('\n');
    }
    Some(s)
}

/// The check script of `prepare()` (exit 0 iff installed).
pub(crate) fn check_script(runtime: &Runtime) -> Option<String> {
    runtime.check.clone()
}

fn provider_base_path(provider: ModelProvider, base_path: &str) -> &str {
    match provider {
        ModelProvider::OpenaiCompatible => base_path,
        ModelProvider::Openai => "/v1",
        ModelProvider::Azure => "/openai/v1",
        ModelProvider::Bedrock | ModelProvider::Anthropic | ModelProvider::Google => "",
    }
}

/// The provider's own variables, aimed at the gateway with the placeholder.
fn standard_envs(
    provider: ModelProvider,
    gateway: &str,
    base_url: &str,
) -> Vec<(&'static str, String)> {
    let key = MODEL_KEY_PLACEHOLDER.to_owned();
    match provider {
        ModelProvider::Openai | ModelProvider::OpenaiCompatible | ModelProvider::Azure => vec![
            ("OPENAI_BASE_URL", base_url.to_owned()),
            ("OPENAI_API_KEY", key),
        ],
        ModelProvider::Anthropic => vec![
            ("ANTHROPIC_BASE_URL", gateway.to_owned()),
            ("ANTHROPIC_API_KEY", key),
        ],
        ModelProvider::Bedrock => vec![
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", gateway.to_owned()),
            ("AWS_BEARER_TOKEN_BEDROCK", key),
        ],
        ModelProvider::Google => vec![
            ("GOOGLE_GEMINI_BASE_URL", gateway.to_owned()),
            ("GEMINI_API_KEY", key),
        ],
    }
}

/// The run request (src/agent/builtin/mod.rs documents it).
fn request(
    spec: &AgentSpec,
    prompt: &str,
    base_url: &str,
    gateway_urls: &BTreeMap<String, String>,
) -> Value {
    let model = &spec.model;
    let agents: serde_json::Map<String, Value> = spec
        .agents
        .iter()
        .map(|(name, a)| {
            (
                name.clone(),
                json!({
                    "description": a.description,
                    "instructions": a.instructions,
                    "model": a.model,
                    "permissions": a.permissions.as_ref().map(permissions),
                }),
            )
        })
        .collect();
    let mcp: serde_json::Map<String, Value> = spec
        .mcp
        .iter()
        .map(|(name, server)| {
            let value = match server {
                McpServer::Local(local) => json!({
                    "type": "local",
                    "command": local.command,
                    "envs": local.envs,
                    "timeout_ms": local.timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                }),
                McpServer::Remote(remote) => json!({
                    "type": "remote",
                    "url": format!(
                        "{}{}",
                        gateway_urls.get(&remote.gateway).cloned().unwrap_or_default(),
                        remote.path
                    ),
                }),
            };
            (name.clone(), value)
        })
        .collect();
    json!({
        "v": 1,
        "prompt": prompt,
        "session_id": spec.session_id,
        "workdir": spec.workdir,
        "reasoning": spec.reasoning,
        "model": {
            "provider": model.provider.as_str(),
            "id": model.id,
            "small_id": spec.small_model.clone().or_else(|| model.id.clone()),
            "base_url": base_url,
            "api_key": MODEL_KEY_PLACEHOLDER,
            "region": model.region,
            "prompt_caching": model.prompt_caching,
        },
        "instructions": spec.instructions,
        "permissions": permissions(&spec.permissions),
        "agents": agents,
        "mcp": mcp,
        "limits": {
            "max_steps": spec.limits.max_steps,
            "timeout_ms": u64::try_from(spec.limits.timeout.as_millis()).unwrap_or(u64::MAX),
            "max_total_tokens": spec.limits.max_total_tokens,
        },
        "raw_config": spec.raw_config,
        "runtime_version": spec.runtime_version,
    })
}

fn permissions(p: &super::spec::AgentPermissions) -> Value {
    let tools: serde_json::Map<String, Value> = p
        .effective_tools()
        .into_iter()
        .map(|(tool, rule)| {
            let value = match rule {
                ToolPermission::Action(a) => Value::from(a.as_str()),
                ToolPermission::Patterns(patterns) => Value::Object(
                    patterns
                        .into_iter()
                        .map(|(k, a)| (k, Value::from(a.as_str())))
                        .collect(),
                ),
            };
            (tool, value)
        })
        .collect();
    json!({"default": action(p.default), "tools": tools})
}

fn action(a: PermissionAction) -> &'static str {
    a.as_str()
}

/// `argv` as one shell command, each word single-quoted.
pub(crate) fn quote_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|word| format!("'{}'", word.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A new session id: `rda_` and 32 hex of randomness.
pub(crate) fn new_session_id() -> String {
    let bytes: [u8; 16] = rand::random();
    let mut id = String::from("rda_");
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    id
}
