//! `rayito agent ...`: run an AI agent once in a new sandbox (`run`) and
//! build the image with the agent runtimes (`template build`). The rest of
//! the reference's group is named in `--help` as the next round's, each
//! printing so and exiting 2, rather than left out.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use futures_util::StreamExt as _;
use rayito::agent::{AGENT_TEMPLATE_BASE, AGENT_TEMPLATE_NAME, AgentEvent, AgentTemplate};
use serde_json::json;

use crate::agent_project;
use crate::commands::{Backend, Failure};
use crate::output;
use crate::template::BuildFlags;
use crate::{Format, Global};

/// The agent subcommands.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Creates a sandbox of the project's image, runs the agent once with
    /// PROMPT, prints its answer and kills the sandbox (costs the VM's
    /// time and the model's tokens).
    Run(RunArgs),
    /// The image with the agent runtimes (OpenCode, from the npm
    /// registry).
    #[command(subcommand)]
    Template(AgentTemplateCommand),
    /// [next round] Scaffolds an agent project.
    #[command(disable_help_flag = true)]
    Init(NextRound),
    /// [next round] Builds a project's image.
    #[command(disable_help_flag = true)]
    Build(NextRound),
    /// [next round] Detects a project's framework, entry and model.
    #[command(disable_help_flag = true)]
    Detect(NextRound),
    /// [next round] Deploys a project as a fleet (MicroVMs or AgentCore).
    #[command(disable_help_flag = true)]
    Deploy(NextRound),
    /// [next round] Exports a project as a container build context.
    #[command(disable_help_flag = true)]
    Export(NextRound),
    /// [next round] Invokes a deployed agent.
    #[command(disable_help_flag = true)]
    Invoke(NextRound),
    /// [next round] The status of a deployed agent.
    #[command(disable_help_flag = true)]
    Status(NextRound),
    /// [next round] Stops a deployed agent or one of its sessions.
    #[command(disable_help_flag = true)]
    Stop(NextRound),
    /// [next round] Deletes an AgentCore runtime.
    #[command(disable_help_flag = true)]
    Delete(NextRound),
    /// [next round] Lists the AgentCore runtimes.
    #[command(disable_help_flag = true)]
    List(NextRound),
}

/// `agent run`'s arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the agent is asked.
    prompt: String,
    /// The project file (`rayito-agent.toml` or `.json`: image, runtime,
    /// model, gateway; docs/agent.md).
    #[arg(long, default_value = agent_project::DEFAULT_FILE)]
    file: PathBuf,
    /// Continues an earlier session (`rda_<32 hex>`).
    #[arg(long)]
    session_id: Option<String>,
    /// Another model id for this run.
    #[arg(long)]
    model: Option<String>,
    /// Prints the events as they come (with `--output json`, one JSON line
    /// per event).
    #[arg(long)]
    stream: bool,
}

