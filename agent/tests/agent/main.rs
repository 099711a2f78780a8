//! The agent's integration tests as one test binary: one module per file
//! of `tests/` (the files stay where they are, included by `#[path]`),
//! sharing one copy of the support code. Each file used to be a binary of
//! its own, which compiled its own copy of the support code and linked the
//! agent again.
//!
//! They run under cargo-nextest (`.ci/run`, the README), which starts every
//! test in a process of its own, so the tests that install a process-wide
//! `tracing` subscriber or measure the whole process keep that process to
//! themselves. Run one file's tests by module path: `cargo nextest run -p
//! rayito-agent --test agent -E 'test(/^agent_files::/)'`.

#[path = "../code_support/mod.rs"]
mod code_support;
#[path = "../../../tests/hello_server/mod.rs"]
mod hello_server;
#[path = "../../../tests/skip_support/mod.rs"]
mod skip_support;
#[path = "../support/mod.rs"]
mod support;

#[path = "../agent_cli.rs"]
mod agent_cli;
#[path = "../agent_configure.rs"]
mod agent_configure;
#[path = "../agent_containment.rs"]
mod agent_containment;
#[path = "../agent_dependencies.rs"]
mod agent_dependencies;
#[path = "../agent_efs_volumes.rs"]
mod agent_efs_volumes;
#[path = "../agent_egress.rs"]
mod agent_egress;
#[path = "../agent_files.rs"]
mod agent_files;
#[path = "../agent_gateway.rs"]
mod agent_gateway;
#[path = "../agent_hardening.rs"]
mod agent_hardening;
#[path = "../agent_health.rs"]
mod agent_health;
#[path = "../agent_image_layer.rs"]
mod agent_image_layer;
#[path = "../agent_lifecycle.rs"]
mod agent_lifecycle;
#[path = "../agent_lifecycle_events.rs"]
mod agent_lifecycle_events;
#[path = "../agent_prestart.rs"]
mod agent_prestart;
#[path = "../agent_process.rs"]
mod agent_process;
#[path = "../agent_s3_mounts.rs"]
mod agent_s3_mounts;
#[path = "../agent_s3fuse.rs"]
mod agent_s3fuse;
#[path = "../agent_shared_dirs.rs"]
mod agent_shared_dirs;
#[path = "../agent_telemetry.rs"]
mod agent_telemetry;
#[path = "../agent_template.rs"]
mod agent_template;
#[path = "../code_contexts.rs"]
mod code_contexts;
#[path = "../code_execute.rs"]
mod code_execute;
#[path = "../code_javascript.rs"]
mod code_javascript;
#[path = "../code_reattach.rs"]
mod code_reattach;
