//! Every future and stream the public API returns is `Send` (and `'static`
//! where its inputs are owned), so it can be used in `tokio::spawn` and in
//! web handlers. The checks are compile-time: a method whose future is not
//! `Send` fails to build this file. The one runtime test keeps the list
//! complete: every `pub async fn` and public stream of `src/` must be named
//! here, so a new method cannot slip past without a check.

use std::time::Duration;

use rayito::{
    Client, ClientBuilder, CodeContextOptions, CommandHandle, CommandOptions, ExecutionEvents,
    FileChunks, ListQuery, PtyHandle, PtyOptions, PtySize, RunCodeOptions, Sandbox, SandboxBuilder,
    SandboxHost, SandboxList, WatchHandle, WriteEntry,
};

fn assert_send<T: Send>(_: &T) {}
fn assert_send_static<T: Send + 'static>(_: &T) {}

/// Never called: it only has to compile.
#[allow(dead_code)]
fn sandbox_futures_are_send(sbx: &Sandbox) {
    assert_send_static(&Sandbox::create());
    assert_send_static(&Sandbox::connect("microvm-1", "token"));
    assert_send_static(&SandboxBuilder::new().create());
    assert_send_static(&SandboxBuilder::new().connect("microvm-1", "token"));
    assert_send(&sbx.run_code("1"));
    // Options with callbacks (`FnMut + Send`, not `Sync`) must not make the
    // future lose `Send`: that was the defect.
    let options = || {
        RunCodeOptions::new()
            .on_stdout(|_| {})
            .on_stderr(|_| {})
            .on_result(|_| {})
            .on_error(|_| {})
    };
    assert_send(&sbx.run_code_with("1", options()));
    assert_send(&sbx.run_code_stream("1", options()));
    assert_send(&sbx.create_code_context(CodeContextOptions::new().env("A", "b")));
    assert_send(&sbx.list_code_contexts());
    assert_send(&sbx.restart_code_context("ctx"));
    assert_send(&sbx.remove_code_context("ctx"));
    assert_send(&sbx.get_host(8080));
    assert_send(&sbx.kill());
    assert_send(&sbx.set_timeout(Duration::from_secs(60)));
    assert_send(&sbx.is_running());
    assert_send(&sbx.get_info());
    assert_send(&sbx.health());
    assert_send(&sbx.metrics().current());
    assert_send(
        &sbx.metrics()
            .history(rayito::MetricsHistoryQuery::default()),
    );
    assert_send(&sbx.network().get());
    assert_send(&sbx.network().update(rayito::NetworkPolicy::new()));
    assert_send(&sbx.pause());
    assert_send(&sbx.resume());
    assert_send(
        &sbx.persistence()
            .checkpoint(rayito::persistence::CheckpointOptions::default().on_progress(|_| {})),
    );
    assert_send(
        &sbx.persistence()
            .restore(rayito::persistence::RestoreOptions::default()),
    );
    assert_send(&sbx.reincarnate());
    assert_send_static(&Sandbox::kill_by_id("microvm-1"));
    assert_send_static(&Sandbox::get_info_by_id("microvm-1"));
    assert_send_static(&Sandbox::resume_by_id("microvm-1"));
    assert_send_static(&Sandbox::list(ListQuery::new()));
    assert_send_static(&Sandbox::get_metrics_by_id("microvm-1", "token"));
    assert_send_static(&Sandbox::get_metrics_history_by_id(
        "microvm-1",
        "token",
        rayito::MetricsHistoryQuery::default(),
    ));
    assert_send_static(&Sandbox::update_network_by_id(
        "microvm-1",
        "token",
        rayito::NetworkPolicy::new(),
    ));
}

