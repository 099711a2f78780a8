//! AI agent runs in a sandbox (SCAFFOLD until h-agent's module is merged).

pub(crate) mod builtin;

#[cfg(feature = "templates")]
pub use builtin::{
    AGENT_MIN_MEMORY_MIB, AGENT_TEMPLATE_BASE, AGENT_TEMPLATE_MANIFEST_PATH,
    AGENT_TEMPLATE_MANIFEST_SCHEMA, AGENT_TEMPLATE_NAME, AgentTemplate,
};
pub use builtin::agent_pool_warmup;
