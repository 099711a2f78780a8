//! `rayito-agent`: a second implementation of the `rayito.v1` agent contract,
//! and a local emulator of the Lambda MicroVMs control plane and its proxy.
//!
//! The SDK embeds both as its local backend; the binary serves them on their own.

/// Generated `rayito.v1` messages, clients and servers. Public so that tests and
/// other clients of the contract can use them; the SDK never re-exports them.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("rayito.v1");
}

pub mod code;
pub mod emulator;
pub mod phase;
pub mod sandbox;
