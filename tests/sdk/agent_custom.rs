//! `CustomRuntime::entrypoint` and `agent_pool_warmup` of a custom runtime
//! end to end on the local backend, against the scripted model
//! (tests/sdk_support/model_server.rs) behind an `openai_compatible`
//! gateway whose key lives in moto's Secrets Manager: a Python function
//! that calls the model and returns text and usage (its prints never
//! break the protocol), a generator streamed as `text_delta`s, an async
//! function given the request, failures classified without their message
//! (`runtime_error`, `model_error`, `entrypoint_not_found`), and a pool
//! whose warm-up installed the runtime so that a taken sandbox's first run
//! installs nothing.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use rayito::agent::{
    AgentEvent, AgentFailureReason, AgentModel, AgentSpec, CustomRuntime, ModelProvider,
    agent_pool_warmup, gateways,
};
use rayito::gateway::SecretGateway;
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{PoolConfig, SandboxBuilder, SandboxError};
use sdk_support::model_server::{ModelServer, Reply};
use sdk_support::moto::MotoServer;

const KEY: &str = "canary-entrypoint-key-51c0";
const SECRET: &str = "agents/entrypoint-key";
const MODEL_HOST: &str = "llm.entrypoint-test.internal";

/// The user's module: functions of every shape the driver takes.
const MODULE: &str = r#"
import asyncio, json, os, urllib.request

def answer(request):
    print("a print of the user's code", flush=True)
    body = json.dumps({"model": request["model"],
                       "messages": [{"role": "user", "content": request["prompt"]}]}).encode()
    r = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"content-type": "application/json",
                 "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    resp = json.load(urllib.request.urlopen(r, timeout=60))
    usage = resp["usage"]
    return {"text": resp["choices"][0]["message"]["content"],
            "usage": {"input": usage["prompt_tokens"], "output": usage["completion_tokens"]}}

def pieces(request):
    for piece in ("one ", "two ", "three"):
        yield piece

async def later(request):
    await asyncio.sleep(0)
    return "%s|%s|%s|%s" % (request["prompt"], request["model"], request["session_id"],
                            request["reasoning"])

def boom(request):
    raise ValueError("a message that must not leave the sandbox")

def refused(request):
    import openai
    raise openai.APIStatusError("the provider's text")

def installed(request):
    with open("/home/user/install.log") as f:
        return "installed %d time(s)" % len(f.read().splitlines())
"#;

/// A stand-in for the `openai` package: only its module name matters.
const FAKE_OPENAI: &str = "class APIStatusError(Exception):\n    pass\n";

struct World {
    _moto: MotoServer,
    model: ModelServer,
    emu: rayito_emulator::Emulator,
    cache: SecretCache,
}

async fn world(script: Vec<Reply>) -> Option<World> {
    let moto = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")?;
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDENTRYPOINT");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone()))
        .expect("a store")
        .create(SECRET, format!("Bearer {KEY}"), &BTreeMap::new())
        .await
        .expect("the secret");
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).expect("a cache");
    let emu = sdk_support::emulator().await;
    let model = ModelServer::start(MODEL_HOST, script).await;
    model.trust_on(emu.gateway_upstreams());
    Some(World {
        _moto: moto,
        model,
        emu,
        cache,
    })
}

impl World {
    fn gateway(&self) -> SecretGateway {
        gateways::openai_compatible(SECRET, &self.model.url(), "/v1").expect("preset")
    }

    /// A builder with the secret cache; `create` adds the gateway, a pool's
    /// take passes it (a pool's warm sandboxes carry none).
    fn builder(&self) -> SandboxBuilder {
        sdk_support::builder(&self.emu).secret_cache(self.cache.clone())
    }
}

fn runtime(function: &str) -> CustomRuntime {
    CustomRuntime::entrypoint(format!("myagent:{function}"))
        .file("/home/user/myagent.py", MODULE, 0o644)
        .file("/home/user/openai.py", FAKE_OPENAI, 0o644)
}

fn spec(runtime: CustomRuntime) -> AgentSpec {
    let model = AgentModel::new(ModelProvider::OpenaiCompatible, "llm")
        .id("scripted-1")
        .base_path("/v1");
    AgentSpec::new(model).runtime(runtime)
}

