//! `rayito sandbox network get|set ID`: the egress policy a running
//! sandbox's agent applies (docs/network.md), read or replaced whole.

use clap::{Args, Subcommand};
use rayito::{EgressEnforcement, NetworkPolicy, NetworkState};
use serde_json::{Value, json};

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::output;

/// The network subcommands.
#[derive(Debug, Subcommand)]
pub enum NetworkCommand {
    /// The policy the agent applies and how it enforces it (never the
    /// proxy's address or credentials).
    Get {
        #[command(flatten)]
        id: crate::ids::SandboxId,
    },
    /// Replaces the whole policy (no flag: unrestricted); connections
    /// opened afterwards follow it. Allow beats deny. The sandbox must
    /// have been created with a restricting policy.
    Set {
        #[command(flatten)]
        id: crate::ids::SandboxId,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

impl NetworkCommand {
    /// The sandbox whose policy is read or replaced.
    pub fn sandbox_id(&self) -> Option<String> {
        match self {
            NetworkCommand::Get { id } | NetworkCommand::Set { id, .. } => id.peek(),
        }
    }
}

/// An egress policy's flags (`sandbox create` and `sandbox network set`).
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// An allowed destination: IP, CIDR or hostname (`*.` for
    /// subdomains) (repeatable).
    #[arg(long, value_name = "DEST")]
    allow_out: Vec<String>,
    /// A denied destination: IP or CIDR (repeatable).
    #[arg(long, value_name = "DEST")]
    deny_out: Vec<String>,
    /// Deny everything --allow-out does not allow (`--deny-out 0.0.0.0/0`).
    #[arg(long)]
    deny_all: bool,
}

impl PolicyArgs {
    /// The policy the flags say (`None` when no flag was given).
    pub fn policy(self) -> Option<NetworkPolicy> {
        if self.allow_out.is_empty() && self.deny_out.is_empty() && !self.deny_all {
            return None;
        }
        let mut policy = NetworkPolicy::new()
            .allow_out(self.allow_out)
            .deny_out(self.deny_out);
        if self.deny_all {
            policy = policy.deny_internet();
        }
        Some(policy)
    }
}

fn enforcement(value: EgressEnforcement) -> &'static str {
    match value {
        EgressEnforcement::None => "none",
        EgressEnforcement::GuestRoutes => "guest_routes",
        EgressEnforcement::GuestRoutesAndProxy => "guest_routes_and_proxy",
        _ => "unspecified",
    }
}

fn state_json(id: &str, state: &NetworkState) -> Value {
    json!({
        "sandbox_id": id,
        "allow_out": state.allow_out,
        "deny_out": state.deny_out,
        "egress_proxy_configured": state.egress_proxy_configured,
        "enforcement": enforcement(state.enforcement),
        "local_proxy_port": state.local_proxy_port,
    })
}

fn print(format: Format, id: &str, state: &NetworkState) {
    match format {
        Format::Json => output::json(&state_json(id, state)),
        Format::Text => {
            let list = |entries: &[String]| {
                if entries.is_empty() {
                    "-".to_owned()
                } else {
                    entries.join(" ")
                }
            };
            outln!("allow_out: {}", list(&state.allow_out));
            outln!("deny_out: {}", list(&state.deny_out));
            outln!(
                "egress_proxy: {}",
                if state.egress_proxy_configured {
                    "configured"
                } else {
                    "none"
                }
            );
            outln!("enforcement: {}", enforcement(state.enforcement));
        }
    }
}

/// Runs one network subcommand.
pub(crate) async fn run(
    backend: &Backend,
    format: Format,
    command: NetworkCommand,
) -> Result<i32, Failure> {
    match command {
        NetworkCommand::Get { id } => {
            let id = id.resolve()?;
            let sandbox = backend.connect(&id).await?;
            print(format, &id, &sandbox.network().get().await?);
        }
        NetworkCommand::Set { id, policy } => {
            let id = id.resolve()?;
            let policy = policy.policy().unwrap_or_default();
            // Checked before connecting: a bad entry is named first.
            policy.check()?;
            let sandbox = backend.connect(&id).await?;
            print(format, &id, &sandbox.network().update(policy).await?);
        }
    }
    Ok(0)
}
