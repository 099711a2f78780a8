//! `rayito sandbox ...`: each subcommand is one or two SDK calls.

use std::time::Duration;

use clap::Subcommand;
use futures_util::StreamExt as _;
use rayito::{AwsOptions, ListQuery, Sandbox, SandboxBuilder, SandboxError, SandboxState};
use serde_json::{Value, json};

use crate::output::{self, EXIT_FAILURE};
use crate::{Format, Global, cache, local, spinner};

/// The sandbox subcommands.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Creates a sandbox and keeps its access token in the cache directory.
    Create {
        /// Image ARN (on the local backend also a bare image name); else
        /// RAYITO_TEMPLATE, else (local only) `rayito-base`.
        #[arg(long)]
        template: Option<String>,
        /// Seconds of life (default 3600).
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// Makes the timeout movable with `sandbox set-timeout`, up to
        /// this lifetime less 60 s (300, 90s, 10m, 2h; at most 8h).
        #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
        max_lifetime: Option<Duration>,
        /// Metadata `key=value` (repeatable).
        #[arg(long, value_parser = parse_pair)]
        metadata: Vec<(String, String)>,
        /// An environment variable of every command, terminal and cell
        /// of the sandbox: K=V, or K for the value K has in rayito's
        /// environment (repeatable). It travels in the create call's
        /// payload: keep secrets out (give them per command, `exec -e`).
        #[arg(long = "env", short = 'e', value_name = "K[=V]", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// The working directory of every command, terminal and cell that
        /// gives none (default /home/user); it must exist in the sandbox.
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// A secret gateway NAME read from a TOML (or `.json`) file:
        /// `upstream`, `headers` (header name = secret name), `allow`
        /// (`[method, path]` pairs), `rate_per_minute`; sandbox code calls
        /// the URL it prints and never sees the secrets (repeatable, at
        /// most 8; docs/cli.md).
        #[arg(long = "gateway", value_name = "NAME=FILE.toml",
              value_parser = crate::gateway::parse_file_arg)]
        gateways: Vec<crate::gateway::GatewayArg>,
        /// A secret gateway NAME given as JSON, the fields of a
        /// `--gateway` file (repeatable).
        #[arg(long = "gateway-json", value_name = "NAME=JSON",
              value_parser = crate::gateway::parse_json_arg)]
        gateway_json: Vec<crate::gateway::GatewayArg>,
        /// EFS volumes, the egress connector and the execution role
        /// (boxed: the variant stays small).
        #[command(flatten)]
        volumes: Box<crate::sandbox_volumes::VolumeArgs>,
        /// An S3 bucket (or a prefix of it) mounted at PATH, read-only
        /// unless `:rw`; `overwrite` and `delete` let a writable mount
        /// replace and delete objects (repeatable, at most 4 with the
        /// volumes; the sandbox's execution role reads and writes the
        /// bucket, which the image must allow; docs/mounts.md).
        #[arg(long = "mount", value_name = "PATH=s3://BUCKET[/PREFIX][:ro|:rw[,overwrite][,delete]]",
              value_parser = crate::sandbox_mounts::parse_mount_arg)]
        mounts: Vec<(String, rayito::mounts::S3Mount)>,
        /// Emit the sandbox's lifecycle events into the events stack
        /// (`rayito events`): needs --logs or --log-group (the stack reads
        /// the events from the sandbox's logs).
        #[arg(long)]
        events: bool,
        /// Telemetry export (--telemetry ENDPOINT and its options; boxed:
        /// the variant stays small).
        #[command(flatten)]
        telemetry: Box<crate::telemetry::TelemetryArgs>,
        /// Also print the access token.
        #[arg(long)]
        show_token: bool,
        /// Send the sandbox's output to CloudWatch Logs, group
        /// `/rayito/<template name>` (on AWS it needs an execution role);
        /// read it with `sandbox logs`.
        #[arg(long)]
        logs: bool,
        /// The CloudWatch Logs group (implies --logs).
        #[arg(long, value_name = "GROUP")]
        log_group: Option<String>,
        /// The egress policy to start with (`sandbox network set` can
        /// replace it later only when it restricts something).
        #[command(flatten)]
        network: crate::network::PolicyArgs,
    },
    /// Lists sandboxes (not ended ones, unless `--state` says otherwise).
    List {
        /// Only sandboxes with this metadata `key=value` (repeatable; RUNNING ones only).
        #[arg(long, value_parser = parse_pair)]
        metadata: Vec<(String, String)>,
        /// Only sandboxes in this state (PENDING, RUNNING, SUSPENDING,
        /// SUSPENDED, TERMINATING, TERMINATED, in any case; repeatable).
        #[arg(long, value_parser = parse_state)]
        state: Vec<SandboxState>,
    },
    /// What the control plane says about a sandbox.
    Info {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// CPU, memory and disk use of a running sandbox (its agent's
    /// sample), once or every `--interval` seconds with `--follow`.
    Metrics {
        #[command(flatten)]
        id: crate::ids::SandboxId,
        /// Keep printing a sample every `--interval` seconds until stopped.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Seconds between samples with `--follow` (1 to 3600).
        #[arg(long, value_name = "SECS", default_value_t = 5,
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        interval: u64,
    },
    /// The sandbox's CloudWatch Logs stream (created with logging on),
    /// oldest first: `<ISO-ms-Z> <message>` lines, or JSON with --json.
    Logs(crate::logs::LogsArgs),
    /// Terminates sandboxes (one, several, or every one of this cache
    /// with --all) and forgets their tokens.
    Kill(crate::kill::KillArgs),
    /// Forgets the cached tokens of sandboxes that ended (TERMINATING,
    /// TERMINATED, or unknown to the backend), asking the backend about
    /// each.
    Prune {
        /// Only say which tokens would be forgotten.
        #[arg(long)]
        dry_run: bool,
    },
    /// Pauses (suspends) a sandbox.
    Pause {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Resumes a paused sandbox.
    Resume {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Runs a command in a login bash (`bash -l -c`, which reads
    /// /etc/profile and ~/.profile), streaming its output as bytes; exits
    /// with its exit code (rayito's own failures: 125; past --timeout:
    /// 124). SIGINT, SIGTERM and SIGHUP are passed on to it; a second one
    /// kills it.
    ///
    /// After `--`: several words are a program and its arguments, each
    /// passed exactly as given (quoted for bash: `ls "a b"` lists one
    /// file); one word is a bash command line (pipes, `;`, `$VAR` work).
    Exec {
        #[command(flatten)]
        id: crate::ids::SandboxId,
        /// Where and how it runs.
        #[command(flatten)]
        args: crate::exec::ExecArgs,
        /// The program and its arguments, or one bash command line (after `--`).
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// An interactive login bash on a terminal in the sandbox (resized
    /// with yours); exits with the shell's exit code (rayito's own
    /// failures: 125).
    Shell {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Runs a Python cell; prints its output, results and error.
    RunCode {
        /// The sandbox id, or the start of one of this cache's sandboxes' ids.
        id: String,
        #[command(flatten)]
        code: crate::code_source::CodeArgs,
        /// Write each image result (PNG, JPEG, SVG, PDF) to DIR as
        /// `result-<n>.<ext>` and print its path.
        #[arg(long, value_name = "DIR")]
        save_dir: Option<std::path::PathBuf>,
    },
    /// Moves files and directories in and out, streamed.
    #[command(subcommand)]
    Files(crate::files::FilesCommand),
    /// Prints the `export` lines that let another shell reach the
    /// sandbox: its id, the cache holding its access token, the backend
    /// and the AWS options given here (`eval "$(rayito sandbox connect ID)"`).
    Connect {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Reads or replaces a running sandbox's egress policy.
    #[command(subcommand)]
    Network(crate::network::NetworkCommand),
    /// Prints the URL that reaches a server listening on PORT inside the
    /// sandbox, through its proxy; every request must carry the headers
    /// `--show-headers` prints.
    Host {
        /// The sandbox id, or the start of one of this cache's sandboxes' ids.
        id: String,
        /// The port inside the sandbox (1 to 65535, not 9000).
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: u16,
        /// Also print the two headers every request must carry
        /// (`x-aws-proxy-port`, and `x-aws-proxy-auth`: a token for this
        /// port, valid for an hour; a secret).
        #[arg(long)]
        show_headers: bool,
    },
    /// The sandbox's secret gateways as its agent reports them: name,
    /// URL (inside the sandbox), port and the class of the last request a
    /// gateway failed.
    Gateways {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// The sandbox's EFS volumes as its agent reports them: mount path,
    /// state and the class of the last failure.
    Volumes {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// The sandbox's S3 mounts as its agent reports them: mount path,
    /// state (pending, mounted, failed) and the class of a failure.
    Mounts {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Moves the sandbox's timeout to DURATION from now (shorter or
    /// longer, up to the cap `create --max-lifetime` set).
    SetTimeout {
        /// The sandbox id, or the start of one of this cache's sandboxes' ids.
        id: String,
        /// From now: 300 (seconds), 90s, 10m, 2h, 1h30m.
        #[arg(value_parser = crate::duration::parse)]
        duration: Duration,
    },
}

impl SandboxCommand {
    /// The id of the existing sandbox the command is about, if it is
    /// about one.
    pub fn sandbox_id(&self) -> Option<String> {
        match self {
            SandboxCommand::Info { id }
            | SandboxCommand::Metrics { id, .. }
            | SandboxCommand::Pause { id }
            | SandboxCommand::Resume { id }
            | SandboxCommand::Exec { id, .. }
            | SandboxCommand::Shell { id }
            | SandboxCommand::Gateways { id }
            | SandboxCommand::Connect { id } => id.peek(),
            SandboxCommand::RunCode { id, .. } => {
                Some(crate::ids::complete(id).unwrap_or_else(|_| id.clone()))
            }
            SandboxCommand::Kill(args) => args.single(),
            SandboxCommand::Logs(args) => args.id(),
            SandboxCommand::Files(files) => files.sandbox_id(),
            SandboxCommand::Network(network) => network.sandbox_id(),
            _ => None,
        }
    }

    /// Whether the exit code is the command's own (`exec`, `shell`): then
    /// rayito's own failures exit [`output::EXIT_OWN`].
    pub fn passes_exit_code(&self) -> bool {
        matches!(
            self,
            SandboxCommand::Exec { .. } | SandboxCommand::Shell { .. }
        )
    }
}

/// The states `list --state` knows.
const STATES: [SandboxState; 6] = [
    SandboxState::Pending,
    SandboxState::Running,
    SandboxState::Suspending,
    SandboxState::Suspended,
    SandboxState::Terminating,
    SandboxState::Terminated,
];

/// `list --state`: one of [`STATES`], in any case. Anything else is
/// refused (it would match no sandbox, and `[]` would look like none).
pub(crate) fn parse_state(text: &str) -> Result<SandboxState, String> {
    STATES
        .into_iter()
        .find(|state| state.as_str().eq_ignore_ascii_case(text))
        .ok_or_else(|| {
            let known: Vec<&str> = STATES.iter().map(SandboxState::as_str).collect();
            format!("no such state: one of {}", known.join(", "))
        })
}

pub(crate) fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err("expected key=value".to_owned()),
    }
}

/// `exec -e`: `K=V`, or `K` alone for the value `K` has in rayito's own
/// environment (as `docker run -e K` does). A secret passed that way is
/// never on rayito's command line, which other users of the host can read
/// in `/proc/<pid>/cmdline`. An unset `K` is refused naming it (never a
/// value), not skipped: a typo should not run the command without it.
pub(crate) fn parse_env(text: &str) -> Result<(String, String), String> {
    if text.contains('=') {
        return parse_pair(text);
    }
    if text.is_empty() {
        return Err("expected K=V, or K for the value K has in rayito's environment".to_owned());
    }
    match std::env::var(text) {
        Ok(value) => Ok((text.to_owned(), value)),
        Err(std::env::VarError::NotPresent) => Err(format!(
            "{text} is not set in rayito's environment; export it or pass {text}=VALUE"
        )),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("{text} in rayito's environment is not UTF-8"))
        }
    }
}

/// Where the commands go: AWS, or the local daemon's emulated API.
pub(crate) struct Backend {
    pub(crate) local: Option<local::BackendState>,
    global: Global,
}

impl Backend {
    /// Whether `global` (or `RAYITO_BACKEND=local`) names the local backend.
    pub(crate) fn is_local(global: &Global) -> bool {
        global.local || std::env::var(rayito::BACKEND_ENV).is_ok_and(|v| v == "local")
    }

    pub(crate) fn resolve(global: &Global) -> std::io::Result<Backend> {
        let local = if Backend::is_local(global) {
            Some(local::ensure()?)
        } else {
            None
        };
        Ok(Backend {
            local,
            global: global.clone(),
        })
    }

    pub(crate) fn builder(&self) -> SandboxBuilder {
        Sandbox::builder().aws(self.aws_options())
    }

    /// A client of this backend.
    pub(crate) async fn client(&self) -> Result<rayito::Client, SandboxError> {
        rayito::Client::builder()
            .aws(self.aws_options())
            .build()
            .await
    }

    fn aws_options(&self) -> AwsOptions {
        match &self.local {
            Some(state) => {
                let mut options = AwsOptions::new()
                    .endpoint_url(&state.endpoint_url)
                    .region(&state.region)
                    .static_credentials(&state.access_key_id, state.secret_access_key.as_str());
                if let Some(s3) = &state.s3_endpoint_url {
                    options = options.s3_endpoint_url(s3);
                }
                options
            }
            None => {
                let mut options = AwsOptions::new();
                if let Some(region) = &self.global.region {
                    options = options.region(region);
                }
                if let Some(profile) = &self.global.profile {
                    options = options.profile(profile);
                }
                options
            }
        }
    }

    /// A handle on the sandbox `id`, with the token kept in the cache and
    /// the S3 staging RAYITO_TRANSFER_BUCKET configures (if any).
    pub(crate) async fn connect(&self, id: &str) -> Result<Sandbox, Failure> {
        let id = &crate::ids::complete(id)?;
        let Some(token) = cache::load_token(id) else {
            return Err(self.without_token(id).await);
        };
        let mut builder = self.builder();
        if let Some(staging) = rayito::transfer::S3Staging::from_env()? {
            builder = builder.staging(staging);
        }
        Ok(builder.connect(id, token).await?)
    }
}

impl Backend {
    /// Why the sandbox `id`, whose token this cache does not keep, cannot
    /// be reached: it does not exist (the control plane's word), it has
    /// ended, or it was created with another cache.
    async fn without_token(&self, id: &str) -> Failure {
        let info = match self.client().await {
            Ok(client) => client.get_info_by_id(id).await,
            Err(err) => Err(err),
        };
        match info {
            Err(err) => Failure::Sdk(err),
            Ok(info) if info.state == SandboxState::Terminated => {
                Failure::Sdk(SandboxError::sandbox_not_found(id))
            }
            Ok(_) => Failure::Cli(format!(
                "sandbox {id} exists but was not created with this cache ({}): its access token is kept only in the cache it was created with; run the command where that cache is, or point RAYITO_CACHE_DIR at it",
                cache::dir().display()
            )),
        }
    }
}

/// Why a subcommand failed.
pub(crate) enum Failure {
    Sdk(SandboxError),
    Cli(String),
    /// A usage error found past clap (exit 2; `sandbox exec` and `shell`: 125).
    Usage(String),
    /// Something does not exist, known without the SDK's error: the
    /// message and the SDK's kind that names it (`sandbox_not_found` for
    /// a sandbox the CLI knows is gone, `not_found` for a template).
    Missing(String, rayito::ErrorKind),
    /// An SDK error about a file, and the path in the sandbox it is about.
    SdkAt(SandboxError, String),
}

impl From<SandboxError> for Failure {
    fn from(err: SandboxError) -> Self {
        Failure::Sdk(err)
    }
}

/// The backend `global` names, or the exit code of the failure to reach
/// it (printed).
pub(crate) fn backend_or_exit(global: &Global) -> Result<Backend, i32> {
    Backend::resolve(global)
        .map_err(|err| output::cli_error(global.output, &format!("the local backend: {err}")))
}

/// A subcommand's exit code: its own, or its failure's (printed).
pub(crate) fn exit_code(format: Format, outcome: Result<i32, Failure>) -> i32 {
    match outcome {
        Ok(code) => code,
        Err(Failure::Sdk(err)) => output::error(format, &err),
        Err(Failure::Cli(message)) => output::cli_error(format, &message),
        Err(Failure::Usage(message)) => output::usage_error(format, &message),
        Err(Failure::Missing(message, kind)) => output::not_found(format, &message, kind),
        Err(Failure::SdkAt(err, path)) => output::error_at(format, &err, &path),
    }
}

/// Runs one sandbox subcommand; returns the exit code (for `exec` and
/// `shell`, rayito's own failures are [`output::EXIT_OWN`]).
pub async fn run(global: Global, command: SandboxCommand) -> i32 {
    let format = global.output;
    let own = command.passes_exit_code();
    let id = command.sandbox_id();
    let outcome = match (&id, stale_local(&global, &command)) {
        (_, Some(outcome)) => outcome,
        (id, None) => match Backend::resolve(&global) {
            Ok(backend) => {
                let outcome = dispatch(&backend, &global, command).await;
                if let (Some(id), Err(Failure::Sdk(err))) = (id, &outcome) {
                    crate::gone::forget_if_gone(&backend, id, err);
                }
                outcome
            }
            Err(err) => Err(Failure::Cli(format!("the local backend: {err}"))),
        },
    };
    match outcome {
        Ok(code) => code,
        Err(failure) => {
            let code = exit_code(format, Err(failure));
            if own { output::EXIT_OWN } else { code }
        }
    }
}

/// The answer to a command on a sandbox of the local backend that the CLI
/// knows is gone (no daemon runs, or the token is of a daemon that
/// stopped): said without starting a daemon only to hear it, and its
/// token forgotten. `None` when the backend must be asked.
fn stale_local(global: &Global, command: &SandboxCommand) -> Option<Result<i32, Failure>> {
    let id = &command.sandbox_id()?;
    // A start of an id this cache cannot complete: the command's own
    // usage error says why (exit 2), not a guess about a sandbox.
    if !Backend::is_local(global) || crate::ids::complete(id).is_err() {
        return None;
    }
    let reason = crate::gone::known_gone_locally(id, local::running().map(|s| s.pid))?;
    if cache::token_origin(id).is_some_and(|origin| origin != cache::Origin::Aws) {
        cache::remove_token(id);
    }
    if let SandboxCommand::Kill(..) = command {
        print_killed(global.output, id, false);
        return Some(Ok(0));
    }
    Some(Err(Failure::Missing(
        reason,
        rayito::ErrorKind::SandboxNotFound,
    )))
}

fn print_killed(format: Format, id: &str, killed: bool) {
    match format {
        Format::Json => output::json(&json!({ "sandbox_id": id, "killed": killed })),
        Format::Text if killed => outln!("killed {id}"),
        Format::Text => outln!("{id} was already gone"),
    }
}

async fn dispatch(
    backend: &Backend,
    global: &Global,
    command: SandboxCommand,
) -> Result<i32, Failure> {
    let format = global.output;
    match command {
        SandboxCommand::Create {
            template,
            timeout,
            max_lifetime,
            metadata,
            env,
            cwd,
            gateways,
            gateway_json,
            volumes,
            mounts,
            events,
            telemetry,
            show_token,
            logs,
            log_group,
            network,
        } => {
            let logging = match log_group {
                Some(group) => rayito::SandboxLogging::cloudwatch_group(group),
                None if logs => rayito::SandboxLogging::cloudwatch(),
                None => rayito::SandboxLogging::Disabled,
            };
            let options = CreateArgs {
                template,
                timeout,
                max_lifetime,
                metadata,
                env,
                cwd,
                gateways: gateways.into_iter().chain(gateway_json).collect(),
                volumes: *volumes,
                mounts,
                events,
                telemetry: *telemetry,
                show_token,
                logging,
                network: network.policy(),
            };
            create(backend, format, options).await
        }
        SandboxCommand::List { metadata, state } => list(backend, format, metadata, state).await,
        SandboxCommand::Info { id } => {
            let id = id.resolve()?;
            let info = backend.client().await?.get_info_by_id(&id).await?;
            let value = json!({
                "sandbox_id": info.sandbox_id,
                "state": info.state.as_str(),
                "state_reason": info.state_reason,
                "template": info.image_arn,
                "template_version": info.image_version,
                "started_at": output::unix(info.started_at),
                "terminated_at": output::unix(info.terminated_at),
                "max_duration_secs": info.max_duration.as_secs(),
            });
            match format {
                Format::Json => output::json(&value),
                Format::Text => out!("{}", crate::readable::info(&info)),
            }
            Ok(0)
        }
        SandboxCommand::Metrics {
            id,
            follow,
            interval,
        } => {
            let id = id.resolve()?;
            let sandbox = backend.connect(&id).await?;
            loop {
                let m = sandbox.metrics().current().await?;
                match format {
                    Format::Json => output::json(&metrics_json(&id, &m)),
                    Format::Text => outln!("{}", crate::readable::metrics(&m)),
                }
                if !follow {
                    return Ok(0);
                }
                tokio::time::sleep(std::time::Duration::from_secs(interval)).await;
            }
        }
        SandboxCommand::Logs(args) => crate::logs::run(backend, format, args).await,
        SandboxCommand::Kill(args) => crate::kill::run(backend, format, args).await,
        SandboxCommand::Prune { dry_run } => crate::prune::run(backend, format, dry_run).await,
        SandboxCommand::Pause { id } => {
            let id = id.resolve()?;
            let sandbox = backend.connect(&id).await?;
            let paused = spinner::around(format, "pausing", sandbox.pause()).await?;
            match format {
                Format::Json => output::json(&json!({ "sandbox_id": id, "paused": paused })),
                Format::Text => outln!("paused {id}"),
            }
            Ok(0)
        }
        SandboxCommand::Resume { id } => {
            let id = id.resolve()?;
            let client = backend.client().await?;
            spinner::around(format, "resuming", client.resume_by_id(&id)).await?;
            match format {
                Format::Json => output::json(&json!({ "sandbox_id": id, "resumed": true })),
                Format::Text => outln!("resumed {id}"),
            }
            Ok(0)
        }
        SandboxCommand::Exec { id, args, cmd } => {
            let sandbox = backend.connect(&id.resolve()?).await?;
            crate::exec::run(&sandbox, format, &command_line(&cmd), args).await
        }
        SandboxCommand::Shell { id } => {
            let sandbox = backend.connect(&id.resolve()?).await?;
            Ok(crate::shell::run(&sandbox).await?)
        }
        SandboxCommand::RunCode { id, code, save_dir } => {
            let (code, options) = code.read()?;
            run_code(backend, format, &id, &code, options, save_dir.as_deref()).await
        }
        SandboxCommand::Files(files) => crate::files::run(backend, format, files).await,
        SandboxCommand::Connect { id } => connect(backend, global, &id.resolve()?).await,
        SandboxCommand::Network(command) => crate::network::run(backend, format, command).await,
        SandboxCommand::Host {
            id,
            port,
            show_headers,
        } => crate::host::host(backend, format, &id, port, show_headers).await,
        SandboxCommand::Gateways { id } => {
            crate::gateway::list(backend, format, &id.resolve()?).await
        }
        SandboxCommand::Volumes { id } => {
            crate::sandbox_volumes::list(backend, format, &id.resolve()?).await
        }
        SandboxCommand::Mounts { id } => {
            crate::sandbox_mounts::list(backend, format, &id.resolve()?).await
        }
        SandboxCommand::SetTimeout { id, duration } => {
            crate::host::set_timeout(backend, format, &id, duration).await
        }
    }
}

/// What `sandbox create` was given.
struct CreateArgs {
    template: Option<String>,
    timeout: Option<u64>,
    max_lifetime: Option<Duration>,
    metadata: Vec<(String, String)>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    gateways: Vec<crate::gateway::GatewayArg>,
    volumes: crate::sandbox_volumes::VolumeArgs,
    mounts: Vec<(String, rayito::mounts::S3Mount)>,
    events: bool,
    telemetry: crate::telemetry::TelemetryArgs,
    show_token: bool,
    logging: rayito::SandboxLogging,
    network: Option<rayito::NetworkPolicy>,
}

async fn create(backend: &Backend, format: Format, args: CreateArgs) -> Result<i32, Failure> {
    let CreateArgs {
        template,
        timeout,
        max_lifetime,
        metadata,
        env,
        cwd,
        gateways,
        volumes,
        mounts,
        events,
        telemetry,
        show_token,
        logging,
        network,
    } = args;
    let mut builder = backend
        .builder()
        .metadata(metadata)
        .envs(env)
        .logging(logging);
    if let Some(policy) = network {
        builder = builder.network(policy);
    }
    if let Some(dir) = cwd {
        builder = builder.workdir(dir);
    }
    builder = volumes.apply(builder);
    for (path, mount) in mounts {
        builder = builder.mount(path, mount);
    }
    if events {
        builder =
            builder.events(crate::events::of(backend, rayito::events::DEFAULT_STACK_NAME).await?);
    }
    builder = telemetry.apply(builder);
    let gateways = crate::gateway::read_all(gateways)?;
    if !gateways.is_empty() {
        builder = crate::gateway::with_gateways(backend, builder, gateways)?;
    }
    let template = match &backend.local {
        Some(state) => Some(
            state.image_for(
                template
                    .or_else(|| std::env::var(rayito::TEMPLATE_ENV).ok())
                    .filter(|t| !t.is_empty())
                    .as_deref(),
            ),
        ),
        None => template,
    };
    if let Some(template) = &template {
        builder = builder.template(template);
    }
    if let Some(secs) = timeout {
        builder = builder.timeout(Duration::from_secs(secs));
    }
    if let Some(cap) = max_lifetime {
        builder = builder.max_lifetime(cap);
    }
    let sandbox = spinner::around(format, "creating a sandbox", builder.create()).await?;
    let gateways = crate::gateway::created_json(&sandbox);
    keep_and_print(
        backend,
        format,
        &sandbox,
        show_token,
        json!({ "template": template, "gateways": gateways }),
    )
    .await?;
    if format == Format::Text {
        crate::gateway::note_created(&sandbox);
    }
    Ok(0)
}

/// Keeps a new sandbox's access token in the cache (killing it when that
/// fails: it could not be reached again) and prints its id, with `fields`
/// beside it in JSON, and its token when asked.
pub(crate) async fn keep_and_print(
    backend: &Backend,
    format: Format,
    sandbox: &Sandbox,
    show_token: bool,
    fields: serde_json::Value,
) -> Result<(), Failure> {
    let token = sandbox.access_token().expose();
    let kept = cache::save_token(sandbox.id(), token).and_then(|_| match &backend.local {
        Some(state) => cache::mark_local(sandbox.id(), state.pid),
        None => Ok(()),
    });
    if let Err(err) = kept {
        // Without its token the sandbox cannot be reached again: do not
        // leave it running.
        let _ = sandbox.kill().await;
        return Err(Failure::Cli(format!(
            "could not keep the access token in {}: {err}",
            cache::dir().display()
        )));
    }
    match format {
        Format::Json => {
            let mut value = json!({ "sandbox_id": sandbox.id() });
            if let (Some(value), serde_json::Value::Object(extra)) = (value.as_object_mut(), fields)
            {
                value.extend(extra);
            }
            if show_token {
                value["access_token"] = json!(token);
            }
            output::json(&value);
        }
        Format::Text => {
            outln!("{}", sandbox.id());
            if show_token {
                outln!("access token: {token}");
            }
        }
    }
    Ok(())
}

async fn list(
    backend: &Backend,
    format: Format,
    metadata: Vec<(String, String)>,
    states: Vec<SandboxState>,
) -> Result<i32, Failure> {
    let mut query = ListQuery::new().metadata(metadata);
    if !states.is_empty() {
        query = query.states(states);
    }
    let mut stream = backend.client().await?.list(query);
    let mut summaries = Vec::new();
    while let Some(summary) = stream.next().await {
        summaries.push(summary?);
    }
    match format {
        Format::Json => {
            let rows = summaries
                .iter()
                .map(|summary| {
                    json!({
                        "sandbox_id": summary.sandbox_id,
                        "state": summary.state.as_str(),
                        "template": summary.template,
                        "started_at": output::unix(summary.started_at),
                        "metadata": summary.metadata,
                    })
                })
                .collect();
            output::json(&Value::Array(rows));
        }
        Format::Text => out!("{}", crate::readable::list(&summaries)),
    }
    Ok(0)
}

/// The bash command line of `exec`'s words: one word is a command line
/// already; several are a program and its arguments, each single-quoted
/// so that bash passes it exactly as given (the program too: a quoted
/// word is never a keyword, an alias or an assignment).
fn command_line(words: &[String]) -> String {
    match words {
        [line] => line.clone(),
        words => words
            .iter()
            .map(|word| single_quote(word))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// `word` in single quotes for bash (a `'` written as `'\''`).
fn single_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// A value for an `export NAME=value` line: as it is when bash reads it
/// literally, else single-quoted.
fn shell_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-+=/.,:@%".contains(&b));
    if plain {
        value.to_owned()
    } else {
        single_quote(value)
    }
}

/// `sandbox connect`: checks the sandbox can be reached with the kept
/// token, then prints what another shell needs (never the token).
async fn connect(backend: &Backend, global: &Global, id: &str) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let cache_dir = std::path::absolute(cache::dir())
        .unwrap_or_else(|_| cache::dir())
        .display()
        .to_string();
    let mut env = vec![
        (crate::ids::SANDBOX_ID_ENV, sandbox.id().to_owned()),
        ("RAYITO_CACHE_DIR", cache_dir),
    ];
    if backend.local.is_some() {
        env.push((rayito::BACKEND_ENV, "local".to_owned()));
    } else {
        if let Some(region) = &global.region {
            env.push(("AWS_REGION", region.clone()));
        }
        if let Some(profile) = &global.profile {
            env.push(("AWS_PROFILE", profile.clone()));
        }
    }
    match global.output {
        Format::Json => {
            let map: serde_json::Map<String, Value> = env
                .iter()
                .map(|(name, value)| ((*name).to_owned(), json!(value)))
                .collect();
            output::json(&json!({ "sandbox_id": sandbox.id(), "env": map }));
        }
        Format::Text => {
            for (name, value) in &env {
                outln!("export {name}={}", shell_value(value));
            }
        }
    }
    Ok(0)
}

/// A result's images: extension and bytes (PNG, JPEG and PDF come
/// base64 from the kernel; SVG as text).
fn images(result: &rayito::ExecutionResult) -> Vec<(&'static str, Vec<u8>)> {
    use base64::Engine as _;
    let decode = |b64: &Option<String>| {
        b64.as_ref().and_then(|text| {
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .ok()
        })
    };
    let mut out = Vec::new();
    for (ext, bytes) in [
        ("png", decode(&result.png)),
        ("jpeg", decode(&result.jpeg)),
        ("pdf", decode(&result.pdf)),
        ("svg", result.svg.as_ref().map(|s| s.as_bytes().to_vec())),
    ] {
        if let Some(bytes) = bytes {
            out.push((ext, bytes));
        }
    }
    out
}

/// Writes every image of `results` to `dir` (`result-<n>.<ext>`, `n`
/// counted from 1 over the results); returns the paths written.
fn save_images(
    dir: &std::path::Path,
    results: &[rayito::ExecutionResult],
) -> Result<Vec<String>, Failure> {
    std::fs::create_dir_all(dir)
        .map_err(|err| Failure::Cli(format!("cannot make {}: {err}", dir.display())))?;
    let mut saved = Vec::new();
    for (n, result) in results.iter().enumerate() {
        for (ext, bytes) in images(result) {
            let path = dir.join(format!("result-{}.{ext}", n + 1));
            std::fs::write(&path, bytes)
                .map_err(|err| Failure::Cli(format!("cannot write {}: {err}", path.display())))?;
            saved.push(path.display().to_string());
        }
    }
    Ok(saved)
}

async fn run_code(
    backend: &Backend,
    format: Format,
    id: &str,
    code: &str,
    options: rayito::RunCodeOptions,
    save_dir: Option<&std::path::Path>,
) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let execution = sandbox.run_code_with(code, options).await?;
    let saved = match save_dir {
        Some(dir) => save_images(dir, &execution.results)?,
        None => Vec::new(),
    };
    // Images as the kernel gave them: PNG, JPEG and PDF base64, SVG text.
    let results: Vec<Value> = execution
        .results
        .iter()
        .map(|r| {
            json!({
                "is_main_result": r.is_main_result,
                "text": r.text, "html": r.html, "markdown": r.markdown, "json": r.json,
                "png": r.png, "jpeg": r.jpeg, "svg": r.svg, "pdf": r.pdf,
            })
        })
        .collect();
    let error = execution
        .error
        .as_ref()
        .map(|e| json!({ "name": e.name, "value": e.value, "traceback": e.traceback }));
    match format {
        Format::Json => output::json(&json!({
            "results": results,
            "stdout": execution.logs.stdout,
            "stderr": execution.logs.stderr,
            "error": error,
            "execution_count": execution.execution_count,
            "saved": saved,
        })),
        Format::Text => {
            out!("{}", execution.logs.stdout.concat());
            eprint!("{}", execution.logs.stderr.concat());
            for result in &execution.results {
                if let Some(text) = &result.text {
                    outln!("{text}");
                } else if images(result).is_empty() {
                    outln!("<a result without a text form>");
                } else if save_dir.is_none() {
                    outln!("<an image: --save-dir DIR writes it, --output json carries it>");
                }
            }
            for path in &saved {
                outln!("saved {path}");
            }
            if let Some(e) = &execution.error {
                if e.traceback.is_empty() {
                    eprintln!("{}: {}", e.name, e.value);
                } else {
                    eprintln!("{}", e.traceback);
                }
            }
        }
    }
    Ok(if execution.error.is_some() {
        EXIT_FAILURE
    } else {
        0
    })
}

/// One metrics sample as a record (`mem_cache_bytes` only when the agent
/// reports it).
fn metrics_json(id: &str, m: &rayito::SandboxMetrics) -> Value {
    let mut value = json!({
        "sandbox_id": id,
        "timestamp": output::unix(Some(m.timestamp)),
        "cpu_count": m.cpu_count,
        "cpu_used_pct": (m.cpu_used_pct * 10.0).round() / 10.0,
        "mem_used_bytes": m.mem_used_bytes,
        "mem_total_bytes": m.mem_total_bytes,
        "disk_used_bytes": m.disk_used_bytes,
        "disk_total_bytes": m.disk_total_bytes,
    });
    if m.mem_cache_bytes != 0
        && let Value::Object(map) = &mut value
    {
        map.insert("mem_cache_bytes".to_owned(), json!(m.mem_cache_bytes));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn one_word_is_a_command_line_and_several_are_quoted_words() {
        assert_eq!(command_line(&words(&["ls | wc -l"])), "ls | wc -l");
        assert_eq!(command_line(&words(&["ls", "a b"])), "'ls' 'a b'");
        assert_eq!(
            command_line(&words(&["echo", "it's", "$HOME", ""])),
            "'echo' 'it'\\''s' '$HOME' ''"
        );
    }

    #[test]
    fn export_values_are_quoted_only_when_bash_would_read_them() {
        assert_eq!(shell_value("microvm-1a/b.c"), "microvm-1a/b.c");
        assert_eq!(shell_value("/tmp/my cache"), "'/tmp/my cache'");
        assert_eq!(shell_value(""), "''");
    }
}
