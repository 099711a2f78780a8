//! E2B's public surface, item by item: `e2b-surface.tsv` (extracted from
//! E2B's own Python SDKs by `tools/extract_surface.py`) says what each item
//! does here, and this file holds the table to the code:
//!
//! - every row has a defined behaviour (works, warns, or `Unimplemented`
//!   naming a feature key that exists), and names a Rust item;
//! - every Rust item a row names is compiled below (`surface!`), each
//!   future checked `Send` (the shim's futures are all here);
//! - a warning row names an option that warns; the classes E2B has and
//!   nothing here can provide fail with their feature key at run time;
//! - `docs/e2b-compat.md`'s coverage section is this table, rendered.
//!
//! Regenerate the doc section with `RAYITO_BLESS=1 cargo test -p rayito-e2b
//! --test surface`.

#![allow(deprecated, clippy::let_underscore_future, clippy::let_unit_value)]

use std::collections::BTreeSet;
use std::time::Duration;

use rayito::git;
use rayito_e2b::exceptions::E2bClass;
use rayito_e2b::*;

const SECOND: Duration = Duration::from_secs(1);
const TSV: &str = include_str!("../e2b-surface.tsv");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/e2b-compat.md");
const BEGIN: &str = "<!-- generated from compat/e2b/e2b-surface.tsv";
const END: &str = "<!-- end of generated table -->";

fn assert_send<T: Send>(value: &T) -> &T {
    value
}
fn assert_send_static<T: Send + 'static>(value: &T) -> &T {
    value
}

/// Compiles each labelled expression (in a function never called) and
/// lists the labels.
macro_rules! surface {
    (|$($var:ident: $ty:ty),*| { $($label:literal => $body:block)* }) => {
        const LABELS: &[&str] = &[$($label),*];

        #[allow(dead_code, unused_variables, unused_mut, unused_must_use, clippy::too_many_arguments)]
        fn compiled($(mut $var: $ty),*) {
            $($body)*
        }
    };
}

