//! The SDK's integration tests that need no process of their own, as one
//! test binary: one module per former `tests/<name>.rs` (`sdk_` dropped
//! from the module name), sharing one copy of `tests/sdk_support`. One
//! binary compiles the support code and the generic code of tokio, tonic
//! and the AWS SDK once and links the whole stack once, where each file
//! used to do both; and its tests share the machine's cores, where a file
//! with one long test used to leave a core idle until it ended.
//!
//! Run one file's tests by module path: `cargo test -p rayito-tests --test sdk
//! commands::`.
//!
//! A test file stays in `tests/` (in the `solo` binary, tests/solo/main.rs)
//! when it needs a process of its own (nextest gives every test one):
//!
//! - it installs the process-wide `tracing` subscriber (the canaries that
//!   search a whole TRACE log, `sdk_git`, `sdk_otel`, `sdk_retry_events`):
//!   there is one per process, and every other test's log lines would
//!   reach it;
//! - it re-runs its own binary as a child for an ignored helper test
//!   (`local_exit`, `local_persistence`, `sdk_moto_logs`,
//!   `sdk_sandbox_logs`);
//! - it looks at every process, listening socket or fd of the host or of
//!   itself (`local_control_surfaces`, `local_kill`, `sdk_scale`,
//!   `sdk_secrets_inject`, `sdk_warm_spare`), which other tests' sandboxes
//!   would add to;
//! - it counts on a process-wide limit no other test touches
//!   (`sdk_template_quota`: the 10 concurrent template builds of a
//!   process);
//! - it builds an example with cargo while it runs
//!   (`local_secrets_and_git_example`, `local_persistence`,
//!   `local_faults`), a load the timing bounds of the tests here are not
//!   sized for;
//! - it injects the counted faults of the process-wide embedded local
//!   backend (`local_faults`: throttling, capacity, quota, proxy
//!   statuses), which every other test's calls would meet.

#[path = "../sdk_support/mod.rs"]
mod sdk_support;
use sdk_support::skip as skip_support;

mod agent;
mod agent_custom;
mod aws_options;
mod background;
mod charts;
mod code_output;
mod code_surface;
mod commands;
mod configure_once;
mod connectors;
mod cpu_limit;
mod dashboard;
mod dashboard_browser;
mod dashboard_hosted;
mod doc_refs;
mod docs_index;
mod efs_volumes_stack;
mod errors;
mod errors_canary;
mod errors_kinds;
mod errors_map_agent;
mod errors_map_aws;
mod errors_map_grpc;
mod errors_props;
mod events;
mod events_aws;
mod events_deploy;
mod events_lambda;
mod events_stack;
mod files_options;
mod files_stream;
mod files_watch;
mod fleet;
mod future_sizes;
mod gateway;
mod hardening;
mod image_publish;
mod image_sizes;
mod image_variants;
mod index;
mod javascript;
mod keep_on_failure;
mod lifecycle;
mod list_resume;
mod local_user;
mod managed_lifecycle;
mod metrics;
mod moto;
mod moto_artifacts;
mod moto_transfers;
mod mounts;
mod network;
mod opencode_runtime;
mod path_races;
mod payload_roundtrip;
mod permissions;
mod persistence;
mod pool;
mod pool_dynamodb;
mod ports;
mod props;
mod pty;
mod quickstart;
mod quota_alerts;
mod quotas;
mod reconnect;
mod reconnect_code;
mod reconnect_streams;
mod reference_interop;
mod repo_layout;
mod request_shapes;
mod retries;
mod s3_mounts_stack;
mod secrets;
mod send_bounds;
mod setup;
mod shared_control;
mod stacks;
mod staged_io;
mod telemetry;
mod template_build;
mod template_gate;
mod templates;
mod timeouts;
mod tls;
mod transfers;
mod volumes;
mod volumes_aws;
mod workdir;
