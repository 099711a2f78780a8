//! Canary: a secret's value and its name (a confidential selector) reach no
//! `tracing` subscriber at TRACE, no error and no `Debug`, across every
//! store and cache operation against moto, the failing ones included (the
//! AWS SDK logs whole requests and responses at TRACE, and AWS's error
//! messages name the secret).
//!
//! One test per binary: it installs the process-wide TRACE subscriber.

use crate::sdk_support;

use std::collections::BTreeMap;

use rayito::secrets::{
    SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions,
};
use sdk_support::captured::Captured;
use sdk_support::moto::MotoServer;

const NAME_CANARY: &str = "CanarySecretNameQx7";
const VALUE_CANARY: &str = "CanarySecretValueZk9";
const UPDATED_CANARY: &str = "CanaryUpdatedValueWm3";
const META_CANARY: &str = "CanaryMetadataVp2";

fn sdk_config(endpoint: &str) -> aws_types::SdkConfig {
    sdk_support::moto_config::sdk_config(endpoint, "AKIDSECRETSCANARY")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_name_or_value_reaches_any_subscriber() {
    let captured = Captured::install_global_trace();

    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let config = sdk_config(&moto.endpoint_url());
    let store = SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone())).unwrap();
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config.clone())).unwrap();
    let name = format!("team/{NAME_CANARY}");
    let metadata: BTreeMap<String, String> = [("k".to_owned(), META_CANARY.to_owned())].into();
    let mut shown = Vec::new();

    let info = store.create(&name, VALUE_CANARY, &metadata).await.unwrap();
    shown.push(format!("{info:?}"));
    // A second create with another value: the name exists. (With the same
    // value it is the same request again, and succeeds: the token is that
    // of version 1.)
    let err = store
        .create(&name, UPDATED_CANARY, &metadata)
        .await
        .unwrap_err();
    shown.push(format!("{err} {err:?}"));
    let updated = store
        .update(&name, UPDATED_CANARY, Some(&metadata))
        .await
        .unwrap();
    shown.push(format!("{updated:?}"));
    // Twice within 600 s, through another store of the same account: the
    // warning (the limit is the secret's, whichever handle writes).
    SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone()))
        .unwrap()
        .update(&name, VALUE_CANARY, None)
        .await
        .unwrap();
    shown.push(format!("{:?}", store.get_info(&name).await.unwrap()));
    assert!(store.exists(&name).await.unwrap());
    shown.push(format!("{:?}", store.list(10, None).await.unwrap()));
    let reference = SecretRef::from(name.as_str());
    shown.push(format!("{reference:?}"));
    let value = cache.get(&reference).await.unwrap();
    shown.push(format!("{value:?}"));
    assert_eq!(value.expose(), VALUE_CANARY);
    shown.push(format!("{:?}", cache.refresh(&reference).await.unwrap()));
    let old =
        SecretRef::new(name.as_str()).version_id("rayito-secret-version-00000000000000000001");
    shown.push(format!("{old:?}"));
    cache.get(&old).await.unwrap();
    shown.push(format!("{cache:?} {store:?}"));
    // Failures: not found, a bad reference, a second destroy.
    let missing = SecretRef::from(format!("{NAME_CANARY}-missing"));
    let err = cache.get(&missing).await.unwrap_err();
    shown.push(format!("{err} {err:?}"));
    let err = cache
        .get(&SecretRef::from(format!("{NAME_CANARY} bad")))
        .await
        .unwrap_err();
    shown.push(format!("{err} {err:?}"));
    let err = store
        .get_info(&format!("{NAME_CANARY}-missing"))
        .await
        .unwrap_err();
    shown.push(format!("{err} {err:?}"));
    assert!(store.destroy(&name).await.unwrap());
    assert!(!store.destroy(&name).await.unwrap());
    let err = cache.refresh(&reference).await.unwrap_err();
    shown.push(format!("{err} {err:?}"));

    let logged = captured.text();
    assert!(logged.contains("rayito::secrets"), "nothing captured");
    assert!(
        logged.contains("updated twice within 600 s"),
        "no update warning"
    );
    for canary in [NAME_CANARY, VALUE_CANARY, UPDATED_CANARY, META_CANARY] {
        for text in shown.iter().chain(std::iter::once(&logged)) {
            if let Some(at) = text.find(canary) {
                let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
                let line = text[start..].lines().next().unwrap_or_default();
                let line: String = line.replace(canary, "<CANARY>").chars().take(300).collect();
                panic!("a secret name or value was shown: {line}");
            }
        }
    }
}
