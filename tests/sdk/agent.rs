//! `sandbox.agent()` end to end on the local backend: a `CustomRuntime`
//! (a Python program the test writes into the sandbox) that speaks protocol
//! v1 and calls a scripted OpenAI-compatible model
//! (tests/sdk_support/model_server.rs) through an HTTPS secret gateway made
//! by the `openai_compatible` preset, the key in moto's Secrets Manager.
//! A run that writes a file and runs a command, events in order with
//! usage; `max_steps`, `token_budget`, `timeout`, `aborted` and `busy`
//! produced for real, the process tree gone afterwards; a malformed line
//! counted as dropped; a crashing runtime (`runtime_error`); a missing one
//! (`runtime_missing`); a model error (`model_error`); an `HttpApp`; and
//! the key nowhere in the sandbox (environment, files, process list,
//! events).

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use rayito::agent::{
    AGENT_RUN_TAG, AgentEvent, AgentFailureReason, AgentLimits, AgentModel, AgentSpec,
    CustomProtocol, CustomRuntime, HttpApp, HttpProtocol, ModelProvider, ToolCallStatus, gateways,
};
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{Sandbox, SandboxError};
use sdk_support::model_server::{ModelServer, Reply};
use sdk_support::moto::MotoServer;
use serde_json::json;

/// The key: in Secrets Manager and the gateway only.
const KEY: &str = "canary-agent-key-7f3a9c";
const SECRET: &str = "agents/model-key";
const MODEL_HOST: &str = "llm.agent-test.internal";
const AGENT_PY: &str = "/home/user/agent.py";

/// The agent program: protocol v1 on stdout, the model through the
/// gateway's base URL with the placeholder key, two tools. `AGENT_MODE`
/// changes how it misbehaves.
const AGENT: &str = r#"
import json, os, secrets, subprocess, sys, time, urllib.request, urllib.error
mode = os.environ.get("AGENT_MODE", "")
req = json.loads(sys.stdin.readline())
def emit(kind, **fields):
    fields.update(v=1, type=kind)
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
session = req.get("session_id") or "rda_" + secrets.token_hex(16)
if mode == "noise":
    print("this is not json", flush=True)
    print(json.dumps({"v": 2, "type": "text", "text": "other version"}), flush=True)
    print(json.dumps({"v": 1, "type": "no_such_type"}), flush=True)
emit("session", session_id=session)
if mode == "sleep":
    emit("step_started")
    subprocess.Popen(["setsid", "sleep", os.environ["SLEEP_MARK"]])
    time.sleep(600)
if mode == "crash":
    emit("step_started")
    sys.exit(3)
base = os.environ["RAYITO_MODEL_BASE_URL"]
key = os.environ["RAYITO_MODEL_API_KEY"]
messages = [{"role": "user", "content": req["prompt"]}]
tools = [{"type": "function", "function": {"name": n}} for n in ("write_file", "bash")]
while True:
    emit("step_started")
    body = json.dumps({"model": req["model"]["id"], "messages": messages, "tools": tools}).encode()
    r = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
        headers={"content-type": "application/json", "authorization": "Bearer " + key})
    try:
        resp = json.load(urllib.request.urlopen(r, timeout=60))
    except urllib.error.HTTPError as e:
        emit("agent_failed", reason="model_error", detail_code="HTTP%d" % e.code)
        sys.exit(1)
    usage = resp.get("usage") or {}
    choice = resp["choices"][0]
    msg = choice["message"]
    messages.append(msg)
    calls = msg.get("tool_calls") or []
    for call in calls:
        args = json.loads(call["function"]["arguments"])
        name = call["function"]["name"]
        if name == "write_file":
            with open(args["path"], "w") as f:
                f.write(args["content"])
            out = "wrote %d bytes" % len(args["content"])
        else:
            p = subprocess.run(["bash", "-c", args["command"]], capture_output=True, text=True)
            out = p.stdout + p.stderr
        emit("tool_call", call_id=call["id"], name=name, status="completed", input=args, output=out)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
    emit("step_finished", finish_reason=choice.get("finish_reason"),
         usage={"input": usage.get("prompt_tokens", 0), "output": usage.get("completion_tokens", 0)})
    if not calls:
        emit("text", text=msg.get("content") or "")
        emit("done")
        break