surface!(|sbx: &Sandbox,
          handle: CommandHandle,
          watch: WatchHandle,
          paginator: SandboxPaginator,
          secret: SecretValue,
          secret_info: SecretInfo,
          builder: TemplateBuilder,
          build_info: BuildInfo,
          secret_paginator: SecretPaginator,
          opts: SandboxOpts,
          api: ApiParams,
          connect: ConnectOpts,
          context: Context,
          execution: Execution,
          error: ExecutionError,
          result: ExecutionResult,
          lifecycle: Lifecycle,
          list: ListOpts,
          logs: Logs,
          network: Network,
          message: OutputMessage,
          pause: PauseOpts| {
        "ApiParams.headers" => { let _ = &api.headers; }
        "ApiParams.request_timeout" => { let _ = &api.request_timeout; }
        "ApiParams.retries" => { let _ = &api.retries; }
        "CodeContextOptions::cwd" => { let _ = CodeContextOptions::new().cwd("/tmp"); }
        "CommandHandle::close_stdin" => { let _ = assert_send(&handle.close_stdin()); }
        "CommandHandle::disconnect" => { let _: fn(CommandHandle) -> Option<u64> = CommandHandle::disconnect; }
        "CommandHandle::kill" => { let _ = assert_send(&handle.kill()); }
        "CommandHandle::pid" => { let _ = handle.pid(); }
        "CommandHandle::send_stdin" => { let _ = assert_send(&handle.send_stdin("x")); }
        "CommandHandle::wait" => { assert_send(&handle.wait()); }
        "CommandOpts::cwd" => { let _ = CommandOpts::new().cwd("/tmp"); }
        "CommandOpts::env" => { let _ = CommandOpts::new().env("A", "b"); }
        "CommandOpts::on_stderr" => { let _ = CommandOpts::new().on_stderr(|_| {}); }
        "CommandOpts::on_stdout" => { let _ = CommandOpts::new().on_stdout(|_| {}); }
        "CommandOpts::request_timeout" => { let _ = CommandOpts::new().request_timeout(SECOND); }
        "CommandOpts::retain_output" => { let _ = CommandOpts::new().retain_output(false); }
        "CommandOpts::stdin" => { let _ = CommandOpts::new().stdin(true); }
        "CommandOpts::timeout" => { let _ = CommandOpts::new().timeout(SECOND); }
        "CommandOpts::user" => { let _ = CommandOpts::new().user("user"); }
        "Commands::close_stdin" => { let _ = assert_send(&sbx.commands().close_stdin(1)); }
        "Commands::connect" => { let _ = assert_send(&sbx.commands().connect(1)); }
        "Commands::connect_with" => { let _ = assert_send(&sbx.commands().connect_with(1, CommandOpts::new().timeout(SECOND))); }
        "Commands::kill" => { let _ = assert_send(&sbx.commands().kill(1)); }
        "Commands::list" => { let _ = assert_send(&sbx.commands().list()); }
        "Commands::run" => { let _ = assert_send(&sbx.commands().run("ls")); }
        "Commands::run_background" => { let _ = assert_send(&sbx.commands().run_background("ls", CommandOpts::new())); }
        "Commands::run_with" => { let _ = assert_send(&sbx.commands().run_with("ls", CommandOpts::new().on_stdout(|_| {}))); }
        "Commands::send_stdin" => { let _ = assert_send(&sbx.commands().send_stdin(1, "x")); }
        "Commands::stream_input" => { let _ = assert_send(&sbx.commands().stream_input(1, ["a", "b"])); }
        "ConnectOpts.on_resume" => { let _ = &connect.on_resume; }
        "ConnectOpts.timeout" => { let _ = &connect.timeout; }
        "Context.cwd" => { let _ = &context.cwd; }
        "Context.id" => { let _ = &context.id; }
        "Context.language" => { let _ = &context.language; }
        "E2bClass::AuthenticationException" => { let _ = E2bClass::AuthenticationException; }
        "E2bClass::BuildException" => { let _ = E2bClass::BuildException; }
        "E2bClass::CommandExitException" => { let _ = E2bClass::CommandExitException; }
        "E2bClass::DockerfileSyntaxError" => { let _ = E2bClass::DockerfileSyntaxError; }
        "E2bClass::FileNotFoundException" => { let _ = E2bClass::FileNotFoundException; }
        "E2bClass::FileUploadException" => { let _ = E2bClass::FileUploadException; }
        "E2bClass::GitAuthException" => { let _ = E2bClass::GitAuthException; }
        "E2bClass::GitUpstreamException" => { let _ = E2bClass::GitUpstreamException; }
        "E2bClass::GuestUnresponsiveException" => { let _ = E2bClass::GuestUnresponsiveException; }
        "E2bClass::InvalidArgumentException" => { let _ = E2bClass::InvalidArgumentException; }
        "E2bClass::NotEnoughSpaceException" => { let _ = E2bClass::NotEnoughSpaceException; }
        "E2bClass::NotFoundException" => { let _ = E2bClass::NotFoundException; }
        "E2bClass::RateLimitException" => { let _ = E2bClass::RateLimitException; }
        "E2bClass::SandboxException" => { let _ = E2bClass::SandboxException; }
        "E2bClass::SandboxNotFoundException" => { let _ = E2bClass::SandboxNotFoundException; }
        "E2bClass::SandboxNotRunningException" => { let _ = E2bClass::SandboxNotRunningException; }
        "E2bClass::SandboxUnreachableException" => { let _ = E2bClass::SandboxUnreachableException; }
        "E2bClass::SecretException" => { let _ = E2bClass::SecretException; }
        "E2bClass::SecretNotFoundException" => { let _ = E2bClass::SecretNotFoundException; }
        "E2bClass::ServiceBusyException" => { let _ = E2bClass::ServiceBusyException; }
        "E2bClass::TemplateException" => { let _ = E2bClass::TemplateException; }
        "E2bClass::TimeoutException" => { let _ = E2bClass::TimeoutException; }
        "E2bClass::VolumeException" => { let _ = E2bClass::VolumeException; }
        "E2bClass::VolumeNotFoundException" => { let _ = E2bClass::VolumeNotFoundException; }
        "E2bClass::VolumePathNotFoundException" => { let _ = E2bClass::VolumePathNotFoundException; }
        "Execution.error" => { let _ = &execution.error; }
        "Execution.execution_count" => { let _ = &execution.execution_count; }
        "Execution.logs" => { let _ = &execution.logs; }
        "Execution.results" => { let _ = &execution.results; }
        "Execution::text" => { let _ = execution.text(); }
        "ExecutionError.name" => { let _ = &error.name; }
        "ExecutionError.traceback" => { let _ = &error.traceback; }
        "ExecutionError.value" => { let _ = &error.value; }
        "ExecutionResult::parsed_chart" => { let _: Option<charts::Chart> = result.parsed_chart(); }
        "ExecutionResult.data" => { let _ = &result.data; }
        "ExecutionResult.extra" => { let _ = &result.extra; }
        "ExecutionResult.html" => { let _ = &result.html; }
        "ExecutionResult.is_main_result" => { let _ = &result.is_main_result; }
        "ExecutionResult.javascript" => { let _ = &result.javascript; }
        "ExecutionResult.jpeg" => { let _ = &result.jpeg; }
        "ExecutionResult.json" => { let _ = &result.json; }
        "ExecutionResult.latex" => { let _ = &result.latex; }
        "ExecutionResult.markdown" => { let _ = &result.markdown; }
        "ExecutionResult.pdf" => { let _ = &result.pdf; }
        "ExecutionResult.png" => { let _ = &result.png; }
        "ExecutionResult.svg" => { let _ = &result.svg; }
        "ExecutionResult.text" => { let _ = &result.text; }
        "ExecutionResult::formats" => { let _ = result.formats(); }
        "Files::exists" => { let _ = assert_send(&sbx.files().exists("/tmp")); }
        "Files::get_info" => { let _ = assert_send(&sbx.files().get_info("/tmp")); }
        "Files::list" => { let _ = assert_send(&sbx.files().list("/tmp")); }
        "Files::make_dir" => { let _ = assert_send(&sbx.files().make_dir("/tmp/d")); }
        "Files::read" => { let _ = assert_send(&sbx.files().read("/tmp/f")); }
        "Files::remove" => { let _ = assert_send(&sbx.files().remove("/tmp/f")); }
        "Files::rename" => { let _ = assert_send(&sbx.files().rename("/tmp/f", "/tmp/g")); }
        "Files::write_with" => { let _ = assert_send(&sbx.files().write_with("/tmp/f", "x", rayito::WriteOptions::new().user("user").gzip(true))); }
        "Files::write_files_with" => { let _ = assert_send(&sbx.files().write_files_with(Vec::new(), rayito::WriteOptions::new())); }
        "Files::watch_dir_with" => { let _ = assert_send(&sbx.files().watch_dir_with("/tmp", rayito::WatchOptions::new().include_entry(true).timeout(SECOND).on_exit(|_| {}))); }
        "GetNewEvents::get_new_events" => { let _ = watch.get_new_events(); }
        "Git::add" => { let _ = assert_send(&sbx.git().add("/r", git::AddOptions::default())); }
        "Git::branches" => { let _ = assert_send(&sbx.git().branches("/r")); }
        "Git::checkout_branch" => { let _ = assert_send(&sbx.git().checkout_branch("/r", "b")); }
        "Git::clone" => { let _ = assert_send(&sbx.git().clone("https://example.com/r.git", git::CloneOptions::default())); }
        "Git::commit" => { let _ = assert_send(&sbx.git().commit("/r", "m", git::CommitOptions::default())); }
        "Git::configure_user" => { let _ = assert_send(&sbx.git().configure_user("n", "e@example.com", git::ConfigScope::Global, None)); }
        "Git::create_branch" => { let _ = assert_send(&sbx.git().create_branch("/r", "b")); }
        "Git::dangerously_authenticate" => { let _ = assert_send(&sbx.git().dangerously_authenticate("u", &secret, git::AuthenticateOptions::default())); }
        "Git::delete_branch" => { let _ = assert_send(&sbx.git().delete_branch("/r", "b", false)); }
        "Git::get_config" => { let _ = assert_send(&sbx.git().get_config("user.name", git::ConfigScope::Global, None)); }
        "Git::init" => { let _ = assert_send(&sbx.git().init("/r", git::InitOptions::default())); }
        "Git::pull" => { let _ = assert_send(&sbx.git().pull("/r", git::PullOptions::default())); }
        "Git::push" => { let _ = assert_send(&sbx.git().push("/r", git::PushOptions::default())); }
        "Git::remote_add" => { let _ = assert_send(&sbx.git().remote_add("/r", "origin", "https://example.com/r.git", git::RemoteAddOptions::default())); }
        "Git::remote_get" => { let _ = assert_send(&sbx.git().remote_get("/r", "origin")); }
        "Git::reset" => { let _ = assert_send(&sbx.git().reset("/r", git::ResetOptions::default())); }
        "Git::restore" => { let _ = assert_send(&sbx.git().restore("/r", &[], git::RestoreOptions::default())); }
        "Git::set_config" => { let _ = assert_send(&sbx.git().set_config("user.name", "n", git::ConfigScope::Global, None)); }
        "Git::status" => { let _ = assert_send(&sbx.git().status("/r")); }
        "Lifecycle.auto_resume" => { let _ = &lifecycle.auto_resume; }
        "Lifecycle.on_timeout" => { let _ = &lifecycle.on_timeout; }
        "ListOpts.limit" => { let _ = &list.limit; }
        "ListOpts.next_token" => { let _ = &list.next_token; }
        "ListOpts.order" => { let _ = &list.order; }
        "Logs.stderr" => { let _ = &logs.stderr; }
        "Logs.stdout" => { let _ = &logs.stdout; }
        "MetricsHistoryQuery::end" => { let _ = MetricsHistoryQuery::new().end(std::time::SystemTime::now()); }
        "MetricsHistoryQuery::start" => { let _ = MetricsHistoryQuery::new().start(std::time::SystemTime::UNIX_EPOCH); }
        "Network.allow_out" => { let _ = &network.allow_out; }
        "Network.allow_public_traffic" => { let _ = &network.allow_public_traffic; }
        "Network.deny_out" => { let _ = &network.deny_out; }
        "Network.dns_servers" => { let _ = &network.dns_servers; }
        "Network.egress_proxy" => { let _ = &network.egress_proxy; }
        "Network.https_ports" => { let _ = &network.https_ports; }
        "Network.mask_request_host" => { let _ = &network.mask_request_host; }
        "Network.rules" => { let _ = &network.rules; }
        "OutputMessage.error" => { let _ = &message.error; }
        "OutputMessage.line" => { let _ = &message.line; }
        "OutputMessage.timestamp_ns" => { let _ = &message.timestamp_ns; }
        "PauseOpts.keep_memory" => { let _ = &pause.keep_memory; }
        "PauseOpts.mode" => { let _ = &pause.mode; }
        "PauseOpts.strict" => { let _ = &pause.strict; }
        "Pty::connect" => { let _ = assert_send(&sbx.pty().connect(1)); }
        "Pty::create" => { let _ = assert_send(&sbx.pty().create(PtySize::new(80, 24), PtyOpts::new())); }
        "Pty::kill" => { let _ = assert_send(&sbx.pty().kill(1)); }
        "Pty::resize" => { let _ = assert_send(&sbx.pty().resize(1, PtySize::new(80, 24))); }
        "Pty::send_stdin" => { let _ = assert_send(&sbx.pty().send_stdin(1, "x")); }
        "Pty::stream_input" => { let _ = assert_send(&sbx.pty().stream_input(1, ["a"])); }
        "PtyOpts::cwd" => { let _ = PtyOpts::new().cwd("/tmp"); }
        "PtyOpts::env" => { let _ = PtyOpts::new().env("A", "b"); }
        "PtyOpts::request_timeout" => { let _ = PtyOpts::new().request_timeout(SECOND); }
        "PtyOpts::timeout" => { let _ = PtyOpts::new().timeout(SECOND); }
        "PtyOpts::user" => { let _ = PtyOpts::new().user("user"); }
        "PtySize::new" => { let _ = PtySize::new(80, 24); }
        "RunCodeOpts::context" => { let _ = RunCodeOpts::new().context("ctx"); }
        "RunCodeOpts::env" => { let _ = RunCodeOpts::new().env("A", "b"); }
        "RunCodeOpts::language" => { let _ = RunCodeOpts::new().language("python"); }
        "RunCodeOpts::on_error" => { let _ = RunCodeOpts::new().on_error(|_| {}); }
        "RunCodeOpts::on_result" => { let _ = RunCodeOpts::new().on_result(|_| {}); }
        "RunCodeOpts::on_stderr" => { let _ = RunCodeOpts::new().on_stderr(|_| {}); }
        "RunCodeOpts::on_stdout" => { let _ = RunCodeOpts::new().on_stdout(|_| {}); }
        "RunCodeOpts::request_timeout" => { let _ = RunCodeOpts::new().request_timeout(SECOND); }
        "RunCodeOpts::timeout" => { let _ = RunCodeOpts::new().timeout(SECOND); }
        "Sandbox::DEFAULT_SANDBOX_TIMEOUT" => { let _ = Sandbox::DEFAULT_SANDBOX_TIMEOUT; }
        "Sandbox::DEFAULT_TEMPLATE" => { let _ = Sandbox::DEFAULT_TEMPLATE; }
        "Sandbox::beta_pause" => { let _ = assert_send(&sbx.beta_pause(PauseOpts::default())); }
        "Sandbox::commands" => { let _ = sbx.commands(); }
        "Sandbox::connect" => { let _ = assert_send_static(&Sandbox::connect("id", "token", ConnectOpts::default())); }
        "Sandbox::create" => { let _ = assert_send_static(&Sandbox::create(SandboxOpts::default())); }
        "Sandbox::create_code_context" => { let _ = assert_send(&sbx.create_code_context(CodeContextOptions::new(), Some("python"), ApiParams::default())); }
        "Sandbox::create_snapshot" => { let _ = assert_send(&sbx.create_snapshot()); }
        "Sandbox::delete_snapshot" => { let _ = assert_send(&Sandbox::delete_snapshot("snap")); }
        "Sandbox::download_url" => { let _ = assert_send(&sbx.download_url("/tmp/f")); }
        "Sandbox::envd_api_url" => { let _ = sbx.envd_api_url(); }
        "Sandbox::files" => { let _ = sbx.files(); }
        "Sandbox::fork" => { let _ = assert_send(&sbx.fork()); }
        "Sandbox::get_host" => { let _ = assert_send(&sbx.get_host(8080)); }
        "Sandbox::get_info" => { let _ = assert_send(&sbx.get_info(ApiParams::default())); }
        "Sandbox::get_mcp_token" => { let _ = sbx.get_mcp_token(); }
        "Sandbox::get_mcp_url" => { let _ = sbx.get_mcp_url(); }
        "Sandbox::get_metrics" => { let _ = assert_send(&sbx.get_metrics(MetricsHistoryQuery::new())); }
        "Sandbox::git" => { let _ = sbx.git(); }
        "Sandbox::is_running" => { let _ = assert_send(&sbx.is_running()); }
        "Sandbox::kill" => { let _ = assert_send(&sbx.kill(ApiParams::default())); }
        "Sandbox::list" => { let _ = Sandbox::list(SandboxQuery::new(), ListOpts::default()); }
        "Sandbox::list_code_contexts" => { let _ = assert_send(&sbx.list_code_contexts()); }
        "Sandbox::list_snapshots" => { let _ = assert_send(&sbx.list_snapshots()); }
        "Sandbox::pause" => { let _ = assert_send(&sbx.pause(PauseOpts::default())); }
        "Sandbox::pty" => { let _ = sbx.pty(); }
        "Sandbox::remove_code_context" => { let _ = assert_send(&sbx.remove_code_context("ctx")); }
        "Sandbox::restart_code_context" => { let _ = assert_send(&sbx.restart_code_context("ctx")); }
        "Sandbox::run_code" => { let _ = assert_send(&sbx.run_code("1", RunCodeOpts::new().on_stdout(|_| {}))); }
        "Sandbox::sandbox_id" => { let _ = sbx.sandbox_id(); }
        "Sandbox::set_timeout" => { let _ = assert_send(&sbx.set_timeout(SECOND, ApiParams::default())); }
        "Sandbox::traffic_access_token" => { let _ = sbx.traffic_access_token(); }
        "Sandbox::update_network" => { let _ = assert_send(&sbx.update_network(Network::default())); }
        "Sandbox::upload_url" => { let _ = assert_send(&sbx.upload_url("/tmp/f")); }
        "SandboxOpts.allow_internet_access" => { let _ = &opts.allow_internet_access; }
        "SandboxOpts.api_headers" => { let _ = &opts.api_headers; }
        "SandboxOpts.api_key" => { let _ = &opts.api_key; }
        "SandboxOpts.api_url" => { let _ = &opts.api_url; }
        "SandboxOpts.debug" => { let _ = &opts.debug; }
        "SandboxOpts.domain" => { let _ = &opts.domain; }
        "SandboxOpts.envs" => { let _ = &opts.envs; }
        "SandboxOpts.http_version" => { let _ = &opts.http_version; }
        "SandboxOpts.iam" => { let _ = &opts.iam; }
        "SandboxOpts.idempotency_key" => { let _ = &opts.idempotency_key; }
        "SandboxOpts.lifecycle" => { let _ = &opts.lifecycle; }
        "SandboxOpts.logger" => { let _ = &opts.logger; }
        "SandboxOpts.mcp" => { let _ = &opts.mcp; }
        "SandboxOpts.metadata" => { let _ = &opts.metadata; }
        "SandboxOpts.network" => { let _ = &opts.network; }
        "SandboxOpts.proxy" => { let _ = &opts.proxy; }
        "SandboxOpts.request_timeout" => { let _ = &opts.request_timeout; }
        "SandboxOpts.sandbox_url" => { let _ = &opts.sandbox_url; }
        "SandboxOpts.secure" => { let _ = &opts.secure; }
        "SandboxOpts.template" => { let _ = &opts.template; }
        "SandboxOpts.timeout" => { let _ = &opts.timeout; }
        "SandboxOpts.validate_api_key" => { let _ = &opts.validate_api_key; }
        "SandboxOpts.volume_mounts" => { let _ = &opts.volume_mounts; }
        "SandboxPaginator::has_next" => { let _ = paginator.has_next(); }
        "SandboxPaginator::next_items" => { let _ = assert_send(&paginator.next_items()); }
        "SandboxPaginator::next_token" => { let _ = paginator.next_token(); }
        "SandboxQuery::new" => { let _ = SandboxQuery::new(); }
        "Secret::create" => { let _ = assert_send(&Secret::create("x", "x", None, SecretOpts::default())); }
        "Secret::destroy" => { let _ = assert_send(&Secret::destroy("x", SecretOpts::default())); }
        "Secret::exists" => { let _ = assert_send(&Secret::exists("x", SecretOpts::default())); }
        "Secret::fill" => { let _ = Secret::fill("x"); }
        "Secret::get_info" => { let _ = assert_send(&Secret::get_info("x", SecretOpts::default())); }
        "Secret::iam_token" => { let _ = assert_send(&Secret::iam_token("x", "x")); }
        "Secret::list" => { let _ = Secret::list(Some(1), None, SecretOpts::default()); }
        "Secret::update" => { let _ = assert_send(&Secret::update("x", SecretValue::new("x"), Some(Default::default()), SecretOpts::default())); }
        "SecretInfo.created_at" => { let _ = &secret_info.created_at; }
        "SecretInfo.metadata" => { let _ = &secret_info.metadata; }
        "SecretInfo.name" => { let _ = &secret_info.name; }
        "SecretInfo.secret_id" => { let _ = &secret_info.secret_id; }
        "SecretInfo.updated_at" => { let _ = &secret_info.updated_at; }
        "SecretInfo.version" => { let _ = &secret_info.version; }
        "SecretPaginator::has_next" => { let _ = secret_paginator.has_next(); }
        "SecretPaginator::next_items" => { let _ = assert_send(&secret_paginator.next_items()); }
        "SecretPaginator::next_token" => { let _ = secret_paginator.next_token(); }
        "Template::alias_exists" => { let _ = assert_send(&Template::alias_exists("x", TemplateOpts::default())); }
        "Template::assign_tags" => { let _ = assert_send(&Template::assign_tags("x", &["t"], TemplateOpts::default())); }
        "Template::build" => { let _ = assert_send(&Template::build(&builder, "x", TemplateOpts::default())); }
        "Template::build_in_background" => { let _ = assert_send(&Template::build_in_background(&builder, "x", TemplateOpts::default())); }
        "Template::exists" => { let _ = assert_send(&Template::exists("x", TemplateOpts::default())); }
        "Template::get_build_status" => { let _ = assert_send(&Template::get_build_status(&build_info, TemplateOpts::default())); }
        "Template::get_tags" => { let _ = assert_send(&Template::get_tags("x", TemplateOpts::default())); }
        "Template::remove_tags" => { let _ = assert_send(&Template::remove_tags("x", &["t"], TemplateOpts::default())); }
        "Template::skip_cache" => { let _: TemplateBuilder = Template::new().skip_cache().from_base_image(); }
        "Template::to_dockerfile" => { let _ = Template::to_dockerfile(&builder); }
        "Template::to_json" => { let _ = Template::to_json(&builder); }
        "Template::from_alpine_image" => { let _: TemplateBuilder = Template::new().from_alpine_image("3"); }
        "Template::from_arch_image" => { let _: TemplateBuilder = Template::new().from_arch_image("latest"); }
        "Template::from_aws_registry" => { let _: TemplateBuilder = Template::new().from_aws_registry("i", "k", "s", "us-east-1"); }
        "Template::from_base_image" => { let _: TemplateBuilder = Template::new().from_base_image(); }
        "Template::from_bun_image" => { let _: TemplateBuilder = Template::new().from_bun_image("latest"); }
        "Template::from_debian_image" => { let _: TemplateBuilder = Template::new().from_debian_image("stable"); }
        "Template::from_dockerfile" => { let _: TemplateBuilder = Template::new().from_dockerfile("FROM x"); }
        "Template::from_fedora_image" => { let _: TemplateBuilder = Template::new().from_fedora_image("44"); }
        "Template::from_gcp_registry" => { let _: TemplateBuilder = Template::new().from_gcp_registry("i", "{{}}"); }
        "Template::from_image" => { let _: TemplateBuilder = Template::new().from_image("x"); }
        "Template::from_node_image" => { let _: TemplateBuilder = Template::new().from_node_image("lts"); }
        "Template::from_python_image" => { let _: TemplateBuilder = Template::new().from_python_image("3"); }
        "Template::from_template" => { let _: TemplateBuilder = Template::new().from_template("x"); }
        "Template::from_ubuntu_image" => { let _: TemplateBuilder = Template::new().from_ubuntu_image("latest"); }
        "TemplateBuilder::add_mcp_server" => { let _: TemplateBuilder = builder.clone().add_mcp_server("x"); }
        "TemplateBuilder::apt_install" => { let _: TemplateBuilder = builder.clone().apt_install(&["x"]); }
        "TemplateBuilder::beta_dev_container_prebuild" => { let _: TemplateBuilder = builder.clone().beta_dev_container_prebuild("d"); }
        "TemplateBuilder::beta_set_dev_container_start" => { let _: TemplateBuilder = builder.clone().beta_set_dev_container_start("d"); }
        "TemplateBuilder::bun_install" => { let _: TemplateBuilder = builder.clone().bun_install(&["x"]); }
        "TemplateBuilder::copy" => { let _: TemplateBuilder = builder.clone().copy("a", "/b"); }
        "TemplateBuilder::copy_items" => { let _: TemplateBuilder = builder.clone().copy_items(&[("a", "/b")]); }
        "TemplateBuilder::git_clone" => { let _: TemplateBuilder = builder.clone().git_clone("https://example.com/r.git", "/r"); }
        "TemplateBuilder::make_dir" => { let _: TemplateBuilder = builder.clone().make_dir("/d"); }
        "TemplateBuilder::make_symlink" => { let _: TemplateBuilder = builder.clone().make_symlink("/a", "/b", false); }
        "TemplateBuilder::npm_install" => { let _: TemplateBuilder = builder.clone().npm_install(&["x"], false); }
        "TemplateBuilder::pip_install" => { let _: TemplateBuilder = builder.clone().pip_install(&["x"]); }
        "TemplateBuilder::remove" => { let _: TemplateBuilder = builder.clone().remove("/d", true, true); }
        "TemplateBuilder::rename" => { let _: TemplateBuilder = builder.clone().rename("/a", "/b", false); }
        "TemplateBuilder::run_cmd" => { let _: TemplateBuilder = builder.clone().run_cmd("ls"); }
        "TemplateBuilder::set_envs" => { let _: TemplateBuilder = builder.clone().set_envs(&[("A", "b")]); }
        "TemplateBuilder::set_ready_cmd" => { let _: TemplateBuilder = builder.clone().set_ready_cmd("true"); }
        "TemplateBuilder::set_start_cmd" => { let _: TemplateBuilder = builder.clone().set_start_cmd("serve", "true"); }
        "TemplateBuilder::set_user" => { let _: TemplateBuilder = builder.clone().set_user("user"); }
        "TemplateBuilder::set_workdir" => { let _: TemplateBuilder = builder.clone().set_workdir("/w"); }
        "TemplateBuilder::skip_cache" => { let _: TemplateBuilder = builder.clone().skip_cache(); }
        "ToJson::to_json" => { let _ = (execution.to_json(), logs.to_json(), error.to_json(), result.to_json()); }
        "Volume::connect" => { let _ = assert_send(&Volume::connect("x")); }
        "Volume::create" => { let _ = assert_send(&Volume::create("x")); }
        "Volume::destroy" => { let _ = assert_send(&Volume::destroy("x")); }
        "Volume::exists" => { let _ = assert_send(&Volume::exists("x")); }
        "Volume::get_info" => { let _ = assert_send(&Volume::get_info("x")); }
        "Volume::list" => { let _ = assert_send(&Volume::list()); }
        "Volume::make_dir" => { let _ = assert_send(&Volume::make_dir("x")); }
        "Volume::name" => { let _ = assert_send(&Volume::name()); }
        "Volume::read_file" => { let _ = assert_send(&Volume::read_file("x")); }
        "Volume::remove" => { let _ = assert_send(&Volume::remove("x")); }
        "Volume::token" => { let _ = assert_send(&Volume::token()); }
        "Volume::update_metadata" => { let _ = assert_send(&Volume::update_metadata("x")); }
        "Volume::volume_id" => { let _ = assert_send(&Volume::volume_id()); }
        "Volume::write_file" => { let _ = assert_send(&Volume::write_file("x", "x")); }
        "WatchHandle::stop" => { let _ = watch.stop(); }
        "context_from_json" => { let _ = context_from_json("{}"); }
});

