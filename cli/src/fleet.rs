//! `rayito fleet ...`: every sandbox of the account (`list`), the images
//! with their versions (`images`), and bulk `kill | pause | resume |
//! set-timeout` over a filter. An action prints its plan (what it would do
//! to each sandbox, and why) and stops; `--confirm <code>` runs it when the
//! fleet still gives the same plan, `--yes` runs the plan it just made.

use std::time::Duration;

use clap::{Args, Subcommand};
use rayito::SandboxState;
use rayito::fleet::{BulkAction, BulkFilter, BulkOutcome, BulkPlan, BulkWill, Fleet, FleetQuery};
use serde_json::json;

use crate::commands::{Backend, Failure, parse_pair, parse_state};
use crate::{Format, Global, cache, output};

/// `rayito fleet ...`.
#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Every sandbox (not ended ones, unless --state says otherwise) with
    /// its image, version, end and size.
    List {
        #[command(flatten)]
        filter: Selection,
        /// Print JSON (as --output json).
        #[arg(long)]
        json: bool,
    },
    /// Every image with its versions, newest first.
    Images {
        /// Print JSON (as --output json).
        #[arg(long)]
        json: bool,
    },
    /// Terminates the selected sandboxes (a dry run without --confirm or --yes).
    Kill(ActionArgs),
    /// Pauses (suspends) the selected RUNNING sandboxes (a dry run without
    /// --confirm or --yes).
    Pause(ActionArgs),
    /// Resumes the selected SUSPENDED sandboxes (a dry run without
    /// --confirm or --yes).
    Resume(ActionArgs),
    /// Sets the timeout of the selected RUNNING sandboxes whose tokens this
    /// cache keeps (a dry run without --confirm or --yes).
    SetTimeout {
        /// The new timeout, in seconds from the run (1 to 28,800).
        #[arg(value_name = "SECONDS")]
        seconds: u64,
        #[command(flatten)]
        action: ActionArgs,
    },
}

/// Which sandboxes: every part given must match.
#[derive(Debug, Args, Clone)]
pub struct Selection {
    /// Only sandboxes in this state (PENDING, RUNNING, SUSPENDING,
    /// SUSPENDED, TERMINATING, TERMINATED, in any case; repeatable).
    #[arg(long, value_parser = parse_state)]
    state: Vec<SandboxState>,
    /// Only sandboxes of this image (a name with --local, an ARN on AWS).
    #[arg(long)]
    image: Option<String>,
    /// Only RUNNING sandboxes with this metadata `key=value` (repeatable).
    #[arg(long, value_parser = parse_pair)]
    metadata: Vec<(String, String)>,
}

/// A bulk action's selection and confirmation.
#[derive(Debug, Args)]
pub struct ActionArgs {
    /// These sandboxes (none: every sandbox the other filters select).
    #[arg(value_name = "ID")]
    ids: Vec<String>,
    #[command(flatten)]
    filter: Selection,
    /// Act, if the plan made now has this confirmation (the one a dry run
    /// printed): a fleet that changed since is refused.
    #[arg(long, value_name = "CODE", conflicts_with = "yes")]
    confirm: Option<String>,
    /// Act on the plan made now, without a dry run first.
    #[arg(long)]
    yes: bool,
    /// Print JSON (as --output json).
    #[arg(long)]
    json: bool,
}

/// Runs one `fleet` subcommand; returns the exit code.
pub async fn run(global: Global, command: FleetCommand) -> i32 {
    let json = match &command {
        FleetCommand::List { json, .. } | FleetCommand::Images { json } => *json,
        FleetCommand::Kill(a) | FleetCommand::Pause(a) | FleetCommand::Resume(a) => a.json,
        FleetCommand::SetTimeout { action, .. } => action.json,
    };
    let format = if json { Format::Json } else { global.output };
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, fleet(&backend, format, command).await)
}

async fn fleet(backend: &Backend, format: Format, command: FleetCommand) -> Result<i32, Failure> {
    let fleet = backend.client().await?.fleet();
    match command {
        FleetCommand::List { filter, .. } => list(&fleet, format, filter).await,
        FleetCommand::Images { .. } => images(&fleet, format).await,
        FleetCommand::Kill(args) => act(fleet, format, BulkAction::Kill, args).await,
        FleetCommand::Pause(args) => act(fleet, format, BulkAction::Pause, args).await,
        FleetCommand::Resume(args) => act(fleet, format, BulkAction::Resume, args).await,
        FleetCommand::SetTimeout { seconds, action } => {
            // The agent needs each sandbox's token: the ones this cache keeps.
            let mut fleet = fleet;
            for id in cache::token_ids() {
                if let Some(token) = cache::load_token(&id) {
                    fleet = fleet.access_token(id, token);
                }
            }
            let timeout = BulkAction::SetTimeout(Duration::from_secs(seconds));
            act(fleet, format, timeout, action).await
        }
    }
}

