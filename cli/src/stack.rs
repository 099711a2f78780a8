//! `rayito stack ...`: the optional stacks (`rayito::stacks::OptionalStacks`,
//! docs/stacks.md): `list` the catalog (no AWS call), `status` of one,
//! `deploy` (a dry run printing the parameter changes unless --yes) and
//! `destroy` (a dry run unless --yes).

use std::collections::BTreeMap;

use clap::Subcommand;
use rayito::stacks::{ParameterChange, StackComponent, StackDeploy, StackStatus, components};
use serde_json::json;

use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global};

/// `rayito stack ...`.
#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// The components: name, whether this SDK deploys it, parameters and
    /// idle cost (--output json: everything, the cost statements too).
    List,
    /// A component's stack: state, outputs, parameters (exit 1 when it does
    /// not exist).
    Status {
        /// The component (rayito stack list).
        component: String,
        /// The stack's name (default rayito-<component>).
        #[arg(long)]
        stack_name: Option<String>,
    },
    /// Creates or updates a component's stack and waits; without --yes,
    /// prints the parameter changes and deploys nothing.
    Deploy {
        /// The component (rayito stack list).
        component: String,
        /// A template parameter, KEY=VALUE (repeatable).
        #[arg(long = "param", value_name = "KEY=VALUE", value_parser = crate::commands::parse_pair)]
        params: Vec<(String, String)>,
        /// The bucket a component's Lambda code is uploaded to.
        #[arg(long)]
        artifact_bucket: Option<String>,
        /// The zip of a component's Lambda code (tools/build-events-lambda).
        #[arg(long, value_name = "ZIP")]
        artifact: Option<std::path::PathBuf>,
        /// A tag of the stack, KEY=VALUE (repeatable; the rayito: tags win).
        #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = crate::commands::parse_pair)]
        tags: Vec<(String, String)>,
        /// The stack's name (default rayito-<component>).
        #[arg(long)]
        stack_name: Option<String>,
        /// Deploy (without it: print what would change).
        #[arg(long)]
        yes: bool,
    },
    /// Deletes a component's stack and waits; a dry run unless --yes.
    Destroy {
        /// The component (rayito stack list).
        component: String,
        /// The stack's name (default rayito-<component>).
        #[arg(long)]
        stack_name: Option<String>,
        /// Delete (without it: print what would be deleted).
        #[arg(long)]
        yes: bool,
    },
}

/// Runs one `stack` subcommand; returns the exit code.
pub async fn run(global: Global, command: StackCommand) -> i32 {
    let format = global.output;
    if let StackCommand::List = command {
        list(format);
        return 0;
    }
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, stack(&backend, format, command).await)
}

fn list(format: Format) {
    match format {
        Format::Json => output::json(&json!({ "components": components() })),
        Format::Text => {
            for c in components() {
                print_component(c);
            }
        }
    }
}

fn print_component(c: &StackComponent) {
    let parameters: Vec<String> = c
        .parameters
        .iter()
        .map(|p| match (p.required, p.default) {
            (true, _) => format!("{}*", p.name),
            (false, Some(d)) if !d.is_empty() => format!("{}={d}", p.name),
            _ => p.name.to_owned(),
        })
        .collect();
    outln!("{}", c.name);
    outln!("  {}", c.description);
    if !parameters.is_empty() {
        outln!("  parameters: {}", parameters.join(" "));
    }
    outln!("  idle: {}", c.cost.idle_monthly);
    if let Some(reason) = c.unsupported_reason {
        outln!("  not deployed by rayito stack: {reason}");
    }
}

fn status_json(status: &StackStatus) -> serde_json::Value {
    serde_json::to_value(status).unwrap_or_default()
}

fn print_status(status: &StackStatus) {
    outln!("stack {} {}", status.name, status.state);
    for (k, v) in &status.outputs {
        outln!("  {k}: {v}");
    }
}

fn changes_json(changes: &[ParameterChange]) -> serde_json::Value {
    serde_json::to_value(changes).unwrap_or_default()
}

async fn stack(backend: &Backend, format: Format, command: StackCommand) -> Result<i32, Failure> {
    let client = backend.client().await?;
    let stacks = client.optional_stacks();
    match command {
        StackCommand::List => Ok(0),
        StackCommand::Status {
            component,
            stack_name,
        } => {
            let status = stacks.status(&component, stack_name.as_deref()).await?;
            match (format, &status) {
                (Format::Json, _) => {
                    output::json(&json!({ "stack": status.as_ref().map(status_json) }));
                }
                (Format::Text, Some(status)) => print_status(status),
                (Format::Text, None) => outln!("the {component} stack is not deployed"),
            }
            Ok(i32::from(status.is_none()))
        }
        StackCommand::Deploy {
            component,
            params,
            artifact_bucket,
            artifact,
            tags,
            stack_name,
            yes,
        } => {
            let mut deploy = StackDeploy::new();
            deploy.parameters = params.into_iter().collect::<BTreeMap<_, _>>();
            deploy.tags = tags.into_iter().collect();
            deploy.artifact_bucket = artifact_bucket;
            deploy.artifact = artifact;
            deploy.stack_name = stack_name;
            if !yes {
                let changes = stacks.parameter_changes(&component, &deploy).await?;
                match format {
                    Format::Json => output::json(&json!({
                        "dryRun": true,
                        "component": component,
                        "changes": changes_json(&changes),
                    })),
                    Format::Text => {
                        for c in &changes {
                            outln!(
                                "  {}: {} -> {}",
                                c.name,
                                c.before.as_deref().unwrap_or("(unset)"),
                                c.after
                            );
                        }
                        outln!("would deploy {component} (dry run: --yes deploys it)");
                    }
                }
                return Ok(0);
            }
            let done = stacks.deploy(&component, &deploy).await?;
            let outcome = done.outcome.map_or("created", |o| o.as_str());
            match format {
                Format::Json => output::json(&json!({
                    "stack": status_json(&done.status),
                    "outcome": outcome,
                })),
                Format::Text => {
                    print_status(&done.status);
                    outln!("{outcome}");
                }
            }
            Ok(0)
        }
        StackCommand::Destroy {
            component,
            stack_name,
            yes,
        } => {
            let name = match &stack_name {
                Some(name) => name.clone(),
                None => rayito::stacks::component(&component)?.default_stack_name(),
            };
            if !yes {
                match format {
                    Format::Json => output::json(&json!({ "dryRun": true, "stackName": name })),
                    Format::Text => outln!(
                        "would delete the stack {name} and what it created (dry run: --yes deletes it)"
                    ),
                }
                return Ok(0);
            }
            stacks.destroy(&component, Some(&name), true).await?;
            match format {
                Format::Json => output::json(&json!({ "deleted": name })),
                Format::Text => outln!("deleted {name}"),
            }
            Ok(0)
        }
    }
}
