//! The E2B-shaped surface end to end: on the local backend for the flow and
//! the warnings, and against an emulator the test owns to prove that a
//! missing feature makes no control-plane call.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::AwsOptions;
use rayito_e2b::exceptions::{E2bClass, is_instance};
use rayito_e2b::{
    ApiParams, Backend, CommandOpts, CompatWarning, Lifecycle, ListOpts, ListOrder, Missing,
    Network, PauseMode, PauseOpts, RunCodeOpts, Sandbox, SandboxOpts,
};
use rayito_emulator::{Emulator, EmulatorConfig, Operation};

/// A recognisable api_key that must never appear anywhere.
const CANARY: &str = "e2b_CANARY_4f1d9c2b7a6e5d3c";

/// Everything written to a subscriber, for the canary check.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn local() -> SandboxOpts {
    SandboxOpts {
        backend: Backend::Local,
        ..SandboxOpts::default()
    }
}

#[allow(deprecated)]
fn with_every_ignored_option() -> SandboxOpts {
    SandboxOpts {
        api_key: Some(CANARY.into()),
        domain: Some(format!("{CANARY}.example")),
        debug: true,
        api_url: Some(format!("https://{CANARY}")),
        sandbox_url: Some(format!("https://{CANARY}")),
        validate_api_key: true,
        api_headers: BTreeMap::from([("x-key".to_owned(), CANARY.to_owned())]),
        secure: Some(false),
        proxy: Some(format!("http://{CANARY}:3128")),
        ..local()
    }
}

fn warning(option: &'static str, reason: &'static str) -> CompatWarning {
    CompatWarning { option, reason }
}

