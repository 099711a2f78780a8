//! Secrets in AWS Secrets Manager (docs/secrets.md): [`SecretStore`]
//! writes and describes them, [`SecretCache`] reads their values for
//! sandboxes.
//!
//! A secret's value never appears in an error, a `Debug` or a log line,
//! and neither does its name (names are confidential selectors: they can
//! say whose key it is). AWS's own error messages are never kept (they can
//! name the secret).
//!
//! Only with the `secrets` cargo feature.

mod cache;
mod client;
mod entries;
mod errors;
pub(crate) mod inject;
#[cfg(test)]
mod mock_tests;
mod reference;
mod store;

pub use cache::{DEFAULT_MAX_ENTRIES, DEFAULT_TTL, MAX_TTL, SecretCache, SecretCacheOptions};
pub use reference::{AWSCURRENT, DEFAULT_PREFIX, SecretRef};
pub use store::{
    MAX_DESCRIPTION_CHARS, MAX_VALUE_BYTES, METADATA_PREFIX, SecretInfo, SecretPage, SecretStore,
    SecretStoreOptions, VERSION_TOKEN_PREFIX,
};

/// The SDK's own, redacted event of one Secrets Manager call (target
/// `rayito::secrets`): the operation and whether it succeeded, never a
/// name or a value.
pub(crate) fn event(operation: &'static str, ok: bool) {
    tracing::debug!(target: "rayito::secrets", operation, ok, "secrets manager call");
}
