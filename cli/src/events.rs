//! `rayito events ...`: lifecycle events' stack (`deploy`, `status`,
//! `destroy`), the events it keeps (`list`), its webhooks (`webhook add |
//! list | remove`) and, on the local backend, its dead letters. On AWS the
//! stack is `rayito-events-webhooks` (docs/events.md); with `--local` the
//! daemon's emulator is the pipeline.

use clap::Subcommand;
use rayito::events::{
    DEFAULT_RECONCILER_INTERVAL_MINUTES, DEFAULT_STACK_NAME, DeadLetter, EventOrder, EventQuery,
    EventRecord, EventsDeploy, EventsStack, LifecycleEvents, WebhookInfo, parse_event_type,
};
use serde_json::json;

use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global};

/// `rayito events ...`.
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Deploys (or updates) the events-webhooks stack and waits; a dry run
    /// unless --yes.
    Deploy {
        /// The bucket holding the stack's functions (rayito setup's
        /// artifact bucket; not needed with --local).
        #[arg(long, default_value = "")]
        artifact_bucket: String,
        /// The log group the sandboxes log to (its subscription feeds the
        /// forwarder).
        #[arg(long)]
        log_group_name: String,
        /// Minutes between reconciler runs (2 or more).
        #[arg(long, default_value_t = DEFAULT_RECONCILER_INTERVAL_MINUTES)]
        reconciler_interval_minutes: u32,
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
        /// A tag of the stack, KEY=VALUE (repeatable).
        #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = crate::commands::parse_pair)]
        tags: Vec<(String, String)>,
        /// The functions' zip to upload to the artifact bucket first.
        #[arg(long, value_name = "ZIP")]
        artifact: Option<std::path::PathBuf>,
        /// Deploy (without it: print what would be deployed).
        #[arg(long)]
        yes: bool,
    },
    /// The stack's status and outputs (exit 1 when it is not deployed).
    Status {
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
    },
    /// Deletes the stack with its events, webhooks and key; a dry run
    /// unless --yes.
    Destroy {
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
        /// Delete (without it: print what would be deleted).
        #[arg(long)]
        yes: bool,
    },
    /// The events kept, newest first unless --order asc.
    List {
        /// Only this sandbox's events.
        #[arg(long)]
        sandbox_id: Option<String>,
        /// Only events of this type, sandbox.lifecycle.created, .paused,
        /// .resumed or .killed (repeatable).
        #[arg(long = "type", value_name = "TYPE")]
        types: Vec<String>,
        /// At most this many (1 to 100).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// asc (oldest first) or desc.
        #[arg(long, default_value = "desc", value_parser = ["asc", "desc"])]
        order: String,
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
    },
    /// The stack's webhooks.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Deliveries that failed for good (the local backend; on AWS read the
    /// stack's DelivererFailuresQueue).
    DeadLetters,
}

/// `rayito events webhook ...`.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Registers a webhook; prints its id.
    Add {
        /// Where deliveries go (https to a public host on AWS).
        url: String,
        /// The secret signing deliveries: a name under rayito/webhooks/,
        /// or an ARN.
        #[arg(long)]
        secret_name: String,
        /// An event type it receives (repeatable, at least one).
        #[arg(long = "type", value_name = "TYPE", required = true)]
        types: Vec<String>,
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
    },
    /// Every webhook.
    List {
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
    },
    /// Removes a webhook (exit 1 when there was none).
    Remove {
        /// Its id.
        id: String,
        /// The stack's name.
        #[arg(long, default_value = DEFAULT_STACK_NAME)]
        stack_name: String,
    },
}

/// Runs one `events` subcommand; returns the exit code.
pub async fn run(global: Global, command: EventsCommand) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, events(&backend, format, command).await)
}

