//! [`AgentSpec`] and its parts: the model and the gateway it is reached
//! through, tool permissions, sub-agents, MCP servers, limits. Setters never
//! fail; [`AgentSpec::check`] (run by every `sandbox.agent()` call before
//! any I/O) refuses what the runtime could not honour, with the messages of
//! docs/agent.md's "Errors" (pinned in src/agent/tests.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use super::runtime::AgentRuntime;
use crate::error::SandboxError;

/// The default step limit.
pub const DEFAULT_MAX_STEPS: u32 = 50;
/// The default time limit of a run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The default output kept from the runtime's command (16 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// The highest output limit (64 MiB, the commands' own).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;
/// The default token budget of a run.
pub const DEFAULT_MAX_TOTAL_TOKENS: u64 = 1_000_000;
/// The default working directory of a run.
pub const DEFAULT_WORKDIR: &str = "/home/user";
/// Longest model id.
pub const MAX_MODEL_ID_CHARS: usize = 256;
/// Longest name of an MCP server, sub-agent or tool.
pub const MAX_NAME_CHARS: usize = 64;
/// Tools a run never offers unless the spec names them: a question needs
/// someone to answer; web access bypasses the gateways.
pub const DEFAULT_DENIED_TOOLS: [&str; 3] = ["question", "webfetch", "websearch"];
/// Top-level keys of `raw_config` the SDK writes itself.
pub const RESERVED_CONFIG_KEYS: [&str; 11] = [
    "provider",
    "autoupdate",
    "share",
    "enabled_providers",
    "model",
    "small_model",
    "mcp",
    "agent",
    "permission",
    "instructions",
    "plugin",
];

/// The model's provider: which API the runtime speaks to the gateway.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelProvider {
    /// Amazon Bedrock (Converse); needs [`AgentModel::region`].
    Bedrock,
    /// Anthropic's Messages API.
    Anthropic,
    /// Any OpenAI-compatible chat completions API (with a base path).
    OpenaiCompatible,
    /// OpenAI (responses and chat completions), also xAI.
    Openai,
    /// Google's Gemini API.
    Google,
    /// Azure OpenAI v1.
    Azure,
}

impl ModelProvider {
    /// The stable string (`openai-compatible`), as the run request names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Bedrock => "bedrock",
            Self::Anthropic => "anthropic",
            Self::OpenaiCompatible => "openai-compatible",
            Self::Openai => "openai",
            Self::Google => "google",
            Self::Azure => "azure",
        }
    }
}

/// The model an agent uses and the gateway (a [`SecretGateway`](crate::SecretGateway)
/// of the sandbox, by name) through which it reaches it: the key stays in
/// the gateway, the runtime sees the gateway's loopback URL and a
/// placeholder key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct AgentModel {
    pub(crate) provider: ModelProvider,
    pub(crate) gateway: String,
    pub(crate) id: Option<String>,
    pub(crate) region: Option<String>,
    pub(crate) base_path: String,
    pub(crate) prompt_caching: bool,
    pub(crate) id_env: Option<String>,
    pub(crate) base_url_env: Option<String>,
    pub(crate) api_key_env: Option<String>,
}

impl AgentModel {
    /// A model of `provider` reached through the sandbox's gateway named
    /// `gateway`.
    pub fn new(provider: ModelProvider, gateway: impl Into<String>) -> Self {
        Self {
            provider,
            gateway: gateway.into(),
            id: None,
            region: None,
            base_path: String::new(),
            prompt_caching: true,
            id_env: None,
            base_url_env: None,
            api_key_env: None,
        }
    }

    /// The provider's model id (`gpt-4o-mini`,
    /// `us.anthropic.claude-haiku-4-5-20251001-v1:0`): 1 to 256 characters
    /// `[A-Za-z0-9._:/@+-]`, starting with a letter or digit.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The AWS region (required with [`ModelProvider::Bedrock`]).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// The API's base path under the gateway (`/v1`; `""` by default), only
    /// with [`ModelProvider::OpenaiCompatible`]: absolute, no trailing `/`.
    pub fn base_path(mut self, base_path: impl Into<String>) -> Self {
        self.base_path = base_path.into();
        self
    }

    /// Whether the runtime asks for prompt caching (on by default).
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// Also exports the model id in the environment variable `name`.
    pub fn id_env(mut self, name: impl Into<String>) -> Self {
        self.id_env = Some(name.into());
        self
    }