/// The class-method forms E2B gives the same name as an instance method
/// (`Sandbox.kill(id)`): their rows name the instance method.
#[allow(dead_code)]
fn by_id_futures_are_send() {
    assert_send_static(&Sandbox::kill_by_id("id", ConnectOpts::default()));
    assert_send_static(&Sandbox::get_info_by_id("id", ConnectOpts::default()));
    assert_send_static(&Sandbox::set_timeout_by_id(
        "id",
        "token",
        SECOND,
        ConnectOpts::default(),
    ));
}

/// One row of the table.
struct Row<'a> {
    item: &'a str,
    kind: &'a str,
    status: &'a str,
    rayito: &'a str,
    note: &'a str,
}

fn rows() -> Vec<Row<'static>> {
    let mut lines = TSV.lines();
    assert_eq!(
        lines.next(),
        Some("item\tkind\te2b\tstatus\trayito\tnote"),
        "the header"
    );
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            assert_eq!(cells.len(), 6, "six cells in {line:?}");
            Row {
                item: cells[0],
                kind: cells[1],
                status: cells[3],
                rayito: cells[4],
                note: cells[5],
            }
        })
        .collect()
}

/// The option a warning row is about: the parameter in parentheses, else
/// the last dotted name.
fn option_of(item: &str) -> &str {
    match item.split_once('(') {
        Some((_, rest)) => rest.trim_end_matches(')'),
        None => item.rsplit('.').next().unwrap_or(item),
    }
}

