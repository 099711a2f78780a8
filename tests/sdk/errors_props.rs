//! Properties, and the fuzz targets of the error contract (docs/errors.md,
//! "Fuzzing the contract"): no mapping and no `from_wire` panics on
//! arbitrary input; no text a guest controls turns a non-retryable failure
//! retryable; a secret planted in any field of any mapper's input never
//! comes out; `from_wire` cleans and bounds what it reads and never
//! rebuilds an error more retryable than its kind; code lists clean any
//! token; redaction always removes the secret shapes, always keeps its
//! bound, and a second pass changes nothing.
//!
//! Each property runs proptest's default number of cases (256, what CI
//! runs); `PROPTEST_CASES=100000 cargo test -p rayito --release --test
//! errors_props` is the long fuzz run.

use std::time::Duration;

use proptest::prelude::*;
use rayito::test_util::{
    AwsError, Call as CallContext, CommandOutput, EndEvent, TransportFailure, agent_status,
    aws_no_credentials, end_event, proxy_answer, redact as redact_aws_text, stream_error,
    transport_failure,
};

/// The most characters of server text an error keeps (docs/errors.md).
const MAX_KEPT_CHARS: usize = 2_048;
/// The longest Display: kept server text plus the longest template around it.
const MAX_DISPLAY_CHARS: usize = MAX_KEPT_CHARS + 512;

/// Display is one line and bounded, whatever the server or guest sent.
fn assert_display_one_line(e: &SandboxError) -> Result<(), TestCaseError> {
    let text = e.to_string();
    prop_assert!(
        !text.contains('\n') && !text.contains('\r'),
        "two lines: {:?}",
        text
    );
    prop_assert!(
        text.chars().count() <= MAX_DISPLAY_CHARS,
        "{} chars",
        text.chars().count()
    );
    Ok(())
}

/// `from_wire(to_wire(e))` is `e`, through the text and through serde.
fn assert_round_trips(e: &SandboxError) -> Result<(), TestCaseError> {
    let wire = e.to_wire();
    let back = SandboxError::from_wire(&wire);
    prop_assert_eq!(back.as_ref(), Ok(e), "{}", wire);
    let via_serde: Result<SandboxError, _> = serde_json::from_str(&wire);
    prop_assert_eq!(via_serde.as_ref().ok(), Some(e));
    Ok(())
}

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
use rayito::SandboxState;
use rayito::error::{
    CapacityCode, CommandExitStatus, GrpcCode, SandboxCode, SandboxError, TimeoutScope,
};

