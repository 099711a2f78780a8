//! The run payload (`runHookPayload`, a JSON string inside the `/run` body).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::token;

/// What the agent does when the logical deadline passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTimeout {
    /// Close streams and kill every process.
    Kill,
    /// Close streams; the SDK or the idle policy suspends the VM.
    Pause,
}

/// The payload's `lifecycle` block, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecyclePlan {
    /// `timeout_s`: seconds from `/run` to the logical deadline.
    pub timeout_s: u64,
    /// `cap_s`: the maximum duration the deadline may be moved to.
    pub cap_s: u64,
    /// `on_timeout`.
    pub on_timeout: OnTimeout,
    /// `auto_resume`: whether the agent reopens after a resume.
    pub auto_resume: bool,
}

/// A validated run payload. Deliberately not `Debug`-printing env values.
#[derive(Clone, Default)]
pub struct RunPayload {
    /// The access token's digest.
    pub token_sha256: Option<[u8; 32]>,
    /// The working directory of commands.
    pub workdir: Option<String>,
    /// The sandbox's environment.
    pub envs: BTreeMap<String, String>,
    /// The sandbox's metadata.
    pub metadata: BTreeMap<String, String>,
    /// `limits.cpu_seconds`.
    pub cpu_seconds: Option<u64>,
    /// The managed lifecycle, if any.
    pub lifecycle: Option<LifecyclePlan>,
    /// `network.enforce`: isolate the sandbox's network and enforce an
    /// egress policy (docs/network.md).
    pub enforce_network: bool,
}

impl std::fmt::Debug for RunPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPayload")
            .field("has_token", &self.token_sha256.is_some())
            .field("env_count", &self.envs.len())
            .field("metadata_count", &self.metadata.len())
            .field("lifecycle", &self.lifecycle)
            .field("enforce_network", &self.enforce_network)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct RawPayload {
    v: Option<u64>,
    token_sha256: Option<String>,
    workdir: Option<String>,
    #[serde(default)]
    envs: BTreeMap<String, String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    limits: Option<RawLimits>,
    lifecycle: Option<RawLifecycle>,
    network: Option<RawNetwork>,
}

#[derive(Deserialize)]
struct RawNetwork {
    enforce: Option<bool>,
}

#[derive(Deserialize)]
struct RawLimits {
    cpu_seconds: Option<u64>,
}

#[derive(Deserialize)]
struct RawLifecycle {
    auto_resume: Option<bool>,
    cap_s: Option<u64>,
    on_timeout: Option<String>,
    timeout_s: Option<u64>,
}

/// Parses a payload. `None` means invalid: the agent then runs token-less
/// (every RPC but Health is UNAUTHENTICATED). Unknown keys are ignored.
pub fn parse(text: &str) -> Option<RunPayload> {
    let raw: RawPayload = serde_json::from_str(text).ok()?;
    if raw.v != Some(1) {
        return None;
    }
    let token_sha256 = Some(token::parse_digest(raw.token_sha256.as_deref()?)?);
    let cpu_seconds = match raw.limits.and_then(|l| l.cpu_seconds) {
        Some(s) if !(1..=28_800).contains(&s) => return None,
        other => other,
    };
    let lifecycle = match raw.lifecycle {
        None => None,
        Some(l) => Some(parse_lifecycle(l)?),
    };
    let workdir = match raw.workdir {
        Some(w) if !w.starts_with('/') || w.contains('\0') => return None,
        other => other,
    };
    Some(RunPayload {
        token_sha256,
        workdir,
        envs: raw.envs,
        metadata: raw.metadata,
        cpu_seconds,
        lifecycle,
        enforce_network: raw.network.and_then(|n| n.enforce).unwrap_or(false),
    })
}

fn parse_lifecycle(raw: RawLifecycle) -> Option<LifecyclePlan> {
    let timeout_s = raw.timeout_s?;
    let cap_s = raw.cap_s?;
    let auto_resume = raw.auto_resume?;
    let on_timeout = match raw.on_timeout?.as_str() {
        "kill" => OnTimeout::Kill,
        "pause" => OnTimeout::Pause,
        _ => return None,
    };
    let valid = (1..=28_800).contains(&timeout_s)
        && (120..=28_800).contains(&cap_s)
        && timeout_s <= cap_s
        && (!auto_resume || on_timeout == OnTimeout::Pause);
    valid.then_some(LifecyclePlan {
        timeout_s,
        cap_s,
        on_timeout,
        auto_resume,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn minimal_payload() {
        let p = parse(&format!(r#"{{"v":1,"token_sha256":"{DIGEST}"}}"#)).expect("valid");
        assert_eq!(p.token_sha256, Some([0u8; 32]));
        assert!(p.lifecycle.is_none());
    }

    #[test]
    fn rejects_bad_version_digest_and_lifecycle() {
        assert!(parse(&format!(r#"{{"v":2,"token_sha256":"{DIGEST}"}}"#)).is_none());
        assert!(parse(r#"{"v":1,"token_sha256":"abc"}"#).is_none());
        assert!(parse("not json").is_none());
        let lc = |body: &str| format!(r#"{{"v":1,"token_sha256":"{DIGEST}","lifecycle":{body}}}"#);
        assert!(parse(&lc(r#"{"timeout_s":10,"cap_s":120,"on_timeout":"kill"}"#)).is_none());
        assert!(
            parse(&lc(
                r#"{"timeout_s":10,"cap_s":100,"on_timeout":"kill","auto_resume":false}"#
            ))
            .is_none()
        );
        assert!(
            parse(&lc(
                r#"{"timeout_s":10,"cap_s":120,"on_timeout":"kill","auto_resume":true}"#
            ))
            .is_none()
        );
        let ok = parse(&lc(
            r#"{"timeout_s":10,"cap_s":120,"on_timeout":"pause","auto_resume":true}"#,
        ))
        .expect("valid");
        assert_eq!(
            ok.lifecycle,
            Some(LifecyclePlan {
                timeout_s: 10,
                cap_s: 120,
                on_timeout: OnTimeout::Pause,
                auto_resume: true
            })
        );
    }
}
