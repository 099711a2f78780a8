//! What the image tests share: a stand-in agent binary, publish options
//! and clients on an emulator of their own (the AWS path, its S3
//! endpoint), and a raw MicroVMs client to read back what was sent.

use std::time::Duration;

use aws_sdk_lambdamicrovms as lmv;
use rayito::Client;
use rayito::template::PublishOptions;
use rayito_emulator::{Emulator, Operation};

/// `e_machine` of aarch64 in an ELF header.
pub const AARCH64: u16 = 0xB7;

/// The first bytes of an ELF executable for `machine` (the local build
/// only copies `rayd`; it never runs it).
pub fn elf(machine: u16) -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&machine.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

/// Publish options for `emu`: its artifact bucket, quick polls, 60 s.
pub fn publish_options(emu: &Emulator) -> PublishOptions {
    let mut options = PublishOptions::default();
    options.bucket = Some(emu.artifact_bucket());
    options.poll_interval = Some(Duration::from_millis(50));
    options.timeout = Duration::from_secs(60);
    options
}

/// A client on `emu` through the AWS path, with its S3 endpoint.
pub async fn client(emu: &Emulator) -> Client {
    Client::builder()
        .aws(super::aws(emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .build()
        .await
        .expect("a client on the AWS path")
}

/// A raw MicroVMs client on `emu`, to read what was submitted.
pub async fn microvms(emu: &Emulator) -> lmv::Client {
    let key = emu.access_key();
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(emu.endpoint_url())
        .credentials_provider(lmv::config::Credentials::new(
            key.id.clone(),
            key.secret.clone(),
            None,
            None,
            "test",
        ))
        .load()
        .await;
    lmv::Client::new(&config)
}

/// Create and Update calls `emu` has answered.
pub fn submissions(emu: &Emulator) -> u64 {
    emu.calls(Operation::CreateMicrovmImage) + emu.calls(Operation::UpdateMicrovmImage)
}
