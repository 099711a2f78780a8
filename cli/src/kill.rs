//! `sandbox kill`: one sandbox, several (`kill ID ID ...`), or every
//! sandbox of this cache (`--all`, narrowed by `--metadata`); each killed
//! one's token forgotten. Only sandboxes whose tokens this cache keeps are
//! killed by `--all`: never another user's or another cache's.

use std::collections::BTreeSet;

use futures_util::StreamExt as _;
use rayito::{ListQuery, SandboxError};
use serde_json::{Value, json};

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::{cache, output};

/// What `sandbox kill` was given.
#[derive(Debug, clap::Args)]
pub(crate) struct KillArgs {
    /// The sandbox ids, or starts of this cache's sandboxes' ids (none:
    /// $RAYITO_SANDBOX_ID).
    #[arg(value_name = "ID", conflicts_with = "all")]
    ids: Vec<String>,
    /// Every sandbox whose token this cache keeps.
    #[arg(long)]
    all: bool,
    /// With --all: only the RUNNING ones with this metadata `key=value`
    /// (repeatable; read from each sandbox's agent).
    #[arg(long, value_parser = crate::commands::parse_pair, requires = "all")]
    metadata: Vec<(String, String)>,
}

impl KillArgs {
    /// The one sandbox a `kill` of one id is about (none for several ids
    /// or `--all`), as [`crate::ids::SandboxId::peek`] names it.
    pub(crate) fn single(&self) -> Option<String> {
        if self.all || self.ids.len() > 1 {
            return None;
        }
        crate::ids::SandboxId::from(self.ids.first().cloned()).peek()
    }
}

/// Runs `sandbox kill`. One id prints as before (an object in JSON, its
/// failure the command's); several, or `--all`, print one line (one array
/// element) each, go on past a failure and exit with the last failure's
/// code.
pub(crate) async fn run(backend: &Backend, format: Format, args: KillArgs) -> Result<i32, Failure> {
    let KillArgs { ids, all, metadata } = args;
    if !all && ids.len() <= 1 {
        let id = crate::ids::SandboxId::from(ids.into_iter().next()).resolve()?;
        let killed = backend.client().await?.kill_by_id(&id).await?;
        cache::remove_token(&id);
        match format {
            Format::Json => output::json(&json!({ "sandbox_id": id, "killed": killed })),
            Format::Text => print_text(&id, killed),
        }
        return Ok(0);
    }
    let targets = if all {
        of_this_cache(backend, metadata).await?
    } else {
        ids.iter()
            .map(|id| crate::ids::complete(id))
            .collect::<Result<Vec<_>, _>>()?
    };
    if targets.is_empty() {
        output::note("no sandbox of this cache to kill");
    }
    let client = backend.client().await?;
    let mut code = 0;
    let mut rows = Vec::new();
    for id in targets {
        match client.kill_by_id(&id).await {
            Ok(killed) => {
                cache::remove_token(&id);
                match format {
                    Format::Json => rows.push(json!({ "sandbox_id": id, "killed": killed })),
                    Format::Text => print_text(&id, killed),
                }
            }
            Err(err) => {
                code = failed(format, &id, &err, &mut rows);
            }
        }
    }
    if format == Format::Json {
        output::json(&Value::Array(rows));
    }
    Ok(code)
}

fn print_text(id: &str, killed: bool) {
    if killed {
        outln!("killed {id}");
    } else {
        outln!("{id} was already gone");
    }
}

/// Reports the failed kill of `id` (a row in JSON, a line on stderr in
/// text); its exit code.
fn failed(format: Format, id: &str, err: &SandboxError, rows: &mut Vec<Value>) -> i32 {
    let info = err.classify();
    match format {
        Format::Json => rows.push(json!({
            "sandbox_id": id,
            "error": { "message": err.to_string(), "kind": info.kind, "retryable": info.retryable },
        })),
        Format::Text => eprintln!("error: {id}: {err}"),
    }
    if info.retryable {
        output::EXIT_RETRYABLE
    } else {
        output::EXIT_FAILURE
    }
}

/// The sandboxes of this cache; with `metadata`, only the RUNNING ones
/// whose metadata holds every pair.
async fn of_this_cache(
    backend: &Backend,
    metadata: Vec<(String, String)>,
) -> Result<Vec<String>, Failure> {
    let cached = crate::ids::cached_ids();
    if metadata.is_empty() {
        return Ok(cached);
    }
    let cached: BTreeSet<String> = cached.into_iter().collect();
    let mut matching = Vec::new();
    let mut stream = backend
        .client()
        .await?
        .list(ListQuery::new().metadata(metadata));
    while let Some(summary) = stream.next().await {
        let id = summary?.sandbox_id;
        if cached.contains(&id) {
            matching.push(id);
        }
    }
    Ok(matching)
}
