//! The CLI's integration tests as one test binary: one module per file of
//! `tests/` (the files stay where they are, included by `#[path]`), sharing
//! one copy of the support code. Each file used to be a binary of its own,
//! which compiled its own copy of the support code and linked again.
//!
//! They run under cargo-nextest (`.ci/run`, the README), which starts every
//! test in a process of its own. Run one file's tests by module path:
//! `cargo nextest run -p rayito-cli --test cli -E 'test(/^cli_exec::/)'`.

#[path = "../../../tests/sdk_support/moto.rs"]
mod moto;
#[path = "../support/session.rs"]
mod session;
#[path = "../../../tests/skip_support/mod.rs"]
mod skip_support;
// tests/sdk_support/moto.rs names it `super::skip`.
use skip_support as skip;

#[path = "../cli_answers.rs"]
mod cli_answers;
#[path = "../cli_exec.rs"]
mod cli_exec;
#[path = "../cli_expect.rs"]
mod cli_expect;
#[path = "../cli_fault.rs"]
mod cli_fault;
#[path = "../cli_gateway.rs"]
mod cli_gateway;
#[path = "../cli_habits.rs"]
mod cli_habits;
#[path = "../cli_image.rs"]
mod cli_image;
#[path = "../cli_local.rs"]
mod cli_local;
#[path = "../cli_secret.rs"]
mod cli_secret;
#[path = "../cli_setup.rs"]
mod cli_setup;
#[path = "../cli_terminal.rs"]
mod cli_terminal;
#[path = "../cli_volume.rs"]
mod cli_volume;
#[path = "../cli_volumes.rs"]
mod cli_volumes;