#[test]
fn every_e2b_item_has_a_defined_behaviour() {
    let labels: BTreeSet<&str> = LABELS.iter().copied().collect();
    let keys: BTreeSet<&str> = Missing::ALL.iter().map(|m| m.key()).collect();
    let warned: BTreeSet<&str> = IGNORED.iter().map(|(o, _)| *o).collect();
    let mut undefined = Vec::new();
    for row in rows() {
        let defined = match row.status.split_once(':') {
            None if row.status == "works" => true,
            None if row.status == "warns" => warned.contains(option_of(row.item)),
            Some(("unimplemented", key)) => keys.contains(key),
            _ => false,
        };
        if !defined || !labels.contains(row.rayito) {
            undefined.push(format!("{} ({} -> {:?})", row.item, row.status, row.rayito));
        }
    }
    assert!(
        undefined.is_empty(),
        "E2B items without a defined behaviour here:\n{}",
        undefined.join("\n")
    );
}

#[test]
fn every_compiled_item_answers_a_row() {
    let named: BTreeSet<&str> = rows().iter().map(|r| r.rayito).collect();
    let stale: Vec<&&str> = LABELS.iter().filter(|l| !named.contains(**l)).collect();
    assert!(stale.is_empty(), "compiled but named by no row: {stale:?}");
}