/// The deprecated spellings stay `Send` while they exist.
#[allow(dead_code, deprecated)]
fn deprecated_spellings_are_send(sbx: &Sandbox) {
    assert_send(&sbx.get_metrics());
    assert_send(&sbx.get_metrics_history(rayito::MetricsHistoryQuery::default()));
    assert_send(&sbx.get_network());
    assert_send(&sbx.update_network(rayito::NetworkPolicy::new()));
    assert_send_static(&SandboxBuilder::new().kill_by_id("microvm-1"));
    assert_send_static(&SandboxBuilder::new().get_info_by_id("microvm-1"));
    assert_send_static(&SandboxBuilder::new().resume_by_id("microvm-1"));
    assert_send_static(&SandboxBuilder::new().list(ListQuery::new()));
    assert_send_static(&SandboxBuilder::new().template_info());
    assert_send_static(&SandboxBuilder::new().get_metrics_by_id("microvm-1", "token"));
    assert_send_static(&SandboxBuilder::new().update_network_by_id(
        "microvm-1",
        "token",
        rayito::NetworkPolicy::new(),
    ));
    assert_send_static(&SandboxBuilder::new().get_metrics_history_by_id(
        "microvm-1",
        "token",
        rayito::MetricsHistoryQuery::default(),
    ));
}

/// The local backends build the same `Sandbox`; their builders' futures
/// are checked too (a backend's state must not make them lose `Send`).
#[allow(dead_code)]
fn local_backend_futures_are_send() {
    assert_send_static(&SandboxBuilder::new().local().create());
    assert_send_static(&SandboxBuilder::new().local_tls().create());
    assert_send_static(&SandboxBuilder::new().local().connect("microvm-1", "token"));
    assert_send_static(
        &SandboxBuilder::new()
            .local_tls()
            .connect("microvm-1", "token"),
    );
    assert_send_static(
        &SandboxBuilder::new()
            .aws(rayito::AwsOptions::new().region("us-east-1"))
            .create(),
    );
}

/// The client's calls, and the code view's.
#[allow(dead_code)]
fn client_and_code_futures_are_send(client: &Client, sbx: &Sandbox) {
    assert_send_static(&Client::from_env());
    assert_send_static(&ClientBuilder::new().build());
    assert_send_static(&client.sandbox().create());
    assert_send(&client.connect("microvm-1", "token"));
    assert_send(&client.kill_by_id("microvm-1"));
    assert_send(&client.get_info_by_id("microvm-1"));
    assert_send(&client.resume_by_id("microvm-1"));
    assert_send(&client.resume_by_id_within("microvm-1", Duration::from_secs(1)));
    assert_send(&client.template_info(None));
    assert_send(&client.get_metrics_by_id("microvm-1", "token"));
    assert_send(&client.get_metrics_history_by_id(
        "microvm-1",
        "token",
        rayito::MetricsHistoryQuery::default(),
    ));
    assert_send(&client.update_network_by_id("microvm-1", "token", rayito::NetworkPolicy::new()));
    let builder = SandboxBuilder::new();
    assert_send(&builder.client());
    let at = rayito::persistence::S3Prefix::new("bkt");
    assert_send(&rayito::persistence::list(client, &at));
    assert_send(&rayito::persistence::delete(client, &at));
    // The metadata index's (a pre-existing gap the scan below reports).
    assert_send(&rayito::SandboxIndex::dynamodb("t").create_table());
    assert_send_static(&client.list(ListQuery::new()));
    let code = sbx.code();
    assert_send(&code.run("1"));
    assert_send(&code.run_with("1", RunCodeOptions::new().on_stdout(|_| {})));
    assert_send(&code.stream("1", RunCodeOptions::new()));
    assert_send(&code.create_context(CodeContextOptions::new()));
    assert_send(&code.contexts());
    assert_send(&code.restart_context("ctx"));
    assert_send(&code.remove_context("ctx"));
}

