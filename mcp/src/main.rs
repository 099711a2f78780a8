//! `rayito-mcp`: a Model Context Protocol server that gives an AI agent
//! one code sandbox (docs/mcp.md). stdio by default; `--http` serves
//! streamable HTTP on loopback. Settings come from the environment only;
//! stdout is the protocol's, every log line goes to stderr.

mod auth;
mod failure;
mod gateways;
mod http;
mod lease;
mod logging;
mod settings;
mod time;
mod tools;
mod truncate;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use rmcp::ServiceExt as _;

use crate::lease::Lease;
use crate::settings::Settings;
use crate::tools::SandboxTools;

/// The exit code of a refused setting or argument.
const USAGE: u8 = 2;

/// A Model Context Protocol server that gives an AI agent one code sandbox.
///
/// Settings come from the environment (docs/mcp.md): RAYITO_BACKEND,
/// RAYITO_TEMPLATE, RAYITO_TEMPLATE_VERSION, RAYITO_EXECUTION_ROLE_ARN,
/// RAYITO_MCP_TIMEOUT_SECONDS, RAYITO_MCP_IDLE_SECONDS, RAYITO_MCP_LOG_LEVEL.
#[derive(Debug, Parser)]
#[command(name = "rayito-mcp", version)]
struct Args {
    /// Serve streamable HTTP at http://<host>:<port>/mcp instead of stdio.
    #[arg(long)]
    http: bool,
    /// The address to listen on with --http (default 127.0.0.1; never a
    /// wildcard).
    #[arg(long)]
    host: Option<String>,
    /// The port to listen on with --http (default 8000; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let listen = match http::Listen::from_args(args.http, args.host, args.port) {
        Ok(listen) => listen,
        Err(message) => {
            eprintln!("rayito-mcp: {message}");
            return ExitCode::from(USAGE);
        }
    };
    // `--http`'s token, when the user gives one (else one is made).
    let token = match (listen, std::env::var(auth::TOKEN_ENV)) {
        (Some(_), Ok(value)) => match auth::Token::given(&value) {
            Ok(token) => Some(token),
            Err(message) => {
                eprintln!("rayito-mcp: {message}");
                return ExitCode::from(USAGE);
            }
        },
        _ => None,
    };
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("rayito-mcp: {err}");
            return ExitCode::from(USAGE);
        }
    };
    logging::init(settings.log_level);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("rayito-mcp: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let lease = Arc::new(Lease::new(settings));
    let served = runtime.block_on(async {
        let served = match listen {
            None => serve_stdio(lease.clone()).await,
            Some(listen) => http::serve(listen, token, lease.clone()).await,
        };
        // However the server stopped (stdin closed, a signal, an error),
        // its sandbox is killed.
        lease.shutdown().await;
        served
    });
    // Not a plain drop: that waits for the blocking thread that reads
    // stdin, which a client that sent SIGTERM may never close.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::FAILURE
        }
    }
}

/// Serves MCP on stdin and stdout until the client closes stdin or a
/// signal (SIGTERM, SIGINT) arrives.
async fn serve_stdio(lease: Arc<Lease>) -> Result<(), String> {
    let running = SandboxTools::new(lease)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    tracing::info!("serving MCP on stdio");
    let cancel = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => {
            tracing::info!(reason = ?quit.ok(), "the client closed the connection");
        }
        signal = shutdown_signal() => {
            tracing::info!(signal, "stopping");
            cancel.cancel();
        }
    }
    Ok(())
}

/// The name of the first of SIGTERM and SIGINT to arrive.
pub(crate) async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the process ends the default way.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
