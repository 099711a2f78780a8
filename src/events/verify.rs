//! What a service receiving webhook deliveries calls on each one:
//! [`verify_webhook`]. It needs no AWS, no client and no sandbox.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito_events::webhook::{self, VerifyError};

/// How far `t` in `rayito-signature` may be from the receiver's clock, each
/// way, by default: 5 minutes. The reference tells receivers only to check
/// that `t` is recent; a window bounds how long a captured delivery can be
/// replayed, and 5 minutes absorbs the deliverer's retries (under a
/// minute) and ordinary clock skew.
pub const DEFAULT_WEBHOOK_TOLERANCE: Duration =
    Duration::from_secs(rayito_events::webhook::DEFAULT_TOLERANCE_S);

/// Why a delivery failed [`verify_webhook`]: answer it with a 4xx and
/// drop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookVerifyError {
    /// A header the check needs is absent: `rayito-signature` or
    /// `e2b-webhook-id` (its name).
    #[error("the delivery has no {0} header")]
    MissingHeader(&'static str),
    /// `rayito-signature` is not `t=<unix seconds>,v1=<64 hex>`, a header
    /// is not visible ASCII, or `e2b-signature-version` is not `v1`.
    #[error("the delivery's signature headers are malformed")]
    Malformed,
    /// `t` is outside the window around the receiver's clock: a replayed
    /// or stale delivery (or a clock far off).
    #[error("the delivery's timestamp is outside the accepted window")]
    OutsideWindow,
    /// A signature does not match the secret and the body: forged, altered,
    /// or signed with another secret.
    #[error("the delivery's signature does not match")]
    Mismatch,
}

/// Checks one webhook delivery with the default 5-minute window
/// ([`DEFAULT_WEBHOOK_TOLERANCE`]): [`verify_webhook_with`].
///
/// # Errors
/// The [`WebhookVerifyError`] that refuses it.
pub fn verify_webhook(
    secret: &[u8],
    headers: &http::HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> Result<(), WebhookVerifyError> {
    verify_webhook_with(secret, headers, body, now, DEFAULT_WEBHOOK_TOLERANCE)
}

/// Checks one webhook delivery as a receiver must, before trusting its
/// body: `rayito-signature`'s `t` within `tolerance` of `now`, its
/// HMAC-SHA256 over `t`, the `e2b-webhook-id` header and the exact body
/// bytes under `secret` (the webhook's secret value), compared in constant
/// time, and `e2b-signature` (E2B's plain hash, which carries no time) when
/// present. Pass the body exactly as received, before any JSON parsing.
///
/// The rayito signature binds the time and the webhook, so a delivery
/// replayed after the window, or to another webhook, fails; E2B's alone
/// does not, which is why the rayito signature is required here.
///
/// # Errors
/// The [`WebhookVerifyError`] that refuses it.
pub fn verify_webhook_with(
    secret: &[u8],
    headers: &http::HeaderMap,
    body: &[u8],
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), WebhookVerifyError> {
    // A header that is not visible ASCII is nothing the deliverer sends.
    let signed = [
        webhook::RAYITO_SIGNATURE,
        webhook::WEBHOOK_ID,
        webhook::SIGNATURE_VERSION,
        webhook::E2B_SIGNATURE,
    ];
    if signed
        .iter()
        .any(|name| headers.get(*name).is_some_and(|v| v.to_str().is_err()))
    {
        return Err(WebhookVerifyError::Malformed);
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now_s = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    webhook::verify(secret, header, body, now_s, tolerance.as_secs()).map_err(|e| match e {
        VerifyError::MissingHeader(name) => WebhookVerifyError::MissingHeader(name),
        VerifyError::Malformed => WebhookVerifyError::Malformed,
        VerifyError::OutsideWindow => WebhookVerifyError::OutsideWindow,
        VerifyError::Mismatch => WebhookVerifyError::Mismatch,
    })
}
