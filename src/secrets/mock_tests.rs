//! What the secret store and the secret cache make of Secrets Manager
//! answers a local moto server cannot produce (AccessDenied, Throttling,
//! LimitExceeded, a name still being deleted): the answers are real HTTP
//! error responses from the AWS edge's mocks
//! (`crate::aws::secretsmanager::mock`), deserialized by the AWS SDK as
//! AWS's own, so the code path from the wire to the `SandboxError` is the
//! production one. The table pins variant, fields and message; the AWS
//! message (with the name in it) never survives.
//!
//! Here and not in `tests/`: the store and the cache take no AWS client
//! type in their public API, and the mocks need one (an interceptor on the
//! service config), so these tests use the crate-private `with_client`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions};
use crate::ErrorKind;
use crate::aws::secretsmanager::mock::{self, NAME, VALUE};
use crate::error::SandboxError;

fn cache(rules: &[&mock::Rule]) -> SecretCache {
    SecretCache::with_client(SecretCacheOptions::new(), mock::manager(rules)).unwrap()
}

fn store(rules: &[&mock::Rule]) -> SecretStore {
    SecretStore::with_client(SecretStoreOptions::new(), mock::manager(rules)).unwrap()
}

fn no_leak(err: &SandboxError) {
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("canary"), "{text}");
    }
}

/// Which call, the AWS answer, and what the error must be.
struct Row {
    call: &'static str,
    status: u16,
    code: &'static str,
    kind: ErrorKind,
    message: &'static str,
}

async fn run(row: &Row) -> SandboxError {
    let rule = mock::failing(row.call, row.status, row.code);
    match row.call {
        "GetSecretValue" => cache(&[&rule])
            .get(&SecretRef::from(NAME))
            .await
            .unwrap_err(),
        "CreateSecret" => store(&[&rule])
            .create(NAME, VALUE, &BTreeMap::new())
            .await
            .unwrap_err(),
        "PutSecretValue" => store(&[&mock::described(), &rule])
            .update(NAME, VALUE, None)
            .await
            .unwrap_err(),
        "DescribeSecret" => store(&[&rule]).get_info(NAME).await.unwrap_err(),
        other => panic!("no row for {other}"),
    }
}

