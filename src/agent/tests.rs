//! The agent's pure parts: the spec's refusals, the protocol decoder, the
//! limits, the gateway presets, the `agent` error messages.

use std::time::Duration;

use super::gateways;
use super::protocol::{Decoder, Limits, LineBuffer, MAX_LINE_BYTES};
use super::*;
use crate::ErrorKind;

fn model() -> AgentModel {
    AgentModel::new(ModelProvider::OpenaiCompatible, "llm").id("gpt-4o-mini")
}

fn spec() -> AgentSpec {
    AgentSpec::new(model())
}

fn refused(spec: AgentSpec) -> (String, String) {
    let err = spec.check().expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    let argument = match &err {
        crate::SandboxError::InvalidArgument { argument, .. } => {
            argument.as_deref().unwrap_or_default().to_owned()
        }
        _ => String::new(),
    };
    let text = err.to_string();
    let message = text
        .strip_prefix(&format!("invalid {argument}: "))
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned();
    (argument, message)
}

#[test]
fn every_reason_has_its_pinned_message_and_detail_code() {
    let expected = [
        ("model_error", "the model returned an error"),
        ("runtime_error", "the agent's runtime ended with an error"),
        ("runtime_missing", "the agent's runtime is not in the image"),
        (
            "runtime_version_mismatch",
            "the image's runtime version is not the one asked for",
        ),
        (
            "protocol_error",
            "the agent's runtime wrote output outside the protocol",
        ),
        ("timeout", "the agent went past its time limit"),
        (
            "max_steps",
            "the agent went past its maximum number of steps",
        ),
        ("token_budget", "the agent went past its token budget"),
        (
            "output_limit",
            "the agent went past its maximum output bytes",
        ),
        ("aborted", "the agent run was aborted"),
        (
            "busy",
            "another agent run is already in progress in this sandbox",
        ),
    ];
    assert_eq!(AgentFailureReason::ALL.len(), expected.len());
    for (reason, (name, message)) in AgentFailureReason::ALL.iter().zip(expected) {
        assert_eq!(reason.as_str(), name);
        assert_eq!(AgentFailureReason::from_name(name), Some(*reason));
        let err = crate::SandboxError::agent(AgentFailure::new(*reason));
        assert_eq!(err.to_string(), message);
        assert_eq!(err.kind(), ErrorKind::Agent);
        assert!(err.is_sandbox_error());
        assert!(!err.is_retryable());
        let back = crate::SandboxError::from_wire(&err.to_wire()).expect("the wire");
        assert_eq!(back, err);
    }
    let mut failure = AgentFailure::new(AgentFailureReason::ModelError);
    failure.detail_code = Some("APIError".to_owned());
    assert_eq!(failure.message(), "the model returned an error (APIError)");
    // Free text never reaches a message.
    assert_eq!(
        crate::error::failure_message(AgentFailureReason::ModelError, Some("key sk-123 leaked")),
        "the model returned an error"
    );
    assert_eq!(crate::error::safe_detail_code(&"x".repeat(65)), None);
}

#[test]
fn limits_have_the_reference_defaults() {
    let limits = AgentLimits::default();
    assert_eq!(limits.steps(), 50);
    assert_eq!(limits.time(), Duration::from_secs(600));
    assert_eq!(limits.max_output_bytes, 16 * 1024 * 1024);
    assert_eq!(limits.tokens(), Some(1_000_000));
    assert_eq!(spec().workdir, "/home/user");
    assert_eq!(
        spec().agent_runtime(),
        &AgentRuntime::Builtin("opencode".to_owned())
    );
}

