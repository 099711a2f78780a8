//! The wire form: a JSON object that rebuilds the same error in another
//! process (a job queue, an RPC).
//!
//! ```json
//! {"kind": "rate_limit", "message": "...", "retry_after": {"secs": 2, "nanos": 0},
//!  "meta": {"server_message": "...", "grpc_code": null, "http_status": 429,
//!           "aws_code": "ThrottlingException", "request_id": "...",
//!           "reason": null, "attempts": 5}}
//! ```
//!
//! `meta.elapsed` (`{secs, nanos}`) is present only when the SDK measured
//! how long it kept trying (a reconnect that gave up).
//!
//! Variant fields sit next to `kind`; `meta` holds the shared metadata. An
//! unknown kind (from a newer SDK) comes back as `Sandbox` with an unknown
//! code that keeps the kind string, and with the message and metadata.
//! Anything else malformed is a [`WireError`], never a panic.
//!
//! The wire form may come from anywhere (a queue another process writes),
//! so every text is bounded and cleaned as the mappers' own output is
//! (redacted, one line where the mapper makes one line), and nothing in it
//! can make the error more retryable than its kind: an unknown kind is
//! `Sandbox { code: Unknown }`, never a known code. Captured command output
//! (`stdout`, `stderr`) is data and kept as sent.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::codes::{
    CapacityCode, CapturedText, CommandExitStatus, GrpcCode, MAX_TOKEN_CHARS, SandboxCode,
    TimeoutScope,
};
use super::map::redact::{MAX_KEPT_CHARS, redact_aws_text, sanitize_remote_text};
use super::{ErrorKind, ErrorMeta, SandboxError};

/// Bounds of the texts read from a wire form, the mappers' own: our
/// message, the control plane's state reason and quota code, the fields of
/// `Unimplemented`.
const MAX_MESSAGE_CHARS: usize = MAX_KEPT_CHARS;
const MAX_STATE_REASON_CHARS: usize = 256;
const MAX_QUOTA_CODE_CHARS: usize = 128;
const MAX_FEATURE_CHARS: usize = 128;
const MAX_REASON_CHARS: usize = 512;

/// A one-line text from the wire, cleaned like a mapper's output; `None`
/// when nothing is left.
fn line(text: Option<String>, max_chars: usize) -> Option<String> {
    text.map(|t| sanitize_remote_text(&t, max_chars))
        .filter(|t| !t.is_empty())
}

/// A value that is not a `SandboxError` in wire form. It says what was
/// wrong, never what the input contained.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a rayito error in wire form: {reason}")]
pub struct WireError {
    reason: &'static str,
}

impl WireError {
    fn new(reason: &'static str) -> Self {
        Self { reason }
    }
}

type Fields<'a> = &'a Map<String, Value>;

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| Value::String(s.to_owned()))
}

fn duration_json(d: Duration) -> Value {
    json!({"secs": d.as_secs(), "nanos": d.subsec_nanos()})
}