    /// Also exports the gateway's base URL in the environment variable `name`.
    pub fn base_url_env(mut self, name: impl Into<String>) -> Self {
        self.base_url_env = Some(name.into());
        self
    }

    /// Also exports the placeholder key in the environment variable `name`
    /// (never the real key: it stays in the gateway).
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// The provider.
    pub fn provider(&self) -> ModelProvider {
        self.provider
    }

    /// The gateway's name.
    pub fn gateway(&self) -> &str {
        &self.gateway
    }

    /// The model id, when set.
    pub fn model_id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn check(&self) -> Result<(), SandboxError> {
        if let Some(id) = &self.id {
            check_model_id(id, "AgentModel.id")?;
        }
        match (&self.region, self.provider) {
            (None, ModelProvider::Bedrock) => {
                return Err(refuse("model", MODEL_REGION_REQUIRED.to_owned()));
            }
            (Some(region), _) if !is_region(region) => {
                return Err(refuse(
                    "model",
                    REGION.replace("{label}", "AgentModel.region"),
                ));
            }
            _ => {}
        }
        check_base_path(&self.base_path, "AgentModel.base_path")?;
        if !self.base_path.is_empty() && self.provider != ModelProvider::OpenaiCompatible {
            return Err(refuse("model", BASE_PATH_PROVIDER.to_owned()));
        }
        for (label, env) in [
            ("AgentModel.id_env", &self.id_env),
            ("AgentModel.base_url_env", &self.base_url_env),
            ("AgentModel.api_key_env", &self.api_key_env),
        ] {
            if let Some(env) = env
                && !is_env_name(env)
            {
                return Err(refuse("model", ENV_NAME.replace("{label}", label)));
            }
        }
        Ok(())
    }
}

/// What a tool may do: allowed or denied (no `ask`: a run has no one to
/// answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PermissionAction {
    /// The tool runs.
    Allow,
    /// The tool is refused.
    Deny,
}

impl PermissionAction {
    /// `allow` or `deny`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// One tool's rule: an action, or an action per pattern of its argument
/// (`bash`: `"git *"` allowed, `"*"` denied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolPermission {
    /// One action for every use of the tool.
    Action(PermissionAction),
    /// An action per argument pattern (1 to 256 characters each, no control
    /// character).
    Patterns(BTreeMap<String, PermissionAction>),
}

impl From<PermissionAction> for ToolPermission {
    fn from(action: PermissionAction) -> Self {
        Self::Action(action)
    }
}

/// Which tools the agent may use: `default` for every tool without a rule
/// of its own, and rules per tool. `question`, `webfetch` and `websearch`
/// are denied underneath the caller's rules. Not a security boundary: the
/// sandbox is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct AgentPermissions {
    pub(crate) default: PermissionAction,
    pub(crate) tools: BTreeMap<String, ToolPermission>,
}

impl Default for AgentPermissions {
    fn default() -> Self {
        Self {
            default: PermissionAction::Allow,
            tools: BTreeMap::new(),
        }
    }
}

impl AgentPermissions {
    /// Everything allowed but the default-denied tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// The action of a tool without a rule (allow by default).
    pub fn default_action(mut self, action: PermissionAction) -> Self {
        self.default = action;
        self
    }

    /// The rule of `tool` (`edit`, `bash`, ...); the same tool again
    /// replaces it.
    pub fn tool(mut self, tool: impl Into<String>, rule: impl Into<ToolPermission>) -> Self {
        self.tools.insert(tool.into(), rule.into());
        self
    }

    /// The rules the runtime gets: the default-denied tools, then the
    /// caller's rules over them.
    pub fn effective_tools(&self) -> BTreeMap<String, ToolPermission> {
        let mut out: BTreeMap<String, ToolPermission> = DEFAULT_DENIED_TOOLS
            .iter()
            .map(|t| {
                (
                    (*t).to_owned(),
                    ToolPermission::Action(PermissionAction::Deny),
                )
            })
            .collect();
        out.extend(self.tools.clone());
        out
    }

    fn check(&self) -> Result<(), SandboxError> {
        for (tool, rule) in &self.tools {
            if !is_name(tool, true) {
                return Err(refuse("permissions", TOOL_NAME.to_owned()));
            }
            if let ToolPermission::Patterns(patterns) = rule {
                if patterns.is_empty() {
                    return Err(refuse(
                        "permissions",
                        PATTERNS_EMPTY.replace("{tool}", tool),
                    ));
                }
                if patterns.keys().any(|p| {
                    p.is_empty() || p.chars().count() > 256 || p.chars().any(char::is_control)
                }) {
                    return Err(refuse("permissions", PATTERN.replace("{tool}", tool)));
                }
            }
        }
        Ok(())
    }
}