/// Template builds and image publishing (feature `templates`, which the
/// SDK's own tests enable).
#[allow(dead_code)]
fn template_and_image_futures_are_send(client: &Client, artifact: &rayito::template::Artifact) {
    use rayito::template::{BuildHandle, BuildOptions, PublishOptions, Template};
    let templates = client.templates();
    let template = Template::new();
    let handle = BuildHandle::new("arn", "1", "t");
    assert_send(&templates.build(&template, "t", BuildOptions::default()));
    assert_send(&templates.build_in_background(&template, "t", BuildOptions::default()));
    assert_send(&templates.status(&handle));
    assert_send(&templates.wait(&handle, BuildOptions::default()));
    assert_send(&templates.logs("t", 10));
    assert_send(&templates.exists("t"));
    assert_send(&templates.list(None));
    assert_send(&templates.version_status("t", None));
    let images = client.images();
    assert_send(&images.publish(artifact, "i", PublishOptions::default()));
    assert_send(&images.list(None));
    assert_send(&images.versions("i"));
    assert_send(&images.sizes("i"));
    assert_send(&images.prune("i", rayito::template::PruneOptions::default()));
}

/// The pool's calls.
#[allow(dead_code)]
fn pool_futures_are_send(pool: &rayito::Pool) {
    assert_send(&pool.start());
    assert_send(&pool.take());
    assert_send(&pool.take_within(Duration::from_secs(1)));
    assert_send(&pool.close(true));
    assert_send(&pool.stats());
    assert_send(&rayito::PoolStore::create_dynamodb_table(
        "t",
        rayito::AwsOptions::new(),
    ));
}

/// A new account's setup (feature `setup`, which the SDK's own tests
/// enable).
#[allow(dead_code)]
async fn setup_futures_are_send(client: &Client) {
    use rayito::setup::SetupOptions;
    let setup = client.setup(SetupOptions::default());
    assert_send(&setup.plan());
    let plan = setup.plan().await.unwrap();
    assert_send(&setup.apply(&plan));
    assert_send(&setup.outputs());
    assert_send(&setup.bucket_exists("b"));
}

#[allow(dead_code)]
fn local_client_futures_are_send() {
    assert_send_static(&Client::local());
    assert_send_static(&ClientBuilder::new().local().build());
}

#[allow(dead_code)]
fn command_futures_are_send(sbx: &Sandbox) {
    let commands = sbx.commands();
    assert_send(&commands.run("true"));
    let options = CommandOptions::new()
        .on_stdout(|_| {})
        .on_stderr(|_| {})
        .stdin("x");
    assert_send(&commands.run_with("true", options));
    let options = CommandOptions::new().on_stdout(|_| {}).stdin("x");
    assert_send(&commands.spawn("sleep 1", options));
    assert_send(&commands.connect(7));
    assert_send(&commands.connect_from(7, 1));
    assert_send(&commands.list());
    assert_send(&commands.list_tagged("t"));
    assert_send(&commands.kill(7));
    assert_send(&commands.signal(7, 2));
    assert_send(&commands.send_stdin(7, vec![1u8]));
    assert_send(&commands.close_stdin(7));
}

/// A background command's handle, and what it offers.
#[allow(dead_code)]
fn command_handle_futures_are_send(handle: CommandHandle, host: SandboxHost) {
    assert_send(&handle.kill());
    assert_send(&handle.send_stdin(vec![1u8]));
    assert_send(&handle.close_stdin());
    assert_send(&host.headers());
    assert_send_static(&handle.wait());
}

#[allow(dead_code)]
fn pty_futures_are_send(sbx: &Sandbox, handle: PtyHandle) {
    let pty = sbx.pty();
    assert_send(&pty.create(PtySize::new(80, 24), PtyOptions::new()));
    assert_send(&pty.connect(7));
    assert_send(&pty.connect_from(7, 1));
    assert_send(&pty.send_input(7, vec![1u8]));
    assert_send(&pty.resize(7, PtySize::new(80, 24)));
    assert_send(&pty.kill(7));
    assert_send(&handle.send_input(vec![1u8]));
    assert_send(&handle.resize(PtySize::new(80, 24)));
    assert_send(&handle.kill());
    assert_send_static(&handle.wait());
}

