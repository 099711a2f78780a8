//! An AI agent in a sandbox (docs/agent.md): a Python function of yours
//! (`CustomRuntime::entrypoint`) answers a prompt by calling a model
//! through the sandbox's secret gateway; the model's key stays in Secrets
//! Manager and the gateway, never in the sandbox. The run's events are
//! printed as they stream, then the final text and the token usage.
//!
//! ```text
//! RAYITO_AGENT_MODEL_URL=https://api.openai.com RAYITO_AGENT_MODEL_ID=gpt-4o-mini \
//!     cargo run --example agent --features agent
//! ```
//!
//! What it needs:
//!
//! - `RAYITO_AGENT_MODEL_URL`: an OpenAI-compatible model's upstream
//!   (`https://host[:port]`). Without it the example says what to set and
//!   exits.
//! - `RAYITO_AGENT_MODEL_SECRET`: a Secrets Manager secret holding the
//!   model's `authorization` header value, `Bearer <key>` (default
//!   `example/model-key`); your account, or a moto server through
//!   `AWS_ENDPOINT_URL_SECRETS_MANAGER` as in `examples/gateway.rs`.
//! - `RAYITO_AGENT_MODEL_ID` (default `gpt-4o-mini`) and
//!   `RAYITO_AGENT_MODEL_BASE_PATH` (default `/v1`).
//! - On the local backend only, for a stand-in model on this host:
//!   `RAYITO_AGENT_MODEL_CA` (a PEM file of the CA the sandboxes trust for
//!   it) and `RAYITO_AGENT_MODEL_ADDR` (`ip:port` where its host is dialed).
//!   The tests run the example this way against a scripted model.

use futures_util::StreamExt;
use rayito::Client;
use rayito::agent::{AgentEvent, AgentModel, AgentSpec, CustomRuntime, ModelProvider, gateways};
use rayito::secrets::{SecretCache, SecretCacheOptions};

/// Your agent: one function, given the request, returning the text and
/// the usage. It reaches the model through the gateway with the standard
/// OpenAI variables, whose key is a placeholder.
const AGENT: &str = r#"
import json, os, urllib.request

def answer(request):
    body = json.dumps({"model": request["model"],
                       "messages": [{"role": "user", "content": request["prompt"]}]}).encode()
    call = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"content-type": "application/json",
                 "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    reply = json.load(urllib.request.urlopen(call, timeout=120))
    usage = reply.get("usage") or {}
    return {"text": reply["choices"][0]["message"]["content"] or "",
            "usage": {"input": usage.get("prompt_tokens", 0),
                      "output": usage.get("completion_tokens", 0)}}
"#;

const PROMPT: &str = "In one sentence: what is a microVM?";

/// What to set, printed when no model is given.
const NO_MODEL: &str = "\
this example needs a model: set RAYITO_AGENT_MODEL_URL to an OpenAI-compatible upstream
(https://api.openai.com, say) and store its key as `Bearer <key>` in the Secrets Manager
secret RAYITO_AGENT_MODEL_SECRET names (default example/model-key); RAYITO_AGENT_MODEL_ID
picks the model (default gpt-4o-mini). Nothing was created.";

fn var(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(url) = std::env::var("RAYITO_AGENT_MODEL_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        println!("{NO_MODEL}");
        return Ok(());
    };
    let secret = var("RAYITO_AGENT_MODEL_SECRET", "example/model-key");
    let model_id = var("RAYITO_AGENT_MODEL_ID", "gpt-4o-mini");
    let base_path = var("RAYITO_AGENT_MODEL_BASE_PATH", "/v1");

    let client = match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Client::from_env().await?,
        _ => Client::local().await?,
    };
    // A stand-in model on this host (local backend only): trust its CA and
    // dial its host where it listens.
    if let Ok(ca) = std::env::var("RAYITO_AGENT_MODEL_CA") {
        let upstreams = client.local_gateway_upstreams()?;
        upstreams.trust_root_pem(std::fs::read_to_string(ca)?);
        if let Ok(addr) = std::env::var("RAYITO_AGENT_MODEL_ADDR") {
            let host = url
                .trim_start_matches("https://")
                .split(['/', ':'])
                .next()
                .unwrap_or_default();
            upstreams.set_host(host, addr.parse()?);
        }
    }

    let gateway = gateways::openai_compatible(secret.as_str(), &url, &base_path)?;
    let sandbox = client
        .sandbox()
        .secret_cache(SecretCache::new(SecretCacheOptions::new())?)
        .gateway("llm", gateway)
        .create()
        .await?;
    println!("sandbox {} is ready", sandbox.id());
    let outcome = run(&sandbox, &model_id, &base_path).await;
    sandbox.kill().await?;
    outcome
}

async fn run(
    sandbox: &rayito::Sandbox,
    model_id: &str,
    base_path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let model = AgentModel::new(ModelProvider::OpenaiCompatible, "llm")
        .id(model_id)
        .base_path(base_path);
    let runtime =
        CustomRuntime::entrypoint("my_agent:answer").file("/home/user/my_agent.py", AGENT, 0o644);
    let spec = AgentSpec::new(model).runtime(runtime);

    println!("prompt: {PROMPT}");
    let mut stream = sandbox.agent().stream(spec, PROMPT).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event? {
            AgentEvent::StepStarted { index } => println!("event: step {index} started"),
            AgentEvent::TextDelta { text } => println!("event: text delta {text:?}"),
            AgentEvent::Text { text: block } => {
                println!("event: text ({} bytes)", block.len());
                text = block;
            }
            AgentEvent::StepFinished { index, usage, .. } => {
                println!("event: step {index} finished, {} tokens", usage.total());
            }
            AgentEvent::Done {
                session_id, usage, ..
            } => {
                println!("event: done (session {session_id})");
                println!("answer: {text}");
                println!(
                    "usage: {} input + {} output = {} tokens",
                    usage.input,
                    usage.output,
                    usage.total()
                );
            }
            AgentEvent::AgentFailed(failure) => {
                return Err(format!("the agent failed: {}", failure.message()).into());
            }
            other => println!("event: {}", other.type_name()),
        }
    }
    Ok(())
}