/// A sub-agent the main agent may call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct SubAgent {
    pub(crate) description: String,
    pub(crate) instructions: String,
    pub(crate) model: Option<String>,
    pub(crate) permissions: Option<AgentPermissions>,
}

impl SubAgent {
    /// A sub-agent described by `description` (when to call it) that
    /// follows `instructions`.
    pub fn new(description: impl Into<String>, instructions: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            instructions: instructions.into(),
            model: None,
            permissions: None,
        }
    }

    /// Its own model id (same provider and gateway as the main model).
    pub fn model(mut self, id: impl Into<String>) -> Self {
        self.model = Some(id.into());
        self
    }

    /// Its own permissions (else the main agent's).
    pub fn permissions(mut self, permissions: AgentPermissions) -> Self {
        self.permissions = Some(permissions);
        self
    }
}

/// An MCP server for the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpServer {
    /// Started by the runtime inside the sandbox.
    Local(McpLocal),
    /// Reached through a gateway of the sandbox.
    Remote(McpRemote),
}

/// An MCP server the runtime starts inside the sandbox (stdio). Its
/// environment holds no credential: reach remote services through a gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct McpLocal {
    pub(crate) command: Vec<String>,
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) timeout: Option<Duration>,
}

impl McpLocal {
    /// The server's argv (non-empty strings, no NUL).
    pub fn new<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            envs: BTreeMap::new(),
            timeout: None,
        }
    }

    /// An environment variable of the server.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(name.into(), value.into());
        self
    }

    /// How long the runtime waits for it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// A remote MCP server reached through the sandbox's gateway `gateway`, at
/// `path` (`/` by default). No headers: the gateway adds the credential.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct McpRemote {
    pub(crate) gateway: String,
    pub(crate) path: String,
}

impl McpRemote {
    /// The server behind gateway `gateway`.
    pub fn new(gateway: impl Into<String>) -> Self {
        Self {
            gateway: gateway.into(),
            path: "/".to_owned(),
        }
    }

    /// The path under the gateway (absolute, forwardable by the gateway).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }
}

impl From<McpLocal> for McpServer {
    fn from(server: McpLocal) -> Self {
        Self::Local(server)
    }
}

impl From<McpRemote> for McpServer {
    fn from(server: McpRemote) -> Self {
        Self::Remote(server)
    }
}

/// The hard limits of a run, enforced by the SDK from the runtime's events
/// (not by the runtime): a step started past `max_steps` ends the run
/// (`max_steps`), the tokens after a step above `max_total_tokens` end it
/// (`token_budget`; a single step may pass it), `timeout` bounds the
/// runtime's command (`timeout`). Each ends the run with its process tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct AgentLimits {
    pub(crate) max_steps: u32,
    pub(crate) timeout: Duration,
    pub(crate) max_output_bytes: usize,
    pub(crate) max_total_tokens: Option<u64>,
}

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_total_tokens: Some(DEFAULT_MAX_TOTAL_TOKENS),
        }
    }
}

impl AgentLimits {
    /// 50 steps, 600 s, 16 MiB of output, 1,000,000 tokens.
    pub fn new() -> Self {
        Self::default()
    }

    /// Steps allowed (at least 1).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps;
        self
    }

    /// Time allowed (more than zero).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Output of the runtime's command kept (1 byte to 64 MiB).
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Tokens allowed (at least 1), or `None` for no budget.
    pub fn max_total_tokens(mut self, tokens: Option<u64>) -> Self {
        self.max_total_tokens = tokens;
        self
    }

    /// The step limit.
    pub fn steps(&self) -> u32 {
        self.max_steps
    }

    /// The time limit.
    pub fn time(&self) -> Duration {
        self.timeout
    }

    /// The token budget.
    pub fn tokens(&self) -> Option<u64> {
        self.max_total_tokens
    }

    fn check(&self) -> Result<(), SandboxError> {
        if self.max_steps == 0 {
            return Err(refuse("limits", LIMIT_STEPS.to_owned()));
        }
        if self.timeout.is_zero() {
            return Err(refuse("limits", LIMIT_TIMEOUT.to_owned()));
        }
        if self.max_output_bytes == 0 || self.max_output_bytes > MAX_OUTPUT_BYTES {
            return Err(refuse("limits", LIMIT_OUTPUT.to_owned()));
        }
        if self.max_total_tokens == Some(0) {
            return Err(refuse("limits", LIMIT_TOKENS.to_owned()));
        }
        Ok(())
    }
}