fn failure(err: &SandboxError) -> (AgentFailureReason, Option<String>) {
    let f = err
        .agent_failure()
        .unwrap_or_else(|| panic!("an agent error: {err:?}"));
    (f.reason, f.detail_code.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entrypoint_function_answers_through_the_driver() {
    let Some(w) = world(vec![Reply::Text("the model's answer".to_owned(), (12, 5))]).await else {
        return;
    };
    let sandbox = w
        .builder()
        .gateway("llm", w.gateway())
        .create()
        .await
        .expect("a sandbox");
    let agent = sandbox.agent();

    // A dict with text and usage; the function's print goes to stderr.
    let mut stream = agent
        .stream(spec(runtime("answer")), "hello model")
        .await
        .expect("the run starts");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("an event"));
    }
    let kinds: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    assert_eq!(kinds, ["step_started", "text", "step_finished", "done"]);
    assert_eq!(
        events[1],
        AgentEvent::Text {
            text: "the model's answer".to_owned()
        }
    );
    let AgentEvent::Done {
        usage,
        usage_reported,
        session_id,
        exit_code,
    } = &events[3]
    else {
        panic!("{events:?}")
    };
    assert_eq!((usage.input, usage.output, *usage_reported), (12, 5, true));
    assert_eq!(*exit_code, 0);
    assert!(session_id.starts_with("rda_") && session_id.len() == 36);
    assert_eq!(stream.dropped_lines(), 0, "the print broke the protocol");
    let requests = w.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "scripted-1");
    assert_eq!(
        requests[0].header("authorization"),
        [format!("Bearer {KEY}").as_str()]
    );

    // A generator: its pieces streamed as text_delta, the text joined.
    let mut stream = agent
        .stream(spec(runtime("pieces")), "count")
        .await
        .expect("the run starts");
    let mut deltas = Vec::new();
    let mut text = None;
    let mut reported = None;
    while let Some(event) = stream.next().await {
        match event.expect("an event") {
            AgentEvent::TextDelta { text } => deltas.push(text),
            AgentEvent::Text { text: t } => text = Some(t),
            AgentEvent::Done { usage_reported, .. } => reported = Some(usage_reported),
            _ => {}
        }
    }
    assert_eq!(deltas, ["one ", "two ", "three"]);
    assert_eq!(text.as_deref(), Some("one two three"));
    assert_eq!(reported, Some(false));

    // An async function gets the request: prompt, model id, session, reasoning.
    let session = "rda_0123456789abcdef0123456789abcdef";
    let result = agent
        .run(spec(runtime("later")).session_id(session), "ping")
        .await
        .expect("an async run");
    assert_eq!(result.text, format!("ping|scripted-1|{session}|False"));
    assert_eq!(result.session_id, session);

    // Failures: the class name as detail, never the message.
    let err = agent
        .run(spec(runtime("boom")), "hi")
        .await
        .expect_err("boom");
    assert_eq!(
        failure(&err),
        (
            AgentFailureReason::RuntimeError,
            Some("ValueError".to_owned())
        )
    );
    assert!(!format!("{err:?}").contains("must not leave"));
    let err = agent
        .run(spec(runtime("refused")), "hi")
        .await
        .expect_err("a model library's error");
    assert_eq!(
        failure(&err),
        (
            AgentFailureReason::ModelError,
            Some("APIStatusError".to_owned())
        )
    );
    let err = agent
        .run(spec(CustomRuntime::entrypoint("no_such_module:f")), "hi")
        .await
        .expect_err("no module");
    assert_eq!(
        failure(&err),
        (
            AgentFailureReason::RuntimeError,
            Some("entrypoint_not_found".to_owned())
        )
    );
    let err = agent
        .run(
            spec(CustomRuntime::entrypoint("myagent:f").python("/opt/no-such/python")),
            "hi",
        )
        .await
        .expect_err("no interpreter");
    assert_eq!(failure(&err).0, AgentFailureReason::RuntimeMissing);
    assert!(sandbox.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_taken_sandbox_starts_its_first_run_with_nothing_to_install() {
    let Some(w) = world(vec![]).await else { return };
    // The install leaves one line per run of it; the check passes once it ran.
    let runtime = runtime("installed")
        .check("test -s /home/user/install.log")
        .install("echo installed >> /home/user/install.log");
    let mut config = PoolConfig::new(1)
        .ready_timeout(Duration::from_secs(60))
        .fill_retry_base(Duration::from_millis(200));
    let steps = agent_pool_warmup(runtime.clone()).expect("the steps");
    assert_eq!(
        steps.len(),
        5,
        "install, two files, the driver, the import: {steps:?}"
    );
    for step in steps {
        config = config.warmup(step);
    }
    let pool = w.builder().pool(config).expect("the pool");
    pool.start().await.expect("start");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while pool.stats().await.expect("stats").ready < 1 {
        assert!(std::time::Instant::now() < deadline, "never parked");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let sandbox = pool
        .take_with_gateways([("llm", w.gateway())])
        .await
        .expect("a parked sandbox");
    // The warm-up wrote the runtime's files before the pause.
    let files = sandbox.files();
    assert_eq!(
        files
            .read_to_string("/home/user/myagent.py")
            .await
            .expect("the module"),
        MODULE
    );
    assert!(
        files
            .exists("/home/user/.rayito/agent/entrypoint_driver.py")
            .await
            .expect("exists")
    );
    let result = sandbox
        .agent()
        .run(spec(runtime.clone()), "first run")
        .await
        .expect("the first run");
    assert_eq!(result.text, "installed 1 time(s)");
    // prepare() finds it installed too: the install does not run again.
    sandbox
        .agent()
        .prepare(spec(runtime))
        .await
        .expect("prepare");
    let log = files
        .read_to_string("/home/user/install.log")
        .await
        .expect("the log");
    assert_eq!(log, "installed\n");
    sandbox.kill().await.expect("kill");
    pool.close(true).await.expect("close");
}
