//! Properties: no mapping and no `from_wire` panics on arbitrary input; no
//! text a guest controls turns a non-retryable failure retryable; code lists
//! round-trip any token; redaction always removes the secret shapes and
//! always cuts at 2,048 characters.

use std::time::Duration;

use proptest::prelude::*;
use rayito::test_util::{
    AwsError, Call as CallContext, CommandOutput, EndEvent, TransportFailure, agent_status,
    aws_no_credentials, end_event, proxy_answer, redact as redact_aws_text, stream_error,
    transport_failure,
};

/// The most characters of server text an error keeps (docs/errors.md).
const MAX_KEPT_CHARS: usize = 2_048;

fn end_event_of(
    status: String,
    exit_code: i32,
    signal: Option<i32>,
    error: Option<(String, String)>,
) -> EndEvent {
    let mut end = EndEvent::new(status, exit_code);
    if let Some(signal) = signal {
        end = end.signal(signal);
    }
    if let Some((code, message)) = error {
        end = end.error(code, message);
    }
    end
}
use rayito::error::{
    CapacityCode, CommandExitStatus, GrpcCode, SandboxCode, SandboxError, TimeoutScope,
};

/// Text a server or guest could send: arbitrary unicode, the exact markers,
/// and near misses.
fn remote_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,80}",
        "\\PC{0,300}",
        proptest::sample::select(vec![
            "suspending",
            "terminating",
            "kernel not ready",
            "kernel not ready: starting",
            "sandbox_timeout",
            "disk_reserve",
            "disk_full",
            "RST_STREAM",
            "Connection reset by peer",
            "failed to connect to all addresses",
            "grpc-status header missing, mapped from HTTP status code 503",
            "connection_lost",
            "service_error",
        ])
        .prop_map(str::to_owned),
    ]
}

fn stream_code() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,20}",
        ".{0,20}",
        proptest::sample::select(vec![
            "not_found",
            "permission_denied",
            "deadline_exceeded",
            "sandbox_timeout",
            "unimplemented",
            "invalid_argument",
            "failed_precondition",
            "resource_exhausted",
            "suspending",
            "output_truncated",
            "cancelled",
            "connection_lost",
            "kernel_not_ready",
        ])
        .prop_map(str::to_owned),
    ]
}

fn call() -> impl Strategy<Value = CallContext> {
    (any::<bool>(), any::<bool>()).prop_map(|(fs, cancelled)| {
        let c = if fs {
            CallContext::filesystem("files.read")
        } else {
            CallContext::new("commands.run")
        };
        if cancelled {
            c.cancelled_by_caller()
        } else {
            c
        }
    })
}