/// What an agent run is: its runtime, model, instructions, tools, limits
/// and where it works. Built with setters from [`AgentSpec::new`]; checked
/// as a whole before any I/O by every `sandbox.agent()` call.
///
/// ```
/// use rayito::agent::{AgentLimits, AgentModel, AgentSpec, ModelProvider};
///
/// let spec = AgentSpec::new(AgentModel::new(ModelProvider::Openai, "openai").id("gpt-4o-mini"))
///     .instructions("Answer in one sentence.")
///     .limits(AgentLimits::new().max_steps(10));
/// # let _ = spec;
/// ```
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub struct AgentSpec {
    pub(crate) runtime: AgentRuntime,
    pub(crate) model: AgentModel,
    pub(crate) small_model: Option<String>,
    pub(crate) instructions: Option<String>,
    pub(crate) permissions: AgentPermissions,
    pub(crate) agents: BTreeMap<String, SubAgent>,
    pub(crate) mcp: BTreeMap<String, McpServer>,
    pub(crate) limits: AgentLimits,
    pub(crate) reasoning: bool,
    pub(crate) workdir: String,
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) session_id: Option<String>,
    pub(crate) raw_config: serde_json::Map<String, serde_json::Value>,
    pub(crate) runtime_version: Option<String>,
}

impl AgentSpec {
    /// A spec for `model` on the default runtime (the built-in `opencode`).
    pub fn new(model: AgentModel) -> Self {
        Self {
            runtime: AgentRuntime::default(),
            model,
            small_model: None,
            instructions: None,
            permissions: AgentPermissions::default(),
            agents: BTreeMap::new(),
            mcp: BTreeMap::new(),
            limits: AgentLimits::default(),
            reasoning: false,
            workdir: DEFAULT_WORKDIR.to_owned(),
            envs: BTreeMap::new(),
            session_id: None,
            raw_config: serde_json::Map::new(),
            runtime_version: None,
        }
    }

    /// The runtime that runs the agent.
    pub fn runtime(mut self, runtime: impl Into<AgentRuntime>) -> Self {
        self.runtime = runtime.into();
        self
    }

    /// A smaller model id for the runtime's side tasks (default: the model's).
    pub fn small_model(mut self, id: impl Into<String>) -> Self {
        self.small_model = Some(id.into());
        self
    }

    /// The agent's own instructions (non-empty).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The tool permissions.
    pub fn permissions(mut self, permissions: AgentPermissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// A sub-agent named `name` (`[a-z0-9][a-z0-9_-]{0,63}`, not `build`).
    pub fn agent(mut self, name: impl Into<String>, agent: SubAgent) -> Self {
        self.agents.insert(name.into(), agent);
        self
    }

    /// An MCP server named `name`.
    pub fn mcp(mut self, name: impl Into<String>, server: impl Into<McpServer>) -> Self {
        self.mcp.insert(name.into(), server.into());
        self
    }

    /// The limits (50 steps, 600 s, 16 MiB, 1,000,000 tokens by default).
    pub fn limits(mut self, limits: AgentLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether the run reports the model's reasoning (`Reasoning` events).
    pub fn reasoning(mut self, on: bool) -> Self {
        self.reasoning = on;
        self
    }

    /// The run's working directory (absolute; `/home/user` by default).
    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = dir.into();
        self
    }

    /// An environment variable of the runtime's process (never a secret:
    /// the process list shows it; use a gateway).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(name.into(), value.into());
        self
    }

    /// Continues the session `id` of an earlier run.
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Extra runtime configuration, merged at the top level; the keys the
    /// SDK writes (`RESERVED_CONFIG_KEYS`) are refused.
    pub fn raw_config(mut self, config: serde_json::Map<String, serde_json::Value>) -> Self {
        self.raw_config = config;
        self
    }

    /// The runtime version the image must have.
    pub fn runtime_version(mut self, version: impl Into<String>) -> Self {
        self.runtime_version = Some(version.into());
        self
    }

    /// The model.
    pub fn model(&self) -> &AgentModel {
        &self.model
    }

    /// The limits.
    pub fn agent_limits(&self) -> &AgentLimits {
        &self.limits
    }

