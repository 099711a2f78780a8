//! STS GetCallerIdentity on the emulator's control-plane port, through the
//! real `aws-sdk-sts` client: the account an image name resolves in (and
//! S3's expected bucket owner) for a client on the AWS path.

use aws_sdk_sts as sts;
use rayito_emulator::{Emulator, EmulatorConfig};
use sts::config::retry::RetryConfig;
use sts::config::{BehaviorVersion, Credentials, Region};

fn client(emu: &Emulator, secret: &str) -> sts::Client {
    let conf = sts::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            &emu.access_key().id,
            secret,
            None,
            None,
            "test",
        ))
        .endpoint_url(emu.endpoint_url())
        .retry_config(RetryConfig::disabled())
        .build();
    sts::Client::from_conf(conf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_caller_identity_answers_the_emulators_account_to_a_signed_call_only() {
    let emu = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let out = client(&emu, &emu.access_key().secret)
        .get_caller_identity()
        .send()
        .await
        .expect("a signed call");
    assert_eq!(out.account(), Some(emu.account_id()));
    assert_eq!(
        out.arn(),
        Some(format!("arn:aws:iam::{}:user/rayito-emulator", emu.account_id()).as_str())
    );
    let err = client(&emu, "not-the-secret")
        .get_caller_identity()
        .send()
        .await
        .expect_err("a wrong signature");
    let status = err.raw_response().map(|r| r.status().as_u16());
    assert_eq!(status, Some(403), "{err:?}");
    emu.shutdown().await;
}
