//! `rayito dashboard cloudwatch`: prints (or writes with --out) the
//! CloudWatch `DashboardBody` JSON of the sandboxes' logs, without any AWS
//! call (`rayito::stacks::CloudWatchBoard`, the same body the
//! dashboard-cloudwatch stack holds; docs/stacks.md).

use clap::Args;
use rayito::stacks::{CloudWatchBoard, DEFAULT_LOG_GROUP_PREFIX};

use crate::output;
use crate::{Format, Global};

/// `rayito dashboard ...` (here only `cloudwatch`; the local dashboard
/// itself joins this group).
#[derive(Debug, clap::Subcommand)]
pub enum DashboardCommand {
    /// Prints the CloudWatch dashboard JSON of the sandboxes' logs (no AWS
    /// call): Logs Insights widgets, with --otlp and --quota charts.
    Cloudwatch(CloudWatchArgs),
}

/// `rayito dashboard cloudwatch`'s options.
#[derive(Debug, Args)]
pub struct CloudWatchArgs {
    /// A log group to query (repeatable; instead of the prefix).
    #[arg(long = "log-group", value_name = "GROUP")]
    log_groups: Vec<String>,
    /// The prefix of the log groups to query.
    #[arg(long, default_value = DEFAULT_LOG_GROUP_PREFIX)]
    log_group_prefix: String,
    /// Adds CPU, memory and disk charts of the OTLP metrics (telemetry).
    #[arg(long)]
    otlp: bool,
    /// Adds the memory quota chart (the quota-alerts stack's metric).
    #[arg(long)]
    quota: bool,
    /// The region the widgets read (default: the AWS configuration's, else
    /// us-east-1).
    #[arg(long)]
    region: Option<String>,
    /// Writes the JSON to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

/// Prints or writes the body; returns the exit code (2 for a bad name).
pub fn run(global: &Global, args: CloudWatchArgs) -> i32 {
    let format: Format = global.output;
    let region = args
        .region
        .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
        .or_else(|| {
            std::env::var("AWS_DEFAULT_REGION")
                .ok()
                .filter(|r| !r.is_empty())
        })
        .unwrap_or_else(|| "us-east-1".to_owned());
    let mut board = CloudWatchBoard::new(region);
    board.log_group_prefix = args.log_group_prefix;
    board.log_groups = args.log_groups;
    board.include_otlp = args.otlp;
    board.include_quota = args.quota;
    let body = match board.body() {
        Ok(body) => body,
        Err(err) => return output::usage_error(format, &err.to_string()),
    };
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    match args.out {
        Some(path) => match std::fs::write(&path, format!("{text}\n")) {
            Ok(()) => {
                if format == Format::Text {
                    outln!("wrote {}", path.display());
                } else {
                    output::json(&serde_json::json!({ "written": path.display().to_string() }));
                }
                0
            }
            Err(err) => {
                output::cli_error(format, &format!("cannot write {}: {err}", path.display()))
            }
        },
        None => {
            outln!("{text}");
            0
        }
    }
}
