//! The gateways through the create pipeline, over the seam tests' injected
//! control plane and an in-memory agent with ConfigureService: the section
//! sent (header values read through the secret cache), the status read
//! after it, a refusal terminating the sandbox (or keeping it), an agent
//! without the feature, refresh after a rotation, connect's recovery.

use std::sync::atomic::Ordering;

use rayito_agent::pb as agent_pb;

use super::SecretGateway;
use crate::aws::secretsmanager::mock;
use crate::error::{ErrorKind, SandboxError};
use crate::seam_tests::{FakeConfigure, FakeControl, FakeHealth, builder, configure_agent, ready};
use crate::secrets::{SecretCache, SecretCacheOptions, SecretRef};

const VALUE: &str = "canary-key-value-1";
const ROTATED: &str = "canary-key-value-2";

fn features() -> agent_pb::AgentFeatures {
    agent_pb::AgentFeatures {
        configure: true,
        secret_gateway: true,
        ..Default::default()
    }
}

fn health(features: Option<agent_pb::AgentFeatures>) -> FakeHealth {
    FakeHealth {
        answer: Ok(agent_pb::HealthResponse {
            features,
            ..ready()
        }),
    }
}

fn listening(port: u32) -> agent_pb::ConfigureStatusResponse {
    agent_pb::ConfigureStatusResponse {
        secret_gateway: Some(agent_pb::SecretGatewayStatus {
            routes: vec![agent_pb::SecretGatewayRouteStatus {
                name: "api".into(),
                port,
                state: agent_pb::SecretGatewayRouteState::Listening as i32,
                last_error_class: String::new(),
            }],
        }),
        ..Default::default()
    }
}

fn gateway() -> SecretGateway {
    SecretGateway::new("https://api.example.com")
        .header("Authorization", SecretRef::new("canary-name"))
        .allow("POST", "/v1/chat/completions")
        .allow("GET", "/v1/models/*")
        .rate_per_minute(60)
}

fn cache(values: &[&str]) -> (SecretCache, mock::Rule) {
    let rule = mock::secret_strings(values);
    let cache = SecretCache::with_client(SecretCacheOptions::new(), mock::manager(&[&rule]))
        .expect("a cache");
    (cache, rule)
}

fn no_leak(err: &SandboxError) {
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("canary"), "{text}");
    }
}

