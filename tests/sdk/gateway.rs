//! Secret gateways (`SandboxBuilder::gateway`, `Pool::take_with_gateways`)
//! on the emulator, with the headers' secrets in a moto Secrets Manager:
//! refusals before any call (nothing launched), and an agent that offers
//! no gateway (the emulator's `agent_secret_gateway: false`: Health's flag
//! false, as an older image's agent): `create` fails `Unimplemented` naming
//! `secret_gateway` and terminates the sandbox, or keeps it with
//! `keep_on_failure`. End to end with the local agent's gateway and a
//! recording HTTPS upstream (`TestUpstream`, trusted through the emulator's
//! `gateway_upstreams`): sandbox code (curl, Python's urllib) calls the
//! gateway, the header arrives upstream and nowhere in the sandbox;
//! `refresh()` after a rotation sends the new value; a connect recovers the
//! routes; a pool's take applies them to the sandbox it gives.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rayito::gateway::SecretGateway;
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{ErrorKind, PoolConfig, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState, TestUpstream};
use sdk_support::moto::MotoServer;
use sdk_support::{builder, emulator};

/// A value no error or Debug may show.
const VALUE: &str = "canary-gateway-key-5d1e";
const NAME: &str = "gateways/canary-name";
/// An access token the test knows (16 zero bytes, base64url).
const TOKEN: &str = "AAAAAAAAAAAAAAAAAAAAAA";

pub(crate) fn gateway() -> SecretGateway {
    SecretGateway::new("https://api.example.com")
        .header("authorization", NAME)
        .allow("POST", "/v1/chat/completions")
}

pub(crate) async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

/// A cache over `moto`, after storing the secret there.
pub(crate) async fn cache_with_secret(moto: &MotoServer) -> SecretCache {
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDGATEWAYS");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone()))
        .expect("a store")
        .create(NAME, VALUE, &BTreeMap::new())
        .await
        .expect("the secret");
    SecretCache::new(SecretCacheOptions::new().sdk_config(config)).expect("a cache")
}

fn no_leak(err: &SandboxError) {
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("canary"), "{text}");
    }
}

/// The MicroVMs started on `emu` since `before`.
fn new_microvms(emu: &Emulator, before: &[String]) -> Vec<String> {
    emu.microvm_ids()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect()
}

