//! The event line the agent writes to its console (and so to the image's
//! log group): `rayito.event.v1 <b64url(json)> <b64url(mac)>`, base64url
//! without padding, the MAC `HMAC-SHA256(sandbox_key, json)` over the
//! exact JSON bytes. [`parse`] is the forwarder's strict reading of one.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use subtle::ConstantTimeEq;

use crate::event::{Event, EventKind, KillReason};
use crate::key::{SandboxKey, hmac_sha256, sandbox_key};

/// What every event line starts with (then one space).
pub const PREFIX: &str = "rayito.event.v1";

/// The longest line [`parse`] reads (a real line is well under 2 KiB).
pub const MAX_LINE: usize = 8 * 1024;

/// The longest string field of an event.
pub const MAX_STRING: usize = 512;

/// How far in the past an event may be and still be admitted.
pub const MAX_AGE_MS: u64 = 24 * 60 * 60 * 1000;

/// How far in the future (clock skew) an event may be.
pub const MAX_SKEW_MS: u64 = 5 * 60 * 1000;

/// Why the pipeline refused an event (the counters' names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// Not a line of this format, JSON not of the event's strict shape.
    MalformedLine,
    /// The MAC does not match the sandbox's key.
    MacInvalid,
    /// The event names another sandbox than its log stream.
    SandboxMismatch,
    /// Older than a day or more than 5 minutes ahead.
    StaleEvent,
    /// Not a forward step of the sandbox's lifecycle.
    InvalidTransition,
    /// Over the paused/resumed rate.
    RateLimited,
    /// The pipeline's own failure.
    InternalError,
}

impl Rejection {
    /// Every rejection, in the counters' order.
    pub const ALL: [Rejection; 7] = [
        Self::MalformedLine,
        Self::MacInvalid,
        Self::SandboxMismatch,
        Self::StaleEvent,
        Self::InvalidTransition,
        Self::RateLimited,
        Self::InternalError,
    ];

    /// The counter's name: `malformed_line`, `mac_invalid`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MalformedLine => "malformed_line",
            Self::MacInvalid => "mac_invalid",
            Self::SandboxMismatch => "sandbox_mismatch",
            Self::StaleEvent => "stale_event",
            Self::InvalidTransition => "invalid_transition",
            Self::RateLimited => "rate_limited",
            Self::InternalError => "internal_error",
        }
    }
}

/// The line for `event` signed with `key`.
pub fn encode(key: &SandboxKey, event: &Event) -> String {
    let json = event.to_json();
    let mac = hmac_sha256(key, &[&json]);
    format!(
        "{PREFIX} {} {}",
        URL_SAFE_NO_PAD.encode(&json),
        URL_SAFE_NO_PAD.encode(mac)
    )
}

/// The sandbox id of a sandbox log stream (`YYYY/MM/DD[<version>]<id>`):
/// what follows the last `]`.
pub fn stream_sandbox_id(stream: &str) -> Option<&str> {
    let (_, id) = stream.rsplit_once(']')?;
    (!id.is_empty()).then_some(id)
}

/// Reads one line of `sandbox_id`'s stream as the forwarder does: the
/// format, the MAC under the key derived from `stack_key` (constant-time
/// compare), the strict JSON, the agent's shape, the sandbox, the
/// freshness against `now_ms`.
///
/// # Errors
/// The [`Rejection`] that refuses it.
pub fn parse(
    line: &str,
    sandbox_id: &str,
    stack_key: &[u8],
    now_ms: u64,
) -> Result<Event, Rejection> {
    use Rejection::*;
    if line.len() > MAX_LINE {
        return Err(MalformedLine);
    }
    let rest = line
        .trim_end_matches(['\r', '\n'])
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix(' '))
        .ok_or(MalformedLine)?;
    let mut parts = rest.split(' ');
    let (Some(json64), Some(mac64), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(MalformedLine);
    };
    let json = URL_SAFE_NO_PAD.decode(json64).map_err(|_| MalformedLine)?;
    let mac = URL_SAFE_NO_PAD.decode(mac64).map_err(|_| MalformedLine)?;
    if mac.len() != 32 {
        return Err(MalformedLine);
    }
    let key = sandbox_key(stack_key, sandbox_id);
    let expected = hmac_sha256(&key, &[&json]);
    if !bool::from(expected.ct_eq(mac.as_slice())) {
        return Err(MacInvalid);
    }
    let event: Event = serde_json::from_slice(&json).map_err(|_| MalformedLine)?;
    check_shape(&event)?;
    if event.sandbox_id != sandbox_id {
        return Err(SandboxMismatch);
    }
    let oldest = now_ms.saturating_sub(MAX_AGE_MS);
    let newest = now_ms.saturating_add(MAX_SKEW_MS);
    if event.occurred_at_ms < oldest || event.occurred_at_ms > newest {
        return Err(StaleEvent);
    }
    Ok(event)
}

