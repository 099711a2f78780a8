//! `rayito dashboard`: the web dashboard (crate rayito-dashboard) on
//! 127.0.0.1 over the client of the usual flags (`--local`, `--region`,
//! `--profile`), until Ctrl-C. It prints the URL to open, with this start's
//! token; the sandboxes' metrics are read with the access tokens this
//! machine's cache keeps (those `rayito sandbox create` made here).

use std::time::Duration;

use clap::Args;
use rayito_dashboard::{AccessTokens, Dashboard, DashboardOptions};
use serde_json::json;

use crate::Global;
use crate::commands::{Failure, exit_code};
use crate::output;

/// The options of `rayito dashboard` (serves the web dashboard), or its
/// `cloudwatch` subcommand (prints the CloudWatch dashboard JSON).
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DashboardArgs {
    /// `cloudwatch`: the CloudWatch dashboard JSON instead of the server.
    #[command(subcommand)]
    pub command: Option<crate::dashboard_cloudwatch::DashboardCommand>,
    /// The port on 127.0.0.1 (0: one the system picks).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Serve bulk actions (kill, pause, resume, set-timeout), each after a
    /// dry-run plan and its typed confirmation; without it the dashboard
    /// only reads.
    #[arg(long)]
    allow_actions: bool,
    /// How often the page refreshes its live views, in seconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    poll_seconds: u64,
}

/// Runs the dashboard until Ctrl-C.
pub async fn run(global: Global, args: DashboardArgs) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    let outcome = async {
        let client = backend.client().await?;
        let options = DashboardOptions::new()
            .port(args.port)
            .allow_actions(args.allow_actions)
            .poll_interval(Duration::from_secs(args.poll_seconds))
            .access_tokens(AccessTokens::from_fn(crate::cache::load_token));
        let dashboard = Dashboard::start(client, options).await.map_err(|e| {
            Failure::Cli(format!(
                "the dashboard cannot listen on 127.0.0.1:{}: {e}",
                args.port
            ))
        })?;
        match format {
            crate::Format::Json => output::json(&json!({
                "url": dashboard.start_url(),
                "address": dashboard.addr().to_string(),
                "allow_actions": args.allow_actions,
            })),
            crate::Format::Text => {
                outln!("Dashboard: {}", dashboard.start_url());
                outln!(
                    "Listening on {} only; actions {}. Ctrl-C stops it.",
                    dashboard.addr(),
                    if args.allow_actions {
                        "enabled"
                    } else {
                        "disabled (--allow-actions)"
                    }
                );
            }
        }
        let _ = tokio::signal::ctrl_c().await;
        dashboard.shutdown().await;
        Ok(0)
    }
    .await;
    exit_code(format, outcome)
}