/// An emulator whose agents offer no secret gateway.
async fn emulator_without_gateways() -> Emulator {
    Emulator::start(EmulatorConfig {
        agent_secret_gateway: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts")
}

async fn until_terminated(emu: &Emulator, id: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while emu.state(id) != Some(MicrovmState::Terminated) {
        assert!(Instant::now() < until, "still {:?}", emu.state(id));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const UNIMPLEMENTED: &str = "feature secret_gateway is not available: the agent in this sandbox does not offer this section (its feature flag in Health is false); use an image whose agent supports it; see docs/configure.md";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_gateways_is_unimplemented_and_the_sandbox_terminated() {
    let Some(moto) = moto().await else { return };
    let cache = cache_with_secret(&moto).await;
    let emu = emulator_without_gateways().await;

    let before = emu.microvm_ids();
    let err = builder(&emu)
        .access_token(TOKEN)
        .secret_cache(cache.clone())
        .gateway("api", gateway())
        .create()
        .await
        .expect_err("this agent offers no gateway");
    assert!(
        matches!(&err, SandboxError::Unimplemented { feature, .. } if &**feature == "secret_gateway"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), UNIMPLEMENTED);
    assert_eq!(err.meta().kept_sandbox_id(), None);
    no_leak(&err);
    let started = new_microvms(&emu, &before);
    assert_eq!(started.len(), 1, "{started:?}");
    until_terminated(&emu, &started[0]).await;

    // Kept on failure: still running, named, usable; its gateways empty.
    let before = emu.microvm_ids();
    let err = builder(&emu)
        .access_token(TOKEN)
        .secret_cache(cache)
        .gateway("api", gateway())
        .keep_on_failure(true)
        .create()
        .await
        .expect_err("this agent offers no gateway");
    let id = new_microvms(&emu, &before).pop().expect("a MicroVM");
    assert_eq!(err.meta().kept_sandbox_id(), Some(id.as_str()));
    assert_eq!(emu.state(&id), Some(MicrovmState::Running));
    let client = builder(&emu).client().await.unwrap();
    let sandbox = client.connect(&id, TOKEN).await.expect("the kept sandbox");
    // Connect recovers nothing from an agent without the feature.
    assert!(sandbox.gateways().is_empty());
    assert!(!sandbox.gateways().recovered());
    sandbox.gateways().refresh().await.expect("a no-op");
    assert!(sandbox.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_gateways_are_refused_before_anything_is_launched() {
    let emu = emulator().await;
    let before = emu.microvm_ids();
    for (gateway, argument) in [
        (SecretGateway::new("http://api.example.com"), "upstream"),
        (gateway().header("Host", NAME), "headers"),
        (gateway().allow("GET", "/a/../b"), "allow"),
        (gateway().rate_per_minute(6_001), "rate_per_minute"),
    ] {
        let err = builder(&emu)
            .gateway("api", gateway)
            .create()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == argument),
            "{err:?}"
        );
    }
    let err = builder(&emu)
        .gateway("Not-Valid", gateway())
        .create()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid gateways: gateway 0 has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those"
    );
    // Connect applies none.
    let err = builder(&emu)
        .gateway("api", gateway())
        .connect("microvm-x", TOKEN)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid gateways: connect applies no gateway (it recovers the sandbox's own from its agent); drop gateway() from the builder, or create a new sandbox"
    );
    // A pool's builder never carries them.
    let err = builder(&emu)
        .gateway("api", gateway())
        .pool(PoolConfig::new(1))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid gateways: a pool's warm sandboxes never carry gateways; drop them from the pool's builder and pass them to Pool::take_with_gateways"
    );
    assert_eq!(new_microvms(&emu, &before), Vec::<String>::new());
}

/// The upstream's host name: resolved to the test's listener through the
/// emulator's local-only overrides.
const UPSTREAM_HOST: &str = "api.gateway.test";

/// A store over `moto` (to rotate the secret).
fn store(moto: &MotoServer) -> SecretStore {
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDGATEWAYS");
    SecretStore::new(SecretStoreOptions::new().sdk_config(config)).expect("a store")
}

fn upstream_gateway(upstream: &TestUpstream) -> SecretGateway {
    SecretGateway::new(upstream.url())
        .header("authorization", NAME)
        .allow("GET", "/v1/*")
}

/// Runs `cmd` in `sandbox`; its stdout.
async fn run(sandbox: &Sandbox, cmd: &str) -> String {
    sandbox.commands().run(cmd).await.expect(cmd).stdout
}

/// The `authorization` values the upstream received, in order.
fn seen_values(upstream: &TestUpstream) -> Vec<String> {
    upstream
        .requests()
        .iter()
        .flat_map(|r| r.header("authorization").into_iter().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_arrives_upstream_never_in_the_sandbox_and_refresh_sends_a_rotation() {
    let Some(moto) = moto().await else { return };
    let cache = cache_with_secret(&moto).await;
    let upstream = TestUpstream::start(UPSTREAM_HOST)
        .await
        .expect("the upstream");
    let emu = emulator().await;
    upstream.trust_on(emu.gateway_upstreams());

    let sandbox = builder(&emu)
        .access_token(TOKEN)
        .secret_cache(cache)
        .gateway("api", upstream_gateway(&upstream))
        .create()
        .await
        .expect("a sandbox with a gateway");
    let gateways = sandbox.gateways();
    assert_eq!(gateways.names(), ["api"]);
    assert!(!gateways.recovered());
    let url = gateways.get("api").expect("the route").url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    // curl and Python's urllib, with a forged copy of the header.
    let code = run(
        &sandbox,
        &format!(
            "curl -s -o /dev/null -w '%{{http_code}}' -H 'Authorization: forged' {url}/v1/models"
        ),
    )
    .await;
    assert_eq!(code, "200");
    let code = run(
        &sandbox,
        &format!(
            "python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1]).status)' {url}/v1/chat"
        ),
    )
    .await;
    assert_eq!(code.trim(), "200");
    // Outside the rules: 403 from the gateway, never upstream.
    let code = run(
        &sandbox,
        &format!("curl -s -o /dev/null -w '%{{http_code}}' {url}/admin"),
    )
    .await;
    assert_eq!(code, "403");
    assert_eq!(seen_values(&upstream), [VALUE, VALUE]);
    let targets: Vec<String> = upstream.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(targets, ["/v1/models", "/v1/chat"]);
    // The view is what the apply read; a connect reads the agent's status,
    // the refusal's class included (ports only: never upstream or headers).
    let client = builder(&emu).client().await.unwrap();
    let again = client
        .connect(sandbox.id(), TOKEN)
        .await
        .expect("a connect");
    assert!(again.gateways().recovered());
    let recovered = again.gateways().get("api").expect("the recovered route");
    assert_eq!(recovered.url(), url);
    assert_eq!(recovered.last_error_class(), Some("not_allowed"));
    assert_eq!(
        sandbox.gateways().get("api").unwrap().last_error_class(),
        None
    );

    // Nowhere the sandbox's code can look.
    let seen = run(
        &sandbox,
        "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; true",
    )
    .await;
    assert!(!seen.contains(VALUE), "the value is visible in the sandbox");
    assert!(seen.contains("PATH="), "the listing ran");

    // A rotation reaches the upstream after refresh(), not before it is
    // re-read (the cache holds the old value until then).
    const ROTATED: &str = "canary-gateway-key-rotated-77b0";
    store(&moto)
        .update(NAME, ROTATED, None)
        .await
        .expect("the rotation");
    sandbox.gateways().refresh().await.expect("the refresh");
    let url = sandbox.gateways().get("api").expect("the route").url();
    let code = run(
        &sandbox,
        &format!("curl -s -o /dev/null -w '%{{http_code}}' {url}/v1/models"),
    )
    .await;
    assert_eq!(code, "200");
    assert_eq!(
        seen_values(&upstream).last().map(String::as_str),
        Some(ROTATED)
    );

    // A recovered view's refresh only re-reads the status: the new route.
    again.gateways().refresh().await.expect("a re-read");
    assert_eq!(again.gateways().get("api").map(|s| s.url()), Some(url));
    assert!(sandbox.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_take_applies_gateways_to_the_sandbox_it_gives() {
    let Some(moto) = moto().await else { return };
    let cache = cache_with_secret(&moto).await;
    let upstream = TestUpstream::start(UPSTREAM_HOST)
        .await
        .expect("the upstream");
    let emu = emulator().await;
    upstream.trust_on(emu.gateway_upstreams());
    let pool = builder(&emu)
        .access_token(TOKEN)
        .secret_cache(cache)
        .pool(PoolConfig::new(1).ready_timeout(Duration::from_secs(60)))
        .expect("a pool");
    pool.start().await.expect("the pool starts");

    let sandbox = pool
        .take_with_gateways([("api", upstream_gateway(&upstream))])
        .await
        .expect("a take with a gateway");
    let url = sandbox.gateways().get("api").expect("the route").url();
    let code = run(
        &sandbox,
        &format!("curl -s -o /dev/null -w '%{{http_code}}' {url}/v1/models"),
    )
    .await;
    assert_eq!(code, "200");
    assert_eq!(seen_values(&upstream), [VALUE]);
    assert!(sandbox.kill().await.unwrap());

    // A plain take carries none.
    let plain = pool.take().await.expect("a take");
    assert!(plain.gateways().is_empty());
    assert!(plain.kill().await.unwrap());
    pool.close(true).await.expect("the pool closes");
}
