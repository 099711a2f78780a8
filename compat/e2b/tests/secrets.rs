//! E2B's `Secret` class (this crate's `secrets` feature) against Secrets
//! Manager on a moto server: create, get_info, exists, list (paged by
//! Secrets Manager's own token), update, destroy; a missing secret is a
//! `SecretNotFoundException`; the value shows in no error, `Debug` or
//! tracing event. Run by `.ci/run`
//! (`cargo test -p rayito-e2b --features secrets --test secrets`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use rayito::secrets::SecretStoreOptions;
use rayito_e2b::exceptions::{E2bClass, class_of, is_instance};
use rayito_e2b::{Secret, SecretInfo, SecretOpts, SecretValue};

#[path = "../../../tests/skip_support/mod.rs"]
mod skip;
// moto.rs reaches the skip helper as `super::skip`.
#[path = "../../../tests/sdk_support/moto.rs"]
mod moto;

use moto::MotoServer;

/// The value every test writes: it must never show anywhere.
const VALUE: &str = "e2b-s3cr3t-value-77";
const NEW_VALUE: &str = "e2b-s3cr3t-value-78";

/// Every tracing event of this test binary, at TRACE, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn install() -> Self {
        let captured = Self::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        captured
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

fn opts(moto: &MotoServer, prefix: &str) -> SecretOpts {
    let credentials = aws_credential_types::Credentials::new(
        "AKIDE2BSECRETS",
        "dummy",
        None,
        None,
        "rayito-e2b-test",
    );
    let config = aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
        )
        .endpoint_url(moto.endpoint_url())
        .build();
    SecretOpts {
        store: SecretStoreOptions::new().sdk_config(config).prefix(prefix),
    }
}

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn no_value(text: &str) {
    assert!(!text.contains(VALUE), "the value leaked: {text}");
    assert!(!text.contains(NEW_VALUE), "the new value leaked: {text}");
}

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_class_creates_describes_lists_updates_and_destroys() {
    let events = Captured::install();
    let Some(moto) = moto().await else {
        return;
    };
    let prefix = "e2b-test/";

    // Secret.create(name, value, metadata)
    let created = Secret::create(
        "openai",
        VALUE,
        Some(meta(&[("team", "ml")])),
        opts(&moto, prefix),
    )
    .await
    .expect("create");
    assert_eq!(created.name, "openai");
    assert_eq!(created.version, 1);
    assert_eq!(created.metadata, meta(&[("team", "ml")]));
    assert!(
        created
            .secret_id
            .starts_with("arn:aws:secretsmanager:us-east-1:")
    );
    assert!(created.secret_id.contains(":secret:e2b-test/openai"));
    let debug = format!("{created:?}");
    no_value(&debug);
    assert!(
        !debug.contains("openai"),
        "the name is not in Debug: {debug}"
    );

    // A second create of the name (another value: the same one is an
    // idempotent retry) is a SecretException, not a "not found".
    let again = Secret::create("openai", NEW_VALUE, None, opts(&moto, prefix))
        .await
        .expect_err("the name exists");
    assert_eq!(class_of(&again), E2bClass::SecretException, "{again:?}");
    assert_eq!(
        again.to_string(),
        "the Secrets Manager call CreateSecret found a secret of that name already; update it, or destroy it first"
    );
    no_value(&format!("{again} {again:?}"));

    // Secret.get_info(secret) by name and by ARN (E2B's secret id).
    let info = Secret::get_info("openai", opts(&moto, prefix))
        .await
        .expect("get_info");
    assert_eq!(
        (info.name.as_str(), info.version, &info.metadata),
        ("openai", 1, &meta(&[("team", "ml")]))
    );
    assert_eq!(info.secret_id, created.secret_id);
    assert!(info.created_at.is_some() && info.updated_at.is_some());
    let by_arn = Secret::get_info(&created.secret_id, opts(&moto, prefix))
        .await
        .expect("get_info by ARN");
    assert_eq!(by_arn.name, "openai");

    // Secret.exists(secret)
    assert!(Secret::exists("openai", opts(&moto, prefix)).await.unwrap());
    assert!(!Secret::exists("nope", opts(&moto, prefix)).await.unwrap());

    // Secret.list(limit, next_token): two more secrets, pages of one,
    // resumed from a paginator's token as E2B's next_token.
    for name in ["b-second", "c-third"] {
        Secret::create(name, VALUE, None, opts(&moto, prefix))
            .await
            .expect("create another");
    }
    // Another prefix's secret is not the store's and never listed.
    Secret::create("stranger", VALUE, None, opts(&moto, "other-prefix/"))
        .await
        .expect("create under another prefix");
    let mut paginator = Secret::list(Some(1), None, opts(&moto, prefix)).expect("list");
    assert!(paginator.has_next());
    assert_eq!(paginator.next_token(), None);
    let first = paginator.next_items().await.expect("the first page");
    assert!(first.len() <= 1, "a limit of 1: {first:?}");
    let token = paginator.next_token().map(str::to_owned);
    assert!(token.is_some() && paginator.has_next(), "more pages follow");
    // Debug says a token is held, not which.
    let debug = format!("{paginator:?}");
    assert!(debug.contains("next_token: true"), "{debug}");
    let mut names: Vec<String> = first.into_iter().map(|s| s.name).collect();
    let mut resumed = Secret::list(Some(1), token, opts(&moto, prefix)).expect("list from a token");
    let mut pages = 1;
    while resumed.has_next() {
        pages += 1;
        assert!(pages < 20, "the listing ends");
        names.extend(
            resumed
                .next_items()
                .await
                .expect("a page")
                .into_iter()
                .map(|s| s.name),
        );
    }
    assert_eq!(resumed.next_token(), None);
    assert!(
        resumed
            .next_items()
            .await
            .expect("after the end")
            .is_empty()
    );
    names.sort();
    assert_eq!(names, ["b-second", "c-third", "openai"]);
    // The default limit reads all three at once.
    let mut all = Secret::list(None, None, opts(&moto, prefix)).expect("list");
    let mut listed: Vec<SecretInfo> = Vec::new();
    while all.has_next() {
        listed.extend(all.next_items().await.expect("a page"));
    }
    assert_eq!(listed.len(), 3, "{listed:?}");
    let openai = listed.iter().find(|s| s.name == "openai").expect("listed");
    assert_eq!(
        (openai.version, &openai.metadata),
        (1, &meta(&[("team", "ml")]))
    );

    // Secret.update(secret, value, metadata): version 2; metadata kept
    // when not given, replaced when given.
    let updated = Secret::update("openai", NEW_VALUE, None, opts(&moto, prefix))
        .await
        .expect("update");
    assert_eq!(
        (updated.version, &updated.metadata),
        (2, &meta(&[("team", "ml")]))
    );
    let replaced = Secret::update(
        "openai",
        SecretValue::new(NEW_VALUE),
        Some(meta(&[("team", "infra")])),
        opts(&moto, prefix),
    )
    .await
    .expect("update with metadata");
    assert_eq!(replaced.version, 3);
    let info = Secret::get_info("openai", opts(&moto, prefix))
        .await
        .unwrap();
    assert_eq!(
        (info.version, &info.metadata),
        (3, &meta(&[("team", "infra")]))
    );

    // Not found: E2B's SecretNotFoundException (a SecretException).
    for err in [
        Secret::get_info("nope", opts(&moto, prefix))
            .await
            .unwrap_err(),
        Secret::update("nope", VALUE, None, opts(&moto, prefix))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(class_of(&err), E2bClass::SecretNotFoundException, "{err:?}");
        assert!(is_instance(&err, E2bClass::SecretException));
        assert!(!is_instance(&err, E2bClass::UnimplementedError));
        no_value(&format!("{err} {err:?}"));
        assert!(
            !err.to_string().contains("nope"),
            "the name is not echoed: {err}"
        );
    }

    // Secret.destroy(secret): true, then false; then it does not exist.
    assert!(
        Secret::destroy("openai", opts(&moto, prefix))
            .await
            .unwrap()
    );
    assert!(
        !Secret::destroy("openai", opts(&moto, prefix))
            .await
            .unwrap()
    );
    assert!(!Secret::exists("openai", opts(&moto, prefix)).await.unwrap());
    for name in ["b-second", "c-third"] {
        assert!(Secret::destroy(name, opts(&moto, prefix)).await.unwrap());
    }

    let log = events.text();
    assert!(
        log.contains("rayito::secrets"),
        "the SDK's events are seen: {log}"
    );
    no_value(&log);
    let _ = std::io::stderr().flush();
}