const ON_HANDLE: &str = "the handle's connection and control plane are already built; pass it when creating or connecting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ignored_option_warns_once_and_the_api_key_never_shows() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let opts = with_every_ignored_option();
    let debug_of_opts = format!("{opts:?}");
    let sbx = Sandbox::create(opts)
        .await
        .expect("create on the local backend");
    let at_create = vec![
        warning("api_key", "rayito uses the AWS credentials of the session"),
        warning("api_headers", "there is no E2B API to send them to"),
        warning(
            "api_url",
            "there is no E2B API; the control plane is Lambda MicroVMs in your AWS account",
        ),
        warning(
            "debug",
            "there is no local debug mode; choose the local backend instead",
        ),
        warning(
            "domain",
            "Lambda MicroVMs assigns each sandbox its own endpoint",
        ),
        warning(
            "proxy",
            "the SDK's HTTP clients do not take a proxy option; set HTTPS_PROXY for the AWS client",
        ),
        warning(
            "sandbox_url",
            "Lambda MicroVMs assigns each sandbox its own endpoint",
        ),
        warning(
            "secure",
            "every call to a sandbox carries its access token; it cannot be turned off",
        ),
        warning("validate_api_key", "there is no api_key to validate"),
    ];
    assert_eq!(sbx.compat_warnings(), at_create);

    // Per-call ApiParams on a built handle: one warning each, alphabetical,
    // and not again on the next call.
    let params = ApiParams {
        headers: BTreeMap::from([("authorization".to_owned(), CANARY.to_owned())]),
        retries: Some(3),
        request_timeout: Some(Duration::from_secs(5)),
    };
    let info = sbx.get_info(params.clone()).await.expect("get_info");
    assert_eq!(info.sandbox_id, sbx.sandbox_id());
    sbx.get_info(params.clone()).await.expect("get_info again");
    assert!(sbx.kill(params).await.expect("kill"));
    let mut all = at_create.clone();
    all.extend([
        warning("headers", ON_HANDLE),
        warning("request_timeout", ON_HANDLE),
        warning("retries", ON_HANDLE),
    ]);
    assert_eq!(sbx.compat_warnings(), all);

    let logs = captured.text();
    for w in &all {
        let line = format!("{} ignored: {}", w.option, w.reason);
        assert_eq!(
            logs.matches(&line).count(),
            1,
            "logged once: {line}\n{logs}"
        );
        assert!(logs.contains("rayito::compat"), "target rayito::compat");
    }
    for (what, text) in [
        ("logs", logs.as_str()),
        ("Debug of the options", debug_of_opts.as_str()),
        ("Debug of the handle", &format!("{sbx:?}")),
        ("warnings", &format!("{:?}", sbx.compat_warnings())),
    ] {
        assert!(!text.contains(CANARY), "the api_key leaked into {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_e2b_style_program_runs_on_the_local_backend() {
    let sbx = Sandbox::create(local()).await.expect("create");
    assert!(sbx.compat_warnings().is_empty(), "nothing was ignored");
    assert!(sbx.is_running().await);

    let execution = sbx
        .run_code("x = 20\nx + 22", RunCodeOpts::new())
        .await
        .expect("run_code");
    assert_eq!(execution.text(), Some("42"));
    let execution = sbx
        .run_code("x * 2", RunCodeOpts::new())
        .await
        .expect("state kept");
    assert_eq!(execution.text(), Some("40"));
    let failed = sbx
        .run_code("1 / 0", RunCodeOpts::new())
        .await
        .expect("a guest exception is data");
    assert_eq!(
        failed.error.as_ref().map(|e| e.name.as_str()),
        Some("ZeroDivisionError")
    );

    let out = sbx
        .commands()
        .run_with(
            "echo $GREETING",
            CommandOpts::new().env("GREETING", "hello"),
        )
        .await
        .expect("commands.run");
    assert_eq!(out.stdout, "hello\n");
    let err = sbx
        .commands()
        .run("exit 3")
        .await
        .expect_err("non-zero exit");
    assert!(is_instance(&err, E2bClass::CommandExitException));
    assert!(is_instance(&err, E2bClass::SandboxException));

    sbx.files()
        .write("/home/user/note.txt", b"from e2b".to_vec())
        .await
        .expect("files.write");
    let cat = sbx
        .commands()
        .run("cat /home/user/note.txt")
        .await
        .expect("cat");
    assert_eq!(cat.stdout, "from e2b");
    let missing = sbx
        .files()
        .read("/home/user/nope.txt")
        .await
        .expect_err("missing file");
    assert!(is_instance(&missing, E2bClass::FileNotFoundException));
    assert!(is_instance(&missing, E2bClass::NotFoundException));

    let unknown = sbx
        .run_code("1", RunCodeOpts::new().language("r"))
        .await
        .expect_err("no R kernel");
    assert!(
        matches!(&unknown, rayito::SandboxError::Unimplemented { feature, .. } if &**feature == "language")
    );
    assert!(sbx.kill(ApiParams::default()).await.expect("kill"));
}

/// Each missing feature is `Unimplemented` with its key, and the emulator
/// saw no RunMicrovm; the last row shows the same options without it do
/// reach the emulator, so the count could have moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_feature_makes_no_control_plane_call() {
    let emulator = Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator");
    let aws = AwsOptions::new()
        .endpoint_url(emulator.endpoint_url())
        .region("us-east-1")
        .static_credentials(
            emulator.access_key().id.clone(),
            emulator.access_key().secret.clone(),
        );
    let base = || SandboxOpts {
        backend: Backend::Aws(aws.clone()),
        template: Some(emulator.image_arn("rayito-base")),
        ..SandboxOpts::default()
    };
    let rows: Vec<(SandboxOpts, Missing)> = vec![
        (
            SandboxOpts {
                lifecycle: Some(Lifecycle {
                    keep_memory: Some(false),
                    ..Lifecycle::default()
                }),
                ..base()
            },
            Missing::PauseWithoutMemory,
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    rules: vec!["api.example.com".into()],
                    ..Network::default()
                }),
                ..base()
            },
            Missing::NetworkRules,
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    mask_request_host: Some("x".into()),
                    ..Network::default()
                }),
                ..base()
            },
            Missing::NetworkMaskRequestHost,
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    allow_public_traffic: true,
                    ..Network::default()
                }),
                ..base()
            },
            Missing::NetworkAllowPublicTraffic,
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    https_ports: vec![8443],
                    ..Network::default()
                }),
                ..base()
            },
            Missing::NetworkHttpsPorts,
        ),
        (
            SandboxOpts {
                iam: Some("aud".into()),
                ..base()
            },
            Missing::Iam,
        ),
        (
            SandboxOpts {
                mcp: Some("{}".into()),
                ..base()
            },
            Missing::Mcp,
        ),
        (
            SandboxOpts {
                volume_mounts: BTreeMap::from([("/data".to_owned(), "vol".to_owned())]),
                ..base()
            },
            Missing::VolumeMounts,
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    dns_servers: vec!["1.1.1.1".into()],
                    ..Network::default()
                }),
                ..base()
            },
            Missing::NetworkDnsServers,
        ),
        (
            SandboxOpts {
                idempotency_key: Some("create-once".into()),
                ..base()
            },
            Missing::IdempotencyKey,
        ),
    ];
    for (opts, missing) in rows {
        let err = Sandbox::create(opts).await.expect_err("refused");
        match &err {
            rayito::SandboxError::Unimplemented {
                feature,
                reason,
                doc,
                ..
            } => {
                assert_eq!(&**feature, missing.key());
                assert_eq!(&**reason, missing.reason());
                assert_eq!(doc.as_deref(), Some("docs/e2b-compat.md"));
            }
            other => panic!("{missing:?}: expected Unimplemented, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!(
                "feature {} is not available: {}; see docs/e2b-compat.md",
                missing.key(),
                missing.reason()
            )
        );
    }
    // No template on AWS: E2B's default does not exist here, and the error
    // says the fix (only when the environment does not name one).
    if std::env::var_os(rayito::TEMPLATE_ENV).is_none() {
        let err = Sandbox::create(SandboxOpts {
            template: None,
            ..base()
        })
        .await
        .expect_err("no template on AWS");
        assert!(is_instance(&err, E2bClass::InvalidArgumentException));
        assert_eq!(
            err.to_string(),
            "invalid template: no template was given and RAYITO_TEMPLATE is unset; \
             E2B's code-interpreter-v1 exists only at E2B: build an image with `rayito template build` \
             and pass its ARN as SandboxOpts.template or set RAYITO_TEMPLATE (the local backend needs neither)"
        );
    }
    assert_eq!(
        emulator.calls(Operation::RunMicrovm),
        0,
        "no call for any refusal"
    );

    let sbx = Sandbox::create(base())
        .await
        .expect("the same options without the feature");
    assert_eq!(
        emulator.calls(Operation::RunMicrovm),
        1,
        "the control row reached AWS"
    );
    let fork = sbx.fork().await.expect_err("no fork");
    assert!(
        matches!(&fork, rayito::SandboxError::Unimplemented { feature, .. } if &**feature == "fork")
    );
    let key = |err: rayito::SandboxError| match err {
        rayito::SandboxError::Unimplemented { feature, .. } => feature.to_string(),
        other => panic!("expected Unimplemented, got {other:?}"),
    };
    let refused = vec![
        key(sbx.create_snapshot().await.expect_err("snapshot")),
        key(sbx.list_snapshots().await.expect_err("snapshots")),
        key(Sandbox::delete_snapshot("snap-1")
            .await
            .expect_err("delete")),
        key(sbx.get_mcp_url().expect_err("mcp url")),
        key(sbx.get_mcp_token().expect_err("mcp token")),
        key(sbx.get_signature("/f").expect_err("signature")),
        key(sbx.traffic_access_token().expect_err("traffic token")),
        key(sbx.envd_api_url().expect_err("envd")),
        key(sbx
            .update_network(Network {
                dns_servers: vec!["1.1.1.1".into()],
                ..Network::default()
            })
            .await
            .expect_err("dns")),
    ];
    assert_eq!(
        refused,
        [
            "create_snapshot",
            "list_snapshots",
            "delete_snapshot",
            "get_mcp_url",
            "get_mcp_token",
            "get_signature",
            "traffic_access_token",
            "envd_endpoints",
            "network.dns_servers",
        ]
    );
    #[cfg(not(feature = "s3"))]
    {
        assert_eq!(key(sbx.upload_url("/f").await.unwrap_err()), "upload_url");
        assert_eq!(
            key(sbx.download_url("/f").await.unwrap_err()),
            "download_url"
        );
    }
    assert_eq!(emulator.calls(Operation::RunMicrovm), 1, "no call made");
    assert!(sbx.kill(ApiParams::default()).await.expect("kill"));
}

