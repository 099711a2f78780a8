//! `rayito`: sandboxes from the terminal, over the `rayito` SDK.
//!
//! Exit codes (docs/cli.md): 0 success; for `sandbox exec` and `sandbox
//! shell`, the command's own exit code;
//! 1 a failure that will not go away by retrying (the `SandboxError` kind
//! says why), or a Python error raised by `run-code`'s cell, or `doctor`
//! finding something to fix; 2 a usage error; 75 (`EX_TEMPFAIL`) a
//! retryable failure (capacity, rate limit, a lost connection): the same
//! call may succeed later.

mod build_output;
mod cache;
mod commands;
mod doctor;
mod image;
mod local;
mod logs;
mod output;
mod pool;
mod setup;
mod shell;
mod spinner;
mod template;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Sandboxes on AWS Lambda MicroVMs (or on this machine with `--local`).
#[derive(Debug, Parser)]
#[command(
    name = "rayito",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 success; `sandbox exec` and `sandbox shell`: the command's own; \
                  1 a failure retrying will not cure (also: run-code's cell raised, doctor found \
                  something to fix); 2 usage; 75 a retryable failure (capacity, rate limit, a lost \
                  connection). Access tokens are kept in $RAYITO_CACHE_DIR, else \
                  $XDG_CACHE_HOME/rayito, else ~/.cache/rayito (mode 0600)."
)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Top,
}

/// Options every command takes.
#[derive(Debug, Args, Clone)]
pub struct Global {
    /// Use the local backend: a daemon on this machine that runs sandbox code
    /// ON THIS HOST with best-effort isolation (also `RAYITO_BACKEND=local`).
    #[arg(long, global = true)]
    local: bool,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// AWS region (else the usual chain: AWS_REGION, the profile).
    #[arg(long, global = true)]
    region: Option<String>,
    /// AWS profile (else AWS_PROFILE or `default`).
    #[arg(long, global = true)]
    profile: Option<String>,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// One JSON document on stdout (errors too), for scripts.
    Json,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Create, inspect, use and kill sandboxes.
    #[command(subcommand)]
    Sandbox(commands::SandboxCommand),
    /// Build templates into images, and read their builds.
    #[command(subcommand)]
    Template(template::TemplateCommand),
    /// Pack, publish and list MicroVM images (the base image with the agent).
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Fill, take from, inspect and drain a pool of suspended sandboxes.
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    /// What the SDK would use on AWS, and whether a `create` could work there
    /// (and publishing: the setup stacks, the artifact bucket, the image).
    Doctor,
    /// Sets up a new account: the artifact bucket and IAM stacks, then the
    /// base image rayito-base, then the doctor. A dry run unless --yes.
    Setup(setup::SetupArgs),
    /// The local-backend daemon that `--local` starts.
    #[command(subcommand)]
    Local(LocalCommand),
    /// Runs the local-backend daemon (started by `--local`; not for direct use).
    #[command(name = "__local-backend", hide = true)]
    LocalBackend,
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
    /// Whether the daemon runs, and where.
    Status,
    /// Stops the daemon and every sandbox it runs.
    Stop,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Top::LocalBackend => local::serve(),
        Top::Local(command) => local_command(&command, cli.global.output),
        Top::Doctor => run_async(doctor::run(cli.global)),
        Top::Sandbox(command) => run_async(commands::run(cli.global, command)),
        Top::Template(command) => run_async(template::run(cli.global, command)),
        Top::Image(command) => run_async(image::run(cli.global, command)),
        Top::Pool(command) => run_async(pool::run(cli.global, command)),
        Top::Setup(args) => run_async(setup::run(cli.global, args)),
    };
    std::process::exit(code);
}

fn run_async(future: impl std::future::Future<Output = i32>) -> i32 {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            // A read of stdin (the shell) may still block a thread: do
            // not wait for it.
            runtime.shutdown_background();
            code
        }
        Err(err) => {
            eprintln!("rayito: cannot start a runtime: {err}");
            1
        }
    }
}

fn local_command(command: &LocalCommand, format: Format) -> i32 {
    match command {
        LocalCommand::Status => {
            let state = local::running();
            match format {
                Format::Json => output::json(&serde_json::json!({ "running": state })),
                Format::Text => match state {
                    Some(s) => println!(
                        "running: pid {}, endpoint {}, image {}",
                        s.pid, s.endpoint_url, s.image_arn
                    ),
                    None => println!("not running"),
                },
            }
            0
        }
        LocalCommand::Stop => match local::stop() {
            Ok(was_running) => {
                match format {
                    Format::Json => output::json(&serde_json::json!({ "stopped": was_running })),
                    Format::Text if was_running => println!("stopped"),
                    Format::Text => println!("not running"),
                }
                0
            }
            Err(err) => {
                eprintln!("rayito: {err}");
                1
            }
        },
    }
}
