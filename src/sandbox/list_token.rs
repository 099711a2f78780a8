//! The resume token of a listing (`SandboxList::next_token`,
//! `ListQuery::next_token`): where a listing stopped, and a fingerprint of
//! the filters it was made for, so a token used with other filters is
//! refused instead of resuming the wrong listing.
//!
//! The format is the reference SDK's (and its TypeScript SDK's), so a token
//! one of them hands out resumes in another: base64url without padding of
//! canonical JSON (sorted keys, compact, UTF-8), either
//! `{"v":1,"f":FP,"a":AWS_TOKEN|null,"s":[DIGEST...]}` (a listing in the
//! control plane's order: the ListMicrovms token of the page being served,
//! and a 12-hex sha256 digest of each id already served from it) or
//! `{"v":1,"f":FP,"k":[STARTED_MS,ID]}` (an ordered listing: the key of the
//! last item served). FP is 16 hex of the sha256 of the canonical filters.
//! A token never names metadata values (only their hash) and no error
//! repeats a token.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::SandboxError;

/// The longest token accepted (the reference's limit).
pub(crate) const MAX_TOKEN_CHARS: usize = 8192;
/// The most digests one page cursor can hold: a page's size.
const MAX_DIGESTS: usize = 50;
const VERSION: u64 = 1;
const FINGERPRINT_HEX: usize = 16;
const DIGEST_HEX: usize = 12;

/// The message of a token this SDK cannot read.
pub(crate) const INVALID_TOKEN: &str =
    "the token is not one a listing handed out, or it was changed; list again without it";
/// The message of a token made for other filters.
pub(crate) const FOREIGN_TOKEN: &str =
    "the token was made for other filters; resume with the query that handed it out";

/// Where a listing resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cursor {
    /// In the control plane's order: the page fetched with `aws_token`
    /// (`None`: the first), less the items already served from it.
    Page {
        aws_token: Option<String>,
        served: BTreeSet<String>,
    },
    /// In an order: after the item with this key.
    Key { started_ms: u64, sandbox_id: String },
}

/// A decoded token: the fingerprint it was made for, and where to resume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub fingerprint: String,
    pub cursor: Cursor,
}

/// The digest of a served id, as a page cursor keeps it.
pub(crate) fn digest(sandbox_id: &str) -> String {
    hex_prefix(sandbox_id.as_bytes(), DIGEST_HEX)
}

/// Milliseconds since the epoch, to the nearest; 0 for a time before it
/// or none. The reference's rule (`round(timestamp * 1000)`), so a key in a
/// token means the same item in both SDKs although the wire's seconds are
/// a float (1.123 s reads as 1.122999999 s), and a `started_after` equal
/// to an item's start includes it.
pub(crate) fn unix_ms(time: Option<SystemTime>) -> u64 {
    time.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| {
            let rounded = d.as_nanos().saturating_add(500_000) / 1_000_000;
            u64::try_from(rounded).unwrap_or(u64::MAX)
        })
}

/// What a fingerprint covers: every filter that changes what a listing
/// holds or its order.
pub(crate) struct Filters<'a> {
    pub image: Option<&'a str>,
    pub version: Option<&'a str>,
    pub states: Option<Vec<&'a str>>,
    pub started_after_ms: Option<u64>,
    pub metadata: Option<&'a BTreeMap<String, String>>,
    pub order: Option<&'static str>,
    pub index: Option<String>,
}

impl Filters<'_> {
    /// 16 hex of the sha256 of the canonical filters.
    pub(crate) fn fingerprint(&self) -> String {
        let mut document = BTreeMap::new();
        document.insert("image", json!(self.image));
        document.insert("version", json!(self.version));
        document.insert("states", json!(self.states));
        document.insert("started_after_ms", json!(self.started_after_ms));
        document.insert("metadata", json!(self.metadata));
        document.insert("order", json!(self.order));
        if let Some(index) = &self.index {
            document.insert("index", json!(index));
        }
        hex_prefix(canonical(&document).as_bytes(), FINGERPRINT_HEX)
    }
}