async fn list(fleet: &Fleet, format: Format, filter: Selection) -> Result<i32, Failure> {
    let mut query = FleetQuery::new().metadata(filter.metadata);
    if !filter.state.is_empty() {
        query = query.states(filter.state);
    }
    if let Some(image) = filter.image {
        query = query.image(image);
    }
    let sandboxes = fleet.sandboxes(query).await?;
    match format {
        Format::Json => output::json(&json!(sandboxes)),
        Format::Text => {
            for s in &sandboxes {
                let memory = s.memory_mib.map_or("-".to_owned(), |m| format!("{m} MiB"));
                // The JSON's RFC 3339 text of the end.
                let end = json!(s)["end_at"].as_str().unwrap_or("-").to_owned();
                outln!(
                    "{} {} {}:{} {} ends {}",
                    s.sandbox_id,
                    s.state,
                    s.image_name,
                    s.version,
                    memory,
                    end
                );
            }
            if sandboxes.is_empty() {
                output::note("no sandbox");
            }
        }
    }
    Ok(0)
}

async fn images(fleet: &Fleet, format: Format) -> Result<i32, Failure> {
    let images = fleet.images().await?;
    match format {
        Format::Json => output::json(&json!(images)),
        Format::Text => {
            for image in &images {
                outln!(
                    "{} {} latest {}",
                    image.name,
                    image.state,
                    image.latest_active_version.as_deref().unwrap_or("-")
                );
                for v in &image.versions {
                    let memory = v.memory_mib.map_or("-".to_owned(), |m| format!("{m} MiB"));
                    outln!("  {} {} {} {}", v.version, v.state, v.status, memory);
                }
                if let Some(kind) = &image.versions_error {
                    outln!("  (versions unreadable: {kind})");
                }
            }
        }
    }
    Ok(0)
}

async fn act(
    fleet: Fleet,
    format: Format,
    action: BulkAction,
    args: ActionArgs,
) -> Result<i32, Failure> {
    let ActionArgs {
        ids,
        filter,
        confirm,
        yes,
        ..
    } = args;
    let selection = BulkFilter::new()
        .ids(ids)
        .states(filter.state)
        .metadata(filter.metadata);
    let selection = match filter.image {
        Some(image) => selection.image(image),
        None => selection,
    };
    let plan = fleet.plan_bulk(action, selection).await?;
    let confirmation = match (confirm, yes) {
        (Some(code), _) => code,
        (None, true) => plan.confirmation.clone(),
        (None, false) => {
            print_plan(format, &plan, None);
            if format == Format::Text {
                output::note(&format!(
                    "dry run: nothing was done; to act on exactly these, run again with --confirm {} (or --yes)",
                    plan.confirmation
                ));
            }
            return Ok(0);
        }
    };
    let outcome = fleet.run_bulk(&plan, &confirmation).await?;
    print_plan(format, &plan, Some(&outcome));
    Ok(if outcome.failed() == 0 { 0 } else { 1 })
}

fn print_plan(format: Format, plan: &BulkPlan, outcome: Option<&BulkOutcome>) {
    if format == Format::Json {
        output::json(&json!({
            "plan": plan,
            "dry_run": outcome.is_none(),
            "outcome": outcome,
        }));
        return;
    }
    let acting = plan.act_count();
    outln!(
        "{}: {} to act on, {} to skip (confirmation {})",
        plan.action,
        acting,
        plan.targets.len() - acting,
        plan.confirmation
    );
    for t in &plan.targets {
        let will = match t.will {
            BulkWill::Act => "act ",
            BulkWill::Skip => "skip",
        };
        let state = t.state.as_ref().map_or("-", SandboxState::as_str);
        let result = outcome
            .and_then(|o| o.results.iter().find(|r| r.sandbox_id == t.sandbox_id))
            .map(|r| match (&r.error_kind, r.changed) {
                (Some(kind), _) => format!(
                    " -> failed ({kind}): {}",
                    r.message.as_deref().unwrap_or("")
                ),
                (None, true) => " -> done".to_owned(),
                (None, false) => " -> done (unchanged)".to_owned(),
            })
            .unwrap_or_default();
        outln!("{will} {} {state} {}{result}", t.sandbox_id, t.reason);
    }
    if let Some(o) = outcome {
        outln!("{} done, {} failed", o.succeeded(), o.failed());
    }
}