/// The lifecycle events of `backend`: the daemon's emulator, or AWS with
/// the global options' region and profile.
pub(crate) async fn of(backend: &Backend, stack_name: &str) -> Result<LifecycleEvents, Failure> {
    if let Some(state) = &backend.local {
        return Ok(LifecycleEvents::local_emulator(
            &state.endpoint_url,
            &state.region,
            &state.access_key_id,
            state.secret_access_key.as_str(),
        ));
    }
    Ok(backend.client().await?.events().stack_name(stack_name))
}

fn stack_json(stack: &EventsStack) -> serde_json::Value {
    json!({
        "stackName": stack.stack_name,
        "status": stack.status,
        "outputs": stack.outputs,
    })
}

fn print_stack(stack: &EventsStack) {
    outln!("stack {} {}", stack.stack_name, stack.status);
    for (key, value) in &stack.outputs {
        outln!("{key}: {value}");
    }
}

fn webhook_json(w: &WebhookInfo) -> serde_json::Value {
    json!({
        "webhookId": w.webhook_id,
        "url": w.url,
        "types": w.types.iter().map(|k| k.type_name()).collect::<Vec<_>>(),
    })
}

fn print_webhook(w: &WebhookInfo) {
    let types: Vec<&str> = w.types.iter().map(|k| k.type_name()).collect();
    outln!("{} {} {}", w.webhook_id, w.url, types.join(","));
}

fn record_json(r: &EventRecord) -> serde_json::Value {
    json!({
        "eventId": r.event_id,
        "sandboxId": r.sandbox_id,
        "type": r.event_type(),
        "killReason": r.kill_reason.map(|k| k.as_str()),
        "generation": r.generation,
        "occurredAtMs": r.occurred_at_ms,
        "imageArn": r.image_arn,
        "imageVersion": r.image_version,
    })
}

fn dead_letter_json(d: &DeadLetter) -> serde_json::Value {
    json!({
        "webhookId": d.webhook_id,
        "eventId": d.event_id,
        "attempts": d.attempts,
        "reason": d.reason,
        "lastStatus": d.last_status,
    })
}

fn event_types(types: &[String]) -> Result<Vec<rayito::events::EventKind>, Failure> {
    Ok(types
        .iter()
        .map(|t| parse_event_type(t))
        .collect::<Result<Vec<_>, _>>()?)
}