    /// The runtime.
    pub fn agent_runtime(&self) -> &AgentRuntime {
        &self.runtime
    }

    /// The gateways the run needs: the model's and each remote MCP server's.
    pub fn gateway_names(&self) -> Vec<String> {
        let mut names = vec![self.model.gateway.clone()];
        for server in self.mcp.values() {
            if let McpServer::Remote(remote) = server
                && !names.contains(&remote.gateway)
            {
                names.push(remote.gateway.clone());
            }
        }
        names
    }

    /// Checks the whole spec (no I/O).
    ///
    /// # Errors
    /// `InvalidArgument` naming the part (`model`, `permissions`, `agents`,
    /// `mcp`, `limits`, `workdir`, `envs`, `raw_config`, `runtime`,
    /// `session_id`) with the message of docs/agent.md's "Errors".
    pub fn check(&self) -> Result<(), SandboxError> {
        self.runtime.check()?;
        self.model.check()?;
        if let Some(small) = &self.small_model {
            check_model_id(small, "AgentSpec.small_model")?;
        }
        if self.instructions.as_deref() == Some("") {
            return Err(refuse("instructions", INSTRUCTIONS.to_owned()));
        }
        self.permissions.check()?;
        for (name, agent) in &self.agents {
            if !is_name(name, false) {
                return Err(refuse(
                    "agents",
                    NAME.replace("{label}", "AgentSpec.agents"),
                ));
            }
            if name == "build" {
                return Err(refuse("agents", AGENT_RESERVED.replace("{name}", name)));
            }
            if agent.description.is_empty() || agent.instructions.is_empty() {
                return Err(refuse("agents", SUB_AGENT_TEXT.to_owned()));
            }
            if let Some(model) = &agent.model {
                check_model_id(model, "SubAgent.model")?;
            }
            if let Some(p) = &agent.permissions {
                p.check()?;
            }
        }
        for (name, server) in &self.mcp {
            if !is_name(name, false) {
                return Err(refuse("mcp", NAME.replace("{label}", "AgentSpec.mcp")));
            }
            match server {
                McpServer::Local(local) => {
                    if local.command.is_empty()
                        || local
                            .command
                            .iter()
                            .any(|p| p.is_empty() || p.contains('\0'))
                    {
                        return Err(refuse("mcp", MCP_COMMAND.to_owned()));
                    }
                    if local.envs.keys().any(|k| !is_env_name(k))
                        || local.envs.values().any(|v| v.contains('\0'))
                    {
                        return Err(refuse("mcp", MCP_ENVS.to_owned()));
                    }
                    if local.timeout.is_some_and(|t| t.is_zero()) {
                        return Err(refuse("mcp", MCP_TIMEOUT.to_owned()));
                    }
                }
                McpServer::Remote(remote) => {
                    if !crate::gateway::is_safe_path(&remote.path) {
                        return Err(refuse("mcp", MCP_PATH.to_owned()));
                    }
                }
            }
        }
        self.limits.check()?;
        if !self.workdir.starts_with('/') || self.workdir.contains('\0') {
            return Err(refuse("workdir", WORKDIR.to_owned()));
        }
        if self.envs.keys().any(|k| !is_env_name(k)) || self.envs.values().any(|v| v.contains('\0'))
        {
            return Err(refuse("envs", ENVS.to_owned()));
        }
        if let Some(session) = &self.session_id
            && !super::protocol::is_session_id(session)
        {
            return Err(refuse("session_id", SESSION_ID.to_owned()));
        }
        if let Some(key) = self
            .raw_config
            .keys()
            .find(|k| RESERVED_CONFIG_KEYS.contains(&k.as_str()))
        {
            return Err(refuse("raw_config", RAW_CONFIG.replace("{key}", key)));
        }
        if self.runtime_version.as_deref() == Some("") {
            return Err(refuse("runtime_version", RUNTIME_VERSION.to_owned()));
        }
        Ok(())
    }
}

fn refuse(argument: &'static str, message: String) -> SandboxError {
    SandboxError::invalid_argument(argument, message)
}

fn check_model_id(id: &str, label: &str) -> Result<(), SandboxError> {
    let mut chars = id.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id.chars().count() <= MAX_MODEL_ID_CHARS
        && chars.all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(refuse("model", MODEL_ID.replace("{label}", label)))
    }
}

