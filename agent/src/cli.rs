//! `rayito-agent serve`: one agent for one sandbox, until SIGTERM/SIGINT or
//! `/terminate`.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::agent::{Agent, AgentConfig};

const USAGE: &str = "usage: rayito-agent serve [--grpc-addr 127.0.0.1:8080] [--hooks-addr 127.0.0.1:9000] [--root DIR]";

/// Parses `serve`'s flags (everything after the subcommand).
fn parse(args: &[String]) -> Result<AgentConfig, String> {
    let mut config = AgentConfig {
        grpc_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
        hooks_addr: SocketAddr::from(([127, 0, 0, 1], 9000)),
        ..AgentConfig::default()
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--grpc-addr" => {
                config.grpc_addr = value
                    .parse()
                    .map_err(|_| format!("bad --grpc-addr\n{USAGE}"))?
            }
            "--hooks-addr" => {
                config.hooks_addr = value
                    .parse()
                    .map_err(|_| format!("bad --hooks-addr\n{USAGE}"))?
            }
            "--root" => {
                config.root = PathBuf::from(value);
                config.remove_root_on_drop = false;
            }
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(config)
}

/// Runs `serve` with its flags; returns the process exit code.
pub fn serve(args: &[String]) -> i32 {
    let config = match parse(args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{msg}");
            return 2;
        }
    };
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