impl SandboxError {
    /// The wire form of this error (a JSON object).
    pub fn to_wire(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("kind".into(), self.kind().as_str().into());
        obj.insert("message".into(), self.meta().message().into());
        let mut put = |k: &str, v: Value| {
            obj.insert(k.to_owned(), v);
        };
        match self {
            Self::Sandbox { code, .. } => {
                put("code", opt_str(code.as_ref().map(SandboxCode::as_str)))
            }
            Self::Timeout { scope, .. } => put("scope", scope.as_str().into()),
            Self::InvalidArgument { argument, .. } => put("argument", opt_str(argument.as_deref())),
            Self::SandboxNotReady {
                state,
                state_reason,
                ..
            } => {
                put(
                    "state",
                    opt_str(state.as_ref().map(crate::SandboxState::as_str)),
                );
                put("state_reason", opt_str(state_reason.as_deref()));
            }
            Self::CommandExit {
                exit_code,
                stdout,
                stderr,
                status,
                truncated,
                ..
            } => {
                put("exit_code", (*exit_code).into());
                put("stdout", stdout.as_str().into());
                put("stderr", stderr.as_str().into());
                put("status", status.as_str().into());
                put("truncated", (*truncated).into());
            }
            Self::RateLimit { retry_after, .. } => {
                put(
                    "retry_after",
                    retry_after.map_or(Value::Null, duration_json),
                );
            }
            Self::Authentication { proxy_rejected, .. } => {
                put("proxy_rejected", (*proxy_rejected).into());
            }
            Self::QuotaExceeded { quota_code, .. } => {
                put("quota_code", opt_str(quota_code.as_deref()))
            }
            Self::Capacity { code, .. } => {
                put("code", opt_str(code.as_ref().map(CapacityCode::as_str)))
            }
            Self::Unimplemented {
                feature,
                reason,
                doc,
                ..
            } => {
                put("feature", (**feature).into());
                put("reason", (**reason).into());
                put("doc", opt_str(doc.as_deref()));
            }
            Self::LifecycleUnsupported {
                feature, reason, ..
            } => {
                put("feature", (**feature).into());
                put("reason", (**reason).into());
            }
            Self::NotFound { .. }
            | Self::FileNotFound { .. }
            | Self::SandboxNotFound { .. }
            | Self::SandboxState { .. }
            | Self::SandboxLifetime { .. }
            | Self::DiskFull { .. } => {}
        }
        let m = self.meta();
        let mut meta = json!({
            "server_message": m.server_message(),
            "grpc_code": m.grpc_code().map(GrpcCode::as_str),
            "http_status": m.http_status(),
            "aws_code": m.aws_code(),
            "request_id": m.request_id(),
            "reason": m.reason(),
            "attempts": m.attempts(),
        });
        // Only when the SDK says (older readers never see the key).
        if let (Some(elapsed), Some(fields)) = (m.elapsed(), meta.as_object_mut()) {
            fields.insert("elapsed".into(), duration_json(elapsed));
        }
        obj.insert("meta".into(), meta);
        Value::Object(obj)
    }

    /// The wire form as a JSON string.
    pub fn to_wire_string(&self) -> String {
        self.to_wire().to_string()
    }

