//! The per-sandbox key: `HMAC-SHA256(stack_key, "rayito.events.v1|" +
//! sandbox_id)`. The SDK derives it at create (it holds the stack key) and
//! sends it in the Configure section; the agent signs with it; the
//! pipeline derives it again to check a line.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The derivation's domain prefix.
pub const DOMAIN: &str = "rayito.events.v1|";

/// A sandbox's event key (32 bytes).
pub type SandboxKey = [u8; 32];

/// HMAC-SHA256 of `message` under `key` (any length: HMAC takes every key).
pub(crate) fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    for part in message {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The key of `sandbox_id`'s events under the stack key.
pub fn sandbox_key(stack_key: &[u8], sandbox_id: &str) -> SandboxKey {
    hmac_sha256(stack_key, &[DOMAIN.as_bytes(), sandbox_id.as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_hmac_of_the_domain_and_the_id() {
        // HMAC-SHA256("k", "rayito.events.v1|sbx"), computed independently
        // (python3 -c 'import hmac,hashlib;print(hmac.new(b"k",
        // b"rayito.events.v1|sbx",hashlib.sha256).hexdigest())').
        assert_eq!(
            hex::encode(sandbox_key(b"k", "sbx")),
            "0b8f754d27f291b7bbb81dcc02fca3f09be41e68ce269c29138088fde0fc181a"
        );
        assert_ne!(sandbox_key(b"k", "a"), sandbox_key(b"k", "b"));
        assert_ne!(sandbox_key(b"k", "a"), sandbox_key(b"j", "a"));
    }
}
