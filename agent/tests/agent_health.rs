//! Health, the hooks and the access-token layer, through real gRPC and HTTP.

use crate::support;

use rayito_agent::pb;
use support::{MICROVM_ID, TestAgent, assert_status};
use tonic::Code;

#[tokio::test]
async fn health_before_run_is_anonymous_and_has_no_sandbox_id() {
    let t = TestAgent::start_without_run().await;
    let h = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(h.agent_ready);
    assert_eq!(h.sandbox_id, "");
    assert_eq!(h.agent_version, rayito_agent::AGENT_VERSION);
    assert_eq!(h.resume_generation, 0);
    let lc = h.lifecycle.expect("lifecycle present");
    assert_eq!(lc.phase, pb::LifecyclePhase::Unmanaged as i32);
    let features = h.features.expect("features present");
    // Configure with its secret gateway (this host's trust store loads;
    // agent_gateway covers an agent without it).
    assert_eq!(
        features,
        pb::AgentFeatures {
            template_start: true,
            configure: true,
            secret_gateway: true,
            lifecycle_events: true,
            telemetry_export: true,
            chunked_import: true,
            root_egress: vec![pb::RootEgressClass::SecretGatewayUpstream as i32],
            ..pb::AgentFeatures::default()
        }
    );
    assert!(h.cpu_count >= 1);
    assert!(h.memory_total_bytes > 0);
}

/// A Health probe that comes before `/run` (RunMicrovm answers before the
/// hook is posted) waits for it, at most 0.3 s in all, and answers with
/// the sandbox id: a readiness wait then needs one probe, not a second one
/// a poll interval later. Without a `/run` it answers "not yet" after the
/// bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_before_run_waits_for_the_run_within_its_bound() {
    let t = TestAgent::start_without_run().await;
    let began = std::time::Instant::now();
    let alone = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(alone.sandbox_id, "");
    assert!(!alone.kernel_ready);
    assert!(
        began.elapsed() >= std::time::Duration::from_millis(300),
        "{:?}",
        began.elapsed()
    );
    let mut probe = t.health();
    let early = tokio::spawn(async move { probe.health(pb::HealthRequest {}).await });
    // The probe is in the agent before the hook (it waits 0.3 s for it).
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let h = early.await.unwrap().unwrap().into_inner();
    assert_eq!(h.sandbox_id, MICROVM_ID);
}

#[tokio::test]
async fn health_after_run_echoes_id_and_metadata() {
    let t = TestAgent::start_with(serde_json::json!({"metadata": {"team": "infra"}})).await;
    let h = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.sandbox_id, MICROVM_ID);
    assert_eq!(h.metadata.get("team").map(String::as_str), Some("infra"));
    // `kernel_ready` means the interpreter has answered; Health itself waits
    // up to 0.3 s for a start under way, so on a loaded machine it may take
    // a few answers.
    let began = std::time::Instant::now();
    let mut ready = h.kernel_ready;
    while !ready {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(30),
            "the kernel never became ready"
        );
        ready = t
            .health()
            .health(pb::HealthRequest {})
            .await
            .unwrap()
            .into_inner()
            .kernel_ready;
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let h2 = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(h2.uptime_ms >= h.uptime_ms + 20);
}

#[tokio::test]
async fn health_ignores_a_malformed_token() {
    let t = TestAgent::start().await;
    let mut c = pb::health_service_client::HealthServiceClient::with_interceptor(
        t.channel.clone(),
        t.raw_interceptor(Some("!!!")),
    );
    c.health(pb::HealthRequest {})
        .await
        .expect("Health needs no access token");
}

