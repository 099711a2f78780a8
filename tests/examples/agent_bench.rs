//! The time from `agent().run()` to the first event on a sandbox taken from
//! a warm pool (issue 49), against its baseline on the same sandbox: the
//! same program (the entrypoint driver with the same function) started by a
//! plain `commands.spawn`, timed to its first stdout byte. The difference is
//! the agent layer: the busy check (`list_tagged`), the runtime files
//! compared (read) before the start, the run script's lock and check.
//!
//! ```text
//! cargo build --release -p rayito-tests --example agent_bench
//! /work/bin/hold-slots ./target/release/examples/agent_bench [takes] [runs]
//! ```
//!
//! Defaults: 4 takes of a pool of 2 (each a hit: the pool is refilled
//! before the next), `runs` = 6 agent runs and 6 baselines per taken
//! sandbox, interleaved (the order alternates). The first agent run after
//! each take is reported apart (the warm-up, `agent_pool_warmup`, wrote the
//! files and imported the module), and on every other take a baseline runs
//! first, to show what the first command after a take costs by itself.
//! A take applies the model's gateway (`take_with_gateways`): its time is
//! in `take()`.
//! Local backend (the emulator in this process), the scripted model of
//! tests/sdk_support/model_server.rs behind an `openai_compatible`
//! gateway, the key in moto's Secrets Manager (needs moto).

#[path = "../sdk_support/mod.rs"]
mod sdk_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rayito::agent::{
    AgentModel, AgentSpec, CustomRuntime, ModelProvider, agent_pool_warmup, gateways,
};
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{CommandEvent, CommandOptions};
use rayito::{PoolConfig, Sandbox};
use sdk_support::model_server::{ModelServer, Reply};
use sdk_support::moto::MotoServer;

const SECRET: &str = "bench/model-key";
const HOST: &str = "llm.agent-bench.test";
const DRIVER: &str = "/home/user/.rayito/agent/entrypoint_driver.py";
const MODULE: &str = r#"
import json, os, urllib.request

def answer(request):
    body = json.dumps({"model": request["model"],
                       "messages": [{"role": "user", "content": request["prompt"]}]}).encode()
    r = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"content-type": "application/json",
                 "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    resp = json.load(urllib.request.urlopen(r, timeout=60))
    return resp["choices"][0]["message"]["content"]
"#;

fn runtime() -> CustomRuntime {
    CustomRuntime::entrypoint("bench_agent:answer").file("/home/user/bench_agent.py", MODULE, 0o644)
}

fn spec() -> AgentSpec {
    let model = AgentModel::new(ModelProvider::OpenaiCompatible, "llm")
        .id("scripted-1")
        .base_path("/v1");
    AgentSpec::new(model).runtime(runtime())
}

/// `run()` to the first event, and to the end.
async fn agent_run(sandbox: &Sandbox) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut stream = sandbox.agent().stream(spec(), "hi").await?;
    stream.next().await.ok_or("no event")??;
    let first = start.elapsed();
    while let Some(event) = stream.next().await {
        event?;
    }
    Ok((first, start.elapsed()))
}

/// The same program by a plain spawn, to its first stdout byte.
async fn baseline(
    sandbox: &Sandbox,
    gateway: &str,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let request = b"{\"v\":1,\"prompt\":\"hi\",\"session_id\":null,\"workdir\":\"/home/user\",\"model\":{\"id\":\"scripted-1\"}}\n";
    let options = CommandOptions::new()
        .cwd("/home/user")
        .stdin(request.to_vec())
        .env("OPENAI_BASE_URL", format!("{gateway}/v1"))
        .env("OPENAI_API_KEY", "placeholder-not-a-secret");
    let start = Instant::now();
    let mut handle = sandbox
        .commands()
        .spawn(&format!("python3 {DRIVER} bench_agent:answer"), options)
        .await?;
    let mut first = None;
    while let Some(event) = handle.next().await {
        if let CommandEvent::Stdout { .. } = event? {
            first.get_or_insert_with(|| start.elapsed());
        }
    }
    let _ = handle.wait().await;
    Ok(first.ok_or("no stdout")?)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn show(name: &str, v: &[f64]) {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    println!(
        "{name:<40} n={:<3} p50 {:>7.1} ms  min {:>7.1}  max {:>7.1}",
        v.len(),
        p50(v.to_vec()),
        sorted[0],
        sorted[sorted.len() - 1]
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let takes: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(4);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(6);
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start).await? else {
        return Err("moto is needed (.ci/install-test-deps)".into());
    };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDAGENTBENCH");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone()))?
        .create(SECRET, "Bearer bench-key", &BTreeMap::new())
        .await?;
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config))?;
    let emu = sdk_support::emulator().await;
    let model = ModelServer::start(HOST, vec![Reply::Text("ok".to_owned(), (3, 1))]).await;
    model.trust_on(emu.gateway_upstreams());
    let gateway = gateways::openai_compatible(SECRET, &model.url(), "/v1")?;
    let mut pool_config = PoolConfig::new(2).ready_timeout(Duration::from_secs(60));
    for step in agent_pool_warmup(runtime())? {
        pool_config = pool_config.warmup(step);
    }
    let pool = sdk_support::builder(&emu)
        .secret_cache(cache)
        .pool(pool_config)?;
    pool.start().await?;

    let (mut take_ms, mut first_event_first, mut first_event) = (vec![], vec![], vec![]);
    let (mut whole, mut spawn_first, mut spawn_first_first) = (vec![], vec![], vec![]);
    for take in 0..takes {
        let deadline = Instant::now() + Duration::from_secs(120);
        while pool.stats().await?.ready < 2 {
            if Instant::now() > deadline {
                return Err("the pool never refilled".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let start = Instant::now();
        let sandbox = pool.take_with_gateways([("llm", gateway.clone())]).await?;
        take_ms.push(ms(start.elapsed()));
        let url = sandbox.gateways().get("llm").ok_or("no gateway")?.url();
        // Odd takes start with the baseline: the first command after a
        // take, to compare with the first agent run after one.
        if take % 2 == 1 {
            spawn_first_first.push(ms(baseline(&sandbox, &url).await?));
        }
        let (first, end) = agent_run(&sandbox).await?;
        first_event_first.push(ms(first));
        whole.push(ms(end));
        for run in 0..runs {
            let agent_first = (run + take) % 2 == 0;
            if agent_first {
                first_event.push(ms(agent_run(&sandbox).await?.0));
            }
            spawn_first.push(ms(baseline(&sandbox, &url).await?));
            if !agent_first {
                first_event.push(ms(agent_run(&sandbox).await?.0));
            }
        }
        sandbox.kill().await?;
    }
    pool.close(true).await?;
    show("take() (a hit)", &take_ms);
    show("run() -> first event, first run", &first_event_first);
    show("run() -> done, first run", &whole);
    show("run() -> first event, later runs", &first_event);
    if !spawn_first_first.is_empty() {
        show(
            "spawn -> first stdout, first after take",
            &spawn_first_first,
        );
    }
    show("spawn -> first stdout (baseline)", &spawn_first);
    println!(
        "agent layer (p50 first event - p50 baseline): {:.1} ms",
        p50(first_event) - p50(spawn_first)
    );
    Ok(())
}