#[test]
fn every_exception_class_of_e2b_is_a_class_here() {
    let names: BTreeSet<&str> = E2bClass::ALL.iter().map(|c| c.name()).collect();
    for row in rows().iter().filter(|r| r.kind == "exception") {
        assert!(names.contains(row.item), "{} has no E2bClass", row.item);
    }
    let e2b: BTreeSet<&str> = rows()
        .iter()
        .filter(|r| r.kind == "exception")
        .map(|r| r.item)
        .collect();
    for class in E2bClass::ALL {
        assert_eq!(
            class.is_e2b(),
            e2b.contains(class.name()),
            "{} is E2B's exactly when the table lists it",
            class.name()
        );
    }
}

#[tokio::test]
async fn e2b_classes_with_no_equivalent_fail_with_their_feature() {
    let calls: Vec<(Result<std::convert::Infallible, SandboxError>, &str)> = vec![
        (Volume::connect("x").await, "volume"),
        (Volume::create("x").await, "volume"),
        (Volume::destroy("x").await, "volume"),
        (Volume::exists("x").await, "volume"),
        (Volume::get_info("x").await, "volume"),
        (Volume::list().await, "volume"),
        (Volume::make_dir("x").await, "volume"),
        (Volume::name().await, "volume"),
        (Volume::read_file("x").await, "volume"),
        (Volume::remove("x").await, "volume"),
        (Volume::token().await, "volume"),
        (Volume::update_metadata("x").await, "volume"),
        (Volume::volume_id().await, "volume"),
        (Volume::write_file("x", "x").await, "volume"),
    ];
    let stubs = rows()
        .iter()
        .filter(|r| r.rayito.starts_with("Volume::"))
        .count();
    assert_eq!(calls.len(), stubs, "one call per Volume row");
    for (outcome, key) in calls {
        match outcome {
            Err(SandboxError::Unimplemented { feature, doc, .. }) => {
                assert_eq!(&*feature, key);
                assert_eq!(doc.as_deref(), Some(DOC_PATH));
            }
            other => panic!("{key}: {other:?}"),
        }
    }
}