#[allow(dead_code)]
fn file_futures_are_send(sbx: &Sandbox) {
    let files = sbx.files();
    assert_send(&files.read("a"));
    assert_send(&files.read_stream("a"));
    assert_send(&files.read_to_string("a"));
    assert_send(&files.write("a", "x"));
    assert_send(&files.write_stream("a", futures_util::stream::iter([vec![1u8]])));
    assert_send(&files.write_files(vec![WriteEntry::new("a", "x")]));
    assert_send(&files.write_with("a", "x", rayito::WriteOptions::new().gzip(true)));
    assert_send(&files.write_stream_with(
        "a",
        futures_util::stream::iter([vec![1u8]]),
        rayito::WriteOptions::new(),
    ));
    assert_send(
        &files.write_files_with(vec![WriteEntry::new("a", "x")], rayito::WriteOptions::new()),
    );
    assert_send(&files.watch_dir_with("a", rayito::WatchOptions::new().on_exit(|_| {})));
    assert_send(&files.list("a"));
    assert_send(&files.list_with_depth("a", 2));
    assert_send(&files.exists("a"));
    assert_send(&files.get_info("a"));
    assert_send(&files.remove("a"));
    assert_send(&files.rename("a", "b"));
    assert_send(&files.make_dir("a"));
    assert_send(&files.watch_dir("a", true));
}

#[allow(dead_code)]
fn streams_are_send_and_static(
    events: ExecutionEvents,
    chunks: FileChunks,
    command: CommandHandle,
    pty: PtyHandle,
    watch: WatchHandle,
    list: SandboxList,
) {
    assert_send_static(&list);
    assert_send_static(&events);
    assert_send_static(&chunks);
    assert_send_static(&command);
    assert_send_static(&pty);
    assert_send_static(&watch);
}

/// What users write: a handle moved into a spawned task.
#[allow(dead_code)]
fn calls_can_be_spawned(sbx: Sandbox) {
    drop(tokio::spawn(async move {
        let options = RunCodeOptions::new().on_stdout(|_| {});
        let _ = sbx.run_code_with("1", options).await;
        let _ = sbx
            .commands()
            .run_with("true", CommandOptions::new().on_stdout(|_| {}))
            .await;
        let _ = sbx.files().read("a").await;
        let _ = sbx.kill().await;
    }));
}

/// S3-staged transfers (feature `s3`, which the SDK's own tests enable).
#[allow(dead_code)]
fn transfer_futures_are_send(
    sbx: &Sandbox,
    ticket: &rayito::transfer::UploadTicket,
    link: &rayito::transfer::DownloadLink,
    staging: rayito::transfer::S3Staging,
) {
    use rayito::transfer::{DownloadUrlOptions, UploadUrlOptions};
    assert_send(
        &sbx.files()
            .upload_url("p", UploadUrlOptions::new(staging.clone())),
    );
    assert_send(
        &sbx.files()
            .download_url("p", DownloadUrlOptions::new(staging.clone())),
    );
    assert_send(&ticket.wait(Duration::from_secs(1)));
    assert_send(&ticket.status());
    assert_send(&ticket.cancel());
    assert_send(&link.delete());
    // Automatic staging: the builder's create and connect with a staging,
    // and the file calls that stage (the same futures as without one).
    assert_send(&Sandbox::builder().staging(staging.clone()).create());
    assert_send(&Sandbox::builder().staging(staging).connect("i", "t"));
    let files = sbx.files();
    assert_send(&files.read("p"));
    assert_send(&files.read_stream("p"));
    assert_send(&files.write("p", vec![0u8; 1]));
    assert_send(&files.write_stream("p", futures_util::stream::iter([vec![1u8]])));
}