#[test]
fn every_refusal_is_named_before_any_io() {
    let cases: Vec<(AgentSpec, &str, &str)> = vec![
        (
            AgentSpec::new(model().id("")),
            "model",
            "AgentModel.id must be a model id of 1 to 256 characters [A-Za-z0-9._:/@+-], starting with a letter or digit",
        ),
        (
            AgentSpec::new(AgentModel::new(ModelProvider::Bedrock, "b")),
            "model",
            "AgentModel.region is required with the bedrock provider; pass region(\"us-east-1\") or the model's region",
        ),
        (
            AgentSpec::new(AgentModel::new(ModelProvider::Bedrock, "b").region("mars")),
            "model",
            "AgentModel.region must be an AWS region such as us-east-1",
        ),
        (
            AgentSpec::new(model().base_path("/v1/")),
            "base_path",
            "AgentModel.base_path must be empty or an absolute path without a trailing '/' (such as /v1) that a gateway forwards",
        ),
        (
            AgentSpec::new(AgentModel::new(ModelProvider::Openai, "o").base_path("/v1")),
            "model",
            "AgentModel.base_path is only for the openai-compatible provider; drop it or change the provider",
        ),
        (
            AgentSpec::new(model().api_key_env("1X")),
            "model",
            "AgentModel.api_key_env must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
        ),
        (
            spec().small_model("bad id"),
            "model",
            "AgentSpec.small_model must be a model id of 1 to 256 characters [A-Za-z0-9._:/@+-], starting with a letter or digit",
        ),
        (
            spec().instructions(""),
            "instructions",
            "AgentSpec.instructions may not be empty; drop it or write some",
        ),
        (
            spec().permissions(AgentPermissions::new().tool("Bash", PermissionAction::Deny)),
            "permissions",
            "invalid tool name in AgentPermissions: 1 to 64 characters [a-z0-9_*-], starting with [a-z0-9*]",
        ),
        (
            spec().permissions(
                AgentPermissions::new().tool("bash", ToolPermission::Patterns(Default::default())),
            ),
            "permissions",
            "AgentPermissions: the patterns of tool bash are empty; pass at least one pattern or a single action",
        ),
        (
            spec().agent("build", SubAgent::new("d", "i")),
            "agents",
            "AgentSpec.agents may not use the reserved name build; pick another name",
        ),
        (
            spec().agent("Reviewer", SubAgent::new("d", "i")),
            "agents",
            "invalid name in AgentSpec.agents: 1 to 64 characters [a-z0-9_-], starting with a letter or digit",
        ),
        (
            spec().agent("reviewer", SubAgent::new("", "i")),
            "agents",
            "a SubAgent needs a non-empty description and non-empty instructions",
        ),
        (
            spec().mcp("files", McpLocal::new(Vec::<String>::new())),
            "mcp",
            "McpLocal's command must be a non-empty list of non-empty strings without NUL",
        ),
        (
            spec().mcp("files", McpLocal::new(["srv"]).timeout(Duration::ZERO)),
            "mcp",
            "McpLocal's timeout must be more than zero",
        ),
        (
            spec().mcp("docs", McpRemote::new("docs").path("/a/../b")),
            "mcp",
            "McpRemote's path must be an absolute path that a gateway forwards (RFC 3986 characters, no '.' or '..' segments)",
        ),
        (
            spec().limits(AgentLimits::new().max_steps(0)),
            "limits",
            "AgentLimits.max_steps must be at least 1",
        ),
        (
            spec().limits(AgentLimits::new().timeout(Duration::ZERO)),
            "limits",
            "AgentLimits.timeout must be more than zero",
        ),
        (
            spec().limits(AgentLimits::new().max_output_bytes(64 * 1024 * 1024 + 1)),
            "limits",
            "AgentLimits.max_output_bytes must be between 1 and 67,108,864 (64 MiB)",
        ),
        (
            spec().limits(AgentLimits::new().max_total_tokens(Some(0))),
            "limits",
            "AgentLimits.max_total_tokens must be at least 1; pass None for no budget",
        ),
        (
            spec().workdir("relative"),
            "workdir",
            "AgentSpec.workdir must be an absolute path without NUL",
        ),
        (
            spec().env("A-B", "x"),
            "envs",
            "AgentSpec's environment needs variable names ([A-Za-z_][A-Za-z0-9_]*) and values without NUL",
        ),
        (
            spec().session_id("abc"),
            "session_id",
            "AgentSpec.session_id must be a session id of an earlier run (rda_ and 32 lower-case hex characters)",
        ),
        (
            spec().raw_config(
                serde_json::json!({"model": "x"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
            "raw_config",
            "AgentSpec.raw_config may not set model: the SDK writes it; use the spec's own setter",
        ),
        (
            spec().runtime("custom"),
            "runtime",
            "the runtime \"custom\" is not a name: pass AgentRuntime::Custom(CustomRuntime::command([...]))",
        ),
        (
            spec().runtime("crewai"),
            "runtime",
            "unknown runtime \"crewai\"; pass one of opencode, deepagents, langgraph, strands, hermes, or a CustomRuntime or HttpApp",
        ),
        (
            spec().runtime(CustomRuntime::command([""])),
            "runtime",
            "CustomRuntime's command must be a non-empty list of non-empty strings without NUL",
        ),
        (
            spec().runtime(CustomRuntime::command(["a"]).file("rel", "x", 0o644)),
            "runtime",
            "a runtime's file needs an absolute path without NUL and a mode up to 0o7777",
        ),
        (
            spec().runtime(HttpApp::new(["app"], 0)),
            "runtime",
            "HttpApp's port must be between 1 and 65535",
        ),
        (
            spec().runtime(HttpApp::new(["app"], 80).health_path("ping")),
            "runtime",
            "HttpApp's health_path and invoke_path must be absolute URL paths (RFC 3986 characters)",
        ),
        (
            spec().runtime(HttpApp::new(["app"], 80).request_field("q")),
            "runtime",
            "HttpApp's request_field and response_field are only for the json protocol",
        ),
        (
            spec().runtime(
                HttpApp::new(["app"], 80)
                    .protocol(HttpProtocol::Json)
                    .response_field("1x"),
            ),
            "runtime",
            "HttpApp's request_field and response_field must be field names ([A-Za-z_][A-Za-z0-9_.]*)",
        ),
    ];
    for (spec, argument, message) in cases {
        assert_eq!(refused(spec), (argument.to_owned(), message.to_owned()));
    }
    spec()
        .instructions("be brief")
        .agent(
            "reviewer",
            SubAgent::new("reviews", "review the diff").model("gpt-4o"),
        )
        .mcp(
            "files",
            McpLocal::new(["mcp-files"]).env("ROOT", "/home/user"),
        )
        .mcp("docs", McpRemote::new("docs").path("/mcp"))
        .permissions(AgentPermissions::new().tool("edit", PermissionAction::Deny))
        .session_id(format!("rda_{}", "0a".repeat(16)))
        .check()
        .expect("a valid spec");
}

#[test]
fn the_builtin_seam_answers_unimplemented_until_a_runtime_ships() {
    let err = plan::resolve(&AgentRuntime::Builtin("deepagents".to_owned()))
        .err()
        .expect("not shipped here");
    assert_eq!(err.kind(), ErrorKind::Unimplemented);
    let http = HttpApp::new(["app"], 80).protocol(HttpProtocol::LanggraphApi);
    assert_eq!(
        plan::resolve(&AgentRuntime::Http(http))
            .err()
            .map(|e| e.kind()),
        Some(ErrorKind::Unimplemented)
    );
}

fn decode(decoder: &mut Decoder, lines: &[serde_json::Value]) -> Vec<AgentEvent> {
    lines
        .iter()
        .flat_map(|l| decoder.line(l.to_string().as_bytes()))
        .collect()
}

#[test]
fn protocol_v1_lines_become_events_and_the_rest_is_dropped() {
    use serde_json::json;
    let session = format!("rda_{}", "ab".repeat(16));
    let mut d = Decoder::new(false);
    let events = decode(
        &mut d,
        &[
            json!({"v": 1, "type": "session", "session_id": session}),
            json!({"v": 1, "type": "step_started"}),
            json!({"v": 1, "type": "text_delta", "text": "he"}),
            json!({"v": 1, "type": "reasoning", "text": "hidden without reasoning"}),
            json!({"v": 1, "type": "tool_call", "call_id": "c1", "name": "bash", "status": "completed",
                   "input": {"command": "ls"}, "output": "x".repeat(70_000)}),
            json!({"v": 1, "type": "step_finished", "usage": {"input": 5, "output": 2, "cache_read": 1},
                   "finish_reason": "stop"}),
            json!({"v": 1, "type": "text", "text": "hello"}),
            json!({"v": 1, "type": "done"}),
            json!({"v": 2, "type": "text", "text": "other version"}),
            json!({"v": 1, "type": "nope"}),
            json!({"v": 1, "type": "session", "session_id": "rda_short"}),
            json!({"v": 1, "type": "tool_call", "status": "maybe"}),
            json!(["not", "an", "object"]),
        ],
    );
    assert_eq!(d.line(b"not json"), Vec::new());
    let kinds: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    assert_eq!(
        kinds,
        [
            "step_started",
            "text_delta",
            "tool_call",
            "step_finished",
            "text"
        ]
    );
    let AgentEvent::ToolCall(call) = &events[2] else {
        panic!()
    };
    assert_eq!(
        call.output.as_ref().map(String::len),
        Some(MAX_TOOL_OUTPUT_BYTES)
    );
    assert!(call.output_truncated);
    assert_eq!(d.dropped, 6);
    let AgentEvent::Done {
        session_id,
        usage,
        usage_reported,
        ..
    } = d.finish(0)
    else {
        panic!()
    };
    assert_eq!(session_id, session);
    assert_eq!((usage.total(), usage_reported), (8, true));
    // Exit non-zero without a failure: runtime_error; no done: protocol_error.
    let AgentEvent::AgentFailed(f) = d.finish(2) else {
        panic!()
    };
    assert_eq!(
        (f.reason, f.exit_code),
        (AgentFailureReason::RuntimeError, Some(2))
    );
    let AgentEvent::AgentFailed(f) = Decoder::new(false).finish(0) else {
        panic!()
    };
    assert_eq!(f.reason, AgentFailureReason::ProtocolError);

    // A runtime may report model_error, runtime_error or protocol_error;
    // anything else is protocol_error. The script's lines are failures.
    for (reason, expected) in [
        ("model_error", AgentFailureReason::ModelError),
        ("timeout", AgentFailureReason::ProtocolError),
    ] {
        let mut d = Decoder::new(true);
        decode(
            &mut d,
            &[
                json!({"v": 1, "type": "agent_failed", "reason": reason, "detail_code": "Rate Limit!"}),
            ],
        );
        let AgentEvent::AgentFailed(f) = d.finish(0) else {
            panic!()
        };
        assert_eq!((f.reason, f.detail_code), (expected, None));
    }
    for (kind, expected) in [
        ("rayito.busy", AgentFailureReason::Busy),
        ("rayito.runtime_missing", AgentFailureReason::RuntimeMissing),
    ] {
        let mut d = Decoder::new(true);
        decode(&mut d, &[json!({"v": 1, "type": kind})]);
        let AgentEvent::AgentFailed(f) = d.finish(0) else {
            panic!()
        };
        assert_eq!(f.reason, expected);
    }
}

#[test]
fn long_lines_are_dropped_whole_and_counted() {
    let mut lines = LineBuffer::default();
    assert_eq!(lines.feed(b"ab"), Vec::<Vec<u8>>::new());
    assert_eq!(lines.feed(b"c\nd"), vec![b"abc".to_vec()]);
    let long = vec![b'x'; MAX_LINE_BYTES];
    assert!(lines.feed(&long).is_empty());
    assert_eq!(lines.feed(b"\nok\n"), vec![b"ok".to_vec()]);
    assert_eq!(lines.dropped, 1);
    assert_eq!(lines.feed(b"tail"), Vec::<Vec<u8>>::new());
    assert_eq!(lines.finish(), Some(b"tail".to_vec()));
}

#[test]
fn limits_stop_at_the_step_past_max_steps_and_after_the_budget() {
    let mut limits = Limits::new(AgentLimits::new().max_steps(2).max_total_tokens(Some(10)));
    assert_eq!(limits.track(&AgentEvent::StepStarted { index: 1 }), None);
    let step = |input| AgentEvent::StepFinished {
        index: 1,
        usage: TokenUsage::new(input, 0),
        finish_reason: None,
    };
    assert_eq!(limits.track(&step(10)), None);
    assert_eq!(limits.track(&AgentEvent::StepStarted { index: 2 }), None);
    assert_eq!(
        limits.track(&step(1)),
        Some(AgentFailureReason::TokenBudget)
    );
    assert_eq!(
        limits.track(&AgentEvent::StepStarted { index: 3 }),
        Some(AgentFailureReason::MaxSteps)
    );
}

#[test]
fn gateway_presets_have_the_providers_hosts_headers_and_paths() {
    let post = |paths: &[&str]| -> Vec<(String, String)> {
        paths
            .iter()
            .map(|p| ("POST".to_owned(), (*p).to_owned()))
            .collect()
    };
    type Row = (
        crate::SecretGateway,
        &'static str,
        &'static str,
        Vec<(String, String)>,
    );
    let rows: Vec<Row> = vec![
        (
            gateways::bedrock(
                "k",
                "us-east-1",
                &["us.anthropic.claude-haiku-4-5-20251001-v1:0"],
            )
            .expect("bedrock"),
            "https://bedrock-runtime.us-east-1.amazonaws.com",
            "authorization",
            post(&[
                "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse-stream",
                "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse",
            ]),
        ),
        (
            gateways::anthropic("k"),
            "https://api.anthropic.com",
            "x-api-key",
            post(&["/v1/messages"]),
        ),
        (
            gateways::openai("k"),
            "https://api.openai.com",
            "authorization",
            post(&["/v1/responses", "/v1/chat/completions"]),
        ),
        (
            gateways::xai("k"),
            "https://api.x.ai",
            "authorization",
            post(&["/v1/responses", "/v1/chat/completions"]),
        ),
        (
            gateways::gemini("k", &["gemini-2.5-flash"]).expect("gemini"),
            "https://generativelanguage.googleapis.com",
            "x-goog-api-key",
            post(&[
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                "/v1beta/models/gemini-2.5-flash:generateContent",
            ]),
        ),
        (
            gateways::azure_openai("k", "my-res").expect("azure"),
            "https://my-res.openai.azure.com",
            "api-key",
            post(&["/openai/v1/responses", "/openai/v1/chat/completions"]),
        ),
        (
            gateways::openrouter("k"),
            "https://openrouter.ai",
            "authorization",
            post(&["/api/v1/chat/completions"]),
        ),
        (
            gateways::groq("k"),
            "https://api.groq.com",
            "authorization",
            post(&["/openai/v1/chat/completions"]),
        ),
        (
            gateways::mistral("k"),
            "https://api.mistral.ai",
            "authorization",
            post(&["/v1/chat/completions"]),
        ),
        (
            gateways::deepseek("k"),
            "https://api.deepseek.com",
            "authorization",
            post(&["/chat/completions"]),
        ),
        (
            gateways::openai_compatible("k", "https://llm.example.com", "/v1").expect("compatible"),
            "https://llm.example.com",
            "authorization",
            post(&["/v1/chat/completions"]),
        ),
        (
            gateways::litellm("k", "https://litellm.internal:4000", None).expect("litellm"),
            "https://litellm.internal:4000",
            "authorization",
            post(&["/v1/responses", "/v1/chat/completions"]),
        ),
    ];
    for (gateway, upstream, header, allow) in rows {
        assert_eq!(gateway.upstream(), upstream);
        assert_eq!(gateway.header_names(), [header]);
        let rules: Vec<(String, String)> = gateway
            .rules()
            .into_iter()
            .map(|(m, p)| (m.to_owned(), p.to_owned()))
            .collect();
        assert_eq!(rules, allow, "{upstream}");
        assert_eq!(gateway.rate(), 0);
        gateway.check("g", "").expect("a valid gateway");
    }
}

#[test]
fn gateway_presets_refuse_bad_values() {
    // The text after `invalid <argument>: `.
    let message = |r: Result<crate::SecretGateway, crate::SandboxError>| {
        let text = r.expect_err("refused").to_string();
        let (head, rest) = text.split_once(": ").expect("a prefixed message");
        assert!(head.starts_with("invalid "), "{text}");
        rest.to_owned()
    };
    assert_eq!(
        message(gateways::bedrock("k", "moon", &["m"])),
        "gateways::bedrock: region must be an AWS region such as us-east-1"
    );
    assert_eq!(
        message(gateways::bedrock("k", "us-east-1", &[])),
        "gateways::bedrock: models must be a non-empty list of model ids"
    );
    assert_eq!(
        message(gateways::bedrock(
            "k",
            "us-east-1",
            &["arn:aws:bedrock:us-east-1::foundation-model/x"]
        )),
        "gateways::bedrock: models may not be ARNs (the gateway refuses an encoded '/' in a path); pass the model or inference profile id"
    );
    assert_eq!(
        message(gateways::gemini("k", &["models/gemini"])),
        "gateways::gemini: a model id may not contain '/'; pass the id (gemini-2.5-flash) without the models/ prefix"
    );
    assert_eq!(
        message(gateways::gemini("k", &["bad id"])),
        "gateways::gemini: a model id is 1 to 256 characters [A-Za-z0-9._:/@+-], starting with a letter or digit"
    );
    assert_eq!(
        message(gateways::azure_openai("k", "-res")),
        "gateways::azure_openai: resource must be a DNS label of 1 to 63 characters [a-z0-9-], no '-' at either end"
    );
    assert_eq!(
        message(gateways::openai_compatible("k", "https://x.example", "v1")),
        "openai_compatible(base_path) must be empty or an absolute path without a trailing '/' (such as /v1) that a gateway forwards"
    );
    for upstream in [
        "http://proxy.example",
        "https://proxy.example/v1",
        "https://",
    ] {
        assert_eq!(
            message(gateways::litellm("k", upstream, None)),
            "gateways::litellm: upstream must be https://host[:port] with a DNS name or an IPv4 address",
            "{upstream}"
        );
    }
    for upstream in [
        "https://localhost",
        "https://api.localhost:8000",
        "https://127.0.0.1",
        "https://169.254.169.254",
        "https://0.1.2.3",
        "https://proxy.example:70000",
    ] {
        assert_eq!(
            message(gateways::litellm("k", upstream, None)),
            "gateways::litellm: upstream may not point at loopback, link-local or 0.0.0.0/8, nor a port outside 1 to 65535",
            "{upstream}"
        );
    }
}

#[test]
fn the_run_script_holds_the_lock_checks_then_launches() {
    let runtime = plan::resolve(&AgentRuntime::Custom(
        CustomRuntime::command(["python3", "it's.py"]).check("command -v python3"),
    ))
    .expect("resolved");
    let plan = plan::plan(
        &spec(),
        runtime,
        "hi",
        &[("llm".to_owned(), "http://127.0.0.1:9".to_owned())].into(),
    );
    assert!(plan.script.contains("flock -n 9"), "{}", plan.script);
    assert!(plan.script.contains("rayito.runtime_missing"));
    assert!(plan.script.contains("'python3' 'it'\\''s.py'"));
    assert_eq!(plan.envs["RAYITO_MODEL_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(plan.envs["OPENAI_API_KEY"], MODEL_KEY_PLACEHOLDER);
    let request: serde_json::Value =
        serde_json::from_slice(plan.stdin.strip_suffix(b"\n").expect("one line")).expect("JSON");
    assert_eq!(request["prompt"], "hi");
    assert_eq!(request["model"]["api_key"], MODEL_KEY_PLACEHOLDER);
    assert_eq!(request["permissions"]["tools"]["webfetch"], "deny");
}
