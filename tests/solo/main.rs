//! The SDK's integration tests that need a process of their own, as one
//! test binary: one module per file of `tests/` (the files stay where they
//! were, each included by `#[path]`), sharing one copy of
//! `tests/sdk_support`. Each file used to be a binary of its own, which
//! compiled its own copy of the support code and linked the whole stack
//! again (about 30 s of CI each).
//!
//! They run under cargo-nextest, the runner of `.ci/run` and the README,
//! which starts every test in a process of its own: that, not a binary of
//! its own, is what each of them needs. A file is here, not in `tests/sdk/`,
//! when one of its tests
//!
//! - installs the process-wide `tracing` subscriber (the canaries that
//!   search a whole TRACE log, `sdk_git`, `sdk_otel`, `sdk_retry_events`);
//! - re-runs this binary as a child for an ignored helper test
//!   (`local_exit`, `local_persistence`, `sdk_moto_logs`,
//!   `sdk_sandbox_logs`: the child is named by [`test_path`]);
//! - looks at every process, listening socket or fd of itself
//!   (`local_control_surfaces`, `local_kill`, `sdk_scale`,
//!   `sdk_secrets_inject`, `sdk_warm_spare`);
//! - counts on a process-wide limit (`sdk_template_quota`: the 10
//!   concurrent template builds of a process);
//! - injects the counted faults of the process-wide embedded local backend
//!   (`local_faults`), or deploys its events stack (`local_events`);
//! - builds and runs an example with cargo (`local_*_example`,
//!   `local_persistence`, `local_faults`).
//!
//! So plain `cargo test` must run them one at a time (`cargo test -p
//! rayito-tests --test solo -- --exact local_kill::...`); `cargo nextest
//! run -p rayito-tests --test solo` runs them all. Run one file's tests by
//! module path: `cargo nextest run -p rayito-tests --test solo -E
//! 'test(/^sdk_git::/)'`.

#[path = "../sdk_support/mod.rs"]
mod sdk_support;
use sdk_support::skip as skip_support;
#[path = "../example_support/mod.rs"]
mod example_support;

#[path = "../local_agent_example.rs"]
mod local_agent_example;
#[path = "../local_control_surfaces.rs"]
mod local_control_surfaces;
#[path = "../local_events.rs"]
mod local_events;
#[path = "../local_events_example.rs"]
mod local_events_example;
#[path = "../local_exit.rs"]
mod local_exit;
#[path = "../local_faults.rs"]
mod local_faults;
#[path = "../local_gateway_example.rs"]
mod local_gateway_example;
#[path = "../local_kill.rs"]
mod local_kill;
#[path = "../local_mounts_example.rs"]
mod local_mounts_example;
#[path = "../local_persistence.rs"]
mod local_persistence;
#[path = "../local_secrets_and_git_example.rs"]
mod local_secrets_and_git_example;
#[path = "../local_telemetry_example.rs"]
mod local_telemetry_example;
#[path = "../local_volumes_example.rs"]
mod local_volumes_example;
#[path = "../sdk_canary.rs"]
mod sdk_canary;
#[path = "../sdk_git.rs"]
mod sdk_git;
#[path = "../sdk_log_canary.rs"]
mod sdk_log_canary;
#[path = "../sdk_moto_logs.rs"]
mod sdk_moto_logs;
#[path = "../sdk_otel.rs"]
mod sdk_otel;
#[path = "../sdk_retry_events.rs"]
mod sdk_retry_events;
#[path = "../sdk_sandbox_logs.rs"]
mod sdk_sandbox_logs;
#[path = "../sdk_scale.rs"]
mod sdk_scale;
#[path = "../sdk_secrets_canary.rs"]
mod sdk_secrets_canary;
#[path = "../sdk_secrets_inject.rs"]
mod sdk_secrets_inject;
#[path = "../sdk_secrets_inject_canary.rs"]
mod sdk_secrets_inject_canary;
#[path = "../sdk_template_quota.rs"]
mod sdk_template_quota;
#[path = "../sdk_transfer_canary.rs"]
mod sdk_transfer_canary;
#[path = "../sdk_warm_spare.rs"]
mod sdk_warm_spare;

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