const DOC_PATH: &str = rayito_e2b::DOC;

/// The pinned text of an `Unimplemented` error of `key`.
fn unimplemented(err: &SandboxError, key: &str) {
    match err {
        SandboxError::Unimplemented { feature, doc, .. } => {
            assert_eq!(&**feature, key);
            assert_eq!(doc.as_deref(), Some(DOC_PATH));
        }
        other => panic!("{key}: {other:?}"),
    }
}

/// Tags have nothing to stand on in any build; E2B's other starting
/// points and steps are refused at the first consumer (with the feature,
/// their own key; without it, `template`).
#[tokio::test]
async fn template_refusals_name_their_feature() {
    let opts = TemplateOpts::default;
    unimplemented(
        &Template::get_tags("x", opts()).await.unwrap_err(),
        "template.tags",
    );
    unimplemented(
        &Template::assign_tags("x", &["v1"], opts())
            .await
            .unwrap_err(),
        "template.tags",
    );
    unimplemented(
        &Template::remove_tags("x", &["v1"], opts())
            .await
            .unwrap_err(),
        "template.tags",
    );
    let featured = |key: &'static str| {
        if cfg!(feature = "templates") {
            key
        } else {
            "template"
        }
    };
    let refused = [
        (
            Template::new().from_image("python:3"),
            "template.from_image",
        ),
        (
            Template::new().from_python_image("3"),
            "template.from_image",
        ),
        (Template::new().from_template("base"), "template.from_image"),
        (
            Template::new().from_dockerfile("FROM x"),
            "template.from_image",
        ),
        (
            Template::new().from_base_image().apt_install(&["git"]),
            "template.apt_install",
        ),
        (
            Template::new()
                .from_base_image()
                .git_clone("https://example.com/r.git", "/r"),
            "template.step",
        ),
        // The first refusal is kept: the later step neither adds nor replaces it.
        (
            Template::new()
                .from_base_image()
                .bun_install(&["x"])
                .apt_install(&["git"]),
            "template.step",
        ),
    ];
    for (builder, key) in refused {
        unimplemented(&Template::to_json(&builder).unwrap_err(), featured(key));
        unimplemented(
            &Template::to_dockerfile(&builder).unwrap_err(),
            featured(key),
        );
        unimplemented(
            &Template::build(&builder, "never-built", opts())
                .await
                .unwrap_err(),
            featured(key),
        );
    }
    let tagged = TemplateOpts {
        tags: vec!["v1".into()],
        ..opts()
    };
    let builder = Template::new().from_base_image();
    unimplemented(
        &Template::build(&builder, "never-built", tagged)
            .await
            .unwrap_err(),
        featured("template.tags"),
    );
}

