//! The built-in runtimes (SCAFFOLD until h-agent's seam is merged).

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

/// A built-in runtime as the run needs it.
#[derive(Clone, Debug)]
pub(crate) struct BuiltinRuntime {
    pub name: String,
    pub version: String,
    pub check: String,
    pub install: Vec<String>,
    pub launch: String,
    pub files: Vec<(String, Vec<u8>, u32)>,
}

/// The names of the registry's built-in runtimes.
pub(crate) const BUILTIN_NAMES: [&str; 5] = ["opencode", "deepagents", "langgraph", "strands", "hermes"];

/// The built-in runtime `name`.
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

/// [`builtin`] for a name a caller gave: a name that is no built-in
/// runtime is `InvalidArgument` (the seam's `builtin` is only asked about
/// names already checked).
pub(crate) fn resolve(name: &str) -> Result<BuiltinRuntime, SandboxError> {
    if !BUILTIN_NAMES.contains(&name) {
        return Err(SandboxError::invalid_argument(
            "runtime",
            format!(
                "no built-in agent runtime is named {name:?} (one of {})",
                BUILTIN_NAMES.join(", ")
            ),
        ));
    }
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
