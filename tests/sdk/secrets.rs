//! The secret store and the secret cache against a real Secrets Manager
//! API: a moto server on 127.0.0.1 (`sdk_support::moto`, moto 5.2.5 from
//! `.ci/install-test-deps`). The cache's AWS calls are counted by a
//! recording proxy between the client and moto (every request it forwarded,
//! not a guess). What moto cannot produce (AccessDenied, Throttling,
//! LimitExceeded, a name still being deleted) is in the crate's
//! `secrets::mock_tests`, through a canned HTTP client.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use aws_sdk_secretsmanager as sm;
use rayito::secrets::{
    SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions,
};
use rayito::{ErrorKind, SandboxError, Secret};
use sdk_support::moto::MotoServer;
use sdk_support::recording_proxy::RecordingProxy;

/// A value no error, Debug or log line may show.
const VALUE: &str = "canary-secret-value-3b9f1c";

/// An `SdkConfig` for `endpoint` with dummy credentials (moto checks no
/// signature in the mode the helper starts it).
fn sdk_config(endpoint: &str) -> aws_types::SdkConfig {
    sdk_support::moto_config::sdk_config(endpoint, "AKIDSECRETSTEST")
}

fn store(endpoint: &str) -> SecretStore {
    SecretStore::new(SecretStoreOptions::new().sdk_config(sdk_config(endpoint)))
        .expect("valid options")
}

/// moto's own client, for what the store never does (raw reads).
fn raw(endpoint: &str) -> sm::Client {
    sm::Client::new(&sdk_config(endpoint))
}

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