/// `""` or an absolute path without a trailing `/` that a gateway forwards.
pub(crate) fn check_base_path(path: &str, label: &str) -> Result<(), SandboxError> {
    if path.is_empty() || (!path.ends_with('/') && crate::gateway::is_safe_path(path)) {
        Ok(())
    } else {
        Err(refuse("base_path", BASE_PATH.replace("{label}", label)))
    }
}

/// An AWS region name (`us-east-1`).
pub(crate) fn is_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[0].bytes().all(|b| b.is_ascii_lowercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

pub(crate) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `[a-z0-9][a-z0-9_-]{0,63}`; with `tool`, `*` too.
fn is_name(name: &str, tool: bool) -> bool {
    let ok = |b: u8, first: bool| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || (tool && b == b'*')
            || (!first && (b == b'_' || b == b'-'))
    };
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name.bytes().enumerate().all(|(i, b)| ok(b, i == 0))
}

// The refusals (docs/agent.md, "Errors"; pinned in src/agent/tests.rs).
pub(crate) const MODEL_ID: &str = "{label} must be a model id of 1 to 256 characters [A-Za-z0-9._:/@+-], starting with a letter or digit";
pub(crate) const MODEL_REGION_REQUIRED: &str = "AgentModel.region is required with the bedrock provider; pass region(\"us-east-1\") or the model's region";
pub(crate) const REGION: &str = "{label} must be an AWS region such as us-east-1";
pub(crate) const BASE_PATH: &str = "{label} must be empty or an absolute path without a trailing '/' (such as /v1) that a gateway forwards";
pub(crate) const BASE_PATH_PROVIDER: &str = "AgentModel.base_path is only for the openai-compatible provider; drop it or change the provider";
pub(crate) const ENV_NAME: &str =
    "{label} must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)";
pub(crate) const TOOL_NAME: &str = "invalid tool name in AgentPermissions: 1 to 64 characters [a-z0-9_*-], starting with [a-z0-9*]";
pub(crate) const PATTERNS_EMPTY: &str = "AgentPermissions: the patterns of tool {tool} are empty; pass at least one pattern or a single action";
pub(crate) const PATTERN: &str = "AgentPermissions: each pattern of tool {tool} must be 1 to 256 characters without control characters";
pub(crate) const INSTRUCTIONS: &str =
    "AgentSpec.instructions may not be empty; drop it or write some";
pub(crate) const NAME: &str =
    "invalid name in {label}: 1 to 64 characters [a-z0-9_-], starting with a letter or digit";
pub(crate) const AGENT_RESERVED: &str =
    "AgentSpec.agents may not use the reserved name {name}; pick another name";
pub(crate) const SUB_AGENT_TEXT: &str =
    "a SubAgent needs a non-empty description and non-empty instructions";
pub(crate) const MCP_COMMAND: &str =
    "McpLocal's command must be a non-empty list of non-empty strings without NUL";
pub(crate) const MCP_ENVS: &str =
    "McpLocal's environment needs variable names ([A-Za-z_][A-Za-z0-9_]*) and values without NUL";
pub(crate) const MCP_TIMEOUT: &str = "McpLocal's timeout must be more than zero";
pub(crate) const MCP_PATH: &str = "McpRemote's path must be an absolute path that a gateway forwards (RFC 3986 characters, no '.' or '..' segments)";
pub(crate) const LIMIT_STEPS: &str = "AgentLimits.max_steps must be at least 1";
pub(crate) const LIMIT_TIMEOUT: &str = "AgentLimits.timeout must be more than zero";
pub(crate) const LIMIT_OUTPUT: &str =
    "AgentLimits.max_output_bytes must be between 1 and 67,108,864 (64 MiB)";
pub(crate) const LIMIT_TOKENS: &str =
    "AgentLimits.max_total_tokens must be at least 1; pass None for no budget";
pub(crate) const WORKDIR: &str = "AgentSpec.workdir must be an absolute path without NUL";
pub(crate) const ENVS: &str =
    "AgentSpec's environment needs variable names ([A-Za-z_][A-Za-z0-9_]*) and values without NUL";
pub(crate) const SESSION_ID: &str = "AgentSpec.session_id must be a session id of an earlier run (rda_ and 32 lower-case hex characters)";
pub(crate) const RAW_CONFIG: &str =
    "AgentSpec.raw_config may not set {key}: the SDK writes it; use the spec's own setter";
pub(crate) const RUNTIME_VERSION: &str = "AgentSpec.runtime_version may not be empty";
