//! AI agent runs in a sandbox (`sandbox.agent()`): an agent runtime (a
//! built-in one, your [`CustomRuntime`] or your [`HttpApp`]) runs as a
//! background command of the sandbox, reaches its model through one of the
//! sandbox's secret gateways (the key never enters the sandbox), and reports
//! what it does as protocol v1 events; the SDK enforces the run's
//! [`AgentLimits`] from those events and kills the runtime's whole process
//! tree when one passes, when the caller aborts, or at the time limit.
//! docs/agent.md has the guide; docs/errors.md the `agent` messages.
//!
//! ```no_run
//! # async fn f(sandbox: rayito::Sandbox) -> Result<(), rayito::SandboxError> {
//! use rayito::agent::{AgentModel, AgentSpec, CustomRuntime, ModelProvider};
//!
//! let spec = AgentSpec::new(AgentModel::new(ModelProvider::OpenaiCompatible, "llm").id("gpt-4o-mini"))
//!     .runtime(CustomRuntime::command(["python3", "/home/user/agent.py"]));
//! let result = sandbox.agent().run(spec, "Fix the failing test").await?;
//! println!("{} ({} tokens)", result.text, result.usage.total());
//! # Ok(()) }
//! ```

pub(crate) mod builtin;
mod events;
pub mod gateways;
mod plan;
mod protocol;
mod run;
mod runtime;
mod spec;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use futures_util::StreamExt;

pub use crate::error::{AgentFailure, AgentFailureReason, TokenUsage};
pub use builtin::agent_pool_warmup;
#[cfg(feature = "templates")]
pub use builtin::{
    AGENT_MIN_MEMORY_MIB, AGENT_TEMPLATE_BASE, AGENT_TEMPLATE_MANIFEST_PATH,
    AGENT_TEMPLATE_MANIFEST_SCHEMA, AGENT_TEMPLATE_NAME, AgentTemplate,
};
pub use events::{AgentEvent, AgentResult, MAX_TOOL_OUTPUT_BYTES, ToolCall, ToolCallStatus};
pub use plan::{AGENT_RUN_TAG, AGENT_STATE_DIR, MODEL_KEY_PLACEHOLDER};
pub use protocol::{MAX_LINE_BYTES, PROTOCOL_VERSION};
pub use run::{AbortHandle, AgentStream};
pub use runtime::{
    AgentRuntime, BUILTIN_RUNTIMES, CustomProtocol, CustomRuntime, DEFAULT_RUNTIME, HttpApp,
    HttpProtocol,
};
pub use spec::{
    AgentLimits, AgentModel, AgentPermissions, AgentSpec, DEFAULT_DENIED_TOOLS,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_STEPS, DEFAULT_MAX_TOTAL_TOKENS, DEFAULT_TIMEOUT,
    DEFAULT_WORKDIR, McpLocal, McpRemote, McpServer, ModelProvider, PermissionAction,
    RESERVED_CONFIG_KEYS, SubAgent, ToolPermission,
};

use crate::commands::CommandOptions;
use crate::error::SandboxError;
use crate::sandbox::Sandbox;

/// The agent runs of one sandbox (a borrowed view: `sandbox.agent()`).
#[derive(Clone, Copy, Debug)]
pub struct AgentView<'a> {
    sandbox: &'a Sandbox,
}

impl Sandbox {
    /// AI agent runs in this sandbox.
    pub fn agent(&self) -> AgentView<'_> {
        AgentView { sandbox: self }
    }
}

/// Refusal of an empty prompt.
pub(crate) const PROMPT_EMPTY: &str = "the prompt of agent().run()/stream() may not be empty";
/// Refusal of a spec whose gateway the sandbox lacks.
pub(crate) const GATEWAY_MISSING: &str = "the sandbox has no gateway \"{gateway}\": create it with .gateway(\"{gateway}\", SecretGateway::new(...)) (or a preset of rayito::agent::gateways)";
/// Refusal of a failed install.
pub(crate) const INSTALL_FAILED: &str = "installing the agent's runtime failed (exit code {code}); run the runtime's install commands by hand to see why";

