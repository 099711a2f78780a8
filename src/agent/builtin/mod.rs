//! The built-in runtimes (`AgentRuntime::Builtin(name)`): the seam between
//! the run (src/agent/run.rs, which owns the protocol, the limits and the
//! process) and each runtime's install and adapter (this directory).
//!
//! # The run request
//!
//! `launch` reads ONE JSON line on stdin, then stdin closes:
//!
//! ```json
//! {"v": 1,
//!  "prompt": "...",
//!  "session_id": "rda_<32 hex>" | null,
//!  "workdir": "/home/user",
//!  "reasoning": false,
//!  "model": {"provider": "openai-compatible", "id": "gpt-4o-mini" | null,
//!            "small_id": "..." | null, "base_url": "http://127.0.0.1:<port><base_path>",
//!            "api_key": "placeholder-not-a-secret", "region": null | "us-east-1",
//!            "prompt_caching": true},
//!  "instructions": "..." | null,
//!  "permissions": {"default": "allow", "tools": {"question": "deny", "bash": {"git *": "allow"}}},
//!  "agents": {"name": {"description": "...", "instructions": "...", "model": null,
//!                      "permissions": null | {...}}},
//!  "mcp": {"name": {"type": "local", "command": [...], "envs": {...}, "timeout_ms": null}
//!          | {"type": "remote", "url": "http://127.0.0.1:<port>/path"}},
//!  "limits": {"max_steps": 50, "timeout_ms": 600000, "max_total_tokens": 1000000 | null},
//!  "raw_config": {...},
//!  "runtime_version": null | "1.18.34"}
//! ```
//!
//! The same model facts are in the environment: `RAYITO_MODEL_PROVIDER`,
//! `RAYITO_MODEL_ID`, `RAYITO_MODEL_BASE_URL`, `RAYITO_MODEL_API_KEY` (the
//! placeholder: the key stays in the gateway), `RAYITO_MODEL_REGION`, plus
//! the provider's standard variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `ANTHROPIC_BASE_URL`, ...).
//!
//! `launch` writes protocol v1 JSON lines on stdout (src/agent/protocol.rs):
//! a `session` line with `rda_<32 hex>` first, then `step_started`,
//! `text_delta`/`text`/`reasoning`, `tool_call`, `step_finished` with
//! `usage`, and `done` (or `agent_failed` with a `reason` of `model_error`,
//! `runtime_error` or `protocol_error` and a short `detail_code`); it exits
//! 0 after `done`. Stderr is never read into events or errors. Before
//! `launch` the run script holds the sandbox's run lock (`busy`) and runs
//! `check` (`runtime_missing` when it fails).

mod opencode;
#[cfg(feature = "templates")]
mod template;
mod unbuilt;
mod warmup;

#[cfg(feature = "templates")]
pub use template::{
    AGENT_MIN_MEMORY_MIB, AGENT_TEMPLATE_BASE, AGENT_TEMPLATE_MANIFEST_PATH,
    AGENT_TEMPLATE_MANIFEST_SCHEMA, AGENT_TEMPLATE_NAME, AgentTemplate,
};
pub use warmup::agent_pool_warmup;

use crate::error::SandboxError;

/// One built-in runtime: how to check, install and launch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BuiltinRuntime {
    /// The runtime's name (`opencode`).
    pub(crate) name: String,
    /// The version installed by `install`.
    pub(crate) version: String,
    /// A shell command: exit 0 iff the runtime is installed.
    pub(crate) check: String,
    /// Shell commands that install it (a template's steps or a warm-up).
    pub(crate) install: Vec<String>,
    /// The shell command run as the run's background command: reads the
    /// run request (module docs) on stdin, writes protocol v1 on stdout.
    pub(crate) launch: String,
    /// Files written into the sandbox before the first run when missing
    /// (an adapter script): path, content, mode.
    pub(crate) files: Vec<(String, Vec<u8>, u32)>,
}

/// The built-in runtime `name` (one of `BUILTIN_RUNTIMES`: unknown names
/// are refused by `AgentSpec::check` before this is called).
///
/// # Errors
/// `Unimplemented` with a reason for a runtime not built in this version.
pub(crate) fn builtin(name: &str) -> Result<BuiltinRuntime, SandboxError> {
    if name == opencode::NAME {
        return Ok(opencode::runtime());
    }
    Err(unbuilt::refusal(name).unwrap_or_else(|| {
        SandboxError::unimplemented(
            format!("agent runtime {name}"),
            "no such built-in runtime",
            Some(unbuilt::DOC),
        )
    }))
}

/// [`builtin`] for a name a caller gave outside a run (a pool's warm-up, a
/// template): a name that is no built-in runtime is `InvalidArgument`, as
/// `AgentSpec::check` answers it.
pub(crate) fn resolve(name: &str) -> Result<BuiltinRuntime, SandboxError> {
    super::AgentRuntime::Builtin(name.to_owned()).check()?;
    builtin(name)
}

/// A runtime's entry in the agent template's manifest.
#[cfg_attr(not(feature = "templates"), allow(dead_code))]
pub(crate) fn manifest_entry(runtime: &BuiltinRuntime) -> serde_json::Value {
    match runtime.name.as_str() {
        opencode::NAME => opencode::manifest_entry(),
        _ => serde_json::json!({ "version": runtime.version }),
    }
}