/// Without the `templates` feature, the class methods say how to enable it.
#[cfg(not(feature = "templates"))]
#[tokio::test]
async fn without_the_templates_feature_the_template_class_says_how_to_enable_it() {
    let builder = Template::new().from_base_image().run_cmd("true");
    let err = Template::exists("x", TemplateOpts::default())
        .await
        .unwrap_err();
    unimplemented(&err, "template");
    assert_eq!(
        err.to_string(),
        "feature template is not available: templates are built by rayito's template builds (on AWS and on the local backend); build rayito-e2b with its templates feature; see docs/e2b-compat.md"
    );
    unimplemented(&Template::to_json(&builder).unwrap_err(), "template");
}

/// `Secret.fill` and `iam_token` have nothing to stand on in any build.
#[tokio::test]
async fn secret_fill_and_iam_token_are_unimplemented() {
    let fill = Secret::fill("openai").unwrap_err();
    unimplemented(&fill, "secret.fill");
    assert_eq!(
        fill.to_string(),
        "feature secret.fill is not available: nothing resolves ${e2b.secrets.<name>} placeholders; give a sandbox the secret as an environment variable with rayito's SandboxBuilder::secret; see docs/e2b-compat.md"
    );
    unimplemented(
        &Secret::iam_token("sts.amazonaws.com", "JWT-SVID")
            .await
            .unwrap_err(),
        "iam",
    );
}