/// The E2B calls added over the SDK's features, on the local backend:
/// stdin by pid, terminals, metrics, git, watch events, JSON, the default
/// template's name, and the per-call options that warn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_calls_over_the_sdk_features() {
    use rayito_e2b::{
        CodeContextOptions, GetNewEvents, MetricsHistoryQuery, PtyOpts, PtySize, ToJson,
    };

    let sbx = Sandbox::create(SandboxOpts {
        template: Some(rayito_e2b::E2B_DEFAULT_TEMPLATE.to_owned()),
        ..local()
    })
    .await
    .expect("create with E2B's default template name");
    let uses_default = warning(
        "template",
        "E2B's default image exists only at E2B; RAYITO_TEMPLATE or the backend's default image is used",
    );
    assert_eq!(sbx.compat_warnings(), vec![uses_default.clone()]);

    // stdin=True, then send_stdin / close_stdin by pid.
    let cat = sbx
        .commands()
        .run_background("cat", CommandOpts::new().stdin(true))
        .await
        .expect("cat with stdin open");
    let pid = cat.pid();
    sbx.commands()
        .send_stdin(pid, "typed ")
        .await
        .expect("send_stdin");
    sbx.commands()
        .stream_input(pid, ["in ", "pieces"])
        .await
        .expect("stream_input");
    sbx.commands().close_stdin(pid).await.expect("close_stdin");
    let done = cat.wait().await.expect("cat ends at end-of-file");
    assert_eq!(done.stdout, "typed in pieces");

    // connect(pid, timeout=): attaches; the timeout is ignored with a warning.
    let sleeper = sbx
        .commands()
        .run_background("sleep 30", CommandOpts::new())
        .await
        .expect("a background command");
    let attached = sbx
        .commands()
        .connect_with(
            sleeper.pid(),
            CommandOpts::new()
                .timeout(Duration::from_secs(1))
                .request_timeout(Duration::from_secs(5)),
        )
        .await
        .expect("connect");
    assert_eq!(attached.pid(), sleeper.pid());
    // Attaching has no request timeout of its own: connect warns (run
    // takes it, and warns of nothing).
    assert!(
        sbx.compat_warnings().contains(&warning(
            "request_timeout",
            "the handle's connection and control plane are already built; pass it when creating or connecting"
        )),
        "{:?}",
        sbx.compat_warnings()
    );
    assert!(sbx.commands().kill(sleeper.pid()).await.expect("kill"));

    // A terminal: send_stdin by pid, then kill.
    let term = sbx
        .pty()
        .create(PtySize::new(80, 24), PtyOpts::new().no_timeout())
        .await
        .expect("pty.create");
    sbx.pty()
        .send_stdin(term.pid(), "echo hi\n")
        .await
        .expect("pty.send_stdin");
    assert!(sbx.pty().kill(term.pid()).await.expect("pty.kill"));

    // get_metrics(start, end): the agent's samples.
    let samples = sbx
        .get_metrics(MetricsHistoryQuery::new())
        .await
        .expect("get_metrics");
    for sample in &samples {
        assert!(sample.mem_total_bytes > 0, "{sample:?}");
    }

    // git, with E2B's method names.
    let has_git = sbx.commands().run("command -v git").await.is_ok();
    if has_git {
        sbx.git()
            .init("/home/user/repo", rayito::git::InitOptions::default())
            .await
            .expect("git.init");
        let status = sbx
            .git()
            .status("/home/user/repo")
            .await
            .expect("git.status");
        assert!(status.is_clean(), "a new repository is clean");
    }

    // watch_dir, then get_new_events without waiting.
    let mut watch = sbx
        .files()
        .watch_dir("/home/user", false)
        .await
        .expect("watch_dir");
    sbx.files()
        .write("/home/user/seen.txt", "x")
        .await
        .expect("write");
    let mut events = Vec::new();
    for _ in 0..50 {
        events.extend(watch.get_new_events().expect("events"));
        if events.iter().any(|e| e.name == "seen.txt") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(events.iter().any(|e| e.name == "seen.txt"), "{events:?}");
    watch.stop();

    // to_json, as E2B's models serialize.
    let execution = sbx
        .run_code(
            "print('out')\n40 + 2",
            RunCodeOpts::new().request_timeout(Duration::from_secs(5)),
        )
        .await
        .expect("run_code");
    let json: serde_json::Value = serde_json::from_str(&execution.to_json()).expect("JSON");
    assert_eq!(json["results"][0]["text"], "42");
    assert_eq!(json["results"][0]["is_main_result"], true);
    assert_eq!(json["logs"]["stdout"][0], "out\n");
    assert!(json["error"].is_null());
    let context = sbx
        .create_code_context(
            CodeContextOptions::new(),
            Some("python"),
            ApiParams {
                retries: Some(3),
                ..ApiParams::default()
            },
        )
        .await
        .expect("create_code_context");
    let from_json = rayito_e2b::context_from_json(&format!(
        r#"{{"id": "{}", "language": "python", "cwd": "/home/user"}}"#,
        context.id
    ))
    .expect("from_json");
    assert_eq!(from_json, context.id);

    let ran = sbx
        .commands()
        .run_with(
            "true",
            CommandOpts::new()
                .request_timeout(Duration::from_secs(5))
                .retain_output(false),
        )
        .await
        .expect("a command with ignored options");
    assert_eq!(ran.exit_code, 0);
    let on_handle = "the handle's connection and control plane are already built; pass it when creating or connecting";
    assert_eq!(
        sbx.compat_warnings(),
        vec![
            uses_default,
            warning(
                "timeout",
                "attaching to a process has no deadline of its own; the process keeps its own timeout"
            ),
            warning("request_timeout", on_handle),
            warning("retries", on_handle),
            warning(
                "retain_output",
                "a handle keeps what it received until wait() returns; the agent keeps the last 1 MiB for connect_from"
            ),
        ]
    );
    assert!(sbx.kill(ApiParams::default()).await.expect("kill"));
}