#[tokio::test]
async fn create_sends_the_section_then_reads_the_ports() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(listening(41_000));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let (cache, reads) = cache(&[VALUE]);
    let sandbox = builder(control.clone(), Some(agent))
        .secret_cache(cache)
        .gateway("api", gateway())
        .create()
        .await
        .unwrap();

    let sent = configure.received();
    assert_eq!(sent.len(), 1, "one Configure");
    let request = &sent[0];
    assert_eq!(request.request_id.len(), 32);
    assert!(request.s3_mounts.is_none() && request.efs_volumes.is_none());
    let section = request.secret_gateway.as_ref().expect("the section");
    assert_eq!(section.routes.len(), 1);
    let route = &section.routes[0];
    assert_eq!(route.name, "api");
    assert_eq!(route.upstream, "https://api.example.com");
    assert_eq!(
        route.headers.iter().collect::<Vec<_>>(),
        [(&"Authorization".to_owned(), &VALUE.to_owned())]
    );
    let rules: Vec<(&str, &str)> = route
        .allow
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        rules,
        [("POST", "/v1/chat/completions"), ("GET", "/v1/models/*")]
    );
    assert_eq!(route.rate_per_minute, 60);
    // The preflight read before the launch was cached: one read in all.
    assert_eq!(reads.num_calls(), 1);
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);

    let gateways = sandbox.gateways();
    assert!(!gateways.recovered());
    assert_eq!(gateways.names(), ["api"]);
    let api = gateways.get("api").expect("api");
    assert_eq!(api.port(), 41_000);
    assert_eq!(api.url(), "http://127.0.0.1:41000");
    assert_eq!(api.last_error_class(), None);
    for shown in [format!("{gateways:?}"), format!("{sandbox:?}")] {
        assert!(!shown.contains("canary"), "{shown}");
    }
    assert_eq!(control.terminations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_refused_section_terminates_the_sandbox_unless_kept() {
    for keep in [false, true] {
        let control = FakeControl::throttled(0);
        let configure = FakeConfigure::applying(listening(1));
        configure.answer_with(agent_pb::SectionCode::Invalid, "invalid_upstream_host");
        let agent = configure_agent(health(Some(features())), configure.clone());
        let err = builder(control.clone(), Some(agent))
            .secret_cache(cache(&[VALUE]).0)
            .gateway("api", gateway())
            .keep_on_failure(keep)
            .create()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Sandbox);
        let message = err.to_string();
        assert!(
            message.starts_with(
                "secret_gateway: invalid_upstream_host; the agent refused the section's settings and applied nothing of it"
            ),
            "{message}"
        );
        no_leak(&err);
        let terminated = control.terminations.load(Ordering::SeqCst);
        if keep {
            assert_eq!(err.meta().kept_sandbox_id(), Some("microvm-1"));
            assert_eq!(terminated, 0);
        } else {
            assert_eq!(err.meta().kept_sandbox_id(), None);
            assert_eq!(terminated, 1);
        }
        // No status is read after a refusal.
        assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn an_agent_without_the_feature_is_unimplemented_and_terminated() {
    for offered in [None, Some(agent_pb::AgentFeatures::default())] {
        let control = FakeControl::throttled(0);
        let configure = FakeConfigure::applying(listening(1));
        let agent = configure_agent(health(offered), configure.clone());
        let err = builder(control.clone(), Some(agent))
            .secret_cache(cache(&[VALUE]).0)
            .gateway("api", gateway())
            .create()
            .await
            .unwrap_err();
        match &err {
            SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "secret_gateway"),
            other => panic!("{other:?}"),
        }
        assert!(configure.received().is_empty(), "nothing sent");
        assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn a_missing_secret_launches_nothing() {
    let control = FakeControl::throttled(0);
    let rule = mock::failing("GetSecretValue", 400, "ResourceNotFoundException");
    let cache =
        SecretCache::with_client(SecretCacheOptions::new(), mock::manager(&[&rule])).unwrap();
    let configure = FakeConfigure::applying(listening(1));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let err = builder(control.clone(), Some(agent))
        .secret_cache(cache)
        .gateway("api", gateway())
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound);
    no_leak(&err);
    assert_eq!(control.terminations.load(Ordering::SeqCst), 0);
    assert!(configure.received().is_empty());
}

#[tokio::test]
async fn refresh_sends_the_rotated_value_and_a_refusal_keeps_the_old_state() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(listening(41_000));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let (cache, reads) = cache(&[VALUE, ROTATED]);
    let sandbox = builder(control.clone(), Some(agent))
        .secret_cache(cache)
        .gateway("api", gateway())
        .create()
        .await
        .unwrap();
    // The agent rebinds on every apply: the port may change.
    *configure.status.lock().unwrap() = listening(41_001);
    sandbox.gateways().refresh().await.unwrap();
    let sent = configure.received();
    assert_eq!(sent.len(), 2);
    let route = &sent[1].secret_gateway.as_ref().unwrap().routes[0];
    assert_eq!(route.headers["Authorization"], ROTATED);
    assert_eq!(reads.num_calls(), 2, "the cache was bypassed");
    assert_eq!(sandbox.gateways().get("api").unwrap().port(), 41_001);
    assert_ne!(sent[0].request_id, sent[1].request_id);

    configure.answer_with(agent_pb::SectionCode::Failed, "listen_failed");
    *configure.status.lock().unwrap() = listening(9);
    let err = sandbox.gateways().refresh().await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("secret_gateway: listen_failed;"),
        "{err}"
    );
    no_leak(&err);
    assert_eq!(sandbox.gateways().get("api").unwrap().port(), 41_001);
    // A failed refresh never terminates the sandbox.
    assert_eq!(control.terminations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn recovery_reads_the_status_once_and_refresh_only_rereads_it() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(listening(41_000));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let sandbox = builder(control, Some(agent)).create().await.unwrap();
    assert!(sandbox.gateways().is_empty());
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);

    // An agent without the feature: nothing is asked.
    super::view::recover(&sandbox, Some(&agent_pb::AgentFeatures::default()))
        .await
        .unwrap();
    super::view::recover(&sandbox, None).await.unwrap();
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
    assert!(!sandbox.gateways().recovered());

    super::view::recover(&sandbox, Some(&features()))
        .await
        .unwrap();
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);
    let gateways = sandbox.gateways();
    assert!(gateways.recovered());
    assert_eq!(gateways.get("api").unwrap().port(), 41_000);

    *configure.status.lock().unwrap() = listening(41_002);
    gateways.refresh().await.unwrap();
    assert_eq!(gateways.get("api").unwrap().port(), 41_002);
    assert!(
        configure.received().is_empty(),
        "no Configure on a recovered view"
    );
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 2);
}