/// Text a server or guest could send: arbitrary unicode (several lines and
/// control characters included), the exact markers, and near misses.
fn remote_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,80}",
        "\\PC{0,300}",
        "(?s).{0,120}",
        Just("line one\nline \"two\" \\ back\r\n\ttab \u{1b}[31m".to_owned()),
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
    // The default reads PROPTEST_CASES (256 when unset).
    #![proptest_config(ProptestConfig::default())]

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
        let make = |message: Option<&str>, request_id: Option<&str>| {
            let mut f = match no_response {
                None => AwsError::new(operation),
                Some(0) => AwsError::timed_out(operation),
                Some(1) => AwsError::connect_failed(operation),
                Some(_) => AwsError::no_response(operation),
            };
            if let Some(code) = &code { f = f.code(code.clone()); }
            if let Some(message) = message { f = f.message(message); }
            if let Some(status) = status { f = f.http_status(status); }
            if let Some((s, n)) = retry { f = f.retry_after(Duration::new(s, n)); }
            if let Some(quota) = &quota { f = f.quota_code(quota.clone()); }
            if let Some(id) = request_id { f = f.request_id(id); }
            f
        };
        let f = make(message.as_deref(), request_id.as_deref());
        let _ = format!("{f:?}");
        let e = f.build();
        let _ = (format!("{e:?}"), e.classify());
        assert_round_trips(&e)?;
        prop_assert!(e.meta().server_message().is_none_or(|m| m.chars().count() <= MAX_KEPT_CHARS));
        assert_display_one_line(&e)?;
        // What a failure is, and whether it is retried, never depends on
        // the text AWS sent with it.
        let quiet = make(None, None).build();
        prop_assert_eq!(e.kind(), quiet.kind());
        prop_assert_eq!(e.is_retryable(), quiet.is_retryable());
        let _ = aws_no_credentials(&e.to_string());
    }

    #[test]
    fn grpc_mapping_never_panics(code in grpc_code(), message in remote_text(), has_status in any::<bool>(), call in call(), status in any::<u16>()) {
        let e = if has_status {
            agent_status(code, &message, call)
        } else {
            transport_failure(TransportFailure::Reset { code }, &message, call)
        };
        let _ = (format!("{e:?}"), e.classify().to_json());
        assert_round_trips(&e)?;
        assert_display_one_line(&e)?;
        // Text after a prefix no marker starts with never changes the kind:
        // only the status code and the exact markers choose it.
        if has_status {
            let prefixed = agent_status(code, &format!("zz {message}"), call);
            prop_assert_eq!(prefixed.kind(), agent_status(code, "zz", call).kind());
            prop_assert!(!prefixed.is_retryable() || agent_status(code, "", call).is_retryable());
        }
        let proxy = proxy_answer(status, call);
        assert_round_trips(&proxy)?;
        assert_display_one_line(&proxy)?;
        prop_assert_eq!(proxy.meta().http_status(), Some(status));
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
        let streamed = stream_error(&code, &message, call);
        assert_round_trips(&streamed)?;
        assert_display_one_line(&streamed)?;
        // The code and the exact markers (`disk_reserve`, ...) choose the
        // kind: text after a prefix no marker has never does.
        let prefixed = stream_error(&code, &format!("zz {message}"), call);
        prop_assert_eq!(prefixed.kind(), stream_error(&code, "zz", call).kind());
        let end = end_event_of(status, exit_code, signal, error);
        if let Err(e) = end_event(end, CommandOutput::default(), &command) {
            let _ = e.classify();
            assert_round_trips(&e)?;
            assert_display_one_line(&e)?;
        }
    }

    #[test]
    fn from_wire_never_panics(value in json_value(), text in ".{0,200}") {
        if let Ok(e) = SandboxError::from_wire(&value.to_string()) {
            // Whatever is accepted round-trips.
            assert_round_trips(&e)?;
        }
        let _ = SandboxError::from_wire(&text);
    }

    /// Every public constructor, fed hostile text (several lines, control
    /// characters, secrets, over-long names), builds an error that the
    /// wire form rebuilds unchanged.
    #[test]
    fn every_constructed_error_survives_the_wire(
        a in remote_text(),
        b in remote_text(),
        c in remote_text(),
        secs in any::<u64>(),
        nanos in 0u32..1_000_000_000,
        attempts in any::<u32>(),
        scope in proptest::sample::select(vec!["request", "command", "execution", "sandbox", "state_wait", "other"]),
        has_doc in any::<bool>(),
    ) {
        // The `&'static str` arguments are names and fixed texts of the
        // caller's code; leaked here so that they can be hostile too.
        let name: &'static str = Box::leak(a.clone().into_boxed_str());
        let fixed: &'static str = Box::leak(b.clone().into_boxed_str());
        let waited = Duration::new(secs, nanos);
        let errors = [
            SandboxError::invalid_argument(name, &b),
            SandboxError::closed(),
            SandboxError::cancelled(&a),
            SandboxError::protocol_violation(&a, fixed),
            SandboxError::internal(&a, fixed),
            SandboxError::connection_lost(&a, Some(&b)),
            SandboxError::connection_lost(&a, None),
            SandboxError::agent_vm_lost(&a),
            SandboxError::not_ready(Some(SandboxState::from(a.as_str())), Some(&b), waited),
            SandboxError::not_ready(None, None, waited),
            SandboxError::sandbox_lifetime(name, waited, Duration::from_secs(28_800)),
            SandboxError::lifetime_reached(&a),
            SandboxError::reconnect_gave_up(&a, waited, attempts),
            SandboxError::sandbox_not_found(&a),
            SandboxError::sandbox_state(name, fixed),
            SandboxError::timeout(TimeoutScope::from(scope), &a, Some(waited)),
            SandboxError::unimplemented(a.clone(), b.clone(), has_doc.then_some(c.as_str())),
            SandboxError::lifecycle_unsupported(a.clone(), c.clone()),
        ];
        for e in &errors {
            assert_round_trips(e)?;
            assert_display_one_line(e)?;
        }
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
    fn code_lists_clean_any_token(s in prop_oneof!["\\PC{0,80}", ".{0,200}", any::<String>()]) {
        // Any token comes back cleaned: one line, at most 64 characters,
        // and parsing it again gives the same value.
        let v = SandboxCode::from(s.as_str());
        prop_assert!(v.as_str().chars().count() <= 64);
        prop_assert!(!v.as_str().chars().any(char::is_control));
        prop_assert_eq!(&SandboxCode::from(v.as_str()), &v);
        let v = TimeoutScope::from(s.as_str());
        prop_assert_eq!(&TimeoutScope::from(v.as_str()), &v);
        let v = CapacityCode::from(s.as_str());
        prop_assert_eq!(&CapacityCode::from(v.as_str()), &v);
        let v = CommandExitStatus::from(s.as_str());
        prop_assert_eq!(&CommandExitStatus::from(v.as_str()), &v);
        let v = rayito::SandboxState::from(s.as_str());
        prop_assert_eq!(&rayito::SandboxState::from(v.as_str()), &v);
    }

    #[test]
    fn code_lists_keep_a_clean_token_as_is(s in "[g-z_]{0,40}") {
        let v = SandboxCode::from(s.as_str());
        prop_assert_eq!(v.as_str(), s.as_str());
        prop_assert_eq!(v.is_known(), SandboxCode::VALUES.contains(&s.as_str()));
        let status = CommandExitStatus::from(s.as_str());
        prop_assert_eq!(status.as_str(), s.as_str());
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

/// A secret in one of the shapes the redaction must catch, planted in a
/// text as servers and guests quote it: `(text, secret)`.
fn planted() -> impl Strategy<Value = (String, String)> {
    let hex = "[0-9a-f]{16,64}";
    let key = "(AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}";
    let token = "[A-Za-z0-9+/]{20}[0-9][A-Z][a-z][A-Za-z0-9+/=]{20,120}";
    let short = "[g-z][a-z0-9]{11,20}";
    (hex, key, token, short, 0usize..11).prop_map(|(hex, key, token, short, which)| match which {
        0 => (hex.clone(), hex),
        1 => (key.clone(), key),
        2 => (format!("X-Amz-Security-Token:\n{token}\nhost: x"), token),
        3 => (
            format!("?X-Amz-Signature={hex}&X-Amz-Credential={key}"),
            hex,
        ),
        4 => (
            format!("Authorization: AWS4-HMAC-SHA256 Credential={key}/x"),
            key,
        ),
        5 => (format!("the canonical request was '{token}'"), token),
        6 => (format!("x-access-token:\nAuthorization:\n{token}"), token),
        // Issue 41: an empty value continued on a line that looks like a
        // header; the secret is short and lower-case, so only its name
        // gives it away.
        7 => (
            format!("x-access-token: a X-Amz-Security-Token:\n{short} : "),
            short,
        ),
        8 => (
            format!("Authorization: Bearer\r\n\t{short}\r\nhost: h"),
            short,
        ),
        9 => (format!("HTTP_AUTHORIZATION=Bearer {short}"), short),
        _ => (format!("{key}_status"), key),
    })
}

/// Every text a user or a log can see of an error.
fn everything_shown(e: &SandboxError) -> String {
    use std::error::Error as _;
    let mut shown = format!("{e} {e:?} {} {}", e.to_wire(), e.classify().to_json());
    let mut next = e.source();
    while let Some(source) = next {
        shown.push_str(&format!(" {source} {source:?}"));
        next = source.source();
    }
    shown
}

/// The kinds whose errors are retryable, and the codes of a bare
/// `Sandbox` that are.
const RETRYABLE_KINDS: &[&str] = &[
    "sandbox_not_ready",
    "sandbox_state",
    "rate_limit",
    "capacity",
];
const RETRYABLE_CODES: &[&str] = &["connection_lost", "service_error", "kernel_not_ready"];

/// Secrets planted in a wire form.
const CANARY_KEY: &str = "AKIAFUZZCANARY000000";
const CANARY_SIGNATURE: &str = "c0ffee00deadbeef0123456789abcdef";

/// A wire form as a hostile or newer sender could write it.
fn wire_object() -> impl Strategy<Value = serde_json::Value> {
    let kind = prop_oneof![
        proptest::sample::select(rayito::ErrorKind::ALL.to_vec())
            .prop_map(|k| k.as_str().to_owned()),
        proptest::sample::select(SandboxCode::VALUES.to_vec()).prop_map(str::to_owned),
        ".{0,30}",
    ];
    let code = prop_oneof![
        proptest::sample::select(SandboxCode::VALUES.to_vec()).prop_map(str::to_owned),
        ".{0,30}",
    ];
    let hostile = (remote_text(), 0usize..3).prop_map(|(text, n)| match n {
        0 => text,
        1 => format!("{text} {CANARY_KEY} x-amz-signature={CANARY_SIGNATURE}"),
        _ => format!("{text}{}", "x-amz-".repeat(1_000)),
    });
    (
        kind,
        proptest::option::of(code),
        proptest::collection::vec(hostile, 12),
        proptest::option::of((any::<u64>(), 0u32..1_000_000_000)),
        any::<bool>(),
    )
        .prop_map(|(kind, code, t, retry, flag)| {
            serde_json::json!({
                "kind": kind,
                "message": t[0],
                "code": code,
                "scope": t[1],
                "argument": t[2],
                "state": t[3],
                "state_reason": t[4],
                "status": t[5],
                "exit_code": 1,
                "feature": t[6],
                "reason": t[7],
                "doc": t[8],
                "quota_code": t[9],
                "proxy_rejected": flag,
                "retry_after": retry.map(|(secs, nanos)| serde_json::json!({"secs": secs, "nanos": nanos})),
                "meta": {
                    "server_message": t[10],
                    "aws_code": t[11],
                    "request_id": t[0],
                    "reason": t[1],
                    "attempts": 3,
                },
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    /// Fuzz target: the three mappers with a secret planted in every field
    /// a server or guest controls.
    #[test]
    fn no_mapper_lets_a_planted_secret_through(
        (text, secret) in planted(),
        before in remote_text(),
        code in grpc_code(),
        stream in stream_code(),
        call in call(),
        status in any::<u16>(),
    ) {
        let hostile = format!("{before} {text}");
        let mut errors = vec![
            AwsError::new("RunMicrovm")
                .code(hostile.clone())
                .message(hostile.clone())
                .request_id(hostile.clone())
                .http_status(status)
                .build(),
            AwsError::new("RunMicrovm")
                .code("ServiceQuotaExceededException")
                .quota_code(hostile.clone())
                .message(hostile.clone())
                .build(),
            AwsError::new("GetMicrovm").code(text.clone()).build(),
            AwsError::connect_failed("GetMicrovm").cause(hostile.clone()).build(),
            aws_no_credentials(&hostile),
            agent_status(code, &hostile, call),
            agent_status(code, &text, call),
            transport_failure(TransportFailure::Reset { code }, &hostile, call),
            proxy_answer(status, call),
            stream_error(&hostile, &hostile, call),
            stream_error(&text, "", call),
            stream_error(&stream, &hostile, call),
        ];
        for end in [
            EndEvent::new(hostile.clone(), 3),
            EndEvent::new(text.clone(), 0).error(text.clone(), hostile.clone()),
            EndEvent::new("exited", 2),
        ] {
            if let Err(e) = end_event(end, CommandOutput::default(), &hostile) {
                errors.push(e);
            }
        }
        for e in &errors {
            let shown = everything_shown(e);
            prop_assert!(!shown.contains(&secret), "{} came out of {:?}", secret, e);
            prop_assert!(!e.to_string().contains('\n'), "{:?}", e.to_string());
            prop_assert!(e.to_string().chars().count() <= 2 * MAX_KEPT_CHARS);
            for token in [e.meta().reason(), e.meta().aws_code(), e.meta().request_id()] {
                prop_assert!(token.is_none_or(|t| t.chars().count() <= 256));
            }
        }
    }

    /// Fuzz target: `from_wire` on what a hostile or newer sender writes.
    #[test]
    fn from_wire_cleans_and_never_raises_retryability(value in wire_object()) {
        let Ok(e) = SandboxError::from_wire(&value.to_string()) else {
            return Ok(());
        };
        let kind = value["kind"].as_str().unwrap_or_default();
        if e.is_retryable() {
            let code = value["code"].as_str().unwrap_or_default();
            prop_assert!(
                RETRYABLE_KINDS.contains(&kind) || (kind == "sandbox" && RETRYABLE_CODES.contains(&code)),
                "{} / {:?} was rebuilt retryable: {:?}", kind, value["code"], e
            );
        }
        if rayito::ErrorKind::from_name(kind).is_none() {
            prop_assert!(e.sandbox_code().is_some_and(|c| !c.is_known()), "{:?}", e);
        }
        let shown = everything_shown(&e);
        prop_assert!(!shown.contains(CANARY_KEY) && !shown.contains(CANARY_SIGNATURE), "{}", shown);
        let m = e.meta();
        prop_assert!(m.message().chars().count() <= MAX_KEPT_CHARS);
        prop_assert!(!m.message().chars().any(char::is_control));
        prop_assert!(m.server_message().is_none_or(|t| t.chars().count() <= MAX_KEPT_CHARS));
        for t in [m.aws_code(), m.request_id(), m.reason()] {
            prop_assert!(t.is_none_or(|t| t.chars().count() <= 256 && !t.chars().any(char::is_control)));
        }
        // What was accepted is stable: another hop changes nothing.
        assert_round_trips(&e)?;
    }

    /// Fuzz target: the redaction keeps no planted secret, even where the
    /// bound cuts through it, and keeps its bound.
    #[test]
    fn redaction_drops_a_secret_the_bound_cuts_through(
        (text, secret) in planted(),
        fill in 0usize..2_100,
    ) {
        let hostile = format!("{} {text} tail", "y ".repeat(fill / 2));
        let out = redact_aws_text(&hostile);
        prop_assert!(out.chars().count() <= MAX_KEPT_CHARS);
        prop_assert!(!out.contains(&secret[..12]), "{} left in {}", &secret[..12], out);
    }
}