fn no_leak(err: &SandboxError, name: &str) {
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(VALUE), "the value leaked: {text}");
        assert!(!text.contains(name), "the name leaked: {text}");
    }
}

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn store_create_update_describe_list_destroy() {
    let Some(moto) = moto().await else { return };
    let endpoint = moto.endpoint_url();
    let store = store(&endpoint);
    let name = "crud/canary-name-41";

    assert!(!store.exists(name).await.unwrap());
    let missing = store.get_info(name).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::SecretNotFound, "{missing}");
    no_leak(&missing, name);

    let info = store
        .create(name, VALUE, &meta(&[("team", "b"), ("owner", "a")]))
        .await
        .expect("create");
    assert_eq!(info.name, name);
    assert_eq!(info.version, 1);
    assert!(
        info.secret_id
            .starts_with("arn:aws:secretsmanager:us-east-1:")
    );
    assert!(format!("{info:?}").find("canary").is_none(), "{info:?}");

    // AWS holds the full name, the version token and the metadata in the
    // description, exactly.
    let described = raw(&endpoint)
        .describe_secret()
        .secret_id(format!("rayito/{name}"))
        .send()
        .await
        .unwrap();
    assert_eq!(described.name(), Some("rayito/crud/canary-name-41"));
    assert_eq!(
        described.description(),
        Some(r#"rayito:v1:{"owner":"a","team":"b"}"#)
    );
    let stages = described.version_ids_to_stages().unwrap();
    assert_eq!(
        stages.get("rayito-secret-version-00000000000000000001"),
        Some(&vec!["AWSCURRENT".to_owned()])
    );

    let got = store.get_info(name).await.unwrap();
    assert_eq!(got.version, 1);
    assert_eq!(got.metadata, meta(&[("owner", "a"), ("team", "b")]));
    assert_eq!(got.secret_id, info.secret_id);
    assert!(got.created_at.is_some() && got.updated_at.is_some());
    assert!(store.exists(name).await.unwrap());
    // By ARN too.
    assert_eq!(store.get_info(&info.secret_id).await.unwrap().version, 1);

    // A second create of the name: `Secret` (exists), never the name.
    let again = store
        .create(name, "other", &BTreeMap::new())
        .await
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Secret, "{again}");
    assert_eq!(again.meta().aws_code(), Some("ResourceExistsException"));
    assert_eq!(
        again.to_string(),
        "the Secrets Manager call CreateSecret found a secret of that name already; update it, or destroy it first"
    );
    no_leak(&again, name);

    // Versions 2 and 3; metadata replaced only when given.
    let v2 = store.update(name, "value-2", None).await.unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(v2.metadata, meta(&[("owner", "a"), ("team", "b")]));
    let v3 = store
        .update(name, "value-3", Some(&meta(&[("k", "v")])))
        .await
        .unwrap();
    assert_eq!(v3.version, 3);
    let got = store.get_info(name).await.unwrap();
    assert_eq!((got.version, got.metadata), (3, meta(&[("k", "v")])));

    // The cache reads each version by id and by stage.
    let cache =
        SecretCache::new(SecretCacheOptions::new().sdk_config(sdk_config(&endpoint))).unwrap();
    let current = cache.get(&SecretRef::from(name)).await.unwrap();
    assert_eq!(current.expose(), "value-3");
    let first = cache
        .get(&SecretRef::new(name).version_id("rayito-secret-version-00000000000000000001"))
        .await
        .unwrap();
    assert_eq!(first.expose(), VALUE);
    let previous = cache
        .get(&SecretRef::new(name).version_stage("AWSPREVIOUS"))
        .await
        .unwrap();
    assert_eq!(previous.expose(), "value-2");
    let by_arn = cache
        .get(&SecretRef::from(info.secret_id.as_str()))
        .await
        .unwrap();
    assert_eq!(by_arn.expose(), "value-3");

    // A foreign version (another tool's VersionId) reads as 0 and the next
    // rayito version still follows the highest rayito one.
    raw(&endpoint)
        .put_secret_value()
        .secret_id(format!("rayito/{name}"))
        .secret_string("foreign")
        .client_request_token("a1b2c3d4-5678-90ab-cdef-EXAMPLE11111")
        .send()
        .await
        .unwrap();
    assert_eq!(store.get_info(name).await.unwrap().version, 0);
    assert_eq!(
        store.update(name, "value-4", None).await.unwrap().version,
        4
    );

    // List: under the prefix only, the prefix stripped; another prefix's
    // secret and an outsider are not listed.
    store
        .create("crud/second", "x", &BTreeMap::new())
        .await
        .unwrap();
    let other = SecretStore::new(
        SecretStoreOptions::new()
            .sdk_config(sdk_config(&endpoint))
            .prefix("elsewhere/"),
    )
    .unwrap();
    other
        .create("crud/third", "x", &BTreeMap::new())
        .await
        .unwrap();
    raw(&endpoint)
        .create_secret()
        .name("not-rayito/crud")
        .secret_string("x")
        .send()
        .await
        .unwrap();
    let page = store.list(100, None).await.unwrap();
    let mut names: Vec<_> = page.secrets.iter().map(|s| s.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["crud/canary-name-41", "crud/second"]);
    assert_eq!(page.next_token, None);
    let listed = page.secrets.iter().find(|s| s.name == name).unwrap();
    assert_eq!(listed.version, 4);
    assert_eq!(listed.metadata, meta(&[("k", "v")]));
    // Pages of one.
    let first_page = store.list(1, None).await.unwrap();
    assert_eq!(first_page.secrets.len(), 1);
    let token = first_page.next_token.clone().expect("a second page");
    let second_page = store.list(1, Some(&token)).await.unwrap();
    assert_eq!(second_page.secrets.len(), 1);
    assert_ne!(first_page.secrets[0].name, second_page.secrets[0].name);
    // With the prefix "" everything is listed, names whole.
    let all = SecretStore::new(
        SecretStoreOptions::new()
            .sdk_config(sdk_config(&endpoint))
            .prefix(""),
    )
    .unwrap()
    .list(100, None)
    .await
    .unwrap();
    assert_eq!(all.secrets.len(), 4);

    // Destroy: true, then false (no DeleteSecret for an absent secret); a
    // secret scheduled for deletion is not found.
    assert!(store.destroy(name).await.unwrap());
    assert!(!store.destroy(name).await.unwrap());
    assert!(!store.exists(name).await.unwrap());
    raw(&endpoint)
        .delete_secret()
        .secret_id("rayito/crud/second")
        .recovery_window_in_days(7)
        .send()
        .await
        .unwrap();
    let scheduled = store.get_info("crud/second").await.unwrap_err();
    assert_eq!(scheduled.kind(), ErrorKind::SecretNotFound, "{scheduled}");
    assert!(!store.exists("crud/second").await.unwrap());
    assert!(!store.destroy("crud/second").await.unwrap());
    assert!(store.list(100, None).await.unwrap().secrets.is_empty());
}

