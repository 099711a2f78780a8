//! `rayito-agent`: a second implementation of the `rayito.v1` agent contract,
//! the server a sandbox image runs as PID 1.
//!
//! Start an agent with [`agent::Agent::start`] and drive it through its hooks
//! ([`hooks::post_hook`]) exactly as AWS does. The local emulator of the
//! Lambda MicroVMs API (crate `rayito-emulator`) runs one such agent per
//! MicroVM; the SDK's `local` feature embeds it.

/// The `rayito.v1` messages, clients and servers (crate `rayito-proto`).
/// Public so that tests and other clients of the contract can use them; the
/// SDK never re-exports them.
pub use rayito_proto::v1 as pb;

pub mod agent;
#[cfg(feature = "cli")]
pub mod cli;
pub mod code;
mod configure;
mod efs_volumes;
mod egress;
pub mod event_lines;
mod filesystem;
mod gate;
pub mod gateway;
mod health;
pub mod hooks;
mod isolation;
mod lifecycle;
mod lifecycle_events;
pub mod local_volumes;
mod metrics;
mod payload;
pub mod persist;
pub mod phase;
mod process;
mod pty;
mod run;
pub mod s3_mounts;
mod s3fuse;
pub mod sandbox;
mod server;
mod state;
mod telemetry_export;
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

/// What the emulator (crate `rayito-emulator`) needs of the agent's
/// internals to run a local image build's steps as a sandbox's processes:
/// the same namespaces, uids, cgroups and launcher a sandbox gets, so that
/// a build step sees what the sandbox will. Not an API: it changes with
/// the emulator, and nothing else may use it.
#[doc(hidden)]
pub mod for_emulator {
    pub use crate::isolation::cgroup::{CommandCgroup, SandboxCgroup};
    pub use crate::isolation::launch::{LaunchPlan, LaunchedChild, Stdio, in_shared_child, launch};
    pub use crate::isolation::layer_root::enter_staging;
    pub use crate::isolation::user::HostIds;
    pub use crate::isolation::{ChildSetup, SandboxMounts, SandboxUserNs, open_for_sandboxes};
}

/// The local backend's S3 mount helper, reachable only for its own tests
/// (`tests/agent_s3fuse.rs`) and benchmark; not an API.
#[doc(hidden)]
pub mod s3fuse_for_tests {
    pub use crate::s3fuse::hook::{TestDaemon, TestMountSpec, serve};
}

/// The workspace's one way a test skips (`SKIPPED: <test>: <reason>`, a
/// failure under `RAYITO_TEST_STRICT=1`), for the unit tests.
#[cfg(test)]
#[path = "../../tests/skip_support/mod.rs"]
mod skip_support;
