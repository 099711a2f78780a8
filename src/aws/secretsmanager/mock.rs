//! Secrets Manager answers a local moto server cannot produce
//! (AccessDenied, Throttling, LimitExceeded, a name still being deleted),
//! served by a canned HTTP client: each answer is a real HTTP response
//! (status, `__type` and an AWS message naming the secret, or a JSON
//! output) that the AWS SDK deserializes as it would AWS's own, so the
//! code path from the wire to the `SandboxError` is the production one.
//! The secrets feature's tests (`secrets/mock_tests.rs`) pin what those
//! answers become; the AWS types stay here, at the edge.
//!
//! Hand-written rather than aws-smithy-mocks: that crate turns on
//! aws-smithy-http-client's `test-util`, about twenty crates that every
//! build of an example paid for before its first AWS client (issue 40's
//! first build). The client needs only the HTTP connector trait the SDK
//! already compiles.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_secretsmanager as sm;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use base64::Engine as _;
use sm::config::retry::RetryConfig;

use super::SecretsManager;

/// The secret name every mock answer quotes (a canary: no error may
/// repeat it).
pub(crate) const NAME: &str = "canary-name-mock";
/// The secret value the mock answers quote (a canary too).
pub(crate) const VALUE: &str = "canary-value-mock";

/// One HTTP answer: status and JSON body.
type Answer = (u16, String);

/// The answers one operation gets, in order; the last repeats when
/// `repeat_last`. Clones share the count of calls served.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    /// The operation's API name, as in `X-Amz-Target: secretsmanager.<name>`.
    operation: &'static str,
    answers: Vec<Answer>,
    repeat_last: bool,
    served: Arc<AtomicUsize>,
}

impl Rule {
    fn new(operation: &'static str, answers: Vec<Answer>, repeat_last: bool) -> Self {
        Self {
            operation,
            answers,
            repeat_last,
            served: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many requests this rule answered.
    pub(crate) fn num_calls(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// The next answer, or `None` once the rule is used up.
    fn next(&self) -> Option<Answer> {
        let n = self.served.load(Ordering::SeqCst);
        let answer = match self.answers.get(n) {
            Some(answer) => answer.clone(),
            None if self.repeat_last => self.answers.last()?.clone(),
            None => return None,
        };
        self.served.fetch_add(1, Ordering::SeqCst);
        Some(answer)
    }
}

/// An HTTP client answering from rules in order: a request goes to the
/// first rule for its operation that is not used up; a request no rule
/// answers fails the test.
#[derive(Clone, Debug)]
struct Canned {
    rules: Arc<Mutex<Vec<Rule>>>,
}

impl HttpConnector for Canned {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let target = request
            .headers()
            .get("x-amz-target")
            .unwrap_or_default()
            .to_owned();
        let operation = target.strip_prefix("secretsmanager.").unwrap_or(&target);
        let answer = self
            .rules
            .lock()
            .unwrap()
            .iter()
            .filter(|rule| rule.operation == operation)
            .find_map(Rule::next);
        let Some((status, body)) = answer else {
            panic!("no mock answer left for {target}");
        };
        let mut response =
            Response::new(StatusCode::try_from(status).unwrap(), SdkBody::from(body));
        response
            .headers_mut()
            .insert("content-type", "application/x-amz-json-1.1");
        response
            .headers_mut()
            .insert("x-amzn-requestid", "11111111-2222-3333-4444-555555555555");
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for Canned {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// An AWS error answer: `status`, `__type` `code`, and a message that
/// names the secret (as AWS's do).
fn error(status: u16, code: &str) -> Answer {
    (
        status,
        format!(
            r#"{{"__type":"{code}","message":"Secrets Manager can't find rayito/{NAME} (value {VALUE})"}}"#
        ),
    )
}

/// A client that answers with `rules`, in order, one attempt per call.
pub(crate) fn manager(rules: &[&Rule]) -> SecretsManager {
    let canned = Canned {
        rules: Arc::new(Mutex::new(
            rules.iter().map(|rule| (*rule).clone()).collect(),
        )),
    };
    let config = sm::Config::builder()
        .behavior_version(sm::config::BehaviorVersion::latest())
        .region(sm::config::Region::new("us-east-1"))
        .credentials_provider(sm::config::Credentials::new(
            "AKIDMOCK", "mock", None, None, "mock",
        ))
        .http_client(canned)
        // One attempt per call: the table sees each answer once.
        .retry_config(RetryConfig::disabled())
        .build();
    SecretsManager::from_sdk(sm::Client::from_conf(config))
}

/// The call `call` (its API name) answered with the error `code` at
/// `status`.
pub(crate) fn failing(call: &str, status: u16, code: &'static str) -> Rule {
    let operation = match call {
        "GetSecretValue" => "GetSecretValue",
        "CreateSecret" => "CreateSecret",
        "PutSecretValue" => "PutSecretValue",
        "DescribeSecret" => "DescribeSecret",
        other => panic!("no mock for {other}"),
    };
    Rule::new(operation, vec![error(status, code)], false)
}

/// DescribeSecret answering a secret `rayito/x`.
pub(crate) fn described() -> Rule {
    let body = r#"{"ARN":"arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf","Name":"rayito/x"}"#;
    Rule::new("DescribeSecret", vec![(200, body.to_owned())], false)
}

/// GetSecretValue answering a secret with binary data only.
pub(crate) fn binary_secret() -> Rule {
    let data = base64::engine::general_purpose::STANDARD.encode(VALUE);
    let body = format!(r#"{{"SecretBinary":"{data}"}}"#);
    Rule::new("GetSecretValue", vec![(200, body)], false)
}

/// AWS's answer to a CreateSecret while a secret of that name is still
/// being deleted. moto 5.2.5 never gives it: its CreateSecret on a name
/// scheduled for deletion answers ResourceExistsException (or returns the
/// old secret for the same token and value), and its forced delete is
/// immediate, so this path is a mock.
fn deleting() -> Answer {
    (
        400,
        r#"{"__type":"InvalidRequestException","message":"You can't create this secret because a secret with this name is already scheduled for deletion."}"#
            .to_owned(),
    )
}

/// CreateSecret answering "still being deleted" `times` times, then
/// creating.
pub(crate) fn created_after_deleting(times: usize) -> Rule {
    let mut answers = vec![deleting(); times];
    answers.push((
        200,
        r#"{"ARN":"arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf"}"#
            .to_owned(),
    ));
    Rule::new("CreateSecret", answers, false)
}

/// CreateSecret answering "still being deleted" every time.
pub(crate) fn always_deleting() -> Rule {
    Rule::new("CreateSecret", vec![deleting()], true)
}

/// CreateSecret answering the error `code` every time.
pub(crate) fn create_always_failing(status: u16, code: &'static str) -> Rule {
    Rule::new("CreateSecret", vec![error(status, code)], true)
}

/// GetSecretValue answering the string `values` in order (the last one
/// repeats): a secret read, then rotated.
pub(crate) fn secret_strings(values: &[&str]) -> Rule {
    let answers = values
        .iter()
        .map(|value| {
            let body = serde_json::json!({
                "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/x-AbCdEf",
                "Name": "rayito/x",
                "VersionId": "00000000-0000-0000-0000-000000000001",
                "SecretString": value,
            });
            (200, body.to_string())
        })
        .collect();
    Rule::new("GetSecretValue", answers, true)
}
