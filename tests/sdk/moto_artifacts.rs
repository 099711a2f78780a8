//! The SDK's artifact store against moto's S3, not only our emulator's:
//! template builds and image publishes whose S3 endpoint is a moto server
//! (`AwsOptions::s3_endpoint_url`) while the MicroVMs API and STS are an
//! emulator's. Upload when absent, skip when present (HeadObject), 403 on
//! HeadObject counted as absent (moto enforcing IAM: no `s3:GetObject` on
//! the key), a denied PutObject and a missing bucket mapped, and the
//! expected bucket owner (moto 5 ignores `ExpectedBucketOwner` on objects,
//! so the mismatch is produced with two emulators: the account STS names
//! is not the one owning the S3 endpoint's bucket).
//!
//! The emulator's builds of these versions fail at once (the artifact is
//! in moto, not in the emulator's store): what is tested is everything up
//! to the submission.

use crate::sdk_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3 as s3;
use rayito::template::{Arch, BuildEvent, BuildOptions, PublishOptions, Template, pack_base_image};
use rayito::{AwsOptions, Client, SandboxError};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig, Operation};
use sdk_support::moto::{MotoServer, xml_text};
use sdk_support::moto_seed::{BUCKET, artifact_uri, s3_client, seed_moto};

/// moto's account: a bucket created there belongs to it.
const MOTO_ACCOUNT: &str = "123456789012";

