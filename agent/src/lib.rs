//! `rayito-agent`: a second implementation of the `rayito.v1` agent contract,
//! and a local emulator of the Lambda MicroVMs control plane and its proxy.
//!
//! The SDK embeds both as its local backend; the binary serves them on their own.
//! Start an agent with [`agent::Agent::start`] and drive it through its hooks
//! ([`hooks::post_hook`]) exactly as AWS does.

/// The `rayito.v1` messages, clients and servers (crate `rayito-proto`).
/// Public so that tests and other clients of the contract can use them; the
/// SDK never re-exports them.
pub use rayito_proto::v1 as pb;

pub mod agent;
#[cfg(feature = "cli")]
pub mod cli;
pub mod code;
mod configure;
mod egress;
#[cfg(feature = "emulator")]
pub mod emulator;
mod filesystem;
mod gate;
mod health;
pub mod hooks;
mod isolation;
mod lifecycle;
mod metrics;
mod payload;
pub mod persist;
pub mod phase;
mod process;
mod pty;
pub mod sandbox;
mod server;
mod state;
pub mod template;
mod text;
pub mod token;
mod trace_context;
mod transfer;

pub use agent::{Agent, AgentConfig};
pub use health::{AGENT_VERSION, KERNEL_FAILURE_HEADER};
pub use sandbox::SandboxLimits;

/// The agent's own run payload parser, reachable only so that the SDK's
/// round-trip test can parse what the SDK builds; not an API.
#[doc(hidden)]
pub mod run_payload {
    pub use crate::payload::{LifecyclePlan, OnTimeout, RunPayload, parse};
}