#[tokio::test]
async fn metrics_needs_the_token_and_is_unimplemented_only_when_turned_off() {
    let t = TestAgent::start().await;
    let mut anon = pb::health_service_client::HealthServiceClient::new(t.channel.clone());
    let err = anon.metrics(pb::MetricsRequest {}).await.unwrap_err();
    assert_status(&err, Code::Unauthenticated, "missing access token");
    let err = anon
        .metrics_history(pb::MetricsHistoryRequest::default())
        .await
        .unwrap_err();
    assert_status(&err, Code::Unauthenticated, "missing access token");
    // With the token, a default agent answers both.
    let snapshot = t
        .health_authed()
        .metrics(pb::MetricsRequest {})
        .await
        .expect("metrics")
        .into_inner();
    assert!(
        snapshot.cpu_count >= 1 && snapshot.mem_total_bytes > 0,
        "{snapshot:?}"
    );
    t.health_authed()
        .metrics_history(pb::MetricsHistoryRequest::default())
        .await
        .expect("metrics history");

    // An agent started without the sampler answers UNIMPLEMENTED, the
    // form an old agent gives and the SDK maps to `Unimplemented`.
    let off = TestAgent::start_config(rayito_agent::AgentConfig {
        metrics_interval: None,
        ..rayito_agent::AgentConfig::default()
    })
    .await;
    let (status, body) = off.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let err = off
        .health_authed()
        .metrics(pb::MetricsRequest {})
        .await
        .unwrap_err();
    assert_status(
        &err,
        Code::Unimplemented,
        "Metrics is not implemented by this agent",
    );
    let err = off
        .health_authed()
        .metrics_history(pb::MetricsHistoryRequest::default())
        .await
        .unwrap_err();
    assert_status(
        &err,
        Code::Unimplemented,
        "MetricsHistory is not implemented by this agent",
    );
}

#[tokio::test]
async fn token_rejections_have_exact_messages() {
    let t = TestAgent::start().await;
    let list = |i| {
        let mut c = t.process_with(i);
        async move { c.list(pb::ListRequest {}).await.unwrap_err() }
    };
    assert_status(
        &list(t.raw_interceptor(None)).await,
        Code::Unauthenticated,
        "missing access token",
    );
    assert_status(
        &list(t.raw_interceptor(Some("not*base64"))).await,
        Code::Unauthenticated,
        "malformed access token",
    );
    assert_status(
        &list(t.raw_interceptor(Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))).await,
        Code::Unauthenticated,
        "access token mismatch",
    );
    // Padding is tolerated: the call passes the layer and reaches Lifecycle.
    let padded = format!("{}=", support::token());
    let mut c = pb::lifecycle_service_client::LifecycleServiceClient::with_interceptor(
        t.channel.clone(),
        t.raw_interceptor(Some(&padded)),
    );
    let err = c.set_timeout(set_timeout_exact(5_000)).await.unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "lifecycle_unmanaged");
}

fn set_timeout_exact(timeout_ms: u64) -> pb::SetTimeoutRequest {
    pb::SetTimeoutRequest {
        timeout_ms,
        mode: pb::TimeoutMode::Exact as i32,
    }
}

#[tokio::test]
async fn no_token_installed_before_run_or_after_invalid_payload() {
    let t = TestAgent::start_without_run().await;
    let err = t.process().list(pb::ListRequest {}).await.unwrap_err();
    assert_status(&err, Code::Unauthenticated, "no access token installed");

    let (status, body) = t.run(r#"{"v":1,"token_sha256":"nothex"}"#).await;
    assert_eq!((status, body.as_str()), (200, "invalid_payload"));
    let err = t.process().list(pb::ListRequest {}).await.unwrap_err();
    assert_status(&err, Code::Unauthenticated, "no access token installed");
}

#[tokio::test]
async fn run_is_accepted_once() {
    let t = TestAgent::start().await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "already_ran"));
    let h = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.hook_anomalies, 1);
}

#[tokio::test]
async fn suspend_and_resume_move_the_generation_and_the_gate() {
    let t = TestAgent::start().await;
    assert_eq!(t.hook("suspend", None).await, (200, "ok".to_owned()));
    let err = t
        .process()
        .connect(pb::ConnectRequest {
            pid: 1,
            from_seq: 0,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::Unavailable, "suspending");
    // Unary calls still reach their service during a suspend.
    let err = t
        .lifecycle()
        .set_timeout(set_timeout_exact(5_000))
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "lifecycle_unmanaged");
    assert_eq!(t.hook("resume", None).await, (200, "ok".to_owned()));
    let h = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.resume_generation, 1);
    // A repeated resume does not bump the generation.
    t.hook("resume", None).await;
    let h = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.resume_generation, 1);
}