/// An emulator in `account` accepting `keys`.
async fn emulator(account: &str, keys: Vec<AccessKey>) -> Emulator {
    Emulator::start(EmulatorConfig {
        account_id: account.to_owned(),
        access_keys: keys,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts")
}

/// AWS options: the MicroVMs API and STS on `emu`, S3 on `s3_endpoint`,
/// signing with `key`.
fn aws(emu: &Emulator, s3_endpoint: &str, key: &AccessKey) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(emu.endpoint_url())
        .s3_endpoint_url(s3_endpoint)
        .region("us-east-1")
        .static_credentials(key.id.clone(), key.secret.clone())
}

async fn client(options: AwsOptions) -> Client {
    Client::builder()
        .aws(options)
        .build()
        .await
        .expect("a client on the AWS path")
}

/// Build options for `BUCKET` in moto, recording the upload events.
fn options(dir: &std::path::Path, uploads: &Arc<Mutex<Vec<bool>>>) -> BuildOptions {
    let seen = uploads.clone();
    BuildOptions {
        bucket: Some(BUCKET.to_owned()),
        context_dir: Some(dir.to_path_buf()),
        poll_interval: Some(Duration::from_millis(50)),
        ..BuildOptions::default()
    }
    .on_event(move |event| {
        if let BuildEvent::Uploaded(uploaded) = event {
            seen.lock().unwrap().push(*uploaded);
        }
    })
}

/// The keys under `prefix` in moto's `BUCKET`.
async fn keys(moto_s3: &s3::Client, prefix: &str) -> Vec<String> {
    let out = moto_s3
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix(prefix)
        .send()
        .await
        .expect("moto lists the bucket");
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// `sha256(bytes)` in lower-case hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Starts moto on the test's own thread (the one `#[tokio::test]` blocks
/// on, not a runtime worker), so that a skip line names the test.
fn start_moto() -> Option<MotoServer> {
    MotoServer::start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_artifact_is_uploaded_to_moto_when_absent_and_skipped_when_present() {
    let Some(moto) = start_moto() else {
        return;
    };
    let key = AccessKey::generate();
    let emu = emulator(MOTO_ACCOUNT, vec![key.clone()]).await;
    let moto_s3 = s3_client(&moto.endpoint_url(), &key);
    seed_moto(&moto_s3, &emu).await;
    let client = client(aws(&emu, &moto.endpoint_url(), &key)).await;
    let dir = tempfile::tempdir().unwrap();
    let template = Template::new().run_cmd("echo moto > /opt/moto");
    let uploads = Arc::new(Mutex::new(Vec::new()));

    let first = client
        .templates()
        .build_in_background(&template, "moto-upload", options(dir.path(), &uploads))
        .await
        .expect("the first build is submitted");
    assert_eq!(first.version, "1");
    assert_eq!(*uploads.lock().unwrap(), [true], "absent: uploaded");
    let uri = artifact_uri(&emu, "moto-upload", "1").await;
    let key_in_moto = uri
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .unwrap_or_else(|| panic!("the artifact is in the option's bucket: {uri}"))
        .to_owned();
    let object = moto_s3
        .get_object()
        .bucket(BUCKET)
        .key(&key_in_moto)
        .send()
        .await
        .expect("the artifact is in moto")
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert!(object.starts_with(b"PK\x03\x04"), "a zip");
    assert_eq!(
        key_in_moto,
        format!("rayito/templates/{}.zip", sha256_hex(&object)),
        "content-addressed (spec 2.3)"
    );
    assert_eq!(
        emu.get_object_directly(BUCKET, &key_in_moto)
            .await
            .ok()
            .flatten(),
        None,
        "nothing went to the emulator's store"
    );

    // The same template again: HeadObject finds it, nothing is uploaded;
    // the first version failed (its artifact is not in the emulator's
    // store), so this one is built again from the same key.
    let second = client
        .templates()
        .build_in_background(&template, "moto-upload", options(dir.path(), &uploads))
        .await
        .expect("the second build is submitted");
    assert_eq!(second.version, "2");
    assert_eq!(*uploads.lock().unwrap(), [true, false], "present: skipped");
    assert_eq!(artifact_uri(&emu, "moto-upload", "2").await, uri);
    assert_eq!(keys(&moto_s3, "rayito/templates/").await, [key_in_moto]);
    assert_eq!(emu.calls(Operation::CreateMicrovmImage), 1);
    assert_eq!(emu.calls(Operation::UpdateMicrovmImage), 1);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_object_403_counts_as_absent_and_a_denied_put_object_is_an_authentication_error() {
    let Some(moto) = start_moto() else {
        return;
    };
    // Two IAM users of moto: both may read the base image's artifacts and
    // neither may read templates' (HeadObject there is 403, as on S3
    // without s3:ListBucket); only `writer` may put them.
    let mut users = Vec::new();
    for (user, may_put) in [("writer", true), ("reader", false)] {
        moto.iam("CreateUser", &[("UserName", user)]);
        let mut statements = vec![format!(
            r#"{{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::{BUCKET}/rayito/images/*"}}"#
        )];
        statements.push(
            r#"{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::rayito-artifacts-123456789012-us-east-1/rayito/images/*"}"#
                .to_owned(),
        );
        if may_put {
            statements.push(format!(
                r#"{{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::{BUCKET}/rayito/templates/*"}}"#
            ));
        }
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{}]}}"#,
            statements.join(",")
        );
        moto.iam(
            "PutUserPolicy",
            &[
                ("UserName", user),
                ("PolicyName", "artifacts"),
                ("PolicyDocument", &policy),
            ],
        );
        let answer = moto.iam("CreateAccessKey", &[("UserName", user)]);
        users.push(AccessKey::new(
            xml_text(&answer, "AccessKeyId").expect("an access key id"),
            xml_text(&answer, "SecretAccessKey").expect("a secret"),
        ));
    }
    let (writer, reader) = (users[0].clone(), users[1].clone());
    let emu = emulator(MOTO_ACCOUNT, users.clone()).await;
    let moto_s3 = s3_client(&moto.endpoint_url(), &writer);
    seed_moto(&moto_s3, &emu).await;
    moto.enforce_auth();

    let dir = tempfile::tempdir().unwrap();
    let uploads = Arc::new(Mutex::new(Vec::new()));
    let writes = client(aws(&emu, &moto.endpoint_url(), &writer)).await;
    let template = Template::new().run_cmd("echo denied-head > /opt/moto");
    writes
        .templates()
        .build_in_background(&template, "moto-403", options(dir.path(), &uploads))
        .await
        .expect("HeadObject's 403 is absence; the put is allowed");
    assert_eq!(*uploads.lock().unwrap(), [true]);

    // The reader's HeadObject is 403 too (absent), and its PutObject is
    // the real denial: an authentication error naming the operation.
    let reads = client(aws(&emu, &moto.endpoint_url(), &reader)).await;
    let other = Template::new().run_cmd("echo denied-put > /opt/moto");
    let err = reads
        .templates()
        .build_in_background(&other, "moto-403-put", options(dir.path(), &uploads))
        .await
        .expect_err("the reader may not put");
    assert!(
        matches!(err, SandboxError::Authentication { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "control plane call PutObject refused the AWS credentials (AccessDenied): \
         Access Denied; check the credentials, their expiry and their IAM permissions"
    );
    assert_eq!(*uploads.lock().unwrap(), [true], "no upload event");

    moto.relax_auth();
    assert_eq!(
        keys(&moto_s3, "rayito/templates/").await.len(),
        1,
        "only the writer's artifact"
    );
    assert_eq!(
        emu.calls(Operation::CreateMicrovmImage),
        1,
        "the reader submitted nothing"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_in_moto_is_mapped_and_nothing_is_submitted() {
    let Some(moto) = start_moto() else {
        return;
    };
    let key = AccessKey::generate();
    let emu = emulator(MOTO_ACCOUNT, vec![key.clone()]).await;
    let moto_s3 = s3_client(&moto.endpoint_url(), &key);
    seed_moto(&moto_s3, &emu).await;
    let client = client(aws(&emu, &moto.endpoint_url(), &key)).await;
    let dir = tempfile::tempdir().unwrap();
    let uploads = Arc::new(Mutex::new(Vec::new()));
    let mut opts = options(dir.path(), &uploads);
    opts.bucket = Some("rayito-no-such-bucket".to_owned());
    let err = client
        .templates()
        .build_in_background(&Template::new().run_cmd("true"), "moto-nobucket", opts)
        .await
        .expect_err("no such bucket");
    assert!(
        matches!(err, SandboxError::Sandbox { code: None, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "control plane call PutObject failed (NoSuchBucket): The specified bucket does not \
         exist; the SDK does not retry this failure"
    );
    assert!(uploads.lock().unwrap().is_empty());
    assert_eq!(emu.calls(Operation::CreateMicrovmImage), 0);
    emu.shutdown().await;
}

/// The first bytes of an ARM_64 ELF executable (publish checks the
/// agent's architecture; nothing runs it here).
fn arm64_elf() -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&0xB7u16.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_of_another_account_is_never_written_to() {
    // moto 5 ignores ExpectedBucketOwner on objects; our emulator's S3
    // refuses a mismatch with 403. STS (emulator `caller`) names account
    // 111111111111; the S3 endpoint's bucket (emulator `owner`) belongs
    // to 000000000000.
    let key = AccessKey::generate();
    let caller = emulator("111111111111", vec![key.clone()]).await;
    let owner = emulator("000000000000", vec![key.clone()]).await;
    let client = client(aws(&caller, &owner.s3_endpoint_url(), &key)).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "COPY rayd /opt/rayd\nCMD [\"/opt/rayd\"]\n",
    )
    .unwrap();
    let artifact = pack_base_image(dir.path(), Some(&arm64_elf()), Arch::Arm64).unwrap();
    let mut opts = PublishOptions::default();
    opts.bucket = Some(owner.artifact_bucket());
    opts.base_image_version = Some(1);
    let err = client
        .images()
        .publish(&artifact, "moto-owner", opts)
        .await
        .expect_err("the bucket is another account's");
    assert!(
        matches!(err, SandboxError::Authentication { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("control plane call PutObject refused the AWS credentials (AccessDenied)"),
        "{err}"
    );
    assert_eq!(
        owner
            .get_object_directly(&owner.artifact_bucket(), &artifact.image_key())
            .await
            .unwrap(),
        None,
        "nothing written"
    );
    assert_eq!(caller.calls(Operation::CreateMicrovmImage), 0);
    caller.shutdown().await;
    owner.shutdown().await;
}
