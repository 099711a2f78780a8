//! The run-hook payload (docs/architecture.md, "One create, step by step"): compact JSON with sorted keys,
//! at most 4,096 characters. It carries the access token only as
//! `hex(sha256(token bytes))`, because AWS may log the payload.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The platform's limit on `runHookPayload`.
pub(crate) const MAX_PAYLOAD_CHARS: usize = 4_096;

/// The managed lifecycle block (sent only with `max_lifetime` or `on_timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LifecycleBlock {
    pub timeout_s: u64,
    pub cap_s: u64,
    pub pause: bool,
    pub auto_resume: bool,
}

/// Builds the payload. Keys are sorted by construction (a `BTreeMap`
/// serialized in key order, nested maps built from `BTreeMap`s): not by
/// `serde_json`'s own map, which keeps insertion order as soon as anything
/// in the build enables its `preserve_order` feature (the AWS SDK's test
/// utilities do).
pub(crate) fn run_payload(
    token_sha256: &str,
    envs: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
    lifecycle: Option<LifecycleBlock>,
) -> String {
    let mut payload: BTreeMap<&str, Value> = BTreeMap::new();
    payload.insert("v", json!(1));
    payload.insert("token_sha256", json!(token_sha256));
    payload.insert("user", json!("user"));
    payload.insert("workdir", json!("/home/user"));
    if !envs.is_empty() {
        payload.insert("envs", json!(envs));
    }
    if !metadata.is_empty() {
        payload.insert("metadata", json!(metadata));
    }
    if let Some(block) = lifecycle {
        let on_timeout = if block.pause { "pause" } else { "kill" };
        let lifecycle: BTreeMap<&str, Value> = BTreeMap::from([
            ("auto_resume", json!(block.auto_resume)),
            ("cap_s", json!(block.cap_s)),
            ("on_timeout", json!(on_timeout)),
            ("timeout_s", json!(block.timeout_s)),
        ]);
        payload.insert("lifecycle", json!(lifecycle));
    }
    // A map of strings and JSON values always serializes.
    ascii_json(&serde_json::to_string(&payload).unwrap_or_default())
}

/// `payload` (from [`run_payload`]) with `"network":{"enforce":true}`: the
/// agent isolates the sandbox's network before `/run` starts anything
/// (docs/network.md). Keys stay sorted (a `BTreeMap` again).
pub(crate) fn with_network_enforce(payload: &str) -> String {
    with_section(
        payload,
        "network",
        BTreeMap::from([("enforce", json!(true))]),
    )
}

/// `payload` with `"limits":{"cpu_seconds":N}`: RLIMIT_CPU for every
/// command, terminal and start command of the sandbox (never a code
/// kernel), as the reference sends it.
pub(crate) fn with_cpu_seconds(payload: &str, seconds: u64) -> String {
    with_section(
        payload,
        "limits",
        BTreeMap::from([("cpu_seconds", json!(seconds))]),
    )
}

/// `payload` with `"workdir"` set to `dir` (instead of the home): the
/// default working directory of every process the agent starts.
pub(crate) fn with_workdir(payload: &str, dir: &str) -> String {
    with_value(payload, "workdir", json!(dir))
}

/// `payload` with the object `section` at `key`.
fn with_section(payload: &str, key: &str, section: BTreeMap<&str, Value>) -> String {
    with_value(payload, key, json!(section))
}

/// `payload` with `value` at `key`; keys stay sorted (a `BTreeMap` again).
fn with_value(payload: &str, key: &str, value: Value) -> String {
    let Ok(mut map) = serde_json::from_str::<BTreeMap<String, Value>>(payload) else {
        return payload.to_owned();
    };
    map.insert(key.to_owned(), value);
    ascii_json(&serde_json::to_string(&map).unwrap_or_default())
}

/// The JSON text with every non-ASCII character escaped as `\uXXXX`
/// (UTF-16 units, lower-case hex, as Python's `json.dumps` does by
/// default): what the reference sends, so the 4,096 limit counts the same
/// characters and the payload is byte-identical.
fn ascii_json(json: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_payload_is_compact_and_sorted() {
        let digest = "ab".repeat(32);
        let payload = run_payload(&digest, &BTreeMap::new(), &BTreeMap::new(), None);
        assert_eq!(
            payload,
            format!(
                "{{\"token_sha256\":\"{digest}\",\"user\":\"user\",\"v\":1,\"workdir\":\"/home/user\"}}"
            )
        );
    }

    #[test]
    fn the_network_block_is_sorted_in() {
        let envs = BTreeMap::from([("Z".to_owned(), "é".to_owned())]);
        let payload = with_network_enforce(&run_payload("00", &envs, &BTreeMap::new(), None));
        assert_eq!(
            payload,
            "{\"envs\":{\"Z\":\"\\u00e9\"},\"network\":{\"enforce\":true},\"token_sha256\":\"00\",\"user\":\"user\",\"v\":1,\"workdir\":\"/home/user\"}"
        );
    }

    #[test]
    fn full_payload_keeps_every_block_sorted() {
        let envs = BTreeMap::from([
            ("B".to_owned(), "2".to_owned()),
            ("A".to_owned(), "1".to_owned()),
        ]);
        let metadata = BTreeMap::from([("team".to_owned(), "x".to_owned())]);
        let payload = run_payload(
            "00",
            &envs,
            &metadata,
            Some(LifecycleBlock {
                timeout_s: 60,
                cap_s: 120,
                pause: false,
                auto_resume: false,
            }),
        );
        assert_eq!(
            payload,
            "{\"envs\":{\"A\":\"1\",\"B\":\"2\"},\"lifecycle\":{\"auto_resume\":false,\"cap_s\":120,\"on_timeout\":\"kill\",\"timeout_s\":60},\"metadata\":{\"team\":\"x\"},\"token_sha256\":\"00\",\"user\":\"user\",\"v\":1,\"workdir\":\"/home/user\"}"
        );
    }
}
