//! The real `aws-sdk-s3` client against an emulator's S3 endpoint, as the
//! agent's tests and benchmarks use it: path style, region `us-east-1`,
//! signed with the emulator's key (or another), retries off so that a
//! refusal shows at once; and the same endpoint and key as an agent's
//! persistence access. Included by `emulator_support` and, by path, by
//! `examples/persist_bench.rs`.
#![allow(dead_code)]

use aws_sdk_s3 as s3;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use rayito_agent::persist::{LocalS3, PersistenceAccess};
use rayito_emulator::{AccessKey, Emulator};

/// A client of `emu`'s S3 endpoint signing with `emu`'s access key.
pub fn client(emu: &Emulator) -> s3::Client {
    client_with(emu, emu.access_key())
}

/// A client of `emu`'s S3 endpoint signing with `key` (its session token
/// too, when it has one).
pub fn client_with(emu: &Emulator, key: &AccessKey) -> s3::Client {
    let conf = s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            &key.id,
            &key.secret,
            key.session_token.clone(),
            None,
            "test",
        ))
        .endpoint_url(emu.s3_endpoint_url())
        .force_path_style(true)
        .retry_config(RetryConfig::disabled())
        .build();
    s3::Client::from_conf(conf)
}

/// The persistence access an emulator's sandbox gets: its S3 endpoint and
/// key (`AgentConfig::persistence` of an agent the test starts itself).
pub fn persistence_access(emu: &Emulator) -> PersistenceAccess {
    let key = emu.access_key();
    PersistenceAccess::Local(Some(LocalS3 {
        endpoint_url: emu.s3_endpoint_url(),
        region: "us-east-1".into(),
        access_key_id: key.id.clone(),
        secret_access_key: key.secret.clone(),
        session_token: key.session_token.clone(),
    }))
}
