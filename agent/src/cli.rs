//! The `rayito-agent` command line (clap): `serve` runs one agent for one
//! sandbox, until SIGTERM/SIGINT or `/terminate`. (The MicroVMs emulator is
//! its own binary, `rayito-emulator`, in crate `rayito-emulator`; it reuses
//! [`LimitArgs`] and [`log_filter`].)

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, Parser, Subcommand};

use crate::agent::{Agent, AgentConfig};
use crate::sandbox::{DEFAULT_MEMORY_MAX_BYTES, DEFAULT_PIDS_MAX, SandboxLimits};

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "rayito-agent",
    version,
    about = "The rayito.v1 agent: the server of one sandbox"
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve one agent (gRPC h2c and hooks) until SIGTERM, Ctrl-C or `/terminate`.
    Serve(ServeArgs),
}

/// `rayito-agent serve`'s flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// gRPC (h2c) address. A MicroVM image passes 0.0.0.0:8080 (the
    /// MicroVMs proxy reaches it over the VM's network; every call but
    /// Health needs the access token `/run` installs).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub grpc_addr: SocketAddr,
    /// Hooks (HTTP/1.1) address; loopback only (AWS calls the hooks on
    /// 127.0.0.1, and `/run` installs the access token).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    pub hooks_addr: SocketAddr,
    /// Sandbox root directory, kept at exit (default: a fresh temporary one,
    /// removed at exit).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The sandbox's limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Directory of the image's template files (`template.json`,
    /// `template-env.json`); an image built from a template passes
    /// `/etc/rayito`. Default: no template.
    #[arg(long, value_name = "DIR")]
    pub template_dir: Option<PathBuf>,
}

/// The limits of a sandbox (`serve`) or of each MicroVM (`rayito-emulator`).
#[derive(Clone, Copy, Debug, Args)]
pub struct LimitArgs {
    /// Most processes and threads of one sandbox at once (its cgroup's
    /// pids.max); 0 for no limit.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PIDS_MAX)]
    pub pids_max: u64,
    /// Most memory of one sandbox, in MiB (its cgroup's memory.max, no
    /// swap); 0 for no limit.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MEMORY_MAX_BYTES >> 20)]
    pub memory_max_mib: u64,
}

impl LimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> SandboxLimits {
        SandboxLimits {
            pids_max: (self.pids_max > 0).then_some(self.pids_max),
            memory_max_bytes: (self.memory_max_mib > 0)
                .then(|| self.memory_max_mib.saturating_mul(1024 * 1024)),
        }
    }
}

impl ServeArgs {
    /// The agent configuration these flags describe.
    pub fn config(&self) -> AgentConfig {
        let mut config = AgentConfig {
            grpc_addr: self.grpc_addr,
            hooks_addr: self.hooks_addr,
            limits: self.limits.limits(),
            template_dir: self.template_dir.clone(),
            grpc_beyond_loopback: !self.grpc_addr.ip().is_loopback(),
            ..AgentConfig::default()
        };
        if let Some(root) = &self.root {
            config.root = root.clone();
            config.remove_root_on_drop = false;
        }
        config
    }
}

/// Crates whose logs name the hosts the agent connects to, capped at INFO
/// whatever `RUST_LOG` says: hyper-util's connector logs the host at DEBUG
/// and its pool at TRACE, and on AWS an S3-staged transfer's host is
/// `<bucket>.s3.<region>.amazonaws.com`. No log line may hold a bucket.
const QUIET_TARGETS: [&str; 1] = ["hyper_util"];

/// The agent's log filter: `RUST_LOG` (default `info`), with
/// [`QUIET_TARGETS`] capped at INFO.
pub fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    let mut filter = rust_log
        .and_then(|spec| tracing_subscriber::EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    for target in QUIET_TARGETS {
        if let Ok(directive) = format!("{target}=info").parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Parses `args` (the program name first); on failure returns the exit code
/// after printing the message: 0 for `--help`/`--version`, 2 for bad
/// arguments (an unknown flag is reported as `unknown flag <flag>`).
pub fn parse<I, T>(args: I) -> Result<Cli, i32>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    parse_as(args)
}

/// [`parse`] for another command line `P` (the `rayito-emulator` binary's),
/// with the same messages and exit codes.
pub fn parse_as<P, I, T>(args: I) -> Result<P, i32>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    P::try_parse_from(args).map_err(|err| {
        let unknown = match (err.kind(), err.get(ContextKind::InvalidArg)) {
            (ErrorKind::UnknownArgument, Some(ContextValue::String(flag))) => Some(flag.clone()),
            _ => None,
        };
        match unknown {
            Some(flag) => {
                let usage = err
                    .get(ContextKind::Usage)
                    .map(|u| u.to_string())
                    .unwrap_or_default();
                eprintln!("unknown flag {flag}\n{usage}");
            }
            None => {
                let _ = err.print();
            }
        }
        err.exit_code()
    })
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Serve(args) => serve(&args),
    }
}

