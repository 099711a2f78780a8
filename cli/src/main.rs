//! `rayito`: sandboxes from the terminal, over the `rayito` SDK.
//!
//! Exit codes (docs/cli.md, `output::EXIT_*`): 0 success; 1 a failure
//! that will not go away by retrying (the `SandboxError` kind says why),
//! or a Python error raised by `run-code`'s cell, or `doctor` finding
//! something to fix; 2 a usage error; 3 `local status` finding no
//! daemon; 75 (`EX_TEMPFAIL`) a retryable
//! failure (capacity, rate limit, a lost connection). `sandbox exec` and
//! `sandbox shell` exit with the command's own code, so their own failures
//! (usage included) take 125 and a command timeout 124, as `docker run`
//! and `timeout` do.

// First: its `outln!` / `out!` macros are used by the modules below.
#[macro_use]
mod output;
mod agent;
mod agent_project;
mod aws_only;
mod build_output;
mod cache;
mod code_source;
mod commands;
mod dashboard;
mod dashboard_cloudwatch;
mod dates;
mod doctor;
mod doctor_account;
mod doctor_permissions;
mod duration;
mod events;
mod exec;
mod fault;
mod files;
mod fleet;
mod gateway;
mod gone;
mod help;
mod hints;
mod host;
mod ids;
mod image;
mod kill;
mod local;
mod local_upstreams;
mod logs;
mod mounts_policy;
mod network;
mod path_statuses;
mod pool;
mod progress;
mod prune;
mod readable;
mod sandbox_mounts;
mod sandbox_volumes;
mod secret;
mod setup;
mod shell;
mod signals;
mod spinner;
mod stack;
mod telemetry;
mod template;
mod usage;
mod volume;

use clap::{ArgAction, Args, FromArgMatches as _, Parser, Subcommand, ValueEnum};

/// Sandboxes on AWS Lambda MicroVMs (or on this machine with `--local`).
#[derive(Debug, Parser)]
#[command(name = "rayito", version)]
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
    /// Output format: `json` prints one JSON document on stdout for every
    /// result and every error (usage errors too).
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    output: Format,
    /// AWS region (else the usual chain: AWS_REGION, the profile).
    #[arg(long, global = true)]
    region: Option<String>,
    /// AWS profile (else AWS_PROFILE or `default`).
    #[arg(long, global = true)]
    profile: Option<String>,
    /// More detail on stderr: the SDK's events at info (`-v`), debug
    /// (`-vv`) or trace (`-vvv`); `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Less on stderr: no spinner, progress bar, note or warning; errors
    /// still print.
    #[arg(short, long, global = true)]
    quiet: bool,
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
    /// Secrets in AWS Secrets Manager for sandboxes (values from stdin or
    /// a file, never from the command line).
    #[command(subcommand)]
    Secret(secret::SecretCommand),
    /// Lifecycle events: the events-webhooks stack, the events it keeps
    /// and its webhooks (with --local, the daemon's own pipeline).
    #[command(subcommand)]
    Events(events::EventsCommand),
    /// The fleet: every sandbox with its image and size, the images with
    /// their versions, and bulk kill, pause, resume and set-timeout (a dry
    /// run unless --confirm or --yes).
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// AI agents in sandboxes: run one once, build the agent image (the
    /// rest of the group is the next round's).
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// S3 mounts' account side: the execution role's IAM policy (the
    /// s3-mounts stack).
    #[command(subcommand)]
    Mounts(mounts_policy::MountsCommand),
    /// EFS volumes (access points) of a file system, for sandboxes.
    #[command(subcommand)]
    Volume(volume::VolumeCommand),
    /// The efs-volumes stack in an existing VPC: check, deploy, status,
    /// destroy.
    #[command(subcommand)]
    Volumes(volume::VolumesCommand),
    /// A web dashboard on 127.0.0.1: the fleet with live state, each
    /// sandbox's metrics and events, images, quotas and cost; bulk actions
    /// with --allow-actions.
    Dashboard(dashboard::DashboardArgs),
    /// What the SDK would use on AWS, and whether a `create` could work there
    /// (and publishing: the setup stacks, the artifact bucket, the image).
    Doctor(doctor::DoctorArgs),
    /// The optional stacks (docs/stacks.md): list, status, deploy, destroy.
    #[command(subcommand)]
    Stack(stack::StackCommand),
    /// Sets up a new account: the artifact bucket and IAM stacks, then the
    /// base image rayito-base, then the doctor. A dry run unless --yes.
    Setup(setup::SetupArgs),
    /// The local-backend daemon that `--local` starts.
    #[command(subcommand)]
    Local(LocalCommand),
    /// Prints a completion script for a shell.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Runs the local-backend daemon (started by `--local`; not for direct use).
    #[command(name = "__local-backend", hide = true)]
    LocalBackend,
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
    /// Whether the daemon runs, and where (exit 3 when it does not).
    Status,
    /// Stops the daemon and every sandbox it runs.
    Stop,
    /// Injects a failure on the daemon (throttling, capacity, quota, proxy
    /// statuses, a cut, a killed agent, a full disk), to test a service
    /// against it (docs/testing.md).
    #[command(subcommand)]
    Fault(fault::FaultCommand),
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match help::command()
        .try_get_matches_from(&args)
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(err) => std::process::exit(usage::report(&err, &args)),
    };
    output::init(&cli.global);
    let format = cli.global.output;
    let code = match cli.command {
        Top::LocalBackend => local::serve(),
        Top::Local(command) => local_command(&command, format),
        Top::Completions { shell } => help::completions(shell, format),
        Top::Doctor(args) => match aws_only::DOCTOR.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, doctor::run(cli.global, args)),
        },
        Top::Sandbox(command) => {
            let own_failure = command.passes_exit_code().then_some(output::EXIT_OWN);
            run_async_or(format, own_failure, commands::run(cli.global, command))
        }
        Top::Template(command) => run_async(format, template::run(cli.global, command)),
        Top::Image(command) => run_async(format, image::run(cli.global, command)),
        Top::Pool(command) => run_async(format, pool::run(cli.global, command)),
        Top::Secret(command) => match aws_only::SECRET.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, secret::run(cli.global, command)),
        },
        Top::Events(command) => run_async(format, events::run(cli.global, command)),
        Top::Dashboard(args) => match args.command {
            Some(dashboard_cloudwatch::DashboardCommand::Cloudwatch(cloudwatch)) => {
                dashboard_cloudwatch::run(&cli.global, cloudwatch)
            }
            None => run_async(format, dashboard::run(cli.global, args)),
        },
        Top::Fleet(command) => run_async(format, fleet::run(cli.global, command)),
        Top::Agent(command) => run_async(format, agent::run(cli.global, command)),
        Top::Mounts(command) => match aws_only::MOUNTS_POLICY.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, mounts_policy::run(cli.global, command)),
        },
        Top::Volume(command) => match aws_only::VOLUME.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, volume::run_volume(cli.global, command)),
        },
        Top::Volumes(command) => match aws_only::VOLUMES.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, volume::run_volumes(cli.global, command)),
        },
        Top::Stack(command) => match aws_only::STACK.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, stack::run(cli.global, command)),
        },
        Top::Setup(args) => match aws_only::SETUP.refuse(&cli.global) {
            Some(code) => code,
            None => run_async(format, setup::run(cli.global, args)),
        },
    };
    std::process::exit(code);
}

