//! `AwsOptions::from_sdk_config`: an AWS configuration the caller loaded
//! is what every service client of the SDK is made from. A configuration
//! whose endpoint is the MicroVMs emulator creates and kills a sandbox
//! there; one whose endpoint is moto creates a DynamoDB table there (no
//! AWS credentials or region exist in the tests' environment, so nothing
//! else could have answered).

use crate::sdk_support;

use std::time::Duration;

use rayito::{AwsOptions, Sandbox, SandboxError, SandboxIndex};
use sdk_support::moto::MotoServer;

/// A loaded configuration for `endpoint`: region, static credentials,
/// the endpoint override.
fn loaded(endpoint: &str, key_id: &str, secret: &str) -> aws_types::SdkConfig {
    aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            aws_sdk_s3::config::Credentials::new(key_id, secret, None, None, "test"),
        ))
        .endpoint_url(endpoint)
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_config_reaches_the_control_plane_at_its_endpoint() {
    let emulator = sdk_support::emulator().await;
    let key = emulator.access_key();
    let config = loaded(&emulator.endpoint_url(), &key.id, &key.secret);
    let sandbox = Sandbox::builder()
        .aws(AwsOptions::from_sdk_config(config))
        .template(emulator.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("created through the loaded configuration");
    assert!(sandbox.is_running().await);
    sandbox.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_config_reaches_dynamodb_at_its_endpoint() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let options = AwsOptions::new().sdk_config(loaded(
        &moto.endpoint_url(),
        "AKIDCONFIGTEST",
        "config-test-secret",
    ));
    let index = SandboxIndex::dynamodb("loaded-config").aws(options);
    index.create_table().await.expect("the table made in moto");
    // It exists there now: a second creation is DynamoDB's refusal.
    let err = index.create_table().await.unwrap_err();
    assert!(
        matches!(&err, SandboxError::SandboxIndex { aws_code: Some(code), .. } if code.contains("ResourceInUse")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_profile_beside_a_loaded_config_is_refused() {
    let options = AwsOptions::from_sdk_config(loaded("http://127.0.0.1:9", "AKID", "secret"))
        .profile("elsewhere");
    let err = Sandbox::builder()
        .aws(options)
        .template("arn:aws:lambda:us-east-1:000000000000:microvm-image:x")
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "profile"),
        "{err:?}"
    );
}