    /// Rebuilds an error from its wire form.
    ///
    /// # Errors
    ///
    /// [`WireError`] when the value is not an object, lacks `kind` or
    /// `message`, or a field has the wrong type. An unknown kind is not an
    /// error: it becomes `Sandbox` with an unknown code.
    pub fn from_wire(value: &Value) -> Result<Self, WireError> {
        let obj = value
            .as_object()
            .ok_or(WireError::new("not a JSON object"))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or(WireError::new("`kind` is missing or not a string"))?;
        let message = obj
            .get("message")
            .and_then(Value::as_str)
            .ok_or(WireError::new("`message` is missing or not a string"))?;
        let meta = Box::new(read_meta(obj.get("meta"), message)?);
        let Some(kind) = ErrorKind::from_name(kind) else {
            return Ok(Self::Sandbox {
                code: Some(SandboxCode::of_unknown_kind(kind)),
                meta,
            });
        };
        let f = obj;
        Ok(match kind {
            ErrorKind::Sandbox => Self::Sandbox {
                code: opt_string(f, "code")?.map(|c| SandboxCode::from(c.as_str())),
                meta,
            },
            ErrorKind::Timeout => Self::Timeout {
                scope: TimeoutScope::from(req_string(f, "scope")?.as_str()),
                meta,
            },
            ErrorKind::InvalidArgument => Self::InvalidArgument {
                argument: line(opt_string(f, "argument")?, MAX_TOKEN_CHARS).map(Cow::Owned),
                meta,
            },
            ErrorKind::NotFound => Self::NotFound { meta },
            ErrorKind::FileNotFound => Self::FileNotFound { meta },
            ErrorKind::SandboxNotFound => Self::SandboxNotFound { meta },
            ErrorKind::SandboxNotReady => Self::SandboxNotReady {
                state: opt_string(f, "state")?
                    .map(|s| crate::SandboxState::from(s.as_str()))
                    .filter(|s| !s.as_str().is_empty()),
                state_reason: line(opt_string(f, "state_reason")?, MAX_STATE_REASON_CHARS),
                meta,
            },
            ErrorKind::SandboxState => Self::SandboxState { meta },
            ErrorKind::SandboxLifetime => Self::SandboxLifetime { meta },
            ErrorKind::CommandExit => Self::CommandExit {
                exit_code: f
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .and_then(|c| i32::try_from(c).ok())
                    .ok_or(WireError::new("`exit_code` is missing or not an i32"))?,
                stdout: CapturedText::new(opt_string(f, "stdout")?.unwrap_or_default()),
                stderr: CapturedText::new(opt_string(f, "stderr")?.unwrap_or_default()),
                status: CommandExitStatus::from(req_string(f, "status")?.as_str()),
                truncated: opt_bool(f, "truncated")?.unwrap_or(false),
                meta,
            },
            ErrorKind::DiskFull => Self::DiskFull { meta },
            ErrorKind::RateLimit => Self::RateLimit {
                retry_after: read_duration(f.get("retry_after"))?,
                meta,
            },
            ErrorKind::Authentication => Self::Authentication {
                proxy_rejected: opt_bool(f, "proxy_rejected")?.unwrap_or(false),
                meta,
            },
            ErrorKind::QuotaExceeded => Self::QuotaExceeded {
                quota_code: line(opt_string(f, "quota_code")?, MAX_QUOTA_CODE_CHARS),
                meta,
            },
            ErrorKind::Capacity => Self::Capacity {
                code: opt_string(f, "code")?.map(|c| CapacityCode::from(c.as_str())),
                meta,
            },
            ErrorKind::Unimplemented => Self::Unimplemented {
                feature: sanitize_remote_text(&req_string(f, "feature")?, MAX_FEATURE_CHARS).into(),
                reason: sanitize_remote_text(&req_string(f, "reason")?, MAX_REASON_CHARS).into(),
                doc: line(opt_string(f, "doc")?, MAX_REASON_CHARS).map(Into::into),
                meta,
            },
            ErrorKind::LifecycleUnsupported => Self::LifecycleUnsupported {
                feature: sanitize_remote_text(&req_string(f, "feature")?, MAX_FEATURE_CHARS).into(),
                reason: sanitize_remote_text(&req_string(f, "reason")?, MAX_REASON_CHARS).into(),
                meta,
            },
        })
    }

    /// Rebuilds an error from its wire form as a JSON string.
    ///
    /// # Errors
    ///
    /// [`WireError`] when the text is not JSON or not a valid wire form.
    pub fn from_wire_str(text: &str) -> Result<Self, WireError> {
        let value: Value =
            serde_json::from_str(text).map_err(|_| WireError::new("not valid JSON"))?;
        Self::from_wire(&value)
    }
}

fn opt_string(f: Fields<'_>, key: &'static str) -> Result<Option<String>, WireError> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(WireError::new("a text field is not a string")),
    }
}

fn req_string(f: Fields<'_>, key: &'static str) -> Result<String, WireError> {
    opt_string(f, key)?.ok_or(WireError::new("a required text field is missing"))
}

fn opt_bool(f: Fields<'_>, key: &'static str) -> Result<Option<bool>, WireError> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(WireError::new("a flag is not a boolean")),
    }
}

fn read_duration(v: Option<&Value>) -> Result<Option<Duration>, WireError> {
    let bad = || WireError::new("a duration is not {secs, nanos}");
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => {
            let secs = o.get("secs").and_then(Value::as_u64).ok_or_else(bad)?;
            let nanos = o
                .get("nanos")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n < 1_000_000_000)
                .ok_or_else(bad)?;
            Ok(Some(Duration::new(secs, nanos)))
        }
        Some(_) => Err(bad()),
    }
}

