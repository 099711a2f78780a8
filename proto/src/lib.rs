//! `rayito-proto`: the `rayito.v1` wire contract between a client and the agent
//! that runs inside each sandbox, generated once for every crate of the
//! workspace.
//!
//! The `.proto` files in `rayito/v1/` are written for this project and checked,
//! field by field, against the published reference descriptor set
//! (`reference/`, see `tests/wire_contract.rs`). The Rust code generated from
//! them is checked in under `src/generated/`, so a user of the SDK compiles no
//! build script and needs no protobuf compiler; `tests/generated.rs` fails when
//! it is stale.
//!
//! [`tokens`] holds the text tokens of the contract that the `.proto` files
//! cannot type (status details, stream codes, end statuses, header names),
//! hand-written and shared by the SDK and the agent.
//!
//! Features: `client` (default) adds the `*_client` modules, `server` the
//! `*_server` modules. Messages are always present.
//!
//! This crate is an implementation detail of `rayito` and `rayito-agent`: the
//! SDK never exposes these types in its public API.

pub mod tokens;

/// Messages, clients and servers of the `rayito.v1` package.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    clippy::all,
    clippy::pedantic
)]
pub mod v1 {
    include!("generated/rayito.v1.rs");
    #[cfg(feature = "client")]
    include!("generated/rayito.v1.client.rs");
    #[cfg(feature = "server")]
    include!("generated/rayito.v1.server.rs");
}
