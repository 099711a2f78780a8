//! The run payload round trip: what the SDK builds for a builder (through
//! `rayito::test_util::run_hook_payload`, the code path of `create`) is
//! parsed by the agent's own parser (`rayito_agent::run_payload::parse`),
//! and every field it parses equals what the options say, derived from the
//! contract (wire-contract.md, "Lifecycle") rather than from the SDK's
//! output: the default cap is `min(max(timeout + 60, 120), 28,800)`, and
//! the lifecycle block's `auto_resume` is the caller's flag in pause mode
//! (the explicit idle policy's, else on) and false in kill mode.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use rayito::{IdlePolicy, OnTimeout, Sandbox, SandboxBuilder};
use rayito_agent::run_payload::{self, LifecyclePlan};
use sha2::Digest as _;

const TOKEN: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

/// The options one case sets, as plain values the expectation is derived
/// from.
#[derive(Clone, Debug, Default)]
struct Case {
    timeout_s: u64,
    max_lifetime_s: Option<u64>,
    on_timeout: Option<OnTimeout>,
    /// An explicit idle policy: (max idle, auto resume).
    idle: Option<(u64, bool)>,
}

impl Case {
    fn builder(&self) -> SandboxBuilder {
        let mut b = Sandbox::builder()
            .access_token(TOKEN)
            .timeout(Duration::from_secs(self.timeout_s));
        if let Some(cap) = self.max_lifetime_s {
            b = b.max_lifetime(Duration::from_secs(cap));
        }
        if let Some(on_timeout) = self.on_timeout {
            b = b.on_timeout(on_timeout);
        }
        if let Some((max_idle, auto_resume)) = self.idle {
            b = b.idle_policy(
                IdlePolicy::new(Duration::from_secs(max_idle)).auto_resume(auto_resume),
            );
        }
        b
    }

    /// The lifecycle block the contract gives these options.
    fn expected(&self) -> Option<LifecyclePlan> {
        if self.max_lifetime_s.is_none() && self.on_timeout.is_none() {
            return None;
        }
        let pause = matches!(self.on_timeout, Some(OnTimeout::Pause));
        Some(LifecyclePlan {
            timeout_s: self.timeout_s,
            cap_s: self
                .max_lifetime_s
                .unwrap_or_else(|| (self.timeout_s + 60).clamp(120, 28_800)),
            on_timeout: if pause {
                run_payload::OnTimeout::Pause
            } else {
                run_payload::OnTimeout::Kill
            },
            auto_resume: pause && self.idle.is_none_or(|(_, auto)| auto),
        })
    }
}

fn token_digest() -> [u8; 32] {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(TOKEN)
        .unwrap();
    sha2::Sha256::digest(bytes).into()
}

#[test]
fn every_lifecycle_combination_round_trips_through_the_agents_parser() {
    let case = |timeout_s, max_lifetime_s, on_timeout, idle| Case {
        timeout_s,
        max_lifetime_s,
        on_timeout,
        idle,
    };
    let cases = [
        // Unmanaged: no lifecycle block.
        case(300, None, None, None),
        case(300, None, None, Some((120, false))),
        // Kill at the timeout, with the default cap (above and below 120 s,
        // and clamped at the platform cap) or a given one.
        case(300, None, Some(OnTimeout::Kill), None),
        case(30, None, Some(OnTimeout::Kill), None),
        case(28_800, None, Some(OnTimeout::Kill), None),
        case(600, Some(3_600), None, None),
        case(600, Some(3_600), Some(OnTimeout::Kill), Some((120, true))),
        // Pause at the timeout: the caller's auto-resume flag travels in
        // the block; a short sandbox gets an idle window derived from its
        // timeout.
        case(600, None, Some(OnTimeout::Pause), None),
        case(600, None, Some(OnTimeout::Pause), Some((120, false))),
        case(600, Some(7_200), Some(OnTimeout::Pause), Some((300, true))),
        case(60, None, Some(OnTimeout::Pause), None),
    ];
    for case in cases {
        let payload = rayito::test_util::run_hook_payload(&case.builder())
            .unwrap_or_else(|err| panic!("{case:?}: {err}"));
        let parsed = run_payload::parse(&payload)
            .unwrap_or_else(|| panic!("{case:?}: the agent refused the payload"));
        assert_eq!(parsed.lifecycle, case.expected(), "{case:?}");
        assert_eq!(parsed.token_sha256, Some(token_digest()), "{case:?}");
        assert_eq!(parsed.workdir.as_deref(), Some("/home/user"), "{case:?}");
        assert!(parsed.envs.is_empty() && parsed.metadata.is_empty());
        assert_eq!(parsed.cpu_seconds, None);
    }
}

/// Envs and metadata come back exactly, non-ASCII text included (the SDK
/// escapes it as `\uXXXX`, surrogate pairs for characters beyond the BMP,
/// which the agent must decode).
#[test]
fn envs_and_metadata_round_trip_with_non_ascii_text() {
    let envs = BTreeMap::from([
        ("GREETING".to_owned(), "héllo wörld ✓ 🦀".to_owned()),
        ("EMPTY".to_owned(), String::new()),
        ("QUOTES".to_owned(), r#"a "b" \c"#.to_owned()),
    ]);
    let metadata = BTreeMap::from([
        ("team".to_owned(), "données".to_owned()),
        ("emoji".to_owned(), "🚀".to_owned()),
    ]);
    let builder = Sandbox::builder()
        .access_token(TOKEN)
        .envs(envs.clone())
        .metadata(metadata.clone())
        .on_timeout(OnTimeout::Pause);
    let payload = rayito::test_util::run_hook_payload(&builder).unwrap();
    assert!(payload.is_ascii(), "non-ASCII is escaped");
    let parsed = run_payload::parse(&payload).expect("the agent accepts it");
    assert_eq!(parsed.envs, envs);
    assert_eq!(parsed.metadata, metadata);
    assert!(parsed.lifecycle.is_some());
}

/// A payload the SDK refuses is never built: the same check as `create`.
#[test]
fn an_oversized_payload_is_refused_before_it_is_built() {
    let builder = Sandbox::builder()
        .access_token(TOKEN)
        .envs([("BIG", "x".repeat(4_096))]);
    let err = rayito::test_util::run_hook_payload(&builder).unwrap_err();
    // Counted as the reference counts (Python's compact, sorted
    // json.dumps): 144 characters around the 4,096 of the value.
    assert_eq!(
        err.to_string(),
        "invalid envs: the run payload is 4,240 characters, above the limit of 4,096; pass fewer or shorter envs and metadata"
    );
}