/// Two writers update one secret at the same time: both read version N,
/// both put N+1; Secrets Manager keeps the first and refuses the other
/// (ResourceExistsException on PutSecretValue): `Secret`, "version
/// conflict". A round where one writer finished before the other read is
/// retried (the race is real, so it is not forced).
#[tokio::test]
async fn concurrent_updates_meet_a_version_conflict() {
    let Some(moto) = moto().await else { return };
    let endpoint = moto.endpoint_url();
    let (a, b) = (store(&endpoint), store(&endpoint));
    let name = "race/canary-name-77";
    a.create(name, VALUE, &BTreeMap::new()).await.unwrap();
    let mut conflict = None;
    for round in 0..30 {
        let (ra, rb) = tokio::join!(
            a.update(name, format!("a-{round}-{VALUE}"), None),
            b.update(name, format!("b-{round}-{VALUE}"), None)
        );
        if let Some(err) = [ra, rb].into_iter().find_map(Result::err) {
            conflict = Some(err);
            break;
        }
    }
    let err = conflict.expect("two concurrent updates met once in 30 rounds");
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    assert_eq!(err.meta().aws_code(), Some("ResourceExistsException"));
    assert_eq!(
        err.to_string(),
        "the Secrets Manager call PutSecretValue found the new version already written by another writer; read the secret's info and update again"
    );
    no_leak(&err, name);
}

/// Requests the proxy forwarded whose body asks for `secret_id` and has
/// the shape of GetSecretValue (a version selector).
fn get_calls(proxy: &RecordingProxy) -> usize {
    proxy
        .records()
        .iter()
        .filter(|r| {
            let body = r.json();
            body.get("SecretId").is_some()
                && (body.get("VersionStage").is_some() || body.get("VersionId").is_some())
        })
        .count()
}

#[tokio::test]
async fn the_cache_makes_one_call_for_50_concurrent_readers_and_keeps_it_for_the_ttl() {
    let Some(moto) = moto().await else { return };
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], moto.port()))).await;
    let store = store(&moto.endpoint_url());
    store
        .create("flight", VALUE, &BTreeMap::new())
        .await
        .unwrap();
    let cache = SecretCache::new(
        SecretCacheOptions::new()
            .sdk_config(sdk_config(&proxy.endpoint_url()))
            .ttl(Duration::from_secs(1)),
    )
    .unwrap();
    let reference = SecretRef::from("flight");
    let readers: Vec<_> = (0..50)
        .map(|_| {
            let cache = cache.clone();
            let reference = reference.clone();
            tokio::spawn(async move { cache.get(&reference).await })
        })
        .collect();
    for reader in readers {
        assert_eq!(reader.await.unwrap().unwrap().expose(), VALUE);
    }
    assert_eq!(
        get_calls(&proxy),
        1,
        "50 concurrent readers, one GetSecretValue"
    );
    assert_eq!(cache.fetches(), 1);
    assert_eq!(
        format!("{cache:?}"),
        "SecretCache { entries: 1, in_flight: 0 }"
    );

    // A hit makes no call.
    assert_eq!(cache.get(&reference).await.unwrap().expose(), VALUE);
    assert_eq!(get_calls(&proxy), 1);
    // Another selector is another key.
    cache
        .get(&SecretRef::new("flight").version_id("rayito-secret-version-00000000000000000001"))
        .await
        .unwrap();
    assert_eq!(get_calls(&proxy), 2);

    // After the TTL the entry is swept and read again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    store.update("flight", "second", None).await.unwrap();
    assert_eq!(cache.get(&reference).await.unwrap().expose(), "second");
    assert_eq!(get_calls(&proxy), 3);
    assert_eq!(
        cache.len(),
        1,
        "the expired entry of the other selector was swept"
    );

    // refresh reads now; invalidate drops every version; refresh_all all.
    store.update("flight", "third", None).await.unwrap();
    assert_eq!(cache.get(&reference).await.unwrap().expose(), "second");
    assert_eq!(cache.refresh(&reference).await.unwrap().expose(), "third");
    assert_eq!(get_calls(&proxy), 4);
    cache.invalidate("flight").unwrap();
    assert!(cache.is_empty());
    cache.get(&reference).await.unwrap();
    cache.refresh_all();
    assert!(cache.is_empty());
    assert_eq!(get_calls(&proxy), 5);
}

