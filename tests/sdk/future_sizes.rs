//! The size of every public future (issue 22: a debug build of a program
//! that awaited many SDK calls in one `#[tokio::main]` future overflowed
//! the main thread's stack). A future is stored inline in its caller's
//! future, so a large one multiplies up the caller's state; the SDK boxes
//! its large inner states so that each public future stays within
//! [`BUDGET`] bytes (docs/architecture.md, "Lifetime of a handle"). The test
//! prints every size, so a change that grows one shows in the log.

use crate::sdk_support;

use std::time::Duration;

use rayito::template::{BuildHandle, BuildOptions, Template};
use rayito::{
    Client, ClientBuilder, CodeContextOptions, CommandOptions, ListQuery, PtyOptions, PtySize,
    RunCodeOptions, Sandbox, SandboxBuilder, WriteEntry,
};

/// A handle to read (never used: only the futures' sizes are looked at).
fn templates_handle() -> BuildHandle {
    BuildHandle::new(
        "arn:aws:lambda:us-east-1:000000000000:microvm-image:t",
        "1",
        "t",
    )
}

/// The most bytes one public future may take, in any build.
const BUDGET: usize = 4 * 1024;

/// Sizes of futures built (never polled) on a handle that is never used:
/// only `size_of_val` looks at them.
fn sizes(sbx: &Sandbox, client: &Client) -> Vec<(&'static str, usize)> {
    let templates = client.templates();
    let template = Template::new();
    let handle = templates_handle();
    let pool = client
        .pool(rayito::PoolConfig::new(1))
        .expect("a pool config");
    let builder = SandboxBuilder::new();
    let quotas = client.quotas();
    let cost = client.cost();
    let cost_query = rayito::CostQuery::new();
    let permissions = client.permissions();
    let simulation = rayito::permissions::SimulationQuery::new();
    let size = |name, n| (name, n);
    macro_rules! of {
        ($name:literal, $future:expr) => {
            size($name, std::mem::size_of_val(&$future))
        };
    }
    vec![
        of!("Sandbox::create", Sandbox::create()),
        of!("Sandbox::connect", Sandbox::connect("microvm-1", "token")),
        of!("SandboxBuilder::create", SandboxBuilder::new().create()),
        of!(
            "SandboxBuilder::connect",
            SandboxBuilder::new().connect("m", "t")
        ),
        of!("SandboxBuilder::client", builder.client()),
        of!("Client::from_env", Client::from_env()),
        of!("ClientBuilder::build", ClientBuilder::new().build()),
        of!("Client::connect", client.connect("m", "t")),
        of!("Client::kill_by_id", client.kill_by_id("m")),
        of!("Client::get_info_by_id", client.get_info_by_id("m")),
        of!("Client::resume_by_id", client.resume_by_id("m")),
        of!("Client::template_info", client.template_info(None)),
        of!(
            "Client::get_metrics_by_id",
            client.get_metrics_by_id("m", "t")
        ),
        of!(
            "Client::update_network_by_id",
            client.update_network_by_id("m", "t", rayito::NetworkPolicy::new())
        ),
        of!("run_code", sbx.run_code("1")),
        of!(
            "run_code_with",
            sbx.run_code_with("1", RunCodeOptions::new())
        ),
        of!(
            "run_code_stream",
            sbx.run_code_stream("1", RunCodeOptions::new())
        ),
        of!("code().run", sbx.code().run("1")),
        of!(
            "create_code_context",
            sbx.create_code_context(CodeContextOptions::new())
        ),
        of!("list_code_contexts", sbx.list_code_contexts()),
        of!("commands().run", sbx.commands().run("true")),
        of!(
            "commands().run_with",
            sbx.commands().run_with("true", CommandOptions::new())
        ),
        of!(
            "commands().spawn",
            sbx.commands().spawn("true", CommandOptions::new())
        ),
        of!("commands().connect", sbx.commands().connect(7)),
        of!("commands().list", sbx.commands().list()),
        of!("commands().kill", sbx.commands().kill(7)),
        of!("files().read", sbx.files().read("a")),
        of!("files().read_stream", sbx.files().read_stream("a")),
        of!("files().write", sbx.files().write("a", "x")),
        of!(
            "files().write_files",
            sbx.files().write_files(vec![WriteEntry::new("a", "x")])
        ),
        of!("files().list", sbx.files().list("a")),
        of!("files().watch_dir", sbx.files().watch_dir("a", true)),
        of!(
            "pty().create",
            sbx.pty().create(PtySize::new(80, 24), PtyOptions::new())
        ),
        of!("get_host", sbx.get_host(8080)),
        of!("kill", sbx.kill()),
        of!("set_timeout", sbx.set_timeout(Duration::from_secs(60))),
        of!("pause", sbx.pause()),
        of!("resume", sbx.resume()),
        of!("is_running", sbx.is_running()),
        of!("get_info", sbx.get_info()),
        of!("health", sbx.health()),
        of!("list (a stream)", sbx.client().list(ListQuery::new())),
        of!(
            "templates().build",
            templates.build(&template, "t", BuildOptions::default())
        ),
        of!(
            "templates().build_in_background",
            templates.build_in_background(&template, "t", BuildOptions::default())
        ),
        of!("templates().status", templates.status(&handle)),
        of!(
            "templates().wait",
            templates.wait(&handle, BuildOptions::default())
        ),
        of!("templates().logs", templates.logs("t", 1)),
        of!("templates().exists", templates.exists("t")),
        of!("templates().list", templates.list(None)),
        of!(
            "templates().version_status",
            templates.version_status("t", None)
        ),
        of!(
            "SandboxBuilder::template_version().create",
            SandboxBuilder::new().template_version(1).create()
        ),
        of!("Pool::start", pool.start()),
        of!("Pool::take", pool.take()),
        of!(
            "Pool::take_within",
            pool.take_within(Duration::from_secs(1))
        ),
        of!("Pool::close", pool.close(true)),
        of!("Pool::stats", pool.stats()),
        of!(
            "persistence().checkpoint",
            sbx.persistence()
                .checkpoint(rayito::persistence::CheckpointOptions::default())
        ),
        of!(
            "persistence().restore",
            sbx.persistence()
                .restore(rayito::persistence::RestoreOptions::default())
        ),
        of!("reincarnate", sbx.reincarnate()),
        of!(
            "SandboxBuilder::persist().create",
            SandboxBuilder::new()
                .persist(rayito::persistence::S3Prefix::new("b"))
                .create()
        ),
        of!(
            "persistence::list",
            rayito::persistence::list(client, &rayito::persistence::S3Prefix::new("b"))
        ),
        of!(
            "persistence::delete",
            rayito::persistence::delete(client, &rayito::persistence::S3Prefix::new("b"))
        ),
        of!(
            "PoolStore::create_dynamodb_table",
            rayito::PoolStore::create_dynamodb_table("t", rayito::AwsOptions::new())
        ),
        of!("Quotas::report", quotas.report()),
        of!("UsageCost::report", cost.report(rayito::CostQuery::new())),
        of!("UsageCost::billed", cost.billed(&cost_query)),
        of!("UsageCost::estimate", cost.estimate()),
        of!("Permissions::simulate", permissions.simulate(&simulation)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_public_future_stays_within_the_budget() {
    let emulator = sdk_support::emulator().await;
    let client = Client::builder()
        .aws(sdk_support::aws(&emulator))
        .build()
        .await
        .expect("a client");
    let sbx = client
        .sandbox()
        .template(emulator.image_arn("rayito-base"))
        .create()
        .await
        .expect("a sandbox");
    let measured = sizes(&sbx, &client);
    let mut over = Vec::new();
    for (name, size) in &measured {
        println!("{name}: {size} bytes");
        if *size > BUDGET {
            over.push(format!("{name}: {size} bytes"));
        }
    }
    sbx.kill().await.unwrap();
    assert!(over.is_empty(), "above the {BUDGET}-byte budget: {over:?}");
}
