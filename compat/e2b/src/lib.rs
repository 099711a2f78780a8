//! `rayito-e2b`: the E2B-shaped API over the `rayito` SDK.
//!
//! Not written yet: this crate only holds its place in the workspace. The
//! E2B surface (options, exception classes, warnings for ignored options) is
//! specified in `docs/e2b-compat.md` and lands with its own issue.
#![deny(missing_docs)]

pub use rayito::{ErrorKind, SandboxError};
