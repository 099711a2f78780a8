//! What the tests that put moto beside an emulator share: S3 clients, and
//! moto seeded with an artifact bucket and the emulator's `rayito-base`
//! artifact (so that a template build reads its base from moto).

use aws_sdk_s3 as s3;
use rayito_emulator::{AccessKey, Emulator};

/// The artifact bucket made in moto.
pub const BUCKET: &str = "rayito-moto-artifacts";

/// An S3 client for `endpoint`, path style, signing with `key`.
pub fn s3_client(endpoint: &str, key: &AccessKey) -> s3::Client {
    let config = s3::Config::builder()
        .behavior_version(s3::config::BehaviorVersion::latest())
        .region(s3::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(s3::config::Credentials::new(
            key.id.clone(),
            key.secret.clone(),
            key.session_token.clone(),
            None,
            "test",
        ))
        .build();
    s3::Client::from_conf(config)
}

pub use super::images::microvms;

/// The code artifact URI of `image` version `version` on `emu`.
pub async fn artifact_uri(emu: &Emulator, image: &str, version: &str) -> String {
    let v = microvms(emu)
        .await
        .get_microvm_image_version()
        .image_identifier(image)
        .image_version(version)
        .send()
        .await
        .expect("the version exists");
    v.code_artifact
        .as_ref()
        .and_then(|a| a.as_uri().ok())
        .cloned()
        .expect("an s3 uri")
}

/// Makes `BUCKET` in moto and copies the emulator's `rayito-base`
/// artifact there (same bucket and key), so that a template build reads
/// its base from moto.
pub async fn seed_moto(moto_s3: &s3::Client, emu: &Emulator) {
    moto_s3
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("a bucket in moto");
    let uri = artifact_uri(emu, "rayito-base", "1").await;
    let (bucket, key) = uri
        .strip_prefix("s3://")
        .and_then(|r| r.split_once('/'))
        .unwrap();
    let zip = emu
        .get_object_directly(bucket, key)
        .await
        .unwrap()
        .expect("the seeded base artifact");
    moto_s3
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .expect("the base artifact's bucket in moto");
    moto_s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(zip.into())
        .send()
        .await
        .expect("the base artifact in moto");
}