#[test]
fn e2b_defaults_differ_from_the_sdk_where_documented() {
    assert_eq!(
        rayito_e2b::DEFAULT_SANDBOX_TIMEOUT,
        Duration::from_secs(300)
    );
    assert_eq!(rayito_e2b::DEFAULT_COMMAND_TIMEOUT, Duration::from_secs(60));
    assert_eq!(
        rayito_e2b::DEFAULT_RUN_CODE_TIMEOUT,
        Duration::from_secs(300)
    );
}

/// Connect by id (resuming a paused sandbox), list by metadata, kill by id:
/// E2B's class methods over the SDK's by-id calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_connect_list_and_kill_by_id() {
    let marker = format!("e2b-{}", std::process::id());
    let sbx = Sandbox::create(SandboxOpts {
        metadata: BTreeMap::from([("suite".to_owned(), marker.clone())]),
        ..local()
    })
    .await
    .expect("create");
    let id = sbx.sandbox_id().to_owned();
    let token = sbx.access_token().clone();
    sbx.run_code("kept = 41", RunCodeOpts::new())
        .await
        .expect("state");

    for opts in [
        PauseOpts {
            keep_memory: Some(false),
            ..PauseOpts::default()
        },
        PauseOpts {
            mode: Some(PauseMode::Filesystem),
            ..PauseOpts::default()
        },
    ] {
        let refused = sbx.pause(opts).await.expect_err("memory is always kept");
        assert!(
            matches!(&refused, rayito::SandboxError::Unimplemented { feature, .. } if &**feature == "pause(keep_memory=false)")
        );
    }
    assert!(
        sbx.pause(PauseOpts {
            mode: Some(PauseMode::Full),
            strict: true,
            ..PauseOpts::default()
        })
        .await
        .expect("pause"),
        "it was running"
    );
    assert_eq!(
        sbx.compat_warnings(),
        vec![warning(
            "strict",
            "suspending a MicroVM does not ask its agent, and a suspended sandbox always resumes with its memory"
        )]
    );

    let reboot = Sandbox::connect(
        &id,
        token.clone(),
        rayito_e2b::ConnectOpts {
            on_resume: rayito_e2b::OnResume::Reboot,
            backend: Backend::Local,
            ..Default::default()
        },
    )
    .await
    .expect_err("no reboot");
    assert!(
        matches!(&reboot, rayito::SandboxError::Unimplemented { feature, .. } if &**feature == "connect(on_resume=reboot)")
    );

    let back = Sandbox::connect(
        &id,
        token,
        rayito_e2b::ConnectOpts {
            timeout: Some(Duration::from_secs(200)),
            backend: Backend::Local,
            ..Default::default()
        },
    )
    .await
    .expect("connect resumes the paused sandbox and sets its timeout");
    let kept = back
        .run_code("kept + 1", RunCodeOpts::new())
        .await
        .expect("memory kept");
    assert_eq!(kept.text(), Some("42"));

    let mut paginator = Sandbox::list(
        rayito_e2b::SandboxQuery::new().metadata([("suite", marker.as_str())]),
        ListOpts {
            limit: Some(1),
            order: Some(ListOrder::Desc),
            backend: Backend::Local,
            ..Default::default()
        },
    )
    .expect("a list with a limit and an order");
    let mut ids = Vec::new();
    while paginator.has_next() {
        let page = paginator.next_items().await.expect("a page");
        assert!(page.len() <= 1, "limit is the page size: {}", page.len());
        ids.extend(page.into_iter().map(|s| s.sandbox_id));
    }
    assert_eq!(ids, vec![id.clone()]);
    assert!(paginator.compat_warnings().is_empty(), "order is kept");
    assert_eq!(paginator.next_token().unwrap(), None, "the listing ended");

    let opts = rayito_e2b::ConnectOpts {
        backend: Backend::Local,
        ..Default::default()
    };
    assert!(
        Sandbox::kill_by_id(&id, opts.clone())
            .await
            .expect("kill by id")
    );
    let info = Sandbox::get_info_by_id(&id, opts).await;
    match info {
        Ok(info) => assert_ne!(info.state, rayito::SandboxState::Running),
        Err(e) => assert!(is_instance(&e, E2bClass::SandboxNotFoundException), "{e}"),
    }
}