#[tokio::test]
async fn terminate_resolves_terminated_and_stops_serving() {
    let t = TestAgent::start().await;
    assert_eq!(t.hook("terminate", None).await, (200, "ok".to_owned()));
    tokio::time::timeout(std::time::Duration::from_secs(5), t.agent.terminated())
        .await
        .expect("terminated resolves");
    // The gRPC port stops accepting soon after.
    let addr = t.agent.grpc_addr();
    let mut refused = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(refused, "gRPC port still accepting after terminate");
}

#[tokio::test]
async fn unknown_services_are_unimplemented() {
    let t = TestAgent::start().await;
    // A service the agent does not serve: tonic's router answers UNIMPLEMENTED.
    let mut grpc = tonic::client::Grpc::new(t.channel.clone());
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(pb::ListRequest {});
    req.metadata_mut()
        .insert("x-access-token", support::token().parse().unwrap());
    let codec = tonic_prost::ProstCodec::<pb::ListRequest, pb::ListResponse>::default();
    let err = grpc
        .unary(req, "/rayito.v1.NoSuchService/Call".parse().unwrap(), codec)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

/// Without `network.enforce` in the run payload the agent enforces
/// nothing: Health and GetNetwork say NONE, and UpdateNetwork is
/// FAILED_PRECONDITION (the SDK's `Unimplemented`).
#[tokio::test]
async fn network_without_enforcement_is_a_precondition() {
    let t = TestAgent::start().await;
    let health = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        health.egress_enforcement,
        pb::EgressEnforcement::None as i32
    );
    let mut net = pb::network_service_client::NetworkServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    );
    let state = net
        .get_network(pb::GetNetworkRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.enforcement, pb::EgressEnforcement::None as i32);
    assert_eq!(state.local_proxy_port, 0);
    let err = net
        .update_network(pb::UpdateNetworkRequest {
            policy: Some(pb::NetworkPolicy {
                deny_out: vec!["0.0.0.0/0".into()],
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_status(
        &err,
        Code::FailedPrecondition,
        "this sandbox was started without egress enforcement (no network.enforce in its run payload, or the host cannot enforce); create it with a restricting network policy",
    );
}

#[tokio::test]
async fn agent_refuses_non_loopback_addresses() {
    let config = rayito_agent::AgentConfig {
        grpc_addr: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    };
    let err = rayito_agent::Agent::start(config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the agent's gRPC server only binds loopback addresses"
    );
    // The hooks never leave loopback, even when gRPC may: `/run` installs
    // the access token and a MicroVM's hooks carry none.
    let config = rayito_agent::AgentConfig {
        hooks_addr: "0.0.0.0:0".parse().unwrap(),
        grpc_beyond_loopback: true,
        ..Default::default()
    };
    let err = rayito_agent::Agent::start(config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the agent's hooks server only binds loopback addresses"
    );
}

/// A MicroVM image's agent serves gRPC on every address (the MicroVMs
/// proxy reaches it over the VM's network): before `/run` installs a token
/// only Health answers, and afterwards a call needs the token.
#[tokio::test]
async fn grpc_beyond_loopback_answers_only_with_the_token() {
    let agent = rayito_agent::Agent::start(rayito_agent::AgentConfig {
        grpc_addr: "0.0.0.0:0".parse().unwrap(),
        grpc_beyond_loopback: true,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(agent.grpc_addr().ip().is_unspecified());
    let reachable = std::net::SocketAddr::from(([127, 0, 0, 1], agent.grpc_addr().port()));
    let channel = support::connect(reachable).await;
    let mut health = pb::health_service_client::HealthServiceClient::new(channel.clone());
    health.health(pb::HealthRequest {}).await.unwrap();
    let mut files = pb::filesystem_service_client::FilesystemServiceClient::new(channel);
    let err = files
        .stat(pb::StatRequest {
            path: "/".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::Unauthenticated, "missing access token")
    );
    agent.shutdown().await;
}

/// With a hooks token (the emulator sets one), a hook without it is
/// refused and does nothing: sandbox code on the host, which shares the
/// agent's loopback, can neither suspend nor terminate the sandbox nor
/// `/run` a sandbox prepared ahead with a payload of its own.
#[tokio::test]
async fn hooks_need_the_token_when_one_is_set() {
    use rayito_agent::hooks::{HooksToken, post_hook, post_hook_with};
    let token = HooksToken::generate();
    let t = TestAgent::start_config(rayito_agent::AgentConfig {
        hooks_token: Some(token.clone()),
        ..rayito_agent::AgentConfig::default()
    })
    .await;
    let addr = t.agent.hooks_addr();
    let attacker_run =
        rayito_agent::hooks::run_body("microvm-attacker", &support::payload(serde_json::json!({})));
    let stranger = HooksToken::generate();
    for hook in ["run", "validate", "ready", "suspend", "resume", "terminate"] {
        let body = (hook == "run").then(|| attacker_run.clone());
        let refused = (403, "forbidden".to_owned());
        assert_eq!(
            post_hook(addr, hook, body.clone()).await.unwrap(),
            refused,
            "{hook}"
        );
        assert_eq!(
            post_hook_with(addr, hook, body, Some(&stranger))
                .await
                .unwrap(),
            refused,
            "{hook} with another token"
        );
    }
    // Nothing ran: no sandbox id, and the real /run is the first.
    let health = |t: &TestAgent| {
        let mut client = t.health();
        async move {
            client
                .health(pb::HealthRequest {})
                .await
                .unwrap()
                .into_inner()
        }
    };
    assert_eq!(health(&t).await.sandbox_id, "");
    let run = rayito_agent::hooks::run_body(MICROVM_ID, &support::payload(serde_json::json!({})));
    assert_eq!(
        post_hook_with(addr, "run", Some(run), Some(&token))
            .await
            .unwrap(),
        (200, "ok".to_owned())
    );
    assert_eq!(health(&t).await.sandbox_id, MICROVM_ID);
    assert_eq!(
        post_hook_with(addr, "validate", None, Some(&token))
            .await
            .unwrap(),
        (200, "ok".to_owned())
    );
    // The token never shows in Debug.
    assert_eq!(format!("{token:?}"), "HooksToken(***)");
}

/// A connection made in the agent's own process (what the emulator's proxy
/// uses) is served like one to its gRPC port: the same services and the
/// same access-token check.
#[tokio::test]
async fn an_in_process_connection_is_served_like_a_sockets() {
    let t = TestAgent::start().await;
    let stream = t
        .agent
        .connect_in_process()
        .expect("an in-process connection");
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(stream)));
    let channel = tonic::transport::Endpoint::from_static("http://in-process.invalid")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let stream = slot.lock().unwrap().take();
            async move {
                stream
                    .map(hyper_util::rt::TokioIo::new)
                    .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
            }
        }))
        .await
        .expect("h2c over the in-process connection");
    let h = pb::health_service_client::HealthServiceClient::new(channel.clone())
        .health(pb::HealthRequest {})
        .await
        .expect("Health")
        .into_inner();
    assert_eq!(h.sandbox_id, MICROVM_ID);
    let denied = pb::filesystem_service_client::FilesystemServiceClient::new(channel)
        .stat(pb::StatRequest {
            path: "/home/user".into(),
            user: None,
        })
        .await
        .expect_err("no access token");
    assert_status(&denied, Code::Unauthenticated, "missing access token");
}

/// An in-process connection is refused, as a closed port would be, while
/// 16 made so still wait for the accept loop, and once the server stopped
/// (the emulator's proxy then answers 502).
#[tokio::test]
async fn in_process_connections_are_refused_past_the_backlog_and_after_a_stop() {
    let t = TestAgent::start().await;
    // The accept loop runs on this test's one thread: it takes none of
    // these before the test awaits.
    let waiting: Vec<_> = (0..16)
        .map(|_| t.agent.connect_in_process().expect("within the backlog"))
        .collect();
    let refused = t
        .agent
        .connect_in_process()
        .expect_err("a 17th waiting connection");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    drop(waiting);
    let taken_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while t.agent.connect_in_process().is_err() {
        assert!(
            std::time::Instant::now() < taken_by,
            "the accept loop takes the waiting connections"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    t.agent.kill();
    let stopped_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stopped = loop {
        match t.agent.connect_in_process() {
            Err(err) => break err,
            Ok(_) => {
                assert!(
                    std::time::Instant::now() < stopped_by,
                    "a stopped server refuses in-process connections"
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    };
    assert_eq!(stopped.kind(), std::io::ErrorKind::ConnectionRefused);
}