async fn events(backend: &Backend, format: Format, command: EventsCommand) -> Result<i32, Failure> {
    match command {
        EventsCommand::Deploy {
            artifact_bucket,
            log_group_name,
            reconciler_interval_minutes,
            stack_name,
            tags,
            artifact,
            yes,
        } => {
            let mut deploy = EventsDeploy::new(artifact_bucket, &log_group_name)
                .reconciler_interval_minutes(reconciler_interval_minutes)
                .tags(tags);
            if let Some(zip) = artifact {
                deploy = deploy.artifact(zip);
            }
            if !yes {
                match format {
                    Format::Json => output::json(&json!({
                        "dryRun": true,
                        "stackName": stack_name,
                        "logGroupName": log_group_name,
                    })),
                    Format::Text => outln!(
                        "would deploy the events stack {stack_name} reading {log_group_name} (dry run: --yes deploys it)"
                    ),
                }
                return Ok(0);
            }
            let events = of(backend, &stack_name).await?;
            let stack = events.deploy(deploy).await?;
            match format {
                Format::Json => output::json(&stack_json(&stack)),
                Format::Text => print_stack(&stack),
            }
            Ok(0)
        }
        EventsCommand::Status { stack_name } => {
            let events = of(backend, &stack_name).await?;
            let stack = events.status().await?;
            match (format, &stack) {
                (Format::Json, _) => output::json(&json!({
                    "stack": stack.as_ref().map(stack_json)
                })),
                (Format::Text, Some(stack)) => print_stack(stack),
                (Format::Text, None) => outln!("the events stack {stack_name} is not deployed"),
            }
            Ok(i32::from(stack.is_none()))
        }
        EventsCommand::Destroy { stack_name, yes } => {
            if !yes {
                match format {
                    Format::Json => {
                        output::json(&json!({ "dryRun": true, "stackName": stack_name }))
                    }
                    Format::Text => outln!(
                        "would delete the events stack {stack_name} with its events, webhooks and key (dry run: --yes deletes it)"
                    ),
                }
                return Ok(0);
            }
            let events = of(backend, &stack_name).await?;
            let deleted = events.destroy().await?;
            match format {
                Format::Json => output::json(&json!({ "deleted": deleted })),
                Format::Text if deleted => outln!("deleted {stack_name}"),
                Format::Text => outln!("the events stack {stack_name} was not deployed"),
            }
            Ok(0)
        }
        EventsCommand::List {
            sandbox_id,
            types,
            limit,
            order,
            stack_name,
        } => {
            let mut query = EventQuery::new()
                .types(event_types(&types)?)
                .limit(limit)
                .order(if order == "asc" {
                    EventOrder::Asc
                } else {
                    EventOrder::Desc
                });
            if let Some(id) = sandbox_id {
                query = query.sandbox_id(id);
            }
            let events = of(backend, &stack_name).await?;
            let records = events.get_events(query).await?;
            match format {
                Format::Json => output::json(&json!({
                    "events": records.iter().map(record_json).collect::<Vec<_>>()
                })),
                Format::Text => {
                    for r in &records {
                        let reason = r
                            .kill_reason
                            .map_or(String::new(), |k| format!(" ({})", k.as_str()));
                        outln!(
                            "{} {} {}{} generation {} at {} ms",
                            r.event_id,
                            r.sandbox_id,
                            r.event_type(),
                            reason,
                            r.generation,
                            r.occurred_at_ms
                        );
                    }
                }
            }
            Ok(0)
        }
        EventsCommand::Webhook(command) => webhook(backend, format, command).await,
        EventsCommand::DeadLetters => {
            let events = of(backend, DEFAULT_STACK_NAME).await?;
            let letters = events.dead_letters().await?;
            match format {
                Format::Json => output::json(&json!({
                    "deadLetters": letters.iter().map(dead_letter_json).collect::<Vec<_>>()
                })),
                Format::Text => {
                    for d in &letters {
                        outln!(
                            "{} {} {} after {} attempts (last status {})",
                            d.webhook_id,
                            d.event_id,
                            d.reason,
                            d.attempts,
                            d.last_status.map_or("-".to_owned(), |s| s.to_string())
                        );
                    }
                }
            }
            Ok(0)
        }
    }
}

async fn webhook(
    backend: &Backend,
    format: Format,
    command: WebhookCommand,
) -> Result<i32, Failure> {
    match command {
        WebhookCommand::Add {
            url,
            secret_name,
            types,
            stack_name,
        } => {
            let kinds = event_types(&types)?;
            let events = of(backend, &stack_name).await?;
            let hook = events.register_webhook(&url, &secret_name, &kinds).await?;
            match format {
                Format::Json => output::json(&webhook_json(&hook)),
                Format::Text => print_webhook(&hook),
            }
            Ok(0)
        }
        WebhookCommand::List { stack_name } => {
            let events = of(backend, &stack_name).await?;
            let hooks = events.list_webhooks().await?;
            match format {
                Format::Json => output::json(&json!({
                    "webhooks": hooks.iter().map(webhook_json).collect::<Vec<_>>()
                })),
                Format::Text => hooks.iter().for_each(print_webhook),
            }
            Ok(0)
        }
        WebhookCommand::Remove { id, stack_name } => {
            let events = of(backend, &stack_name).await?;
            let deleted = events.delete_webhook(&id).await?;
            match format {
                Format::Json => output::json(&json!({ "deleted": deleted })),
                Format::Text if deleted => outln!("removed {id}"),
                Format::Text => outln!("no webhook {id}"),
            }
            Ok(i32::from(!deleted))
        }
    }
}