fn read_meta(v: Option<&Value>, message: &str) -> Result<ErrorMeta, WireError> {
    let mut meta = ErrorMeta::new(sanitize_remote_text(message, MAX_MESSAGE_CHARS));
    let obj = match v {
        None | Some(Value::Null) => return Ok(meta),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(WireError::new("`meta` is not an object")),
    };
    // Cleaned as the mappers clean them: the sender may not be this SDK.
    meta.server_message = opt_string(obj, "server_message")?
        .map(|t| redact_aws_text(&t))
        .filter(|t| !t.is_empty());
    if let Some(code) = opt_string(obj, "aws_code")? {
        meta = meta.with_aws_code(code);
    }
    if let Some(id) = opt_string(obj, "request_id")? {
        meta = meta.with_request_id(id);
    }
    if let Some(reason) = opt_string(obj, "reason")? {
        meta = meta.with_reason(reason);
    }
    meta.grpc_code = match opt_string(obj, "grpc_code")? {
        None => None,
        Some(name) => Some(
            GrpcCode::from_name(&name)
                .ok_or(WireError::new("`meta.grpc_code` is not a gRPC code"))?,
        ),
    };
    meta.http_status = match obj.get("http_status") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .ok_or(WireError::new("`meta.http_status` is not a u16"))?,
        ),
    };
    meta.attempts = match obj.get("attempts") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|a| u32::try_from(a).ok())
            .ok_or(WireError::new("`meta.attempts` is not a u32"))?,
    };
    meta.elapsed = read_duration(obj.get("elapsed"))?;
    Ok(meta)
}