/// The agent's shape of an event: bounded strings, a 32-hex id, a kill
/// reason exactly on killed (`request` or `timeout`), an image ARN of a MicroVM
/// image.
fn check_shape(event: &Event) -> Result<(), Rejection> {
    let strings = [
        &event.event_id,
        &event.sandbox_id,
        &event.image_arn,
        &event.image_version,
    ];
    if strings.iter().any(|s| s.len() > MAX_STRING) || event.sandbox_id.is_empty() {
        return Err(Rejection::MalformedLine);
    }
    let hex_id = event.event_id.len() == 32
        && event
            .event_id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let reason_ok = match event.kind {
        // rayd writes `request` only; rayito's agent also `timeout` (the
        // deadline in kill mode, which no hook announces). `unknown` is the
        // reconciler's, never a line's.
        EventKind::Killed => matches!(
            event.kill_reason,
            Some(KillReason::Request | KillReason::Timeout)
        ),
        _ => event.kill_reason.is_none(),
    };
    if hex_id && reason_ok && is_image_arn(&event.image_arn) {
        Ok(())
    } else {
        Err(Rejection::MalformedLine)
    }
}

/// `arn:aws…:lambda:<region>:<12 digits | aws>:microvm-image:<name…>`.
pub fn is_image_arn(arn: &str) -> bool {
    let mut it = arn.splitn(7, ':');
    let parts: [Option<&str>; 7] = std::array::from_fn(|_| it.next());
    let [
        Some("arn"),
        Some(partition),
        Some("lambda"),
        Some(region),
        Some(account),
        Some("microvm-image"),
        Some(name),
    ] = parts
    else {
        return false;
    };
    partition.starts_with("aws")
        && !region.is_empty()
        && (account == "aws"
            || (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())))
        && !name.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STACK: &[u8] = b"stack key";
    const NOW: u64 = 1_800_000_000_000;

    fn event() -> Event {
        Event {
            event_id: "00112233445566778899aabbccddeeff".into(),
            sandbox_id: "sbx-1".into(),
            kill_reason: None,
            kind: EventKind::Created,
            generation: 0,
            occurred_at_ms: NOW,
            image_arn: "arn:aws:lambda:us-east-1:123456789012:microvm-image:base".into(),
            image_version: "1".into(),
        }
    }

    fn line(e: &Event) -> String {
        encode(&sandbox_key(STACK, &e.sandbox_id), e)
    }

    #[test]
    fn a_signed_line_parses_back() {
        let e = event();
        let l = line(&e);
        assert!(l.starts_with("rayito.event.v1 "));
        assert_eq!(parse(&l, "sbx-1", STACK, NOW), Ok(e.clone()));
        assert_eq!(parse(&format!("{l}\n"), "sbx-1", STACK, NOW), Ok(e));
    }

    #[test]
    fn each_refusal_is_its_counter() {
        let e = event();
        let l = line(&e);
        assert_eq!(parse(&l, "sbx-2", STACK, NOW), Err(Rejection::MacInvalid));
        assert_eq!(
            parse(&l, "sbx-1", b"other", NOW),
            Err(Rejection::MacInvalid)
        );
        assert_eq!(
            parse("rayito.event.v1 x", "sbx-1", STACK, NOW),
            Err(Rejection::MalformedLine)
        );
        assert_eq!(
            parse(&l.replacen(' ', "  ", 1), "sbx-1", STACK, NOW),
            Err(Rejection::MalformedLine)
        );
        let old = NOW + MAX_AGE_MS + 1;
        assert_eq!(parse(&l, "sbx-1", STACK, old), Err(Rejection::StaleEvent));
        let early = NOW - MAX_SKEW_MS - 1;
        assert_eq!(parse(&l, "sbx-1", STACK, early), Err(Rejection::StaleEvent));
        // Signed with sbx-1's key but naming another sandbox.
        let other = Event {
            sandbox_id: "sbx-9".into(),
            ..event()
        };
        let forged = encode(&sandbox_key(STACK, "sbx-1"), &other);
        assert_eq!(
            parse(&forged, "sbx-1", STACK, NOW),
            Err(Rejection::SandboxMismatch)
        );
        // A killed event without its reason, a non-hex id, a foreign ARN.
        for bad in [
            Event {
                kind: EventKind::Killed,
                ..event()
            },
            Event {
                kill_reason: Some(KillReason::Unknown),
                kind: EventKind::Killed,
                ..event()
            },
            Event {
                event_id: "X".repeat(32),
                ..event()
            },
            Event {
                image_arn: "arn:aws:s3:::bucket".into(),
                ..event()
            },
        ] {
            assert_eq!(
                parse(&line(&bad), "sbx-1", STACK, NOW),
                Err(Rejection::MalformedLine),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse(&"a".repeat(MAX_LINE + 1), "sbx-1", STACK, NOW),
            Err(Rejection::MalformedLine)
        );
    }

    #[test]
    fn a_stream_names_its_sandbox_after_the_bracket() {
        assert_eq!(stream_sandbox_id("2026/12/06[3]sbx-1"), Some("sbx-1"));
        assert_eq!(stream_sandbox_id("2026/12/06[3]"), None);
        assert_eq!(stream_sandbox_id("no bracket"), None);
    }
}