#[tokio::test]
async fn arguments_are_refused_before_any_call() {
    // A dead endpoint: any call would fail as a connection error instead.
    let dead = SecretOpts {
        store: SecretStoreOptions::new()
            .region("us-east-1")
            .endpoint_url("http://127.0.0.1:9"),
    };
    let limit = Secret::list(Some(101), None, dead.clone()).unwrap_err();
    assert_eq!(
        limit.to_string(),
        "invalid limit: a page holds 1 to 100 secrets; pass a limit in that range"
    );
    assert!(Secret::list(Some(0), None, dead.clone()).is_err());
    let empty = Secret::create("x", "", None, dead.clone())
        .await
        .unwrap_err();
    assert_eq!(
        empty.to_string(),
        "invalid value: a secret value is empty; pass 1 to 65,536 bytes of UTF-8"
    );
    assert!(is_instance(&empty, E2bClass::InvalidArgumentException));
    let mut bad_token = Secret::list(None, Some("bad token".into()), dead.clone()).expect("list");
    let err = bad_token.next_items().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid next_token: a next_token is 1 to 4,096 printable ASCII characters; pass the one a page returned"
    );
    let prefix = SecretOpts {
        store: SecretStoreOptions::new().prefix("bad prefix"),
    };
    let err = Secret::exists("x", prefix).await.unwrap_err();
    assert!(
        is_instance(&err, E2bClass::InvalidArgumentException),
        "{err:?}"
    );
}
