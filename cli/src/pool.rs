//! `rayito pool`: a pool of suspended sandboxes shared through a pool file
//! in the cache directory, so that one long-running `pool start` fills it
//! and any number of `pool take` invocations (other processes) take from
//! it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use rayito::{Pool, PoolConfig, PoolStats, PoolStore, SandboxError, WarmupStep};
use serde_json::json;

use crate::commands::{Backend, Failure, keep_and_print};
use crate::{Format, Global, cache, output};

/// The pool subcommands.
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Fills the pool and keeps it full until Ctrl-C or SIGTERM (parked
    /// sandboxes stay for `pool take`; `pool drain` ends them).
    Start {
        #[command(flatten)]
        which: Which,
        /// How many sandboxes to keep parked (1 to 64).
        #[arg(long, default_value_t = 4)]
        size: u32,
        /// A command run in each sandbox before it is parked (repeatable).
        #[arg(long, value_name = "CMD")]
        warmup: Vec<String>,
        /// Sandboxes warmed at once (1 to 8).
        #[arg(long, default_value_t = 4)]
        fill_concurrency: u32,
    },
    /// Takes a parked sandbox (or creates one) and keeps its access token
    /// in the cache directory, as `sandbox create` does.
    Take {
        #[command(flatten)]
        which: Which,
        /// Seconds to wait for a parked sandbox before creating one.
        #[arg(long, value_name = "SECS", default_value_t = 0)]
        wait: u64,
        /// Also print the access token.
        #[arg(long)]
        show_token: bool,
    },
    /// What the pool holds.
    Stats {
        #[command(flatten)]
        which: Which,
    },
    /// Terminates every parked sandbox of the pool.
    Drain {
        #[command(flatten)]
        which: Which,
    },
}

/// Which pool: its name and its sandboxes' template.
#[derive(Debug, Args)]
pub struct Which {
    /// The pool's name: its file is `<cache>/pools/<name>.json`.
    #[arg(long, default_value = "default")]
    name: String,
    /// The sandboxes' template (image ARN; on the local backend also a
    /// bare name); else RAYITO_TEMPLATE, else (local only) `rayito-base`.
    #[arg(long)]
    template: Option<String>,
}

/// The pool file of `name`, in a private directory of the cache.
fn pool_file(name: &str) -> Result<PathBuf, Failure> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(Failure::Cli(
            "a pool name is 1 to 64 of A-Z, a-z, 0-9, - and _".to_owned(),
        ));
    }
    let dir = cache::dir().join("pools");
    cache::private_dir(&dir).map_err(|err| {
        Failure::Cli(format!(
            "could not make the pools directory in {}: {err}",
            cache::dir().display()
        ))
    })?;
    Ok(dir.join(format!("{name}.json")))
}

/// The pool `which` names, on `backend`; `config` sets its size and
/// warm-up.
fn open(backend: &Backend, which: &Which, config: PoolConfig) -> Result<Pool, Failure> {
    let mut builder = backend.builder();
    let template = match &backend.local {
        Some(state) => Some(
            state.image_for(
                which
                    .template
                    .clone()
                    .or_else(|| std::env::var(rayito::TEMPLATE_ENV).ok())
                    .filter(|t| !t.is_empty())
                    .as_deref(),
            ),
        ),
        None => which.template.clone(),
    };
    if let Some(template) = template {
        builder = builder.template(template);
    }
    let store = PoolStore::file(pool_file(&which.name)?);
    Ok(builder.pool(config.store(store))?)
}

/// A pool of `which` that only takes, reads and drains (another process
/// fills it).
async fn taker(backend: &Backend, which: &Which) -> Result<Pool, Failure> {
    let pool = open(backend, which, PoolConfig::new(1).filler(false))?;
    pool.start().await?;
    Ok(pool)
}

/// Runs one pool subcommand; returns the exit code.
pub async fn run(global: Global, command: PoolCommand) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    crate::commands::exit_code(format, dispatch(&backend, format, command).await)
}

async fn dispatch(backend: &Backend, format: Format, command: PoolCommand) -> Result<i32, Failure> {
    match command {
        PoolCommand::Start {
            which,
            size,
            warmup,
            fill_concurrency,
        } => {
            let mut config = PoolConfig::new(size).fill_concurrency(fill_concurrency);
            for step in warmup {
                config = config.warmup(WarmupStep::run(step));
            }
            let pool = open(backend, &which, config)?;
            pool.start().await?;
            if format == Format::Text {
                crate::output::note(&format!(
                    "filling pool {} (size {size}); Ctrl-C stops the filler, parked sandboxes stay",
                    which.name
                ));
            }
            fill_until_stopped(&pool, format).await?;
            pool.close(false).await?;
            Ok(0)
        }
        PoolCommand::Take {
            which,
            wait,
            show_token,
        } => {
            let pool = taker(backend, &which).await?;
            let before = pool.stats().await?;
            let sandbox = pool.take_within(Duration::from_secs(wait)).await?;
            let hit = pool.stats().await?.hits > before.hits;
            keep_and_print(
                backend,
                format,
                &sandbox,
                show_token,
                json!({ "from_pool": hit }),
            )
            .await?;
            if format == Format::Text && !hit {
                crate::output::note("no parked sandbox: this one was created");
            }
            Ok(0)
        }
        PoolCommand::Stats { which } => {
            let pool = taker(backend, &which).await?;
            print_stats(format, &pool.stats().await?);
            Ok(0)
        }
        PoolCommand::Drain { which } => {
            let pool = taker(backend, &which).await?;
            let parked = pool.stats().await?.ready;
            pool.close(true).await?;
            match format {
                Format::Json => output::json(&json!({ "terminated": parked })),
                Format::Text => outln!("terminated {parked} parked sandboxes"),
            }
            Ok(0)
        }
    }
}

/// Waits for Ctrl-C or SIGTERM, printing the pool's counts as they change
/// (text) or one JSON line per change (json).
async fn fill_until_stopped(pool: &Pool, format: Format) -> Result<(), SandboxError> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|_| SandboxError::internal("pool start", "cannot watch SIGTERM"))?;
    let mut last = None;
    loop {
        let stats = pool.stats().await?;
        let now = (stats.ready, stats.warming, stats.failed);
        if last != Some(now) {
            match format {
                Format::Json => outln!(
                    "{}",
                    json!({"ready": stats.ready, "warming": stats.warming, "failed": stats.failed})
                ),
                Format::Text => eprintln!(
                    "ready {} warming {} failed {}",
                    stats.ready, stats.warming, stats.failed
                ),
            }
            last = Some(now);
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

fn print_stats(format: Format, stats: &PoolStats) {
    match format {
        Format::Json => output::json(&json!({
            "ready": stats.ready,
            "warming": stats.warming,
            "slots": stats.slots.iter().map(|s| json!({
                "sandbox_id": s.sandbox_id,
                "state": s.state.as_str(),
                "started_at": output::unix(Some(s.started_at)),
                "expires_at": output::unix(Some(s.expires_at)),
                "parked_at": output::unix(s.parked_at),
            })).collect::<Vec<_>>(),
        })),
        Format::Text => {
            outln!("ready {} warming {}", stats.ready, stats.warming);
            for s in &stats.slots {
                outln!("{:<8} {}", s.state.as_str(), s.sandbox_id);
            }
        }
    }
}
