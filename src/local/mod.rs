//! The embedded local backend: the `rayito-agent` MicroVMs emulator, started
//! in-process on first use and kept for the life of the process.
//!
//! It is chosen only explicitly (`Sandbox::builder().local()` or
//! `RAYITO_BACKEND=local`), because code then runs on this machine with
//! best-effort isolation. The emulator runs on its own thread and tokio
//! runtime, so it outlives whichever runtime first asked for it (each
//! `#[tokio::test]` has its own).
//!
//! The TLS mode (`Sandbox::builder().local_tls()`) is a second emulator,
//! started on its first use, whose sandboxes are dialled as on AWS (TLS on
//! port 443 of a loopback address of their own) and verified against its CA.
//!
//! Nothing outlives the process: the emulator's directory and every sandbox
//! process are removed and killed when it ends, however it ends (see
//! `rayito_agent::sandbox::SandboxEnv::remove_at_exit`).

mod faults;
mod gateway_upstreams;

use std::sync::OnceLock;

use rayito_agent::sandbox::SandboxEnv;
use rayito_emulator::{Emulator, EmulatorConfig, Faults, LatencyProfile};

pub use faults::LocalFaults;
pub use gateway_upstreams::LocalGatewayUpstreams;

use crate::LOCAL_BUCKET;
use crate::error::SandboxError;
use crate::secret::Secret;

/// The image the local backend uses when no template is given.
pub(crate) const DEFAULT_IMAGE: &str = "rayito-base";

/// Where the embedded emulator answers.
#[derive(Debug, Clone)]
pub(crate) struct LocalBackend {
    /// The control-plane endpoint (`http://127.0.0.1:<port>`).
    endpoint_url: String,
    /// The emulator's region.
    region: String,
    /// ARN prefix of images: `arn:aws:lambda:<region>:<account>:microvm-image:`.
    image_arn_prefix: String,
    /// TLS mode: the emulator's CA certificate (PEM).
    ca_pem: Option<String>,
    /// The access key id the emulator generated: it refuses calls signed
    /// with any other, so sandbox code on this host cannot drive it.
    access_key_id: String,
    /// That key's secret.
    secret_access_key: Secret,
    /// The emulator's account id.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    account_id: String,
    /// The emulator's S3 endpoint (`http://127.0.0.1:<port>`, path style).
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    s3_endpoint_url: Option<String>,
    /// The emulator's fault injection ([`LocalFaults`] wraps it).
    faults: Faults,
    /// The agents' gateway upstream settings ([`LocalGatewayUpstreams`]).
    gateway_upstreams: rayito_agent::gateway::LocalUpstreams,
}

impl LocalBackend {
    /// Fault injection on this backend (see [`LocalFaults`]).
    pub(crate) fn faults(&self) -> LocalFaults {
        LocalFaults::new(self.faults.clone())
    }

    /// The gateway upstream settings of this backend's agents.
    pub(crate) fn gateway_upstreams(&self) -> LocalGatewayUpstreams {
        LocalGatewayUpstreams::new(self.gateway_upstreams.clone())
    }

    /// The control-plane endpoint (`http://127.0.0.1:<port>`).
    pub(crate) fn endpoint_url(&self) -> &str {
        &self.endpoint_url
    }

    /// The emulator's region.
    pub(crate) fn region(&self) -> &str {
        &self.region
    }

    /// The CA certificate (PEM) of the TLS mode; `None` in plain mode.
    pub(crate) fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The access key id control-plane calls are signed with.
    pub(crate) fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The secret of [`LocalBackend::access_key_id`].
    pub(crate) fn secret_access_key(&self) -> &Secret {
        &self.secret_access_key
    }

    /// The ARN of an image the emulator knows by `name`.
    pub(crate) fn image_arn(&self, name: &str) -> String {
        format!("{}{name}", self.image_arn_prefix)
    }

    /// The emulator's account id.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    pub(crate) fn account_id(&self) -> &str {
        &self.account_id
    }

    /// The emulator's S3 endpoint.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    pub(crate) fn s3_endpoint_url(&self) -> Option<&str> {
        self.s3_endpoint_url.as_deref()
    }

    /// The emulator's artifact bucket.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    pub(crate) fn artifact_bucket(&self) -> String {
        format!("rayito-artifacts-{}-{}", self.account_id, self.region)
    }
}

static LOCAL: OnceLock<Result<LocalBackend, String>> = OnceLock::new();
static LOCAL_TLS: OnceLock<Result<LocalBackend, String>> = OnceLock::new();