/// The token of `cursor` for the listing of `fingerprint`.
pub(crate) fn encode(fingerprint: &str, cursor: &Cursor) -> String {
    let mut document: BTreeMap<&str, Value> = BTreeMap::new();
    document.insert("v", json!(VERSION));
    document.insert("f", json!(fingerprint));
    match cursor {
        Cursor::Page { aws_token, served } => {
            document.insert("a", json!(aws_token));
            document.insert("s", json!(served));
        }
        Cursor::Key {
            started_ms,
            sandbox_id,
        } => {
            document.insert("k", json!([started_ms, sandbox_id]));
        }
    }
    URL_SAFE_NO_PAD.encode(canonical(&document))
}

/// Reads a token, bounded before it is decoded.
///
/// # Errors
/// `InvalidArgument` (argument `next_token`) with [`INVALID_TOKEN`]: too
/// long, not base64url, not JSON, another version, or a field of the
/// wrong shape.
pub(crate) fn decode(token: &str) -> Result<Token, SandboxError> {
    let invalid = || SandboxError::invalid_argument("next_token", INVALID_TOKEN);
    if token.is_empty()
        || token.len() > MAX_TOKEN_CHARS
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid());
    }
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let document: BTreeMap<String, Value> = serde_json::from_slice(&raw).map_err(|_| invalid())?;
    if document.get("v").and_then(Value::as_u64) != Some(VERSION) {
        return Err(invalid());
    }
    let fingerprint = document
        .get("f")
        .and_then(Value::as_str)
        .filter(|f| is_hex(f, FINGERPRINT_HEX))
        .ok_or_else(invalid)?
        .to_owned();
    let keys: BTreeSet<&str> = document.keys().map(String::as_str).collect();
    let cursor = if keys == BTreeSet::from(["v", "f", "a", "s"]) {
        page_cursor(&document["a"], &document["s"])
    } else if keys == BTreeSet::from(["v", "f", "k"]) {
        key_cursor(&document["k"])
    } else {
        None
    };
    let cursor = cursor.ok_or_else(invalid)?;
    Ok(Token {
        fingerprint,
        cursor,
    })
}

fn page_cursor(aws_token: &Value, served: &Value) -> Option<Cursor> {
    let aws_token = match aws_token {
        Value::Null => None,
        Value::String(token) => Some(token.clone()),
        _ => return None,
    };
    let served = served.as_array().filter(|s| s.len() <= MAX_DIGESTS)?;
    let served = served
        .iter()
        .map(|d| {
            d.as_str()
                .filter(|d| is_hex(d, DIGEST_HEX))
                .map(str::to_owned)
        })
        .collect::<Option<BTreeSet<String>>>()?;
    Some(Cursor::Page { aws_token, served })
}

fn key_cursor(key: &Value) -> Option<Cursor> {
    let [millis, id] = key.as_array()?.as_slice() else {
        return None;
    };
    let started_ms = millis.as_u64()?;
    let sandbox_id = id.as_str().filter(|id| !id.is_empty())?.to_owned();
    Some(Cursor::Key {
        started_ms,
        sandbox_id,
    })
}

