//! The wire contract's tests as one test binary: one module per file of
//! `tests/` (the files stay where they are, included by `#[path]`); each
//! file used to be a binary of its own, linked apart. Run one file's tests
//! by module path: `cargo test -p rayito-proto --test proto generated::`.

#[path = "../generated.rs"]
mod generated;
#[path = "../tokens.rs"]
mod tokens;
#[path = "../wire_contract.rs"]
mod wire_contract;