fn run_async(format: Format, future: impl std::future::Future<Output = i32>) -> i32 {
    run_async_or(format, None, future)
}

/// Runs `future` on a new runtime; `own_failure` is the code of a failure
/// to start one (when the command's exit code is passed through).
fn run_async_or(
    format: Format,
    own_failure: Option<i32>,
    future: impl std::future::Future<Output = i32>,
) -> i32 {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            // A read of stdin (the shell) may still block a thread: do
            // not wait for it.
            runtime.shutdown_background();
            code
        }
        Err(err) => {
            let code = output::cli_error(format, &format!("cannot start a runtime: {err}"));
            own_failure.unwrap_or(code)
        }
    }
}

fn local_command(command: &LocalCommand, format: Format) -> i32 {
    match command {
        LocalCommand::Fault(fault) => fault::run(fault, format),
        LocalCommand::Status => {
            let state = local::running();
            match format {
                // The emulator's secret key stays in the 0600 state file:
                // where the daemon is, and the key's id, nothing more.
                Format::Json => output::json(&serde_json::json!({
                    "running": state.as_ref().map(local::BackendState::public_view)
                })),
                Format::Text => match &state {
                    Some(s) => outln!(
                        "running: pid {}, endpoint {}, image {}",
                        s.pid,
                        s.endpoint_url,
                        s.image_arn
                    ),
                    None => outln!("not running"),
                },
            }
            if state.is_some() {
                0
            } else {
                output::EXIT_NOT_RUNNING
            }
        }
        LocalCommand::Stop => match local::stop() {
            Ok(was_running) => {
                match format {
                    Format::Json => output::json(&serde_json::json!({ "stopped": was_running })),
                    Format::Text if was_running => outln!("stopped"),
                    Format::Text => outln!("not running"),
                }
                0
            }
            Err(err) => output::cli_error(format, &format!("cannot stop the local daemon: {err}")),
        },
    }
}