"#;

/// The running pieces of one test.
struct World {
    _moto: MotoServer,
    model: ModelServer,
    _emu: rayito_emulator::Emulator,
    sandbox: Sandbox,
}

async fn world(script: Vec<Reply>) -> Option<World> {
    let moto = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")?;
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDAGENTRUNS");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone()))
        .expect("a store")
        .create(SECRET, format!("Bearer {KEY}"), &BTreeMap::new())
        .await
        .expect("the secret");
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).expect("a cache");
    let emu = sdk_support::emulator().await;
    let model = ModelServer::start(MODEL_HOST, script).await;
    model.trust_on(emu.gateway_upstreams());
    let gateway = gateways::openai_compatible(SECRET, &model.url(), "/v1").expect("the preset");
    let sandbox = sdk_support::builder(&emu)
        .secret_cache(cache)
        .gateway("llm", gateway)
        .create()
        .await
        .expect("a sandbox");
    sandbox
        .files()
        .write(AGENT_PY, AGENT)
        .await
        .expect("the agent program");
    Some(World {
        _moto: moto,
        model,
        _emu: emu,
        sandbox,
    })
}

fn spec(mode: &str) -> AgentSpec {
    let model = AgentModel::new(ModelProvider::OpenaiCompatible, "llm")
        .id("scripted-1")
        .base_path("/v1");
    AgentSpec::new(model).runtime(
        CustomRuntime::command(["python3", AGENT_PY])
            .check("command -v python3")
            .env("AGENT_MODE", mode),
    )
}

fn tool(id: &str, name: &str, args: serde_json::Value, usage: (u64, u64)) -> Reply {
    Reply::Tool(id.to_owned(), name.to_owned(), args, usage)
}

fn reason(err: &SandboxError) -> AgentFailureReason {
    err.agent_failure()
        .unwrap_or_else(|| panic!("an agent error: {err:?}"))
        .reason
}

