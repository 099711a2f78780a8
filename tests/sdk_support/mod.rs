//! Shared set-up of the SDK integration tests: each test starts its own
//! emulator (so fault injection never leaks between tests) and reaches it
//! through the real AWS client (the "custom endpoint" backend) and real gRPC
//! through its proxy.

#![allow(dead_code)]

use std::time::Duration;

use rayito::{AwsOptions, Sandbox, SandboxBuilder};
use rayito_agent::emulator::{Emulator, EmulatorConfig};

/// A fresh emulator on loopback.
pub async fn emulator() -> Emulator {
    Emulator::start(EmulatorConfig::default())
        .await
        .expect("the emulator starts")
}

/// A builder pointed at `emulator` with static test credentials and its
/// `rayito-base` image.
pub fn builder(emulator: &Emulator) -> SandboxBuilder {
    Sandbox::builder()
        .aws(aws(emulator))
        .template(emulator.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(30))
}

/// AWS options for `emulator`.
pub fn aws(emulator: &Emulator) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(emulator.endpoint_url())
        .region("us-east-1")
        .static_credentials("AKIDTESTTESTTEST", "test-secret")
}

/// A sandbox on `emulator`.
pub async fn sandbox(emulator: &Emulator) -> Sandbox {
    builder(emulator)
        .create()
        .await
        .expect("the sandbox is created")
}
