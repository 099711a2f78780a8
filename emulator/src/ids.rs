//! Identifiers, opaque tokens and timestamps the emulator hands out.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;

/// 16 random bytes in the 8-4-4-4-12 hex form of a UUID (version 4 bits set),
/// as AWS uses for request ids and MicroVM ids.
pub(crate) fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A new MicroVM id, shaped like the real ones (`microvm-<uuid>`).
pub(crate) fn microvm_id() -> String {
    format!("microvm-{}", uuid_v4())
}

/// A proxy auth token: 32 random bytes, base64url without padding. Opaque to
/// clients (the real one is a JWE); never logged.
pub(crate) fn proxy_token() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// Now, in epoch seconds with millisecond precision: the wire form of
/// `startedAt` and `terminatedAt` (JSON numbers; the Rust client refuses strings).
pub(crate) fn epoch_seconds_now() -> f64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    ms as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_has_the_canonical_shape() {
        let u = uuid_v4();
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert_ne!(uuid_v4(), u);
    }

    #[test]
    fn tokens_are_43_url_safe_chars() {
        let t = proxy_token();
        assert_eq!(t.len(), 43);
        assert!(
            t.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }
}