impl AgentView<'_> {
    /// Runs the agent on `prompt` to the end.
    ///
    /// # Errors
    /// Before any I/O, `InvalidArgument` for a spec that [`AgentSpec::check`]
    /// refuses, an empty prompt (`prompt`) or a gateway the sandbox lacks
    /// (`gateways`); `Unimplemented` for a runtime this version does not
    /// ship. Then `Agent { failure }` for a failed run (its `reason`:
    /// `busy`, `runtime_missing`, `runtime_error`, `protocol_error`,
    /// `model_error`, `max_steps`, `token_budget`, `timeout`), and the
    /// sandbox's own failures (transport, the sandbox gone).
    pub async fn run(
        &self,
        spec: AgentSpec,
        prompt: impl Into<String>,
    ) -> Result<AgentResult, SandboxError> {
        let prompt = prompt.into();
        boxed!(Result<AgentResult, SandboxError>, {
            let mut stream = self.stream_inner(spec, prompt).await?;
            let mut result = Collected::default();
            while let Some(event) = stream.next().await {
                match event? {
                    AgentEvent::AgentFailed(failure) => return Err(SandboxError::agent(failure)),
                    AgentEvent::Done {
                        session_id,
                        exit_code,
                        usage,
                        usage_reported,
                    } => {
                        return Ok(AgentResult {
                            session_id,
                            text: result.text,
                            steps: result.steps,
                            usage,
                            exit_code,
                            tool_calls: result.tool_calls,
                            dropped_lines: stream.dropped_lines(),
                            usage_reported,
                        });
                    }
                    other => result.see(other),
                }
            }
            // The pump always ends with Done, AgentFailed or an error.
            Err(SandboxError::agent(AgentFailure::new(AgentFailureReason::ProtocolError)))
        })
    }

    /// Starts the agent on `prompt` and streams its events; the stream ends
    /// after `Done` or `AgentFailed` (`AgentStream::abort` ends it with
    /// `aborted`).
    ///
    /// # Errors
    /// As [`AgentView::run`] before the runtime starts; the run's own
    /// failures arrive as the stream's last event.
    pub async fn stream(
        &self,
        spec: AgentSpec,
        prompt: impl Into<String>,
    ) -> Result<AgentStream, SandboxError> {
        let prompt = prompt.into();
        boxed!(Result<AgentStream, SandboxError>, {
            self.stream_inner(spec, prompt).await
        })
    }

    /// Installs the spec's runtime when its check fails (its install
    /// commands), and checks it, without running the agent.
    ///
    /// # Errors
    /// As [`AgentView::run`] before any I/O; `Agent { runtime_missing }`
    /// when the runtime is still missing afterwards; `InvalidArgument`
    /// (`runtime`) when an install command failed; transport failures.
    pub async fn prepare(&self, spec: AgentSpec) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            spec.check()?;
            let runtime = plan::resolve(&spec.runtime)?;
            self.write_files(&runtime.files).await?;
            let commands = self.sandbox.commands();
            if let Some(script) = plan::install_script(&runtime) {
                let options = CommandOptions::new()
                    .timeout(std::time::Duration::from_secs(1_800))
                    .cwd(spec.workdir.clone());
                match commands.run_with(&script, options).await {
                    Ok(_) => {}
                    Err(SandboxError::CommandExit { exit_code, .. }) => {
                        return Err(SandboxError::invalid_argument(
                            "runtime",
                            INSTALL_FAILED.replace("{code}", &exit_code.to_string()),
                        ));
                    }
                    Err(err) => return Err(err),
                }
            }
            if let Some(check) = plan::check_script(&runtime) {
                match commands.run(&format!("( {check}\n) </dev/null >/dev/null 2>&1")).await {
                    Ok(_) => {}
                    Err(SandboxError::CommandExit { .. }) => {
                        return Err(SandboxError::agent(AgentFailure::new(
                            AgentFailureReason::RuntimeMissing,
                        )));
                    }
                    Err(err) => return Err(err),
                }
            }
            Ok(())
        })
    }

    async fn stream_inner(
        &self,
        spec: AgentSpec,
        prompt: String,
    ) -> Result<AgentStream, SandboxError> {
        spec.check()?;
        if prompt.is_empty() {
            return Err(SandboxError::invalid_argument("prompt", PROMPT_EMPTY));
        }
        let runtime = plan::resolve(&spec.runtime)?;
        let gateway_urls = self.gateway_urls(&spec)?;
        let plan = plan::plan(&spec, runtime, &prompt, &gateway_urls);
        let commands = self.sandbox.commands();
        // The check a second run makes: a tagged process is alive (the run
        // script's lock also catches two runs started at the same moment).
        if !commands.list_tagged(AGENT_RUN_TAG).await?.is_empty() {
            return Ok(AgentStream::ended(AgentEvent::AgentFailed(
                AgentFailure::new(AgentFailureReason::Busy),
            )));
        }
        self.write_files(&plan.files).await?;
        let options = |kill_tree: bool| {
            let mut options = CommandOptions::new()
                .tag(AGENT_RUN_TAG)
                .kill_tree(kill_tree)
                .timeout(plan.limits.timeout)
                .max_output_bytes(plan.limits.max_output_bytes)
                .stdin(plan.stdin.clone())
                .cwd(plan.workdir.clone());
            for (name, value) in &plan.envs {
                options = options.env(name.clone(), value.clone());
            }
            options
        };
        let (handle, sweep) = match commands.spawn(&plan.script, options(true)).await {
            Ok(handle) => (handle, false),
            // A host without a cgroup of the command's own (no writable
            // cgroup v2): the run goes on without kill_tree, and the pump
            // sweeps the processes that carry the run's id instead.
            Err(err) if no_cgroup(&err) => {
                (commands.spawn(&plan.script, options(false)).await?, true)
            }
            Err(err) => return Err(err),
        };
        let sweep = sweep.then(|| (self.sandbox.clone(), plan.run_id.clone()));
        Ok(AgentStream::start(handle, &plan, sweep))
    }

    /// The URL of each gateway the spec needs, refused before any I/O when
    /// the sandbox lacks one.
    fn gateway_urls(&self, spec: &AgentSpec) -> Result<BTreeMap<String, String>, SandboxError> {
        let gateways = self.sandbox.gateways();
        let mut urls = BTreeMap::new();
        for name in spec.gateway_names() {
            let Some(status) = gateways.get(&name) else {
                return Err(SandboxError::invalid_argument(
                    "gateways",
                    GATEWAY_MISSING.replace("{gateway}", &name),
                ));
            };
            urls.insert(name, status.url());
        }
        Ok(urls)
    }

    /// Writes each runtime file that is missing or different.
    async fn write_files(&self, files: &[(String, Vec<u8>, u32)]) -> Result<(), SandboxError> {
        let fs = self.sandbox.files();
        for (path, content, mode) in files {
            if fs.read(path).await.ok().as_ref() == Some(content) {
                continue;
            }
            fs.write_with(
                path,
                content.clone(),
                crate::files::WriteOptions::new().mode(*mode),
            )
            .await?;
        }
        Ok(())
    }
}

/// Whether `err` is the agent's refusal of `kill_tree` on a host without a
/// cgroup v2 of the command's own.
fn no_cgroup(err: &SandboxError) -> bool {
    matches!(err, SandboxError::InvalidArgument { .. })
        && err.to_string().contains("kill_tree needs a cgroup")
}

/// What `run()` keeps of the events before `Done`.
#[derive(Default)]
struct Collected {
    text: String,
    steps: u32,
    tool_calls: Vec<ToolCall>,
}

impl Collected {
    fn see(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Text { text } => self.text = text,
            AgentEvent::StepStarted { index } => self.steps = index,
            AgentEvent::ToolCall(call) => self.tool_calls.push(call),
            _ => {}
        }
    }
}