/// Without the `secrets` feature, each `Secret` call E2B has fails with
/// the same signature, before any call, saying how to enable it.
#[cfg(not(feature = "secrets"))]
#[tokio::test]
async fn without_the_secrets_feature_the_secret_class_says_how_to_enable_it() {
    let opts = SecretOpts::default;
    let errors = [
        Secret::create("x", "v", None, opts()).await.unwrap_err(),
        Secret::update("x", "v", None, opts()).await.unwrap_err(),
        Secret::get_info("x", opts()).await.unwrap_err(),
        Secret::exists("x", opts()).await.unwrap_err(),
        Secret::destroy("x", opts()).await.unwrap_err(),
        Secret::list(None, None, opts()).unwrap_err(),
    ];
    for err in &errors {
        unimplemented(err, "secret");
        assert_eq!(
            err.to_string(),
            "feature secret is not available: secrets live in AWS Secrets Manager through rayito's secret store; build rayito-e2b with its secrets feature; see docs/e2b-compat.md"
        );
    }
}

#[tokio::test]
async fn list_refuses_a_token_it_did_not_hand_out_before_any_call() {
    let opts = ListOpts {
        next_token: Some("page-2".into()),
        ..ListOpts::default()
    };
    assert!(!format!("{opts:?}").contains("page-2"), "{opts:?}");
    let err = Sandbox::list(SandboxQuery::new(), opts).expect_err("not a token");
    assert!(
        matches!(&err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid next_token: the token is not one a listing handed out, or it was changed; list again without it"
    );
}

/// Every `pub async fn` of the crate is checked `Send` above (the macro's
/// `assert_send` lines), so a new one cannot slip past: the list is read
/// from the sources, as `tests/send_bounds.rs` does for the SDK.
#[test]
fn every_public_future_of_the_crate_is_checked_send() {
    let this = include_str!("surface.rs");
    let checked: Vec<&str> = this.lines().filter(|l| l.contains("assert_send")).collect();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut unchecked = Vec::new();
    for entry in std::fs::read_dir(src).expect("src") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("a source file");
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("pub async fn ") else {
                continue;
            };
            let name = rest.split(['(', '<']).next().unwrap_or_default();
            if name.starts_with('$') {
                // unavailable.rs's macro: each method it makes is a row.
                continue;
            }
            let called = [format!(".{name}("), format!("::{name}(")];
            if !checked.iter().any(|l| called.iter().any(|c| l.contains(c))) {
                unchecked.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(
        unchecked.is_empty(),
        "futures not checked Send: {unchecked:?}"
    );
}

/// The coverage section of `docs/e2b-compat.md`, from the table.
fn render() -> String {
    let rows = rows();
    let total = rows.len();
    let count = |p: &str| rows.iter().filter(|r| r.status.starts_with(p)).count();
    let (works, warns, missing) = (count("works"), count("warns"), count("unimplemented"));
    let defined = works + warns + missing;
    let mut out = format!(
        "{BEGIN} by compat/e2b/tests/surface.rs; RAYITO_BLESS=1 rewrites it -->\n\n\
         Of the {total} public items of E2B's Python SDKs (e2b 2.63, e2b-code-interpreter 2.11) \
         in `compat/e2b/e2b-surface.tsv`, **{defined} have a defined behaviour ({} %)**: \
         {works} work, {warns} warn once and are ignored (`CompatWarning`), {missing} return \
         `Unimplemented` naming the feature. None is a compile error.\n\n\
         | E2B item | kind | status | rayito-e2b | note |\n|---|---|---|---|---|\n",
        defined * 100 / total
    );
    for row in &rows {
        let status = match row.status.split_once(':') {
            Some((_, key)) => format!("`Unimplemented` (`{key}`)"),
            None => row.status.to_owned(),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | `{}` | {} |\n",
            row.item, row.kind, status, row.rayito, row.note
        ));
    }
    out.push_str(END);
    out
}

#[test]
fn the_doc_states_the_coverage_of_the_table() {
    let doc = std::fs::read_to_string(DOC).expect("docs/e2b-compat.md");
    let start = doc
        .find(BEGIN)
        .expect("the generated section's start marker");
    let end = doc.find(END).expect("the generated section's end marker") + END.len();
    let expected = render();
    if std::env::var_os("RAYITO_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], expected, &doc[end..]);
        std::fs::write(DOC, updated).expect("write docs/e2b-compat.md");
        return;
    }
    assert!(
        doc[start..end] == expected,
        "docs/e2b-compat.md's coverage section is not the table; run RAYITO_BLESS=1 cargo test -p rayito-e2b --test surface"
    );
}
