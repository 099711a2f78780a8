//! Secrets Manager answers a local moto server cannot produce
//! (AccessDenied, Throttling, LimitExceeded, a name still being deleted),
//! through aws-smithy-mocks: each answer is a real HTTP error response
//! (status, `__type` and an AWS message naming the secret) that the AWS
//! SDK deserializes as it would AWS's own, so the code path from the wire
//! to the `SandboxError` is the production one. The table pins variant,
//! fields and message; the AWS message (with the name in it) never
//! survives.
//!
//! Here and not in `tests/`: the store and the cache take no AWS client
//! type in their public API, and the mocks need one (an interceptor on the
//! service config), so these tests use the crate-private `with_client`.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_secretsmanager as sm;
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, create_mock_http_client, mock};
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use sm::config::retry::RetryConfig;

use super::SecretsManager;
use crate::ErrorKind;
use crate::error::SandboxError;
use crate::secrets::{SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions};

const NAME: &str = "canary-name-mock";
const VALUE: &str = "canary-value-mock";

/// An AWS error answer: `status`, `__type` `code`, and a message that
/// names the secret (as AWS's do).
fn answer(
    status: u16,
    code: &'static str,
) -> impl Fn() -> Response<SdkBody> + Send + Sync + 'static {
    move || {
        let body = format!(
            r#"{{"__type":"{code}","message":"Secrets Manager can't find rayito/{NAME} (value {VALUE})"}}"#
        );
        let mut response =
            Response::new(StatusCode::try_from(status).unwrap(), SdkBody::from(body));
        response
            .headers_mut()
            .insert("x-amzn-requestid", "11111111-2222-3333-4444-555555555555");
        response
    }
}

fn client(rules: &[&Rule]) -> sm::Client {
    let mut interceptor = MockResponseInterceptor::new().rule_mode(RuleMode::Sequential);
    for rule in rules {
        interceptor = interceptor.with_rule(rule);
    }
    let config = sm::Config::builder()
        .behavior_version(sm::config::BehaviorVersion::latest())
        .region(sm::config::Region::new("us-east-1"))
        .credentials_provider(sm::config::Credentials::new(
            "AKIDMOCK", "mock", None, None, "mock",
        ))
        .http_client(create_mock_http_client())
        .interceptor(interceptor)
        // One attempt per call: the table sees each answer once.
        .retry_config(RetryConfig::disabled())
        .build();
    sm::Client::from_conf(config)
}

fn cache(rules: &[&Rule]) -> SecretCache {
    SecretCache::with_client(
        SecretCacheOptions::new(),
        SecretsManager::from_sdk(client(rules)),
    )
    .unwrap()
}

fn store(rules: &[&Rule]) -> SecretStore {
    SecretStore::with_client(
        SecretStoreOptions::new(),
        SecretsManager::from_sdk(client(rules)),
    )
    .unwrap()
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
    let respond = answer(row.status, row.code);
    match row.call {
        "GetSecretValue" => {
            let rule = mock!(sm::Client::get_secret_value).then_http_response(respond);
            cache(&[&rule])
                .get(&SecretRef::from(NAME))
                .await
                .unwrap_err()
        }
        "CreateSecret" => {
            let rule = mock!(sm::Client::create_secret).then_http_response(respond);
            store(&[&rule])
                .create(NAME, VALUE, &BTreeMap::new())
                .await
                .unwrap_err()
        }
        "PutSecretValue" => {
            let describe = mock!(sm::Client::describe_secret).then_output(|| {
                sm::operation::describe_secret::DescribeSecretOutput::builder()
                    .arn("arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf")
                    .name("rayito/x")
                    .build()
            });
            let put = mock!(sm::Client::put_secret_value).then_http_response(respond);
            store(&[&describe, &put])
                .update(NAME, VALUE, None)
                .await
                .unwrap_err()
        }
        "DescribeSecret" => {
            let rule = mock!(sm::Client::describe_secret).then_http_response(respond);
            store(&[&rule]).get_info(NAME).await.unwrap_err()
        }
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
    let rule = mock!(sm::Client::get_secret_value)
        .then_http_response(answer(400, "ResourceNotFoundException"));
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
    let binary = mock!(sm::Client::get_secret_value).then_output(|| {
        sm::operation::get_secret_value::GetSecretValueOutput::builder()
            .secret_binary(sm::primitives::Blob::new(VALUE.as_bytes()))
            .build()
    });
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

/// AWS's answer to a CreateSecret while a secret of that name is still
/// being deleted. moto 5.2.5 never gives it: its CreateSecret on a name
/// scheduled for deletion answers ResourceExistsException (or returns the
/// old secret for the same token and value), and its forced delete is
/// immediate, so this path is a mock.
fn deleting() -> impl Fn() -> Response<SdkBody> + Send + Sync + 'static {
    || {
        Response::new(
            StatusCode::try_from(400).unwrap(),
            SdkBody::from(
                r#"{"__type":"InvalidRequestException","message":"You can't create this secret because a secret with this name is already scheduled for deletion."}"#,
            ),
        )
    }
}

#[tokio::test(start_paused = true)]
async fn create_retries_while_the_name_is_being_deleted_then_succeeds() {
    let rule = mock!(sm::Client::create_secret)
        .sequence()
        .http_response(deleting())
        .times(3)
        .output(|| {
            sm::operation::create_secret::CreateSecretOutput::builder()
                .arn("arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf")
                .build()
        })
        .build();
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
    let rule = mock!(sm::Client::create_secret)
        .sequence()
        .http_response(deleting())
        .repeatedly()
        .build();
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
    let rule = mock!(sm::Client::create_secret)
        .sequence()
        .http_response(answer(400, "InvalidRequestException"))
        .repeatedly()
        .build();
    let err = store(&[&rule])
        .create("x", VALUE, &BTreeMap::new())
        .await
        .unwrap_err();
    assert_eq!(rule.num_calls(), 1);
    assert_eq!(err.kind(), ErrorKind::Secret, "{err}");
    no_leak(&err);
}