fn grpc_code() -> impl Strategy<Value = GrpcCode> {
    proptest::sample::select(GrpcCode::ALL)
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
        proptest::sample::select(vec![
            "command_exit",
            "rate_limit",
            "timeout",
            "unimplemented",
            "sandbox",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        let keys = proptest::sample::select(vec![
            "kind",
            "message",
            "meta",
            "exit_code",
            "status",
            "retry_after",
            "secs",
            "nanos",
            "grpc_code",
            "http_status",
            "attempts",
            "feature",
            "reason",
            "code",
            "scope",
        ]);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(keys.prop_map(str::to_owned), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn aws_mapping_never_panics(
        code in proptest::option::of(remote_text()),
        message in proptest::option::of(remote_text()),
        status in proptest::option::of(any::<u16>()),
        retry in proptest::option::of((any::<u64>(), 0u32..1_000_000_000)),
        quota in proptest::option::of(remote_text()),
        request_id in proptest::option::of(remote_text()),
        no_response in proptest::option::of(0u8..3),
        run in any::<bool>(),
    ) {
        let operation = if run { "RunMicrovm" } else { "GetMicrovm" };
        let mut f = match no_response {
            None => AwsError::new(operation),
            Some(0) => AwsError::timed_out(operation),
            Some(1) => AwsError::connect_failed(operation),
            Some(_) => AwsError::no_response(operation),
        };
        if let Some(code) = code { f = f.code(code); }
        if let Some(message) = message { f = f.message(message); }
        if let Some(status) = status { f = f.http_status(status); }
        if let Some((s, n)) = retry { f = f.retry_after(Duration::new(s, n)); }
        if let Some(quota) = quota { f = f.quota_code(quota); }
        if let Some(id) = request_id { f = f.request_id(id); }
        let _ = format!("{f:?}");
        let e = f.build();
        let _ = (e.to_string(), format!("{e:?}"), e.classify(), e.to_wire());
        prop_assert!(e.meta().server_message().is_none_or(|m| m.chars().count() <= MAX_KEPT_CHARS));
        let _ = aws_no_credentials(&e.to_string());
    }

    #[test]
    fn grpc_mapping_never_panics(code in grpc_code(), message in remote_text(), has_status in any::<bool>(), call in call(), status in any::<u16>()) {
        let e = if has_status {
            agent_status(code, &message, call)
        } else {
            transport_failure(TransportFailure::Reset { code }, &message, call)
        };
        let _ = (e.to_string(), format!("{e:?}"), e.classify().to_json(), e.to_wire());
        let _ = proxy_answer(status, call).to_string();
    }

    #[test]
    fn agent_mapping_never_panics(
        code in stream_code(),
        message in remote_text(),
        call in call(),
        status in stream_code(),
        exit_code in any::<i32>(),
        signal in proptest::option::of(any::<i32>()),
        error in proptest::option::of((stream_code(), remote_text())),
        command in ".{0,60}",
    ) {
        let _ = stream_error(&code, &message, call).to_wire();
        let end = end_event_of(status, exit_code, signal, error);
        if let Err(e) = end_event(end, CommandOutput::default(), &command) {
            let _ = (e.to_string(), e.classify());
        }
    }

    #[test]
    fn from_wire_never_panics(value in json_value(), text in ".{0,200}") {
        if let Ok(e) = SandboxError::from_wire(&value) {
            // Whatever is accepted round-trips.
            let back = SandboxError::from_wire(&e.to_wire());
            prop_assert_eq!(back.as_ref(), Ok(&e));
        }
        let _ = SandboxError::from_wire_str(&text);
    }

    /// The message of an agent status can only make a failure less
    /// retryable than the status code alone would.
    #[test]
    fn guest_text_never_makes_a_grpc_status_retryable(code in grpc_code(), message in remote_text(), call in call()) {
        let with_text = agent_status(code, &message, call);
        let neutral = agent_status(code, "", call);
        prop_assert!(!with_text.is_retryable() || neutral.is_retryable(),
            "{:?} {:?} became retryable", code, message);
        // Nor does it choose the variant of a transport failure.
        prop_assert_eq!(with_text.meta().http_status(), None);
    }

    #[test]
    fn guest_text_never_makes_a_stream_error_retryable(code in stream_code(), message in remote_text(), call in call()) {
        let with_text = stream_error(&code, &message, call);
        let neutral = stream_error(&code, "", call);
        prop_assert!(!with_text.is_retryable() || neutral.is_retryable());
        // Only the agent's two environmental codes are ever retryable.
        if with_text.is_retryable() {
            prop_assert!(code == "resource_exhausted" || code == "suspending", "{}", code);
        }
    }

    #[test]
    fn an_end_event_is_retryable_only_through_an_exact_environmental_code(
        status in stream_code(),
        exit_code in any::<i32>(),
        error in proptest::option::of((stream_code(), remote_text())),
    ) {
        let end = end_event_of(status, exit_code, None, error.clone());
        if let Err(e) = end_event(end, CommandOutput::default(), "x") && e.is_retryable() {
            let code = error.map(|(c, _)| c).unwrap_or_default();
            prop_assert!(code == "resource_exhausted" || code == "suspending", "{}", code);
        }
    }

    #[test]
    fn code_lists_round_trip_any_token(s in ".{0,40}") {
        let v = SandboxCode::from(s.as_str());
        prop_assert_eq!(v.as_str(), s.as_str());
        let v = TimeoutScope::from(s.as_str());
        prop_assert_eq!(v.as_str(), s.as_str());
        let v = CapacityCode::from(s.as_str());
        prop_assert_eq!(v.as_str(), s.as_str());
        let v = CommandExitStatus::from(s.as_str());
        prop_assert_eq!(v.as_str(), s.as_str());
        prop_assert_eq!(SandboxCode::from(s.as_str()).is_known(), SandboxCode::VALUES.contains(&s.as_str()));
    }

    #[test]
    fn redaction_removes_every_secret_shape(
        before in "\\PC{0,200}",
        after in "\\PC{0,200}",
        hex in "[0-9a-f]{16,64}",
        key in "(AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}",
        token in "[A-Za-z0-9+/]{20}[0-9][A-Z][a-z][A-Za-z0-9+/=]{20,300}",
        which in 0usize..6,
    ) {
        let (text, secret) = match which {
            0 => (format!("{before} {hex} {after}"), hex.clone()),
            1 => (format!("{before} {key} {after}"), key.clone()),
            2 => (format!("{before}\nX-Amz-Security-Token:\n{token}\n{after}"), token.clone()),
            3 => (format!("{before} ?X-Amz-Signature={hex}&X-Amz-Credential={key} {after}"), hex.clone()),
            4 => (format!("{before}\nAuthorization: AWS4-HMAC-SHA256 Credential={key}/x\n{after}"), key.clone()),
            _ => (format!("{before} the canonical request was '{token}' {after}"), token.clone()),
        };
        let out = redact_aws_text(&text);
        prop_assert!(!out.contains(&secret), "{} survived in {}", secret, out);
        prop_assert!(out.chars().count() <= MAX_KEPT_CHARS);
    }

    #[test]
    fn redaction_always_cuts(text in "\\PC{0,3000}") {
        prop_assert!(redact_aws_text(&text).chars().count() <= MAX_KEPT_CHARS);
    }
}
