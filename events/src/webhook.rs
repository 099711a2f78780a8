//! A webhook delivery: its JSON body, its signature headers (E2B's plain
//! hash, and rayito's timestamped HMAC bound to the webhook), and the
//! receiver's check of both, [`verify`].

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::event::Event;
use crate::key::hmac_sha256;

/// `e2b-webhook-id`: the registered webhook's id.
pub const WEBHOOK_ID: &str = "e2b-webhook-id";
/// `e2b-delivery-id`: 32 random hex characters, new per attempt.
pub const DELIVERY_ID: &str = "e2b-delivery-id";
/// `e2b-signature-version`: `v1`.
pub const SIGNATURE_VERSION: &str = "e2b-signature-version";
/// `e2b-signature`: `base64(sha256(secret + body))`, no padding.
pub const E2B_SIGNATURE: &str = "e2b-signature";
/// `rayito-signature`: `t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<webhook_id>." + body)>`.
pub const RAYITO_SIGNATURE: &str = "rayito-signature";

/// The receiver's default window around `t` (5 minutes each way): the
/// reference defines none; a delivery older than this is a replay.
pub const DEFAULT_TOLERANCE_S: u64 = 300;

/// The webhook's JSON body, fields in the reference's order.
#[derive(Serialize)]
struct Body<'a> {
    event_id: &'a str,
    sandbox_id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    kill_reason: Option<&'a str>,
    generation: u64,
    occurred_at_ms: u64,
    sandbox_template_id: &'a str,
    sandbox_execution_id: String,
}

/// The POST body delivering `event`.
pub fn body(event: &Event) -> Vec<u8> {
    let b = Body {
        event_id: &event.event_id,
        sandbox_id: &event.sandbox_id,
        kind: event.kind.type_name(),
        kill_reason: event.kill_reason.map(|r| r.as_str()),
        generation: event.generation,
        occurred_at_ms: event.occurred_at_ms,
        sandbox_template_id: &event.image_arn,
        sandbox_execution_id: event.sandbox_execution_id(),
    };
    serde_json::to_vec(&b).unwrap_or_else(|_| unreachable!("plain strings and integers"))
}

/// E2B's signature: `base64(sha256(secret + body))` without padding.
pub fn e2b_signature(secret: &[u8], body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(secret);
    h.update(body);
    STANDARD_NO_PAD.encode(h.finalize())
}

/// rayito's MAC of `body` for `webhook_id` at `t` (hex).
fn rayito_mac(secret: &[u8], t: u64, webhook_id: &str, body: &[u8]) -> [u8; 32] {
    let prefix = format!("{t}.{webhook_id}.");
    hmac_sha256(secret, &[prefix.as_bytes(), body])
}

/// Every header of one delivery attempt (content type first), the
/// signatures made with `secret` at `now_unix_s`.
pub fn headers(
    secret: &[u8],
    webhook_id: &str,
    delivery_id: &str,
    body: &[u8],
    now_unix_s: u64,
) -> Vec<(&'static str, String)> {
    let mac = hex::encode(rayito_mac(secret, now_unix_s, webhook_id, body));
    vec![
        ("content-type", "application/json".to_owned()),
        (WEBHOOK_ID, webhook_id.to_owned()),
        (DELIVERY_ID, delivery_id.to_owned()),
        (SIGNATURE_VERSION, "v1".to_owned()),
        (E2B_SIGNATURE, e2b_signature(secret, body)),
        (RAYITO_SIGNATURE, format!("t={now_unix_s},v1={mac}")),
    ]
}

/// Why a delivery failed [`verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// A header the check needs is absent (its name).
    MissingHeader(&'static str),
    /// `rayito-signature` is not `t=<unix s>,v1=<64 hex>[,v1=...]`, or
    /// `e2b-signature-version` is not `v1`.
    Malformed,
    /// `t` is outside the window around now (a replay or a stale copy).
    OutsideWindow,
    /// A signature does not match the secret and the body.
    Mismatch,
}