/// The secret store and cache (feature `secrets`, which the SDK's own
/// tests enable): owned clones are spawned, so the futures are `'static`
/// with owned inputs.
#[allow(dead_code)]
fn secrets_futures_are_send(
    store: rayito::secrets::SecretStore,
    cache: rayito::secrets::SecretCache,
) {
    use rayito::secrets::SecretRef;
    let metadata = std::collections::BTreeMap::new();
    assert_send(&store.create("n", "v", &metadata));
    assert_send(&store.update("n", "v", Some(&metadata)));
    assert_send(&store.get_info("n"));
    assert_send(&store.exists("n"));
    assert_send(&store.list(10, None));
    assert_send(&store.destroy("n"));
    let reference = SecretRef::from("n");
    assert_send(&cache.get(&reference));
    assert_send(&cache.refresh(&reference));
    assert_send_static(&async move {
        let _ = store.destroy("n").await;
        let _ = cache.get(&SecretRef::from("n")).await;
    });
}

/// The volume store and the efs-volumes stack (feature `efs`): owned
/// clones are spawned, so the futures are `'static` with owned inputs.
#[allow(dead_code)]
fn volume_store_and_stack_futures_are_send(
    store: rayito::volumes::VolumeStore,
    efs: rayito::volumes::EfsVolumes,
) {
    let subnets = ["subnet-12345678".to_owned()];
    assert_send(&store.create("n"));
    assert_send(&store.get("n"));
    assert_send(&store.list());
    assert_send(&store.destroy("n"));
    assert_send(&efs.check("vpc-12345678", &subnets));
    assert_send(&efs.deploy(
        "vpc-12345678",
        &subnets,
        rayito::volumes::EfsDeployOptions::default(),
    ));
    assert_send(&efs.status());
    assert_send(&efs.volume_store());
    assert_send(&efs.destroy(false, true));
    assert_send(&efs.delete_file_system("fs-12345678"));
    assert_send_static(&async move {
        let _ = store.destroy("n").await;
        let _ = efs.status().await;
    });
}

/// The secret gateways (feature `secrets`): the pool's take with
/// gateways, the view's refresh.
#[allow(dead_code)]
fn gateway_futures_are_send(sbx: &Sandbox, pool: rayito::Pool) {
    use rayito::gateway::SecretGateway;
    assert_send(&sbx.gateways().refresh());
    let gateway = SecretGateway::new("https://h")
        .header("a", "s")
        .allow("GET", "/");
    assert_send(&pool.take_with_gateways([("api", gateway.clone())]));
    assert_send_static(&SandboxBuilder::new().gateway("api", gateway).create());
    assert_send_static(&async move {
        let _ = pool
            .take_with_gateways(Vec::<(String, SecretGateway)>::new())
            .await;
    });
}

/// The EFS volumes (feature `efs`): create with a volume, the view's
/// reads.
#[allow(dead_code)]
fn volume_futures_are_send(sbx: &Sandbox) {
    use rayito::volumes::EfsVolume;
    assert_send(&sbx.volumes().statuses());
    assert_send(&sbx.volumes().get("/mnt/data"));
    let volume = EfsVolume::new("fs-0123abcd", "fsap-0123abcd");
    assert_send_static(&SandboxBuilder::new().volume("/mnt/data", volume).create());
}

/// Lifecycle events (feature `events`): every call of the stack's
/// handle, owned clones spawned; create with events.
#[allow(dead_code)]
fn events_futures_are_send(events: rayito::events::LifecycleEvents) {
    use rayito::events::{EventKind, EventQuery, EventsDeploy};
    assert_send(&events.deploy(EventsDeploy::new("b", "/g")));
    assert_send(&events.status());
    assert_send(&events.destroy());
    assert_send(&events.register_webhook("https://h", "s", &[EventKind::Created]));
    assert_send(&events.list_webhooks());
    assert_send(&events.delete_webhook("0123456789abcdef"));
    assert_send(&events.get_events(EventQuery::new()));
    assert_send(&events.dead_letters());
    assert_send_static(&SandboxBuilder::new().events(events.clone()).create());
    assert_send_static(&async move {
        let _ = events.get_events(EventQuery::new()).await;
        let _ = events.dead_letters().await;
    });
}

/// Lifecycle events: a sandbox's counters read.
#[allow(dead_code)]
fn events_status_is_send(sbx: &Sandbox) {
    assert_send(&sbx.events_status());
}

