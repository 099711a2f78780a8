//! `rayito`: an async SDK for code sandboxes on AWS Lambda MicroVMs.
#![deny(missing_docs)]

pub mod error;

pub use error::{ErrorKind, SandboxError};

/// Generated `rayito.v1` clients and messages; private to the SDK.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    dead_code,
    missing_debug_implementations
)]
pub(crate) mod pb {
    tonic::include_proto!("rayito.v1");
}
