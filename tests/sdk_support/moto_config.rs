//! The AWS SDK configuration of the SDK tests that talk to moto (kept out
//! of `moto.rs`, which the CLI's tests include without the AWS crates).

/// An AWS SDK configuration for a test endpoint (moto, a proxy in front
/// of it, or a dead port): region `us-east-1` and dummy credentials with
/// `access_key_id` (a test whose cache is keyed by the credentials
/// identity passes its own).
pub fn sdk_config(endpoint: &str, access_key_id: &str) -> aws_types::SdkConfig {
    aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            aws_sdk_s3::config::Credentials::new(access_key_id, "dummy", None, None, "test"),
        ))
        .endpoint_url(endpoint)
        .build()
}