/// No tagged run left, and no process carrying `mark` (the runtime's
/// `setsid` child) on the host.
async fn tree_gone(sandbox: &Sandbox, mark: Option<&str>) {
    let tagged = sandbox
        .commands()
        .list_tagged(AGENT_RUN_TAG)
        .await
        .expect("the list");
    assert!(tagged.is_empty(), "{tagged:?}");
    if let Some(mark) = mark {
        let out = sandbox
            .commands()
            // `[d]` so that the pattern never matches this shell's own line.
            .run(&format!(
                "pgrep -f 'sleep [{}]{}' || true",
                &mark[..1],
                &mark[1..]
            ))
            .await
            .expect("pgrep");
        assert_eq!(out.stdout.trim(), "", "a leftover of the run's tree");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_writes_a_file_runs_a_command_and_reports_events_in_order() {
    let script = vec![
        tool(
            "call_1",
            "write_file",
            json!({"path": "notes.txt", "content": "agent was here"}),
            (100, 20),
        ),
        tool(
            "call_2",
            "bash",
            json!({"command": "wc -c < notes.txt"}),
            (150, 10),
        ),
        Reply::Text("All done: 14 bytes.".to_owned(), (200, 5)),
    ];
    let Some(w) = world(script).await else { return };
    let mut stream = w
        .sandbox
        .agent()
        .stream(spec(""), "write notes.txt and count its bytes")
        .await
        .expect("the run starts");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("an event"));
    }
    let kinds: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    assert_eq!(
        kinds,
        [
            "step_started",
            "tool_call",
            "step_finished",
            "step_started",
            "tool_call",
            "step_finished",
            "step_started",
            "step_finished",
            "text",
            "done"
        ]
    );
    let AgentEvent::ToolCall(call) = &events[4] else {
        panic!("{:?}", events[4])
    };
    assert_eq!(call.name, "bash");
    assert_eq!(call.status, ToolCallStatus::Completed);
    assert_eq!(call.output.as_deref().map(str::trim), Some("14"));
    let AgentEvent::StepFinished { index, usage, .. } = &events[2] else {
        panic!("{:?}", events[2])
    };
    assert_eq!((*index, usage.input, usage.output), (1, 100, 20));
    let AgentEvent::Done {
        usage,
        usage_reported,
        session_id,
        exit_code,
    } = events.last().expect("a last event")
    else {
        panic!("{events:?}")
    };
    assert_eq!((usage.input, usage.output, usage.total()), (450, 35, 485));
    assert!(*usage_reported);
    assert_eq!(*exit_code, 0);
    assert!(session_id.starts_with("rda_"));
    assert_eq!(stream.dropped_lines(), 0);
    let written = w
        .sandbox
        .files()
        .read_to_string("/home/user/notes.txt")
        .await;
    assert_eq!(written.expect("the file"), "agent was here");

    // The model got the gateway's key, never the placeholder; the sandbox
    // never sees the key.
    let requests = w.model.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(
            request.header("authorization"),
            [format!("Bearer {KEY}").as_str()]
        );
        assert_eq!(request.body["model"], "scripted-1");
    }

    // run() gives the same run as a result.
    w.model
        .script(vec![Reply::Text("hello".to_owned(), (7, 3))]);
    let result = w
        .sandbox
        .agent()
        .run(spec(""), "say hello")
        .await
        .expect("a run");
    assert_eq!(result.text, "hello");
    assert_eq!(
        (result.steps, result.usage.total(), result.exit_code),
        (1, 10, 0)
    );
    assert!(result.tool_calls.is_empty());
    tree_gone(&w.sandbox, None).await;

    let seen = w
        .sandbox
        .commands()
        .run("env; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; grep -rl canary-agent-key \"$HOME\" 2>/dev/null || true")
        .await
        .expect("the look");
    assert!(!seen.stdout.contains(KEY), "the key is in the sandbox");
    let processes = w.sandbox.commands().list().await.expect("the processes");
    assert!(!format!("{processes:?}").contains(KEY));
    assert!(!format!("{events:?}").contains(KEY));
    assert!(w.sandbox.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_end_the_run_with_their_reason_and_kill_its_tree() {
    // Always a tool call: the run goes on until a limit stops it.
    let looping = || vec![tool("call", "bash", json!({"command": "true"}), (400, 100))];
    let Some(w) = world(looping()).await else {
        return;
    };
    let agent = w.sandbox.agent();

    let err = agent
        .run(spec("").limits(AgentLimits::new().max_steps(2)), "loop")
        .await
        .expect_err("past max_steps");
    assert_eq!(reason(&err), AgentFailureReason::MaxSteps);
    assert_eq!(
        err.to_string(),
        "the agent went past its maximum number of steps"
    );
    assert_eq!(
        err.agent_failure().and_then(|f| f.usage).map(|u| u.total()),
        Some(1_000)
    );
    assert!(
        err.agent_failure()
            .and_then(|f| f.session_id.clone())
            .is_some()
    );
    tree_gone(&w.sandbox, None).await;

    w.model.script(looping());
    let err = agent
        .run(
            spec("").limits(AgentLimits::new().max_total_tokens(Some(1_200))),
            "loop",
        )
        .await
        .expect_err("past the budget");
    assert_eq!(reason(&err), AgentFailureReason::TokenBudget);
    assert_eq!(err.to_string(), "the agent went past its token budget");
    // Three steps of 500: the third passes 1,200 and is the last.
    assert_eq!(
        err.agent_failure().and_then(|f| f.usage).map(|u| u.total()),
        Some(1_500)
    );
    tree_gone(&w.sandbox, None).await;

    let sleepy = spec("sleep")
        .env("SLEEP_MARK", "9137")
        .limits(AgentLimits::new().timeout(Duration::from_secs(3)));
    let err = agent.run(sleepy, "sleep").await.expect_err("past the time");
    assert_eq!(reason(&err), AgentFailureReason::Timeout);
    assert_eq!(err.to_string(), "the agent went past its time limit");
    tree_gone(&w.sandbox, Some("9137")).await;
    assert!(w.sandbox.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_busy_and_the_runtimes_own_failures() {
    let Some(w) = world(vec![Reply::Text("ok".to_owned(), (1, 1))]).await else {
        return;
    };
    let agent = w.sandbox.agent();

    // A run in progress: a second one is busy; abort ends the first.
    let mut first = agent
        .stream(spec("sleep").env("SLEEP_MARK", "9138"), "wait")
        .await
        .expect("the first run");
    let started = first.next().await.expect("an event").expect("no error");
    assert_eq!(started, AgentEvent::StepStarted { index: 1 });
    let err = agent.run(spec(""), "again").await.expect_err("busy");
    assert_eq!(reason(&err), AgentFailureReason::Busy);
    assert_eq!(
        err.to_string(),
        "another agent run is already in progress in this sandbox"
    );
    first.abort();
    let mut last = None;
    while let Some(event) = first.next().await {
        last = Some(event.expect("an event"));
    }
    let Some(AgentEvent::AgentFailed(failure)) = last else {
        panic!("{last:?}")
    };
    assert_eq!(failure.reason, AgentFailureReason::Aborted);
    assert_eq!(failure.message(), "the agent run was aborted");
    tree_gone(&w.sandbox, Some("9138")).await;
    // Not busy any more.
    agent
        .run(spec(""), "now")
        .await
        .expect("a run after the abort");

    // Unknown and malformed lines are dropped and counted, never fatal.
    let result = agent.run(spec("noise"), "hi").await.expect("a noisy run");
    assert_eq!(result.dropped_lines, 3);
    assert_eq!(result.text, "ok");

    let err = agent.run(spec("crash"), "hi").await.expect_err("a crash");
    assert_eq!(reason(&err), AgentFailureReason::RuntimeError);
    assert_eq!(err.agent_failure().and_then(|f| f.exit_code), Some(3));
    assert_eq!(err.to_string(), "the agent's runtime ended with an error");

    let missing = spec("").runtime(
        CustomRuntime::command(["/opt/no-such-runtime/bin/agent"])
            .check("test -x /opt/no-such-runtime/bin/agent"),
    );
    let err = agent.run(missing.clone(), "hi").await.expect_err("missing");
    assert_eq!(reason(&err), AgentFailureReason::RuntimeMissing);
    assert_eq!(err.to_string(), "the agent's runtime is not in the image");
    let err = agent.prepare(missing).await.expect_err("still missing");
    assert_eq!(reason(&err), AgentFailureReason::RuntimeMissing);

    w.model.script(vec![Reply::Error(500)]);
    let err = agent.run(spec(""), "hi").await.expect_err("a model error");
    assert_eq!(reason(&err), AgentFailureReason::ModelError);
    assert_eq!(err.to_string(), "the model returned an error (HTTP500)");

    // The text protocol: the prompt on stdin, stdout is the answer.
    let text = spec("").runtime(
        CustomRuntime::command(["bash", "-c", "echo \"you said: $(cat)\""])
            .protocol(CustomProtocol::Text),
    );
    let result = agent.run(text, "ping").await.expect("a text run");
    assert_eq!(result.text, "you said: ping");
    assert!(!result.usage_reported);
    assert!(result.session_id.starts_with("rda_"));
    assert!(w.sandbox.kill().await.expect("kill"));
}

/// A JSON app: `POST /invocations` `{"question": ...}` answers
/// `{"reply": ...}`.
const APP: &str = r#"
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200 if self.path == "/ping" else 404)
        self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        out = json.dumps({"reply": "app got: " + body["question"]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(out)
HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_app_is_started_health_checked_and_invoked() {
    let Some(w) = world(vec![]).await else { return };
    let port = 18_000 + u16::try_from(std::process::id() % 2_000).unwrap_or(0);
    let app = HttpApp::new(["python3", "/home/user/app.py"], port)
        .protocol(HttpProtocol::Json)
        .request_field("question")
        .response_field("reply")
        .port_env("PORT")
        .file("/home/user/app.py", APP, 0o644);
    let result = w
        .sandbox
        .agent()
        .run(spec("").runtime(app), "what time is it")
        .await
        .expect("the app's answer");
    assert_eq!(result.text, "app got: what time is it");
    assert_eq!(result.steps, 1);
    tree_gone(&w.sandbox, None).await;
    assert!(w.sandbox.kill().await.expect("kill"));
}