/// A full cache drops its least recently used entry: with room for two,
/// reading a third secret forgets the one read longest ago (read again
/// from AWS), never the one just used.
#[tokio::test]
async fn a_full_cache_drops_its_least_recently_used_entry() {
    let Some(moto) = moto().await else { return };
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], moto.port()))).await;
    let store = store(&moto.endpoint_url());
    for name in ["lru-a", "lru-b", "lru-c"] {
        store.create(name, VALUE, &BTreeMap::new()).await.unwrap();
    }
    let cache = SecretCache::new(
        SecretCacheOptions::new()
            .sdk_config(sdk_config(&proxy.endpoint_url()))
            .max_entries(2),
    )
    .unwrap();
    let read = |name: &'static str| {
        let cache = cache.clone();
        async move { cache.get(&SecretRef::from(name)).await.unwrap() }
    };
    read("lru-a").await;
    read("lru-b").await;
    read("lru-a").await; // a hit: b is now the least recently used
    assert_eq!(get_calls(&proxy), 2);
    read("lru-c").await; // the cache is full: b goes
    assert_eq!(get_calls(&proxy), 3);
    assert_eq!(cache.len(), 2);
    read("lru-a").await;
    read("lru-c").await;
    assert_eq!(get_calls(&proxy), 3, "a and c are kept");
    read("lru-b").await;
    assert_eq!(get_calls(&proxy), 4, "b was dropped and is read again");
    assert_eq!(cache.len(), 2);
}