impl serde::Serialize for SandboxError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for SandboxError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Self::from_wire(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), ".{0,40}", "[a-z_]{1,12}"]
    }

    fn opt_text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(text())
    }

    /// A one-line text as a mapper keeps it (the SDK's own errors hold
    /// only such texts, and `from_wire` cleans them the same way).
    fn clean(max: usize) -> impl Strategy<Value = String> {
        text().prop_map(move |t| sanitize_remote_text(&t, max))
    }

    fn opt_clean(max: usize) -> impl Strategy<Value = Option<String>> {
        proptest::option::of(clean(max)).prop_map(|t| t.filter(|t| !t.is_empty()))
    }

    fn meta() -> impl Strategy<Value = Box<ErrorMeta>> {
        (
            clean(MAX_MESSAGE_CHARS),
            opt_text().prop_map(|t| t.map(|t| redact_aws_text(&t)).filter(|t| !t.is_empty())),
            proptest::option::of(proptest::sample::select(GrpcCode::ALL)),
            proptest::option::of(any::<u16>()),
            (opt_clean(256), opt_clean(256), opt_clean(256)),
            (any::<u32>(), proptest::option::of(duration())),
        )
            .prop_map(
                |(message, server, grpc, http, (aws, req, reason), (attempts, elapsed))| {
                    Box::new(ErrorMeta {
                        message,
                        server_message: server,
                        grpc_code: grpc,
                        http_status: http,
                        aws_code: aws,
                        request_id: req,
                        reason,
                        attempts,
                        elapsed,
                        cause: None,
                    })
                },
            )
    }

    fn duration() -> impl Strategy<Value = Duration> {
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n))
    }

    /// Every variant, with arbitrary fields.
    fn any_error() -> impl Strategy<Value = SandboxError> {
        let code = |t: String| SandboxCode::from(t.as_str());
        prop_oneof![
            (proptest::option::of(text().prop_map(code)), meta())
                .prop_map(|(code, meta)| SandboxError::Sandbox { code, meta }),
            (text(), meta()).prop_map(|(s, meta)| SandboxError::Timeout {
                scope: TimeoutScope::from(s.as_str()),
                meta
            }),
            (opt_clean(MAX_TOKEN_CHARS), meta()).prop_map(|(a, meta)| {
                SandboxError::InvalidArgument {
                    argument: a.map(Cow::Owned),
                    meta,
                }
            }),
            meta().prop_map(|meta| SandboxError::NotFound { meta }),
            meta().prop_map(|meta| SandboxError::FileNotFound { meta }),
            meta().prop_map(|meta| SandboxError::SandboxNotFound { meta }),
            (opt_text(), opt_clean(MAX_STATE_REASON_CHARS), meta()).prop_map(
                |(state, state_reason, meta)| {
                    SandboxError::SandboxNotReady {
                        state: state
                            .map(|s| crate::SandboxState::from(s.as_str()))
                            .filter(|s| !s.as_str().is_empty()),
                        state_reason,
                        meta,
                    }
                }
            ),
            meta().prop_map(|meta| SandboxError::SandboxState { meta }),
            meta().prop_map(|meta| SandboxError::SandboxLifetime { meta }),
            (any::<i32>(), text(), text(), text(), any::<bool>(), meta()).prop_map(
                |(exit_code, o, e, s, truncated, meta)| SandboxError::CommandExit {
                    exit_code,
                    stdout: CapturedText::new(o),
                    stderr: CapturedText::new(e),
                    status: CommandExitStatus::from(s.as_str()),
                    truncated,
                    meta,
                }
            ),
            meta().prop_map(|meta| SandboxError::DiskFull { meta }),
            (proptest::option::of(duration()), meta())
                .prop_map(|(retry_after, meta)| SandboxError::RateLimit { retry_after, meta }),
            (any::<bool>(), meta()).prop_map(|(proxy_rejected, meta)| {
                SandboxError::Authentication {
                    proxy_rejected,
                    meta,
                }
            }),
            (opt_clean(MAX_QUOTA_CODE_CHARS), meta())
                .prop_map(|(quota_code, meta)| SandboxError::QuotaExceeded { quota_code, meta }),
            (opt_text(), meta()).prop_map(|(c, meta)| SandboxError::Capacity {
                code: c.map(|c| CapacityCode::from(c.as_str())),
                meta
            }),
            (
                clean(MAX_FEATURE_CHARS),
                clean(MAX_REASON_CHARS),
                opt_clean(MAX_REASON_CHARS),
                meta()
            )
                .prop_map(|(f, r, d, meta)| {
                    SandboxError::Unimplemented {
                        feature: f.into(),
                        reason: r.into(),
                        doc: d.map(Into::into),
                        meta,
                    }
                }),
            (clean(MAX_FEATURE_CHARS), clean(MAX_REASON_CHARS), meta()).prop_map(|(f, r, meta)| {
                SandboxError::LifecycleUnsupported {
                    feature: f.into(),
                    reason: r.into(),
                    meta,
                }
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn wire_round_trips_every_variant(e in any_error()) {
            let back = SandboxError::from_wire(&e.to_wire()).expect("own wire form parses");
            prop_assert_eq!(&back, &e);
            let back = SandboxError::from_wire_str(&e.to_wire_string()).expect("string form parses");
            prop_assert_eq!(&back, &e);
            let via_serde: SandboxError =
                serde_json::from_str(&serde_json::to_string(&e).expect("serializes")).expect("deserializes");
            prop_assert_eq!(via_serde, e);
        }
    }

    #[test]
    fn every_kind_is_covered_by_the_strategy() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_000 {
            let e = any_error().new_tree(&mut runner).expect("tree").current();
            seen.insert(e.kind());
        }
        assert_eq!(seen.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn wire_shape_is_stable() {
        let e = SandboxError::RateLimit {
            retry_after: Some(Duration::from_millis(2_500)),
            meta: Box::new(ErrorMeta {
                message: "m".into(),
                http_status: Some(429),
                aws_code: Some("ThrottlingException".into()),
                attempts: 5,
                ..ErrorMeta::default()
            }),
        };
        assert_eq!(
            e.to_wire_string(),
            r#"{"kind":"rate_limit","message":"m","meta":{"attempts":5,"aws_code":"ThrottlingException","grpc_code":null,"http_status":429,"reason":null,"request_id":null,"server_message":null},"retry_after":{"nanos":500000000,"secs":2}}"#
        );
    }

    #[test]
    fn unknown_kinds_come_back_as_sandbox_with_the_kind_kept() {
        let v = json!({"kind": "pool_closed", "message": "the pool is closed", "meta": {"attempts": 2}});
        let e = SandboxError::from_wire(&v).expect("unknown kinds are accepted");
        assert!(matches!(
            &e,
            SandboxError::Sandbox { code: Some(c), .. } if c.as_str() == "pool_closed" && !c.is_known()
        ));
        assert_eq!(e.to_string(), "the pool is closed");
        assert_eq!(e.meta().attempts(), 2);
    }

    #[test]
    fn a_kind_that_spells_a_code_never_chooses_it() {
        for code in SandboxCode::VALUES {
            let v = json!({"kind": code, "message": "m"});
            let e = SandboxError::from_wire(&v).expect("unknown kinds are accepted");
            let Some(c) = e.sandbox_code() else {
                panic!("{e:?}")
            };
            assert!(!c.is_known(), "{code}: {e:?}");
            assert_eq!(c.as_str(), format!("kind:{code}"));
            assert!(!e.is_retryable(), "{code}");
            // And it stays so across another hop.
            assert_eq!(SandboxError::from_wire(&e.to_wire()).as_ref(), Ok(&e));
        }
    }

    #[test]
    fn wire_texts_are_bounded_and_cleaned_like_a_mappers() {
        let key = "AKIAIOSFODNN7EXAMPLE";
        let long = format!("x-amz-{}", "y".repeat(5_000));
        let v = json!({
            "kind": "invalid_argument",
            "message": format!("bad\nvalue {key} {long}"),
            "argument": format!("arg\u{7}{key}{long}"),
            "meta": {
                "server_message": format!("line one\nAuthorization: {key}\n{long}"),
                "aws_code": format!("Code {key}"),
                "request_id": long.clone(),
                "reason": format!("\tsome_token {key}"),
            },
        });
        let e = SandboxError::from_wire(&v).expect("accepted");
        let wire = e.to_wire_string();
        assert!(!wire.contains(key), "{wire}");
        assert!(!format!("{e:?} {e}").contains(key));
        let m = e.meta();
        assert!(!m.message().contains('\n'));
        assert!(m.message().chars().count() <= MAX_MESSAGE_CHARS);
        assert_eq!(
            m.server_message(),
            Some("line one\nAuthorization: [redacted]\n")
        );
        assert_eq!(m.aws_code(), Some("Code [redacted]"));
        assert_eq!(m.reason(), Some("some_token [redacted]"));
        assert!(m.request_id().is_none_or(|r| r.chars().count() <= 256));
        let SandboxError::InvalidArgument {
            argument: Some(a), ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(a.chars().count() <= MAX_TOKEN_CHARS && !a.contains('\u{7}'));
    }

    #[test]
    fn garbage_is_an_error_that_quotes_nothing() {
        let cases = [
            json!(null),
            json!("timeout"),
            json!([1, 2]),
            json!({"message": "m"}),
            json!({"kind": 3, "message": "m"}),
            json!({"kind": "timeout"}),
            json!({"kind": "timeout", "message": "m"}),
            json!({"kind": "command_exit", "message": "m", "status": "exited"}),
            json!({"kind": "command_exit", "message": "m", "exit_code": 1u64 << 40, "status": "exited"}),
            json!({"kind": "rate_limit", "message": "m", "retry_after": 3}),
            json!({"kind": "rate_limit", "message": "m", "retry_after": {"secs": 1, "nanos": 2_000_000_000u64}}),
            json!({"kind": "sandbox", "message": "m", "meta": {"grpc_code": "NOPE"}}),
            json!({"kind": "sandbox", "message": "m", "meta": {"http_status": 70000}}),
            json!({"kind": "sandbox", "message": "m", "meta": "x"}),
            json!({"kind": "authentication", "message": "m", "proxy_rejected": "yes"}),
            json!({"kind": "unimplemented", "message": "m", "feature": "f"}),
        ];
        for v in cases {
            let err = SandboxError::from_wire(&v).expect_err(&v.to_string());
            assert!(
                err.to_string()
                    .starts_with("not a rayito error in wire form: ")
            );
            assert!(!err.to_string().contains("NOPE"));
        }
        assert_eq!(
            SandboxError::from_wire_str("{not json")
                .unwrap_err()
                .to_string(),
            "not a rayito error in wire form: not valid JSON"
        );
    }
}
