//! The MCP server's integration tests as one test binary: one module per
//! file of `tests/` (the files stay where they are, included by `#[path]`),
//! sharing one copy of the support code. Each file used to be a binary of
//! its own, which compiled its own copy of the support code and linked
//! again.
//!
//! They run under cargo-nextest (`.ci/run`, the README), which starts every
//! test in a process of its own. Run one file's tests by module path:
//! `cargo nextest run -p rayito-mcp --test mcp -E 'test(/^gateway::/)'`.

#[path = "../../../tests/sdk_support/moto.rs"]
mod moto;
#[path = "../../../tests/skip_support/mod.rs"]
mod skip_support;
// tests/sdk_support/moto.rs names it `super::skip`.
use skip_support as skip;
#[path = "../support/mod.rs"]
mod support;

#[path = "../emulated_lease.rs"]
mod emulated_lease;
#[path = "../gateway.rs"]
mod gateway;
#[path = "../process.rs"]
mod process;
#[path = "../stdio_local.rs"]
mod stdio_local;
