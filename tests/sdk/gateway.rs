//! Secret gateways (`SandboxBuilder::gateway`, `Pool::take_with_gateways`)
//! on the emulator, with the headers' secrets in a moto Secrets Manager:
//! refusals before any call (nothing launched), and today's local agent,
//! which offers no gateway (Health's flag false): `create` fails
//! `Unimplemented` naming `secret_gateway` and terminates the sandbox, or
//! keeps it with `keep_on_failure`.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rayito::gateway::SecretGateway;
use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{ErrorKind, PoolConfig, SandboxError};
use rayito_emulator::{Emulator, MicrovmState};
use sdk_support::moto::MotoServer;
use sdk_support::{builder, emulator};

/// A value no error or Debug may show.
const VALUE: &str = "canary-gateway-key-5d1e";
const NAME: &str = "gateways/canary-name";
/// An access token the test knows (16 zero bytes, base64url).
const TOKEN: &str = "AAAAAAAAAAAAAAAAAAAAAA";

fn gateway() -> SecretGateway {
    SecretGateway::new("https://api.example.com")
        .header("authorization", NAME)
        .allow("POST", "/v1/chat/completions")
}

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

/// A cache over `moto`, after storing the secret there.
async fn cache_with_secret(moto: &MotoServer) -> SecretCache {
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
    let emu = emulator().await;

    let before = emu.microvm_ids();
    let err = builder(&emu)
        .access_token(TOKEN)
        .secret_cache(cache.clone())
        .gateway("api", gateway())
        .create()
        .await
        .expect_err("the local agent offers no gateway");
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
        .expect_err("the local agent offers no gateway");
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