/// The fleet (feature `fleet`): every read and the bulk plan and run,
/// owned clones spawned.
#[allow(dead_code)]
fn fleet_futures_are_send(fleet: rayito::fleet::Fleet, plan: rayito::fleet::BulkPlan) {
    use rayito::fleet::{BulkAction, BulkFilter, FleetQuery};
    assert_send(&fleet.sandboxes(FleetQuery::new()));
    assert_send(&fleet.images());
    assert_send(&fleet.events(None, 10));
    assert_send(&fleet.metrics("id"));
    assert_send(&fleet.plan_bulk(BulkAction::Kill, BulkFilter::new()));
    assert_send(&fleet.run_bulk(&plan, "kill-0-00000000"));
    assert_send_static(&async move {
        let _ = fleet.sandboxes(FleetQuery::new()).await;
        let _ = fleet.run_bulk(&plan, "kill-0-00000000").await;
    });
}

/// The optional stacks (feature `stacks`): status, the parameter changes,
/// deploy, destroy, and an owned clone spawned.
#[allow(dead_code)]
fn stacks_futures_are_send(client: &rayito::Client) {
    use rayito::stacks::StackDeploy;
    let stacks = client.optional_stacks();
    let deploy = StackDeploy::new().param("TableName", "t");
    assert_send(&stacks.status("metadata-index", None));
    assert_send(&stacks.parameter_changes("metadata-index", &deploy));
    assert_send(&stacks.deploy("metadata-index", &deploy));
    assert_send(&stacks.destroy("metadata-index", None, true));
    assert_send_static(&async move {
        let _ = stacks.deploy("metadata-index", &deploy).await;
    });
}

/// AI agent runs: run, stream, prepare, the stream itself, and the agent
/// template's build.
#[allow(dead_code)]
fn agent_futures_are_send(
    sbx: &Sandbox,
    spec: rayito::agent::AgentSpec,
    stream: rayito::agent::AgentStream,
    templates: &rayito::template::Templates,
) {
    assert_send(&sbx.agent().run(spec.clone(), "hello"));
    assert_send(&sbx.agent().stream(spec.clone(), "hello"));
    assert_send(&sbx.agent().prepare(spec));
    assert_send_static(&stream);
    assert_send(
        &rayito::agent::AgentTemplate::new()
            .build(templates, rayito::template::BuildOptions::default()),
    );
}

/// Telemetry export: create with an export, the status read.
#[allow(dead_code)]
fn telemetry_futures_are_send(sbx: &Sandbox) {
    use rayito::telemetry::TelemetryExport;
    assert_send(&sbx.telemetry_status());
    let export = TelemetryExport::new().endpoint("https://collector.example.com/v1/metrics");
    assert_send_static(&SandboxBuilder::new().telemetry(export).create());
}

/// The S3 mounts: create with a mount, the view's reads.
#[allow(dead_code)]
fn mount_futures_are_send(sbx: &Sandbox) {
    use rayito::mounts::S3Mount;
    assert_send(&sbx.mounts().statuses());
    assert_send(&sbx.mounts().get("/mnt/data"));
    let mount = S3Mount::new("my-bucket").prefix("team7/");
    assert_send_static(&SandboxBuilder::new().mount("/mnt/data", mount).create());
}