#[tokio::test]
async fn each_aws_answer_is_pinned_and_never_repeats_aws_text() {
    let rows = [
        Row {
            call: "GetSecretValue",
            status: 400,
            code: "ResourceNotFoundException",
            kind: ErrorKind::SecretNotFound,
            message: "the Secrets Manager call GetSecretValue found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret",
        },
        Row {
            call: "GetSecretValue",
            status: 400,
            code: "ThrottlingException",
            kind: ErrorKind::RateLimit,
            message: "control plane call GetSecretValue was throttled; retry later with backoff",
        },
        Row {
            call: "GetSecretValue",
            status: 400,
            code: "AccessDeniedException",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call GetSecretValue was refused (AccessDeniedException); allow the IAM action secretsmanager:GetSecretValue to the caller, and kms:Decrypt on the key of a secret encrypted with a customer managed key",
        },
        Row {
            call: "DescribeSecret",
            status: 400,
            code: "AccessDeniedException",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call DescribeSecret was refused (AccessDeniedException); allow the IAM action secretsmanager:DescribeSecret to the caller, and kms:Decrypt on the key of a secret encrypted with a customer managed key",
        },
        Row {
            call: "CreateSecret",
            status: 400,
            code: "ResourceExistsException",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call CreateSecret found a secret of that name already; update it, or destroy it first",
        },
        Row {
            call: "PutSecretValue",
            status: 400,
            code: "ResourceExistsException",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call PutSecretValue found the new version already written by another writer; read the secret's info and update again",
        },
        Row {
            call: "PutSecretValue",
            status: 400,
            code: "LimitExceededException",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call PutSecretValue hit a Secrets Manager limit (LimitExceededException); write a secret at most once every 10 minutes, or delete secrets you no longer use",
        },
        Row {
            call: "CreateSecret",
            status: 400,
            code: "EncryptionFailure",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call CreateSecret failed (EncryptionFailure); check the request, and report it if it persists",
        },
        Row {
            call: "GetSecretValue",
            status: 400,
            code: "DecryptionFailure",
            kind: ErrorKind::Secret,
            message: "the Secrets Manager call GetSecretValue failed (DecryptionFailure); check the request, and report it if it persists",
        },
    ];
    let mut failures = Vec::new();
    for row in &rows {
        let err = run(row).await;
        no_leak(&err);
        if err.kind() != row.kind || err.to_string() != row.message {
            failures.push(format!(
                "{} {}: got {:?} {:?}",
                row.call,
                row.code,
                err.kind(),
                err.to_string()
            ));
        }
        if row.kind != ErrorKind::RateLimit {
            assert_eq!(err.meta().aws_code(), Some(row.code), "{}", row.code);
        }
        // The variant's own field.
        if row.kind == ErrorKind::Secret {
            assert!(
                matches!(&err, SandboxError::Secret { aws_code: Some(code), .. } if code == row.code),
                "{err:?}"
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn errors_of_a_read_for_an_environment_variable_name_it() {
    let rule = mock::failing("GetSecretValue", 400, "ResourceNotFoundException");
    let err = cache(&[&rule])
        .get_for_env(&SecretRef::from(NAME), "OPENAI_API_KEY")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound);
    assert_eq!(
        err.to_string(),
        "the Secrets Manager call GetSecretValue for environment variable OPENAI_API_KEY found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret"
    );
    no_leak(&err);
    // A bad reference too, before any call.
    let err = cache(&[])
        .get_for_env(&SecretRef::from("bad canary"), "OPENAI_API_KEY")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid secrets: the secret of environment variable OPENAI_API_KEY: a secret name has a character outside A-Z, a-z, 0-9 and / _ + = . @ -; pass a valid name"
    );
    // A secret with binary data only.
    let binary = mock::binary_secret();
    let err = cache(&[&binary])
        .get_for_env(&SecretRef::from(NAME), "OPENAI_API_KEY")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    assert_eq!(
        err.to_string(),
        "the Secrets Manager call GetSecretValue for environment variable OPENAI_API_KEY returned a binary secret, not a string; store the value as a string (SecretString) to read or inject it"
    );
    no_leak(&err);
}

#[tokio::test(start_paused = true)]
async fn create_retries_while_the_name_is_being_deleted_then_succeeds() {
    let rule = mock::created_after_deleting(3);
    let started = tokio::time::Instant::now();
    let info = store(&[&rule])
        .create(NAME, VALUE, &BTreeMap::new())
        .await
        .expect("created on the fourth attempt");
    let waited = started.elapsed();
    assert_eq!(rule.num_calls(), 4);
    assert_eq!(info.version, 1);
    // 0.5 + 1 + 2 = 3.5 s, each ±25 %.
    assert!(
        waited >= Duration::from_millis(2_625) && waited <= Duration::from_millis(4_375),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn create_gives_up_after_60_seconds_of_deletion() {
    let rule = mock::always_deleting();
    let started = tokio::time::Instant::now();
    let err = store(&[&rule])
        .create(NAME, VALUE, &BTreeMap::new())
        .await
        .unwrap_err();
    let waited = started.elapsed();
    // 0.5, 1, 2, 4, 8, 8, ... (±25 %) while the sum stays within 60 s.
    assert!(waited <= Duration::from_secs(60), "{waited:?}");
    assert!(waited >= Duration::from_secs(45), "{waited:?}");
    assert!(rule.num_calls() >= 8, "{}", rule.num_calls());
    assert_eq!(
        err.meta().attempts(),
        u32::try_from(rule.num_calls()).unwrap()
    );
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("a secret of that name was still being deleted after ")
            && message.ends_with(
                " ms of retries; wait a minute and create it again, or choose another name"
            ),
        "{message}"
    );
    no_leak(&err);
}

/// Any other refusal of CreateSecret is not retried.
#[tokio::test(start_paused = true)]
async fn other_invalid_requests_are_not_retried() {
    let rule = mock::create_always_failing(400, "InvalidRequestException");
    let err = store(&[&rule])
        .create("x", VALUE, &BTreeMap::new())
        .await
        .unwrap_err();
    assert_eq!(rule.num_calls(), 1);
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    no_leak(&err);
}
