//! Shared set-up of the SDK integration tests: each test starts its own
//! emulator (so fault injection never leaks between tests) and reaches it
//! through the real AWS client (the "custom endpoint" backend) and real gRPC
//! through its proxy.

#![allow(dead_code)]

pub mod captured;
pub mod git_server;
pub mod images;
pub mod model_server;
pub mod moto;
pub mod moto_config;
pub mod moto_seed;
pub mod plain_http;
pub mod recording_proxy;
#[path = "../skip_support/mod.rs"]
pub mod skip;
pub mod tls_forward;

use std::path::Path;
use std::time::Duration;

use rayito::{AwsOptions, Sandbox, SandboxBuilder};
use rayito_emulator::{Emulator, EmulatorConfig};

/// A fresh emulator on loopback.
pub async fn emulator() -> Emulator {
    Emulator::start(EmulatorConfig::default())
        .await
        .expect("the emulator starts")
}

/// The repository's root: the parent of this package (`tests/`, package
/// `rayito-tests`).
#[allow(dead_code)]
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
}

/// A builder pointed at `emulator` with its access key and its
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
        .static_credentials(
            emulator.access_key().id.clone(),
            emulator.access_key().secret.clone(),
        )
}

/// A sandbox on `emulator`.
pub async fn sandbox(emulator: &Emulator) -> Sandbox {
    builder(emulator)
        .create()
        .await
        .expect("the sandbox is created")
}

/// A builder whose reconnect budget (300 s) outlasts any deadline a test
/// sets, so that only a deadline can end a reconnect wait.
pub fn patient_builder(emulator: &Emulator) -> SandboxBuilder {
    let mut policy = rayito::error::RetryPolicy::default();
    policy.reconnect.total_budget = Some(Duration::from_secs(300));
    builder(emulator).retry_policy(policy)
}

/// A sender to call from an output callback, and a future that, at its
/// first signal, makes the proxy answer 502 to everything and cuts the
/// sandbox's connections: the sandbox never comes back for that handle.
pub fn lost_for_good_on_signal(
    emulator: &Emulator,
    sandbox: &Sandbox,
) -> (
    tokio::sync::mpsc::UnboundedSender<()>,
    impl Future<Output = ()> + Send + 'static,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let faults = emulator.faults().clone();
    let id = sandbox.id().to_owned();
    let fault = async move {
        rx.recv().await.expect("the first signal");
        assert!(faults.proxy_status(100_000, 502));
        assert!(faults.cut_connections(&id));
    };
    (tx, fault)
}

/// `err` is the stream deadline's `Timeout { Request }` for `feature`, and
/// it came at the stream's deadline (`deadline` after the call began,
/// within a loaded machine's margin), not at a reconnect budget.
pub fn assert_stream_deadline(
    err: &rayito::SandboxError,
    feature: &str,
    deadline: Duration,
    waited: Duration,
) {
    assert!(
        matches!(
            err,
            rayito::SandboxError::Timeout {
                scope: rayito::error::TimeoutScope::Request,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("the call {feature} did not finish; raise request_timeout or retry")
    );
    assert!(
        waited >= deadline && waited < deadline + Duration::from_secs(40),
        "{waited:?}"
    );
}