/// Whatever a next-round command is given: it is refused before use.
#[derive(Debug, Args)]
pub struct NextRound {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// `agent template ...`.
#[derive(Debug, Subcommand)]
pub enum AgentTemplateCommand {
    /// Builds the agent image (or reuses an identical version).
    Build {
        /// The image's name.
        #[arg(long, default_value = AGENT_TEMPLATE_NAME)]
        name: String,
        /// The base image (default rayito-base-caps; with --local,
        /// rayito-base, the host).
        #[arg(long)]
        base: Option<String>,
        /// The image's memory in MiB (at least 2048).
        #[arg(long, default_value_t = 2048)]
        memory_mb: u32,
        // --force, --timeout, --bucket.
        #[command(flatten)]
        build: BuildFlags,
    },
}

/// What a next-round command prints (exit 2).
pub(crate) fn next_round_message(name: &str) -> String {
    format!(
        "rayito agent {name} is not in this version (next round): this version has \
         `rayito agent run` and `rayito agent template build`; see docs/agent.md"
    )
}

/// Runs one agent subcommand; returns the exit code.
pub async fn run(global: Global, command: AgentCommand) -> i32 {
    let format = global.output;
    let next = match &command {
        AgentCommand::Init(_) => Some("init"),
        AgentCommand::Build(_) => Some("build"),
        AgentCommand::Detect(_) => Some("detect"),
        AgentCommand::Deploy(_) => Some("deploy"),
        AgentCommand::Export(_) => Some("export"),
        AgentCommand::Invoke(_) => Some("invoke"),
        AgentCommand::Status(_) => Some("status"),
        AgentCommand::Stop(_) => Some("stop"),
        AgentCommand::Delete(_) => Some("delete"),
        AgentCommand::List(_) => Some("list"),
        AgentCommand::Run(_) | AgentCommand::Template(_) => None,
    };
    if let Some(name) = next {
        return output::usage_error(format, &next_round_message(name));
    }
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    let outcome = match command {
        AgentCommand::Run(args) => run_once(&backend, format, args).await,
        AgentCommand::Template(AgentTemplateCommand::Build {
            name,
            base,
            memory_mb,
            build: flags,
        }) => {
            let base = base.unwrap_or_else(|| {
                if backend.local.is_some() {
                    "rayito-base".to_owned()
                } else {
                    AGENT_TEMPLATE_BASE.to_owned()
                }
            });
            let template = AgentTemplate::new()
                .name(name)
                .base(base)
                .memory_mib(memory_mb);
            build(&backend, format, &template, flags).await
        }
        _ => unreachable!("next-round commands returned above"),
    };
    crate::commands::exit_code(format, outcome)
}

async fn build(
    backend: &Backend,
    format: Format,
    template: &AgentTemplate,
    flags: BuildFlags,
) -> Result<i32, Failure> {
    template.check()?;
    let client = backend.client().await?;
    let templates = client.templates();
    let options = crate::template::build_options(backend, flags);
    crate::template::build_reported(format, template.image_name(), options, |options| {
        template.build(&templates, options)
    })
    .await
}

/// `agent run`: create, run once, kill (the sandbox is killed whatever
/// the run's outcome).
async fn run_once(backend: &Backend, format: Format, args: RunArgs) -> Result<i32, Failure> {
    let project = agent_project::read(&args.file).map_err(Failure::Usage)?;
    let mut spec = project
        .spec(args.model.as_deref())
        .map_err(Failure::Usage)?;
    if let Some(session) = &args.session_id {
        spec = spec.session_id(session);
    }
    let gateway = project.gateway().map_err(Failure::Usage)?;
    let client = backend.client().await?;
    let mut builder = client
        .sandbox()
        .gateway(agent_project::GATEWAY_NAME, gateway);
    if let Some(template) = project.template.as_deref().or(Some(AGENT_TEMPLATE_NAME)) {
        builder = builder.template(template);
    }
    let sandbox = builder.create().await?;
    let outcome = if args.stream {
        stream(&sandbox, format, spec, &args.prompt).await
    } else {
        sandbox
            .agent()
            .run(spec, args.prompt.as_str())
            .await
            .map_err(Failure::Sdk)
            .map(|result| {
                match format {
                    Format::Json => output::json(&json!(result)),
                    Format::Text => {
                        outln!("{}", result.text);
                        outln!(
                            "session {} · {} step(s) · {} tokens",
                            result.session_id,
                            result.steps,
                            result.usage.total()
                        );
                    }
                }
                0
            })
    };
    let _ = sandbox.kill().await;
    outcome
}

async fn stream(
    sandbox: &rayito::Sandbox,
    format: Format,
    spec: rayito::agent::AgentSpec,
    prompt: &str,
) -> Result<i32, Failure> {
    let mut events = sandbox.agent().stream(spec, prompt).await?;
    while let Some(event) = events.next().await {
        let event = event?;
        match format {
            Format::Json => outln!("{}", serde_json::to_string(&event).unwrap_or_default()),
            Format::Text => print_event(&event),
        }
        if let AgentEvent::AgentFailed(failure) = &event {
            return Ok(output::cli_error(format, &failure.message()));
        }
    }
    Ok(0)
}

fn print_event(event: &AgentEvent) {
    match event {
        AgentEvent::TextDelta { text } => out!("{text}"),
        AgentEvent::Text { text } => outln!("{text}"),
        AgentEvent::Reasoning { text } => outln!("(thinking) {text}"),
        AgentEvent::ToolCall(call) => outln!("[tool {} {:?}]", call.name, call.status),
        AgentEvent::StepStarted { index } => outln!("[step {index}]"),
        AgentEvent::StepFinished { usage, .. } => outln!("[{} tokens]", usage.total()),
        AgentEvent::Done {
            session_id, usage, ..
        } => {
            outln!("[done: session {session_id} · {} tokens]", usage.total());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_round_command_names_what_this_version_has() {
        assert_eq!(
            next_round_message("deploy"),
            "rayito agent deploy is not in this version (next round): this version has \
             `rayito agent run` and `rayito agent template build`; see docs/agent.md"
        );
        // docs/agent.md transcribes it.
        let doc = include_str!("../../docs/agent.md");
        let line = format!("``{}``", next_round_message("<name>"));
        assert!(doc.contains(&line), "docs/agent.md lacks {line}");
    }
}
