//! The stack key read on AWS, against moto's Secrets Manager: the key as
//! the stack's secret holds it, a string (what the template's
//! `GenerateSecretString` writes) or binary (a key put by another tool;
//! the reference reads both), found through the stack's
//! `StackKeySecretArn` output; a secret without a value refused with the
//! `events.aws` message, the key in no message.

use std::collections::BTreeMap;

use base64::Engine as _;

use super::super::moto::MotoServer;
use super::super::types::EventsStack;
use super::{Aws, AwsTarget, KEY_OUTPUT};
use crate::error::SandboxError;
use crate::secret::Secret;

/// Creates `name` in moto's Secrets Manager with `value` (a JSON member:
/// `SecretString`, `SecretBinary` or none) and answers its ARN. Sent as
/// raw JSON so that the binary form needs no client the SDK lacks.
fn create_secret(moto: &MotoServer, name: &str, value: Option<(&str, String)>) -> String {
    let mut body = serde_json::json!({ "Name": name });
    if let Some((member, text)) = value {
        body[member] = serde_json::Value::String(text);
    }
    let (status, answer) = super::super::moto::http_post(
        moto.port(),
        "/",
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDEVENTSKEY/20260101/us-east-1/secretsmanager/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("X-Amz-Target", "secretsmanager.CreateSecret"),
            ("Content-Type", "application/x-amz-json-1.1"),
        ],
        body.to_string().as_bytes(),
    )
    .expect("moto's Secrets Manager answers");
    assert_eq!(status, 200, "CreateSecret {name}: {answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    answer["ARN"].as_str().expect("an ARN").to_owned()
}

/// An `Aws` on moto whose stack outputs name `arn` as the key secret, as
/// `status()` keeps them.
async fn aws_with_key(moto: &MotoServer, arn: &str) -> Aws {
    let settings = crate::aws::config::AwsSettings {
        region: Some("us-east-1".to_owned()),
        endpoint_url: Some(moto.endpoint_url()),
        static_credentials: Some(("AKIDEVENTSKEY".to_owned(), Secret::new("moto".to_owned()))),
        ..Default::default()
    };
    let (config, _) = crate::aws::config::load(&settings).await.expect("config");
    let aws = Aws::new(
        AwsTarget {
            region: Some("us-east-1".to_owned()),
            endpoint_url: Some(moto.endpoint_url()),
            sdk_config: Some(config),
        },
        "sdk-events-key".to_owned(),
    );
    aws.remember(&EventsStack {
        stack_name: "sdk-events-key".to_owned(),
        status: "CREATE_COMPLETE".to_owned(),
        outputs: BTreeMap::from([(KEY_OUTPUT.to_owned(), arn.to_owned())]),
    });
    aws
}

#[tokio::test]
async fn the_stack_key_is_read_as_a_string_or_as_binary() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };

    // As the template writes it: 32 alphanumerics in SecretString.
    let text = "k3yCanaryAbCdEfGhIjKlMnOpQrStUv12";
    let arn = create_secret(&moto, "key-string", Some(("SecretString", text.to_owned())));
    let key = aws_with_key(&moto, &arn)
        .await
        .stack_key()
        .await
        .expect("the string key");
    assert_eq!(key, text.as_bytes());

    // Binary, bytes no string could hold.
    let bytes: Vec<u8> = (0..=255u8).rev().step_by(7).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let arn = create_secret(&moto, "key-binary", Some(("SecretBinary", encoded)));
    let key = aws_with_key(&moto, &arn)
        .await
        .stack_key()
        .await
        .expect("the binary key");
    assert_eq!(key, bytes);

    // A secret with no value yet: Secrets Manager has no AWSCURRENT
    // version to answer, the caller is told which call failed and how.
    let arn = create_secret(&moto, "key-empty", None);
    let err = aws_with_key(&moto, &arn)
        .await
        .stack_key()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Webhook { aws_code: Some(code), .. } if code == "ResourceNotFoundException"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "lifecycle events stack_key: AWS answered ResourceNotFoundException; check the caller's IAM policy (the stack's Events*Policy outputs)"
    );
    assert!(!format!("{err:?}").contains("k3yCanary"));
}