/// Checks one delivery as a receiver must: `rayito-signature`'s `t`
/// within `tolerance_s` of `now_unix_s`, its HMAC over `t`, the webhook id
/// and the exact body (constant-time), and `e2b-signature` when present.
/// `header` looks a header up by lower-case name.
///
/// # Errors
/// The [`VerifyError`] that refuses it.
pub fn verify<'h>(
    secret: &[u8],
    header: impl Fn(&str) -> Option<&'h str>,
    body: &[u8],
    now_unix_s: u64,
    tolerance_s: u64,
) -> Result<(), VerifyError> {
    let signature = header(RAYITO_SIGNATURE).ok_or(VerifyError::MissingHeader(RAYITO_SIGNATURE))?;
    let webhook_id = header(WEBHOOK_ID).ok_or(VerifyError::MissingHeader(WEBHOOK_ID))?;
    if header(SIGNATURE_VERSION).is_some_and(|v| v != "v1") {
        return Err(VerifyError::Malformed);
    }
    let mut t = None;
    let mut macs = Vec::new();
    for part in signature.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v))
                if t.is_none() && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) =>
            {
                t = Some(v.parse::<u64>().map_err(|_| VerifyError::Malformed)?);
            }
            Some(("v1", v)) if v.len() == 64 && macs.len() < 8 => {
                macs.push(hex_32(v).ok_or(VerifyError::Malformed)?);
            }
            _ => return Err(VerifyError::Malformed),
        }
    }
    let t = t.ok_or(VerifyError::Malformed)?;
    if macs.is_empty() {
        return Err(VerifyError::Malformed);
    }
    if t.abs_diff(now_unix_s) > tolerance_s {
        return Err(VerifyError::OutsideWindow);
    }
    let expected = rayito_mac(secret, t, webhook_id, body);
    let any = macs
        .iter()
        .fold(subtle::Choice::from(0), |acc, m| acc | expected.ct_eq(m));
    if !bool::from(any) {
        return Err(VerifyError::Mismatch);
    }
    if let Some(e2b) = header(E2B_SIGNATURE) {
        let want = e2b_signature(secret, body);
        if !bool::from(want.as_bytes().ct_eq(e2b.as_bytes())) {
            return Err(VerifyError::Mismatch);
        }
    }
    Ok(())
}

fn hex_32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, KillReason};

    const NOW: u64 = 1_800_000_000;

    fn event() -> Event {
        Event {
            event_id: "00112233445566778899aabbccddeeff".into(),
            sandbox_id: "sbx".into(),
            kill_reason: Some(KillReason::Request),
            kind: EventKind::Killed,
            generation: 1,
            occurred_at_ms: 5,
            image_arn: "arn:img".into(),
            image_version: "2".into(),
        }
    }

    fn lookup<'a>(h: &'a [(&'static str, String)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
        move |name| h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_body_is_the_references_shape() {
        assert_eq!(
            String::from_utf8(body(&event())).unwrap(),
            r#"{"event_id":"00112233445566778899aabbccddeeff","sandbox_id":"sbx","type":"sandbox.lifecycle.killed","kill_reason":"request","generation":1,"occurred_at_ms":5,"sandbox_template_id":"arn:img","sandbox_execution_id":"sbx#1"}"#
        );
    }

    #[test]
    fn the_signatures_match_an_independent_computation() {
        // python3: base64.b64encode(hashlib.sha256(b"s3cret" + b"{}").digest()).rstrip(b"=")
        assert_eq!(
            e2b_signature(b"s3cret", b"{}"),
            "MPZVqvq5xhOOOXbtZLyuLDmZs4P5OPzRrUZjJUm1ft0"
        );
        // python3: hmac.new(b"s3cret", b"1800000000.wh.{}", hashlib.sha256).hexdigest()
        let h = headers(b"s3cret", "wh", "d", b"{}", NOW);
        assert_eq!(
            lookup(&h)(RAYITO_SIGNATURE).unwrap(),
            "t=1800000000,v1=03ab27e6f844b7a8f8ad2f84f15f3a8343c9f759ac9337f206afe4835b07002b"
        );
    }

    #[test]
    fn a_delivery_verifies_and_each_tampering_fails() {
        let b = body(&event());
        let h = headers(b"s3cret", "wh-1", "d", &b, NOW);
        let ok = |secret: &[u8], body: &[u8], now| {
            verify(secret, lookup(&h), body, now, DEFAULT_TOLERANCE_S)
        };
        assert_eq!(ok(b"s3cret", &b, NOW), Ok(()));
        assert_eq!(ok(b"s3cret", &b, NOW + DEFAULT_TOLERANCE_S), Ok(()));
        assert_eq!(ok(b"wrong", &b, NOW), Err(VerifyError::Mismatch));
        assert_eq!(ok(b"s3cret", b"{}", NOW), Err(VerifyError::Mismatch));
        assert_eq!(
            ok(b"s3cret", &b, NOW + DEFAULT_TOLERANCE_S + 1),
            Err(VerifyError::OutsideWindow)
        );
        // Another webhook's id: the same body and time do not verify.
        let mut other = h.clone();
        other[1].1 = "wh-2".into();
        assert_eq!(
            verify(b"s3cret", lookup(&other), &b, NOW, 300),
            Err(VerifyError::Mismatch)
        );
        let none: [(&'static str, String); 0] = [];
        assert_eq!(
            verify(b"s3cret", lookup(&none), &b, NOW, 300),
            Err(VerifyError::MissingHeader(RAYITO_SIGNATURE))
        );
        let mut bad = h.clone();
        bad[5].1 = "t=x,v1=00".into();
        assert_eq!(
            verify(b"s3cret", lookup(&bad), &b, NOW, 300),
            Err(VerifyError::Malformed)
        );
    }
}