/// The git view's calls (each one command; credentials on stdin).
#[allow(dead_code)]
fn git_futures_are_send(sbx: &Sandbox) {
    use rayito::git::{
        AddOptions, AuthenticateOptions, CloneOptions, CommitOptions, ConfigScope, GitOptions,
        InitOptions, PullOptions, PushOptions, RemoteAddOptions, ResetOptions, RestoreOptions,
    };
    let git = sbx.git().with_options(GitOptions::new().env("A", "b"));
    let p = "/home/user/r";
    assert_send(&git.clone("https://h/r", CloneOptions::default()));
    assert_send(&git.init(p, InitOptions::default()));
    assert_send(&git.remote_add(p, "o", "https://h/r", RemoteAddOptions::default()));
    assert_send(&git.remote_get(p, "o"));
    assert_send(&git.status(p));
    assert_send(&git.branches(p));
    assert_send(&git.create_branch(p, "b"));
    assert_send(&git.checkout_branch(p, "b"));
    assert_send(&git.delete_branch(p, "b", false));
    assert_send(&git.add(p, AddOptions::default()));
    assert_send(&git.commit(p, "m", CommitOptions::default()));
    assert_send(&git.reset(p, ResetOptions::default()));
    assert_send(&git.restore(p, &[], RestoreOptions::default()));
    assert_send(&git.push(p, PushOptions::default()));
    assert_send(&git.pull(p, PullOptions::default()));
    assert_send(&git.set_config("k.k", "v", ConfigScope::Global, None));
    assert_send(&git.get_config("k.k", ConfigScope::Global, None));
    assert_send(&git.configure_user("n", "e", ConfigScope::Global, None));
    let secret = rayito::Secret::new("pw");
    assert_send(&git.dangerously_authenticate("u", &secret, AuthenticateOptions::default()));
}

/// Sandbox logs (feature `logs`, which the SDK's own tests turn on).
#[allow(dead_code)]
fn logs_futures_are_send(client: &Client, reader: &mut rayito::logs::LogReader) {
    let query = rayito::logs::LogsQuery::default();
    assert_send(&client.sandbox_logs("microvm-1", &query));
    assert_send(&client.open_sandbox_logs("microvm-1", &query));
    assert_send(&reader.read(10));
}

/// Quotas and cost (features `quotas`, `cost`).
#[allow(dead_code)]
fn quotas_and_cost_futures_are_send(client: &Client) {
    let quotas = client.quotas();
    assert_send(&quotas.report());
    let cost = client.cost();
    assert_send(&cost.report(rayito::CostQuery::new()));
    let query = rayito::CostQuery::new();
    assert_send(&cost.billed(&query));
    assert_send(&cost.estimate());
}

/// The IAM simulation (feature `permissions`).
#[allow(dead_code)]
fn permissions_futures_are_send(client: &Client) {
    let permissions = client.permissions();
    let query = rayito::permissions::SimulationQuery::new();
    assert_send(&permissions.simulate(&query));
}

/// The hosted dashboard's (crate rayito-dashboard, feature `lambda`).
#[allow(dead_code)]
fn hosted_dashboard_futures_are_send(d: &rayito_dashboard::hosted::HostedDashboard) {
    let event = serde_json::Value::Null;
    assert_send(&d.handle(&event));
    assert_send_static(&rayito_dashboard::hosted::response_to_event(
        http::Response::new(axum::body::Body::empty()),
    ));
}

/// The `pub async fn` names and public stream types of `src/`.
fn public_async_items() -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![crate::sdk_support::repo_root().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            for line in text.lines() {
                let line = line.trim_start();
                if let Some(rest) = line.strip_prefix("pub async fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.push(format!(".{name}("));
                }
                for prefix in ["impl Stream for ", "impl futures_util::Stream for "] {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        let name: String = rest
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        names.push(name);
                    }
                }
                assert!(
                    !line.starts_with("pub fn") || !line.contains("-> impl"),
                    "a public fn returns an opaque type; add it to tests/sdk/send_bounds.rs: {line}"
                );
            }
        }
    }
    names
}

#[test]
fn every_public_async_method_and_stream_is_checked_here() {
    let this = include_str!("send_bounds.rs");
    // Only the checks above count, not this test's own text.
    let checks = &this[..this.find("/// The `pub async fn` names").expect("marker")];
    let items = public_async_items();
    assert!(items.len() >= 28, "the scan found too little: {items:?}");
    for item in items {
        let named = checks.contains(&item) || checks.contains(&item.replacen('.', "::", 1));
        assert!(
            named,
            "{item} has no Send check in tests/sdk/send_bounds.rs"
        );
    }
}