/// Runs `serve`; returns the process exit code.
pub fn serve(args: &ServeArgs) -> i32 {
    let config = args.config();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rayito-agent: cannot start the runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        // Watch SIGTERM before announcing the ports, so that a caller that
        // signals right after the announcement is handled.
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("rayito-agent: cannot watch SIGTERM: {e}");
                    return 1;
                }
            };
        let agent = match Agent::start(config).await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("rayito-agent: cannot start: {e}");
                return 1;
            }
        };
        // One machine-readable line on stdout (ports may have been 0).
        println!(
            "rayito-agent listening grpc={} hooks={}",
            agent.grpc_addr(),
            agent.hooks_addr()
        );
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = agent.terminated() => {}
        }
        agent.shutdown().await;
        0
    })
}

#[cfg(test)]
mod log_filter_tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What reaches a subscriber with `log_filter(rust_log)`.
    fn logged(rust_log: Option<&str>) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::registry()
            .with(super::log_filter(rust_log))
            .with(tracing_subscriber::fmt::layer().with_writer(move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "hyper_util::client::legacy::connect::http", "host-at-debug");
            tracing::trace!(target: "hyper_util::client::legacy::pool", "host-at-trace");
            tracing::info!(target: "hyper_util::client::legacy::pool", "pool-at-info");
            tracing::trace!(target: "rayito_agent::transfer", "agent-at-trace");
        });
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn hyper_util_stays_at_info_whatever_rust_log_says() {
        for spec in [
            Some("trace"),
            Some("hyper_util=trace"),
            Some("debug,hyper_util=trace"),
        ] {
            let log = logged(spec);
            assert!(
                !log.contains("host-at-debug") && !log.contains("host-at-trace"),
                "{spec:?}: {log}"
            );
            assert!(log.contains("pool-at-info"), "{spec:?}: {log}");
        }
        assert!(
            logged(Some("trace")).contains("agent-at-trace"),
            "the agent's own TRACE stays"
        );
        let default = logged(None);
        assert!(default.contains("pool-at-info") && !default.contains("agent-at-trace"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(line: &str) -> Cli {
        Cli::try_parse_from(line.split_whitespace()).unwrap()
    }

    #[test]
    fn serve_flags_and_defaults() {
        let Command::Serve(args) = parse_ok("rayito-agent serve").command;
        assert_eq!(args.grpc_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(args.hooks_addr.to_string(), "127.0.0.1:9000");
        assert!(args.config().remove_root_on_drop);
        let Command::Serve(args) =
            parse_ok("rayito-agent serve --grpc-addr 127.0.0.1:0 --root /tmp/x").command;
        assert_eq!(args.grpc_addr.to_string(), "127.0.0.1:0");
        let config = args.config();
        assert_eq!(config.root, PathBuf::from("/tmp/x"));
        assert!(!config.remove_root_on_drop);
        assert_eq!(config.template_dir, None);
        assert!(!config.grpc_beyond_loopback);
        // A MicroVM image's command line: gRPC on every address.
        let Command::Serve(args) = parse_ok("rayito-agent serve --grpc-addr 0.0.0.0:8080").command;
        assert!(args.config().grpc_beyond_loopback);
        let Command::Serve(args) =
            parse_ok("rayito-agent serve --template-dir /etc/rayito").command;
        assert_eq!(
            args.config().template_dir,
            Some(PathBuf::from(crate::template::IMAGE_TEMPLATE_DIR))
        );
    }

    #[test]
    fn bad_arguments_exit_2() {
        assert_eq!(
            parse(["rayito-agent", "serve", "--nope", "x"]).unwrap_err(),
            2
        );
        assert_eq!(
            parse(["rayito-agent", "serve", "--grpc-addr", "nope"]).unwrap_err(),
            2
        );
        assert_eq!(parse(["rayito-agent"]).unwrap_err(), 2);
    }
}