/// The process-wide local backend (`tls`: the one in TLS mode), started on
/// first call.
///
/// # Errors
/// `Sandbox` (no code) when the emulator could not start (in TLS mode, also
/// when port 443 cannot be bound; the log line says why).
pub(crate) async fn backend(tls: bool) -> Result<LocalBackend, SandboxError> {
    // Starting blocks a thread for a few milliseconds; do it off the caller's
    // runtime worker.
    let started = tokio::task::spawn_blocking(move || {
        let cell = if tls { &LOCAL_TLS } else { &LOCAL };
        cell.get_or_init(|| start(tls)).clone()
    })
    .await
    .map_err(|_| SandboxError::internal("local", "the local backend could not start"))?;
    started.map_err(|_| SandboxError::internal("local", "the local backend could not start"))
}

/// Starts the emulator on a dedicated thread that keeps it alive, and waits
/// until it answers. The `Err` string is for the one warning log line only.
fn start(tls: bool) -> Result<LocalBackend, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("rayito-local".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("rayito-local")
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = tx.send(Err(err.to_string()));
                    return;
                }
            };
            // AWS-like create, suspend and resume times when the environment
            // asks (docs/local.md, "Latency profile"); off by default.
            let latency = match LatencyProfile::from_env(|name| std::env::var(name).ok()) {
                Ok(latency) => latency,
                Err(err) => {
                    let _ = tx.send(Err(err));
                    return;
                }
            };
            // The emulator lives until the process ends, and is never dropped
            // (a static): its directory goes with the process however it ends.
            let config = EmulatorConfig {
                root: std::env::temp_dir().join(format!(
                    "rayito-emulator-{}-{:016x}",
                    std::process::id(),
                    rand::random::<u64>()
                )),
                tls,
                // A sandbox made ahead, its kernel started: a create then
                // does not wait for an interpreter (docs/local.md).
                warm_spare: true,
                latency,
                ..EmulatorConfig::default()
            };
            SandboxEnv::remove_at_exit(&config.root);
            let buckets = config.root.clone();
            runtime.block_on(async move {
                let started = match Emulator::start(config).await {
                    Ok(emulator) => create_local_bucket(&buckets)
                        .await
                        .map(|()| emulator)
                        .map_err(|err| format!("the local bucket could not be made: {err}")),
                    Err(err) => Err(err.to_string()),
                };
                match started {
                    Ok(emulator) => {
                        let arn = emulator.image_arn("");
                        let key = emulator.access_key();
                        let backend = LocalBackend {
                            endpoint_url: emulator.endpoint_url(),
                            region: region_of(&arn),
                            account_id: emulator.account_id().to_owned(),
                            s3_endpoint_url: Some(emulator.s3_endpoint_url()),
                            image_arn_prefix: arn,
                            ca_pem: emulator.ca_pem().map(str::to_owned),
                            access_key_id: key.id.clone(),
                            secret_access_key: Secret::new(key.secret.clone()),
                            faults: emulator.faults().clone(),
                            gateway_upstreams: emulator.gateway_upstreams().clone(),
                        };
                        let _ = tx.send(Ok(backend));
                        // Kept for the life of the process.
                        std::future::pending::<()>().await;
                        drop(emulator);
                    }
                    Err(err) => {
                        let _ = tx.send(Err(err));
                    }
                }
            });
        });
    if let Err(err) = spawned {
        return Err(err.to_string());
    }
    let outcome = rx
        .recv()
        .unwrap_or_else(|_| Err("the local backend thread stopped".to_owned()));
    match &outcome {
        Ok(backend) => tracing::warn!(
            target: "rayito::local",
            endpoint = %backend.endpoint_url,
            "started the local backend: sandbox code runs on this machine with best-effort isolation"
        ),
        Err(err) => {
            tracing::warn!(target: "rayito::local", error = %err, "the local backend could not start")
        }
    }
    outcome
}

/// Makes [`LOCAL_BUCKET`] in the emulator's object store, which keeps a
/// bucket as a directory under `<root>/s3` (`Emulator::s3_endpoint_url`'s
/// documented layout). Done before the backend is handed out, so the first
/// checkpoint never races it; `rayito-agent` has no public call for it.
async fn create_local_bucket(root: &std::path::Path) -> std::io::Result<()> {
    tokio::fs::create_dir_all(root.join("s3").join(LOCAL_BUCKET)).await
}

/// `arn:aws:lambda:<region>:...` -> `<region>`.
fn region_of(arn: &str) -> String {
    arn.split(':').nth(3).unwrap_or("us-east-1").to_owned()
}

#[cfg(test)]
mod tests {
    use super::region_of;

    #[test]
    fn region_comes_from_the_arn() {
        assert_eq!(
            region_of("arn:aws:lambda:eu-west-1:000000000000:microvm-image:"),
            "eu-west-1"
        );
    }
}
