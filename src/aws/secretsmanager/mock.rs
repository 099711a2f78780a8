//! Secrets Manager answers a local moto server cannot produce
//! (AccessDenied, Throttling, LimitExceeded, a name still being deleted),
//! through aws-smithy-mocks: each answer is a real HTTP error response
//! (status, `__type` and an AWS message naming the secret) that the AWS
//! SDK deserializes as it would AWS's own, so the code path from the wire
//! to the `SandboxError` is the production one. The secrets feature's
//! tests (`secrets/mock_tests.rs`) pin what those answers become; the
//! AWS types stay here, at the edge.

use aws_sdk_secretsmanager as sm;
pub(crate) use aws_smithy_mocks::Rule;
use aws_smithy_mocks::{MockResponseInterceptor, RuleMode, create_mock_http_client, mock};
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use sm::config::retry::RetryConfig;

use super::SecretsManager;

/// The secret name every mock answer quotes (a canary: no error may
/// repeat it).
pub(crate) const NAME: &str = "canary-name-mock";
/// The secret value the mock answers quote (a canary too).
pub(crate) const VALUE: &str = "canary-value-mock";

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

/// A client that answers with `rules`, in order, one attempt per call.
pub(crate) fn manager(rules: &[&Rule]) -> SecretsManager {
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
    SecretsManager::from_sdk(sm::Client::from_conf(config))
}

/// The call `call` (its API name) answered with the error `code` at
/// `status`.
pub(crate) fn failing(call: &str, status: u16, code: &'static str) -> Rule {
    let respond = answer(status, code);
    match call {
        "GetSecretValue" => mock!(sm::Client::get_secret_value).then_http_response(respond),
        "CreateSecret" => mock!(sm::Client::create_secret).then_http_response(respond),
        "PutSecretValue" => mock!(sm::Client::put_secret_value).then_http_response(respond),
        "DescribeSecret" => mock!(sm::Client::describe_secret).then_http_response(respond),
        other => panic!("no mock for {other}"),
    }
}

/// DescribeSecret answering a secret `rayito/x`.
pub(crate) fn described() -> Rule {
    mock!(sm::Client::describe_secret).then_output(|| {
        sm::operation::describe_secret::DescribeSecretOutput::builder()
            .arn("arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf")
            .name("rayito/x")
            .build()
    })
}

/// GetSecretValue answering a secret with binary data only.
pub(crate) fn binary_secret() -> Rule {
    mock!(sm::Client::get_secret_value).then_output(|| {
        sm::operation::get_secret_value::GetSecretValueOutput::builder()
            .secret_binary(sm::primitives::Blob::new(VALUE.as_bytes()))
            .build()
    })
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

/// CreateSecret answering "still being deleted" `times` times, then
/// creating.
pub(crate) fn created_after_deleting(times: usize) -> Rule {
    mock!(sm::Client::create_secret)
        .sequence()
        .http_response(deleting())
        .times(times)
        .output(|| {
            sm::operation::create_secret::CreateSecretOutput::builder()
                .arn("arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf")
                .build()
        })
        .build()
}

/// CreateSecret answering "still being deleted" every time.
pub(crate) fn always_deleting() -> Rule {
    mock!(sm::Client::create_secret)
        .sequence()
        .http_response(deleting())
        .repeatedly()
        .build()
}

/// CreateSecret answering the error `code` every time.
pub(crate) fn create_always_failing(status: u16, code: &'static str) -> Rule {
    mock!(sm::Client::create_secret)
        .sequence()
        .http_response(answer(status, code))
        .repeatedly()
        .build()
}
