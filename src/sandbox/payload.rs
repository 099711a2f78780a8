//! The run-hook payload (docs/architecture.md, "One create, step by step"): compact JSON with sorted keys,
//! at most 4,096 characters. It carries the access token only as
//! `hex(sha256(token bytes))`, because AWS may log the payload.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

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

/// Builds the payload. `serde_json`'s map is a `BTreeMap` (no
/// `preserve_order` feature), so keys come out sorted.
pub(crate) fn run_payload(
    token_sha256: &str,
    envs: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
    lifecycle: Option<LifecycleBlock>,
) -> String {
    let mut payload = Map::new();
    payload.insert("v".into(), json!(1));
    payload.insert("token_sha256".into(), json!(token_sha256));
    payload.insert("user".into(), json!("user"));
    payload.insert("workdir".into(), json!("/home/user"));
    if !envs.is_empty() {
        payload.insert("envs".into(), json!(envs));
    }
    if !metadata.is_empty() {
        payload.insert("metadata".into(), json!(metadata));
    }
    if let Some(block) = lifecycle {
        payload.insert(
            "lifecycle".into(),
            json!({
                "auto_resume": block.auto_resume,
                "cap_s": block.cap_s,
                "on_timeout": if block.pause { "pause" } else { "kill" },
                "timeout_s": block.timeout_s,
            }),
        );
    }
    Value::Object(payload).to_string()
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
