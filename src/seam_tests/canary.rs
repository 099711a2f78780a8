//! Proxy-token canary: a planted, recognisable proxy token (the emulator mints
//! random ones, so only here can one be planted) is refused by the real
//! emulated proxy twice; the resulting error and everything traced on the
//! way must not contain it.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito_emulator::{Emulator, EmulatorConfig};

use crate::aws::microvms::AwsControlPlane;
use crate::control::ControlPlane;
use crate::error::RetryPolicy;
use crate::secret::Secret;
use crate::transport::{AgentConn, ConnectRetry, ProxyMinter};
use crate::{AwsOptions, Sandbox};

const PROXY_CANARY_1: &str = "CANARYproxyTOKENone";
const PROXY_CANARY_2: &str = "CANARYproxyTOKENtwo";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn planted_proxy_tokens_never_leak() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let sandbox = Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emulator.endpoint_url())
                .region("us-east-1")
                .static_credentials(
                    emulator.access_key().id.clone(),
                    emulator.access_key().secret.clone(),
                ),
        )
        .template(emulator.image_arn("rayito-base"))
        .create()
        .await
        .unwrap();
    let control = AwsControlPlane::hermetic(
        &emulator.endpoint_url(),
        "us-east-1",
        &emulator.access_key().id,
        &Secret::new(emulator.access_key().secret.clone()),
    );
    let vm = control.get_microvm(sandbox.id().to_owned()).await.unwrap();

    let minter: ProxyMinter = Arc::new(|| Box::pin(async { Ok(Secret::new(PROXY_CANARY_2)) }));
    let conn = AgentConn::open(
        &vm.endpoint,
        Secret::new(PROXY_CANARY_1),
        sandbox.access_token().clone(),
        minter,
        RetryPolicy::default(),
        &crate::transport::AgentRoots::default(),
    )
    .unwrap();
    let err = conn
        .health(Duration::from_secs(5), ConnectRetry::Never)
        .await
        .unwrap_err();
    super::assert_proxy_rejected(&err);
    let texts = [
        err.to_string(),
        format!("{err:?}"),
        err.to_wire(),
        String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned(),
    ];
    for text in texts {
        assert!(!text.contains("CANARY"), "a proxy token leaked: {text}");
    }
    sandbox.kill().await.unwrap();
}
