//! The emulator's integration tests as one test binary: one module per
//! file of `tests/` (the files stay where they are, included by `#[path]`),
//! sharing one copy of the support code (the agent's included). Each file
//! used to be a binary of its own, which compiled its own copy of the
//! support code and linked the emulator and the agent again.
//!
//! They run under cargo-nextest (`.ci/run`, the README), which starts every
//! test in a process of its own: the tests that install a process-wide
//! `tracing` subscriber (`agent_persist`, `emulator_s3`) or measure the
//! whole process's peak memory (`agent_restore_attacks`) keep that process
//! to themselves. Run one file's tests by module path: `cargo nextest run
//! -p rayito-emulator --test emulator -E 'test(/^emulator_s3::/)'`.

#[path = "../emulator_support/mod.rs"]
mod emulator_support;
#[path = "../../../tests/skip_support/mod.rs"]
mod skip_support;
#[path = "../../../agent/tests/support/mod.rs"]
mod support;

#[path = "../agent_persist.rs"]
mod agent_persist;
#[path = "../agent_restore_attacks.rs"]
mod agent_restore_attacks;
#[path = "../agent_restore_fidelity.rs"]
mod agent_restore_fidelity;
#[path = "../agent_transfer.rs"]
mod agent_transfer;
#[path = "../emulator_aws_like.rs"]
mod emulator_aws_like;
#[path = "../emulator_control.rs"]
mod emulator_control;
#[path = "../emulator_efs.rs"]
mod emulator_efs;
#[path = "../emulator_events.rs"]
mod emulator_events;
#[path = "../emulator_http.rs"]
mod emulator_http;
#[path = "../emulator_images.rs"]
mod emulator_images;
#[path = "../emulator_latency.rs"]
mod emulator_latency;
#[path = "../emulator_lifecycle.rs"]
mod emulator_lifecycle;
#[path = "../emulator_logs.rs"]
mod emulator_logs;
#[path = "../emulator_proxy.rs"]
mod emulator_proxy;
#[path = "../emulator_retention.rs"]
mod emulator_retention;
#[path = "../emulator_roots.rs"]
mod emulator_roots;
#[path = "../emulator_s3.rs"]
mod emulator_s3;
#[path = "../emulator_sts.rs"]
mod emulator_sts;

/// The name libtest gives test `name` of the module whose `module_path!()`
/// is `module_path`: the path without the crate's name, which is what a
/// child run of this binary passes with `--exact`.
pub fn test_path(module_path: &str, name: &str) -> String {
    let module = module_path
        .split_once("::")
        .map_or("", |(_crate_name, module)| module);
    if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    }
}