/// Compact JSON with sorted keys (every map here is a `BTreeMap`, and
/// serde_json keeps a map's order).
fn canonical<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn hex_prefix(bytes: &[u8], chars: usize) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    hex
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_hold_no_metadata_value() {
        let metadata = BTreeMap::from([("owner".to_owned(), "canary-value".to_owned())]);
        let filters = Filters {
            image: Some("arn:aws:lambda:us-east-1:000000000000:microvm-image:x"),
            version: None,
            states: Some(vec!["RUNNING"]),
            started_after_ms: Some(5),
            metadata: Some(&metadata),
            order: None,
            index: None,
        };
        let fingerprint = filters.fingerprint();
        assert!(is_hex(&fingerprint, 16), "{fingerprint}");
        for cursor in [
            Cursor::Page {
                aws_token: None,
                served: BTreeSet::from([digest("vm-1"), digest("vm-2")]),
            },
            Cursor::Page {
                aws_token: Some("opaque".to_owned()),
                served: BTreeSet::new(),
            },
            Cursor::Key {
                started_ms: 1_700_000_000_000,
                sandbox_id: "vm-3".to_owned(),
            },
        ] {
            let token = encode(&fingerprint, &cursor);
            let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(&token).unwrap()).unwrap();
            assert!(!raw.contains("canary"), "{raw}");
            assert_eq!(
                decode(&token).unwrap(),
                Token {
                    fingerprint: fingerprint.clone(),
                    cursor
                }
            );
        }
    }

    /// The reference's canonical form, byte for byte: a token one SDK
    /// hands out resumes in the other.
    #[test]
    fn the_canonical_documents_are_the_references() {
        let cursor = Cursor::Page {
            aws_token: None,
            served: BTreeSet::from(["0123456789ab".to_owned()]),
        };
        let raw = URL_SAFE_NO_PAD
            .decode(encode("0123456789abcdef", &cursor))
            .unwrap();
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            r#"{"a":null,"f":"0123456789abcdef","s":["0123456789ab"],"v":1}"#
        );
        let filters = Filters {
            image: None,
            version: None,
            states: None,
            started_after_ms: None,
            metadata: None,
            order: Some("asc"),
            index: None,
        };
        let document = r#"{"image":null,"metadata":null,"order":"asc","started_after_ms":null,"states":null,"version":null}"#;
        assert_eq!(filters.fingerprint(), hex_prefix(document.as_bytes(), 16));
    }

    #[test]
    fn milliseconds_round_to_the_nearest_as_the_references_do() {
        let at = |nanos: u64| Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(nanos));
        assert_eq!(unix_ms(at(1_122_999_999)), 1_123);
        assert_eq!(unix_ms(at(1_123_400_000)), 1_123);
        assert_eq!(unix_ms(at(1_123_600_000)), 1_124);
        assert_eq!(unix_ms(None), 0);
        assert_eq!(
            unix_ms(SystemTime::UNIX_EPOCH.checked_sub(std::time::Duration::from_secs(1))),
            0
        );
    }

    #[test]
    fn every_malformed_token_is_the_same_refusal() {
        let fp = "0123456789abcdef";
        let b64 = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let cases = [
            String::new(),
            "x".repeat(MAX_TOKEN_CHARS + 1),
            "not base64!".to_owned(),
            b64("not json"),
            b64("[1]"),
            b64(&format!(r#"{{"v":2,"f":"{fp}","a":null,"s":[]}}"#)),
            b64(r#"{"v":1,"f":"short","a":null,"s":[]}"#),
            b64(&format!(r#"{{"v":1,"f":"{fp}","a":3,"s":[]}}"#)),
            b64(&format!(r#"{{"v":1,"f":"{fp}","a":null,"s":["xyz"]}}"#)),
            b64(&format!(
                r#"{{"v":1,"f":"{fp}","a":null,"s":[],"k":[1,"a"]}}"#
            )),
            b64(&format!(r#"{{"v":1,"f":"{fp}","k":[-1,"a"]}}"#)),
            b64(&format!(r#"{{"v":1,"f":"{fp}","k":[1,""]}}"#)),
            b64(&format!(r#"{{"v":1,"f":"{fp}","k":[1]}}"#)),
            b64(&format!(
                r#"{{"v":1,"f":"{fp}","a":null,"s":[{}]}}"#,
                vec![r#""0123456789ab""#; 51].join(",")
            )),
        ];
        for token in cases {
            let err = decode(&token).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid next_token: {INVALID_TOKEN}"),
                "{token}"
            );
            assert!(!format!("{err:?}").contains(&token) || token.is_empty());
        }
    }
}