#[tokio::test]
async fn not_found_is_never_cached() {
    let Some(moto) = moto().await else { return };
    let proxy = RecordingProxy::start(SocketAddr::from(([127, 0, 0, 1], moto.port()))).await;
    let cache =
        SecretCache::new(SecretCacheOptions::new().sdk_config(sdk_config(&proxy.endpoint_url())))
            .unwrap();
    let reference = SecretRef::from("later/canary-name-5");
    for _ in 0..2 {
        let err = cache.get(&reference).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::SecretNotFound, "{err}");
        assert!(err.kind().is_a(ErrorKind::NotFound) && err.kind().is_a(ErrorKind::Secret));
        assert_eq!(
            err.to_string(),
            "the Secrets Manager call GetSecretValue found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret"
        );
        no_leak(&err, "canary-name-5");
    }
    assert_eq!(get_calls(&proxy), 2, "each miss asked AWS again");
    assert!(cache.is_empty());
    // Created a moment later, it is found at once.
    store(&moto.endpoint_url())
        .create("later/canary-name-5", VALUE, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(cache.get(&reference).await.unwrap().expose(), VALUE);
    // A secret without a string value is `Secret`, never its bytes.
    raw(&moto.endpoint_url())
        .create_secret()
        .name("rayito/bin-canary-9")
        .secret_binary(sm::primitives::Blob::new(VALUE.as_bytes()))
        .send()
        .await
        .unwrap();
    let err = cache
        .get(&SecretRef::from("bin-canary-9"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    assert_eq!(
        err.to_string(),
        "the Secrets Manager call GetSecretValue returned a binary secret, not a string; store the value as a string (SecretString) to read or inject it"
    );
    no_leak(&err, "bin-canary-9");
}

/// An invalidate while a read is on the wire: the read still answers its
/// callers, but does not store what it read before the invalidate.
#[tokio::test]
async fn a_read_that_raced_an_invalidate_does_not_store() {
    let Some(moto) = moto().await else { return };
    let store = store(&moto.endpoint_url());
    store.create("race", VALUE, &BTreeMap::new()).await.unwrap();
    let cache =
        SecretCache::new(SecretCacheOptions::new().sdk_config(sdk_config(&moto.endpoint_url())))
            .unwrap();
    let reference = SecretRef::from("race");
    // Warm the client so the read below is one HTTP call.
    cache.get(&SecretRef::from("race")).await.unwrap();
    cache.invalidate("race").unwrap();
    let (mut raced, mut stored_after_race) = (0, 0);
    for _ in 0..20 {
        let reading = {
            let cache = cache.clone();
            let reference = reference.clone();
            tokio::spawn(async move { cache.get(&reference).await })
        };
        // Wait until the read is in flight, then invalidate under it (a
        // read that finished first does not count).
        let mut in_flight = false;
        while !reading.is_finished() {
            if format!("{cache:?}") == "SecretCache { entries: 0, in_flight: 1 }" {
                in_flight = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        if in_flight {
            cache.invalidate("race").unwrap();
            raced += 1;
        }
        assert_eq!(reading.await.unwrap().unwrap().expose(), VALUE);
        if in_flight {
            stored_after_race += cache.len();
        } else {
            assert_eq!(cache.len(), 1, "a read without a race stores");
        }
        cache.refresh_all();
    }
    assert!(
        raced >= 10,
        "only {raced} of 20 reads were caught in flight"
    );
    assert_eq!(stored_after_race, 0, "no raced read stored its answer");
}

#[tokio::test]
async fn arguments_are_refused_before_any_call() {
    // No server at all: an argument error comes before the client is made.
    let store = store("http://127.0.0.1:9");
    let cache =
        SecretCache::new(SecretCacheOptions::new().sdk_config(sdk_config("http://127.0.0.1:9")))
            .unwrap();
    let cases: Vec<(SandboxError, &str)> = vec![
        (
            store.create("", VALUE, &BTreeMap::new()).await.unwrap_err(),
            "invalid name: a secret name is empty; pass a name or an ARN",
        ),
        (
            store
                .create(
                    "arn:aws:secretsmanager:us-east-1:123456789012:secret:x",
                    VALUE,
                    &BTreeMap::new(),
                )
                .await
                .unwrap_err(),
            "invalid name: create takes a name under the store's prefix, not an ARN",
        ),
        (
            store.create("ok", "", &BTreeMap::new()).await.unwrap_err(),
            "invalid value: a secret value is empty; pass 1 to 65,536 bytes of UTF-8",
        ),
        (
            store.update("webhooks/x", VALUE, None).await.unwrap_err(),
            "invalid name: secrets under rayito/webhooks/ belong to lifecycle events and are never read or written here",
        ),
        (
            store.list(0, None).await.unwrap_err(),
            "invalid limit: a page holds 1 to 100 secrets; pass a limit in that range",
        ),
        (
            store.list(101, None).await.unwrap_err(),
            "invalid limit: a page holds 1 to 100 secrets; pass a limit in that range",
        ),
        (
            store.list(10, Some("")).await.unwrap_err(),
            "invalid next_token: a next_token is 1 to 4,096 printable ASCII characters; pass the one a page returned",
        ),
        (
            cache
                .get(&SecretRef::from("bad name canary"))
                .await
                .unwrap_err(),
            "invalid reference: a secret name has a character outside A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid name",
        ),
        (
            SecretCache::new(SecretCacheOptions::new().ttl(Duration::ZERO)).unwrap_err(),
            "invalid ttl: a secret cache's TTL is 1 s to 86,400 s; pass a duration in that range",
        ),
        (
            SecretCache::new(SecretCacheOptions::new().ttl(Duration::from_secs(86_401)))
                .unwrap_err(),
            "invalid ttl: a secret cache's TTL is 1 s to 86,400 s; pass a duration in that range",
        ),
        (
            SecretCache::new(SecretCacheOptions::new().max_entries(0)).unwrap_err(),
            "invalid max_entries: a secret cache keeps 1 to 1,000,000 entries; pass a count in that range",
        ),
        (
            SecretStore::new(SecretStoreOptions::new().prefix("bad prefix")).unwrap_err(),
            "invalid prefix: a secret name prefix is at most 512 of A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid prefix or \"\"",
        ),
        (
            SecretStore::new(SecretStoreOptions::new().kms_key_id("")).unwrap_err(),
            "invalid kms_key_id: a KMS key id is 1 to 2,048 printable ASCII characters (an id, alias/<name> or an ARN)",
        ),
    ];
    for (err, message) in cases {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.to_string(), message);
        no_leak(&err, "canary");
    }
    assert!(SecretCache::new(SecretCacheOptions::new().ttl(Duration::from_secs(86_400))).is_ok());
    assert!(SecretCache::new(SecretCacheOptions::new().ttl(Duration::from_secs(1))).is_ok());
    let _ = Secret::new("unused");
}

#[tokio::test]
async fn shared_caches_are_one_per_configuration_at_most_32() {
    let config = sdk_config("http://127.0.0.1:9");
    let a = SecretCache::shared(&config);
    assert!(a.is_same(&SecretCache::shared(&config.clone())));
    assert!(
        !a.is_same(&SecretCache::shared(&sdk_config("http://127.0.0.1:9"))),
        "another credentials provider is another cache"
    );
    assert!(!a.is_same(&SecretCache::shared(&sdk_config("http://127.0.0.1:10"))));
    // 32 newer configurations push the least recently used one out.
    let configs: Vec<_> = (0..32)
        .map(|i| sdk_config(&format!("http://127.0.0.1:{}", 100 + i)))
        .collect();
    for config in &configs {
        SecretCache::shared(config);
    }
    assert!(
        !a.is_same(&SecretCache::shared(&config)),
        "evicted, a new cache"
    );
}
