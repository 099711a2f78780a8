//! A home that outlives its sandbox, on the local backend (no AWS account):
//! create with a persistence name, write files, checkpoint, kill, create
//! again with the same name, and the files are back.
//!
//! ```sh
//! cargo run --example persistence
//! ```
//!
//! The emulator of the local backend serves an S3-compatible endpoint and
//! gives sandboxes created with an execution role its key, as AWS gives
//! them the role's credentials. On AWS, use a real bucket and role
//! (docs/persistence.md, "IAM").

use std::time::Duration;

use aws_sdk_s3 as s3;
use rayito::persistence::{CheckpointOptions, S3Prefix};
use rayito::{AwsOptions, Sandbox, SandboxBuilder};
use rayito_agent::emulator::{Emulator, EmulatorConfig};

const BUCKET: &str = "my-checkpoints";

fn builder(emu: &Emulator) -> SandboxBuilder {
    Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emu.endpoint_url())
                .region("us-east-1")
                .static_credentials(emu.access_key().id.clone(), emu.access_key().secret.clone()),
        )
        .template(emu.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .execution_role_arn("arn:aws:iam::000000000000:role/rayito-sandbox")
        .persist(S3Prefix::new(BUCKET).name("alice"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let emu = Emulator::start(EmulatorConfig::default()).await?;
    // The bucket, with any S3 client (path style on the local endpoint).
    let key = emu.access_key();
    let s3 = s3::Client::from_conf(
        s3::Config::builder()
            .behavior_version(s3::config::BehaviorVersion::latest())
            .region(s3::config::Region::new("us-east-1"))
            .credentials_provider(s3::config::Credentials::new(
                &key.id,
                &key.secret,
                key.session_token.clone(),
                None,
                "example",
            ))
            .endpoint_url(emu.s3_endpoint_url())
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket().bucket(BUCKET).send().await?;

    // First life: nothing to restore yet.
    let first = builder(&emu).create().await?;
    first
        .files()
        .write("project/notes.md", "# day one\nremember the milk\n")
        .await?;
    let done = first
        .persistence()
        .checkpoint(CheckpointOptions::default().on_progress(|p| {
            println!(
                "  archived {} files, {} bytes uploaded",
                p.files_done, p.bytes_uploaded
            );
        }))
        .await?;
    println!(
        "checkpoint: {} files, {} bytes archived (sha256 {}) at {}",
        done.files, done.archive_bytes, done.sha256, done.uri
    );
    first.kill().await?;

    // Second life: the same name restores the home before create returns.
    let second = builder(&emu).create().await?;
    let notes = second.files().read("project/notes.md").await?;
    println!(
        "second life reads: {}",
        String::from_utf8_lossy(&notes).trim_end()
    );
    second.kill().await?;
    Ok(())
}