/// `allow_internet_access=False` and `network.allow_out`/`deny_out` map
/// onto the SDK's egress policy (docs/network.md): limits are refused
/// before any call, and an agent that cannot enforce the policy has its
/// sandbox terminated and create fails `Unimplemented` naming the feature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_options_map_onto_the_sdk_policy() {
    let emulator = Emulator::start(EmulatorConfig {
        agent_egress: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator");
    let aws = AwsOptions::new()
        .endpoint_url(emulator.endpoint_url())
        .region("us-east-1")
        .static_credentials(
            emulator.access_key().id.clone(),
            emulator.access_key().secret.clone(),
        );
    let base = || SandboxOpts {
        backend: Backend::Aws(aws.clone()),
        template: Some(emulator.image_arn("rayito-base")),
        ..SandboxOpts::default()
    };
    let err = Sandbox::create(SandboxOpts {
        network: Some(Network {
            deny_out: vec!["api.example.com".into()],
            ..Network::default()
        }),
        ..base()
    })
    .await
    .expect_err("a hostname in deny_out");
    assert!(
        matches!(&err, rayito::SandboxError::InvalidArgument { argument, .. } if argument.as_deref() == Some("deny_out")),
        "{err:?}"
    );
    assert!(!err.to_string().contains("api.example.com"), "{err}");
    assert_eq!(
        emulator.calls(Operation::RunMicrovm),
        0,
        "refused before any call"
    );

    for (opts, feature) in [
        (
            SandboxOpts {
                allow_internet_access: Some(false),
                ..base()
            },
            "allow_internet_access=False",
        ),
        (
            SandboxOpts {
                network: Some(Network {
                    allow_out: vec!["10.0.0.1".into()],
                    deny_out: vec!["0.0.0.0/0".into()],
                    ..Network::default()
                }),
                ..base()
            },
            "network",
        ),
    ] {
        let err = Sandbox::create(opts).await.expect_err("not enforced here");
        assert!(
            matches!(&err, rayito::SandboxError::Unimplemented { feature: f, doc, .. }
                if &**f == feature && doc.as_deref() == Some("docs/network.md")),
            "{err:?}"
        );
    }
    assert_eq!(emulator.calls(Operation::RunMicrovm), 2);
    for id in emulator.microvm_ids() {
        assert!(
            matches!(
                emulator.state(&id),
                Some(
                    rayito_emulator::MicrovmState::Terminated
                        | rayito_emulator::MicrovmState::Terminating
                )
            ),
            "{id} is still up"
        );
    }
    // An allow list alone restricts nothing: created as always.
    let sbx = Sandbox::create(SandboxOpts {
        allow_internet_access: Some(true),
        network: Some(Network {
            allow_out: vec!["10.0.0.1".into()],
            ..Network::default()
        }),
        ..base()
    })
    .await
    .expect("unrestricted");
    assert!(sbx.kill(ApiParams::default()).await.expect("kill"));
}
