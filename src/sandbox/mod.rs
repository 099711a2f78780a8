//! The sandbox handle: create, connect, kill, timeouts, info.

pub(crate) mod backend;
mod builder;
pub(crate) mod client;
mod connectors;
mod health;
mod host;
#[cfg(feature = "templates")]
pub(crate) mod image_name;
pub(crate) mod image_variant;
pub(crate) mod lifecycle;
pub(crate) mod list;
mod list_token;
mod logging;
mod metrics;
pub(crate) mod named;
mod network;
mod options;
pub(crate) mod parts;
pub(crate) mod payload;
mod readiness;
pub(crate) mod steps;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use self::backend::{AwsOptions, BACKEND_ENV, TEMPLATE_ENV};
pub(crate) use self::builder::{Launched, Pooled};
pub use self::builder::{SandboxBuilder, TemplateInfo};
pub use self::connectors::NetworkConnector;
pub use self::health::{LifecycleHealth, LifecyclePhase, SandboxHealth};
pub use self::host::SandboxHost;
use self::lifecycle::LifecycleMarks;
pub(crate) use self::lifecycle::{kill as terminate_by_id, request_resume};
pub use self::list::{ListOrder, ListQuery, SandboxList, SandboxSummary};
pub use self::logging::SandboxLogging;
#[cfg(feature = "logs")]
pub(crate) use self::logging::{check_log_group, default_log_group};
pub use self::metrics::{Metrics, MetricsHistoryQuery, SandboxMetrics};
pub(crate) use self::metrics::{metrics_by_id, metrics_history_by_id};
pub(crate) use self::network::network_by_id;
pub use self::network::{
    ALL_TRAFFIC, EgressEnforcement, EgressProxy, Network, NetworkPolicy, NetworkState,
};
pub(crate) use self::options::{DEFAULT_REQUEST_TIMEOUT, MAX_DURATION_SECS};
pub use self::options::{IdlePolicy, OnTimeout};
pub use crate::control::pacing::Pacing;
use crate::control::{AuthTokenRequest, ControlPlane};
use crate::error::{ErrorKind, SandboxError};
use crate::pb;
use crate::secret::Secret;
pub use crate::state::SandboxState;
use crate::transport::{AgentConn, ConnectRetry, ProxyMinter, Refresher};

/// Lifetime of a proxy token (the AWS maximum).
const PROXY_TOKEN_TTL: Duration = Duration::from_secs(60 * 60);
/// The agent's FAILED_PRECONDITION text for `SetTimeout` without a managed
/// lifecycle (wire-contract 3.6).
use rayito_proto::tokens::detail::LIFECYCLE_UNMANAGED;
/// Longest time `is_running` waits for Health.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A running sandbox: a MicroVM with the rayito agent, reached through the
/// control plane and the agent's gRPC endpoint.
///
/// Cheap to clone (an `Arc` inside); clones share one connection.
/// Dropping the last clone closes the connection without blocking and does
/// **not** terminate the MicroVM: call [`Sandbox::kill`] for that (it runs
/// until its timeout otherwise, and you can [`Sandbox::connect`] to it again).
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    /// The client the handle was made with (it shares its control plane).
    client: crate::sandbox::client::Client,
    id: String,
    access_token: Secret,
    control: Arc<dyn ControlPlane>,
    conn: AgentConn,
    request_timeout: Duration,
    /// Bounds the state waits of pause and resume.
    ready_timeout: Duration,
    /// Shared with the reconnect poller (it must not wake a sandbox this
    /// handle paused).
    marks: Arc<LifecycleMarks>,
    /// Re-mints the proxy token in the background; stopped by `kill()` and
    /// when the last clone of the handle is dropped (with `Inner`).
    refresher: Refresher,
    /// Whether the agent runs a managed lifecycle (its Health said so when
    /// the handle was made); `None` when the agent did not say.
    managed_lifecycle: Option<bool>,
    /// The features' state (the persistence binding, the staging, the
    /// bound secrets...), each part a type of its feature's module (the
    /// index and the tracer ride on `client`).
    parts: self::parts::Parts,
}

/// What a ready Health says about the lifecycle: `Some(false)` for an
/// UNMANAGED phase, `None` when the agent sent no lifecycle.
fn managed_lifecycle(health: &pb::HealthResponse) -> Option<bool> {
    health
        .lifecycle
        .as_ref()
        .map(|l| l.phase != pb::LifecyclePhase::Unmanaged as i32)
}

crate::secret::redacted_debug! {
    Sandbox |o| id = o.inner.id, access_token = o.inner.access_token,
    closed = o.inner.conn.is_closed()
}

/// What the control plane says about a sandbox.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SandboxInfo {
    /// The MicroVM id.
    pub sandbox_id: String,
    /// Its state (the control plane is eventually consistent: `RUNNING` can
    /// linger briefly after a kill).
    pub state: SandboxState,
    /// Why it is in that state, when the platform says.
    pub state_reason: Option<String>,
    /// The image ARN it runs.
    pub image_arn: String,
    /// The image version.
    pub image_version: String,
    /// When it started.
    pub started_at: Option<SystemTime>,
    /// When it ended, if it did.
    pub terminated_at: Option<SystemTime>,
    /// Its maximum duration, running and suspended.
    pub max_duration: Duration,
    /// The ARNs of its ingress network connectors, as the control plane
    /// reports them (empty when it reports none).
    pub ingress: Vec<String>,
    /// The ARNs of its egress network connectors, as the control plane
    /// reports them (empty when it reports none).
    pub egress: Vec<String>,
}

impl Sandbox {
    /// The client this handle was made with: its backend, and the control
    /// plane it shares with every other handle of that client.
    pub fn client(&self) -> &crate::Client {
        &self.inner.client
    }

    /// A builder for a new sandbox (or a connection to an existing one) on
    /// the implicit client of this tokio runtime (see [`crate::Client`] to
    /// choose the client yourself).
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder::new()
    }

    /// Creates a sandbox with the defaults: the backend from
    /// `RAYITO_BACKEND` (AWS when unset), the template from
    /// `RAYITO_TEMPLATE` (the local backend's `rayito-base` otherwise),
    /// a 1 h timeout.
    ///
    /// # Errors
    /// As [`SandboxBuilder::create`].
    pub async fn create() -> Result<Sandbox, SandboxError> {
        SandboxBuilder::new().create().await
    }

    /// Connects to an existing sandbox with its access token (the backend
    /// from `RAYITO_BACKEND`, AWS when unset).
    ///
    /// # Errors
    /// As [`SandboxBuilder::connect`].
    pub async fn connect(
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<Sandbox, SandboxError> {
        SandboxBuilder::new()
            .connect(sandbox_id, access_token)
            .await
    }

    /// The sandbox (MicroVM) id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The access token; keep it to [`Sandbox::connect`] later (the control
    /// plane never returns it). Never log it.
    pub fn access_token(&self) -> &Secret {
        &self.inner.access_token
    }

    /// The egress policy: read it, replace it (docs/network.md).
    pub fn network(&self) -> Network<'_> {
        Network::new(self)
    }

    /// The sandbox's resources: now, and the sampled history
    /// (docs/metrics.md).
    pub fn metrics(&self) -> Metrics<'_> {
        Metrics::new(self)
    }

    /// Terminates the sandbox. With a metadata index (the builder's
    /// `index`), then deletes its row; a row that cannot be deleted is
    /// logged (target `rayito::index`), not an error: the MicroVM is gone,
    /// an indexed list never shows a terminated sandbox, and the row
    /// expires with its TTL. Returns `false` when it was already gone (not
    /// found, already terminating or terminated, or this handle was already
    /// killed), `true` when this call terminated it. After either, later
    /// calls on this handle (and its clones) fail with
    /// `Sandbox { code: Closed }` without any I/O.
    ///
    /// # Errors
    /// Control-plane failures other than not-found (`Authentication`,
    /// `RateLimit` after retries, `Sandbox { code: ServiceError }`, ...),
    /// with the same variant and a message saying that the MicroVM may still
    /// be running: the handle stays usable and `kill` can be called again.
    pub async fn kill(&self) -> Result<bool, SandboxError> {
        let op = crate::otel::Op::new(crate::otel::Name::SandboxKill).on(self);
        boxed!(Result<bool, SandboxError>, {
            op.run(self.kill_inner(), crate::otel::nothing).await
        })
    }

    /// [`Self::kill`] inside its span.
    async fn kill_inner(&self) -> Result<bool, SandboxError> {
        if self.inner.conn.is_closed() {
            return Ok(false);
        }
        match lifecycle::kill(self.inner.control.as_ref(), &self.inner.id).await {
            Ok(killed) => {
                self.inner.refresher.stop();
                self.inner.conn.close();
                for step in crate::feature_steps() {
                    step.after_kill(&self.inner.client, &self.inner.id).await;
                }
                Ok(killed)
            }
            // The handle stays usable: the MicroVM may still be running.
            Err(err) => Err(err.kill_failed(&self.inner.id)),
        }
    }

    /// Terminates the sandbox `sandbox_id` without a handle (AWS
    /// credentials suffice; the backend from `RAYITO_BACKEND`, AWS when
    /// unset). Returns `false` when it was not found. E2B calls it
    /// `Sandbox.kill(sandbox_id)`.
    ///
    /// # Errors
    /// As [`crate::Client::kill_by_id`]; the implicit client's failures.
    pub async fn kill_by_id(sandbox_id: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            lifecycle::check_sandbox_id(sandbox_id)?;
            SandboxBuilder::new()
                .client()
                .await?
                .kill_by_id(sandbox_id)
                .await
        })
    }

    /// What the control plane says about the sandbox `sandbox_id`, without
    /// a handle. E2B calls it `Sandbox.get_info(sandbox_id)`.
    ///
    /// # Errors
    /// As [`crate::Client::get_info_by_id`]; the implicit client's failures.
    pub async fn get_info_by_id(sandbox_id: &str) -> Result<SandboxInfo, SandboxError> {
        boxed!(Result<SandboxInfo, SandboxError>, {
            lifecycle::check_sandbox_id(sandbox_id)?;
            SandboxBuilder::new()
                .client()
                .await?
                .get_info_by_id(sandbox_id)
                .await
        })
    }

    /// Resumes the paused sandbox `sandbox_id` without a handle and waits
    /// until the control plane says RUNNING. E2B calls it
    /// `Sandbox.resume(sandbox_id)` (connect to it to use it).
    ///
    /// # Errors
    /// As [`crate::Client::resume_by_id`]; the implicit client's failures.
    pub async fn resume_by_id(sandbox_id: &str) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            lifecycle::check_sandbox_id(sandbox_id)?;
            SandboxBuilder::new()
                .client()
                .await?
                .resume_by_id(sandbox_id)
                .await
        })
    }

    /// The sandboxes that match `query`, page after page (E2B:
    /// `Sandbox.list(query)`); the backend from `RAYITO_BACKEND`.
    pub fn list(query: ListQuery) -> SandboxList {
        list::list_from(crate::sandbox::client::ClientSource::default(), query)
    }

    /// Pauses (suspends) the sandbox and waits until it is SUSPENDED
    /// (within the ready timeout). Returns `false` when it was already
    /// suspending or suspended. Processes and kernels live on; the
    /// connection's streams are closed and must be opened again after
    /// [`Sandbox::resume`]. E2B calls it `pause()` (`beta_pause`).
    ///
    /// # Errors
    /// `SandboxNotFound` when it has ended; `Timeout { scope: StateWait }`
    /// when it is not SUSPENDED in time; `Sandbox { closed }` after
    /// `kill()`; control-plane failures (`RateLimit`, `Authentication`, ...).
    pub async fn pause(&self) -> Result<bool, SandboxError> {
        let op = crate::otel::Op::new(crate::otel::Name::SandboxPause).on(self);
        let pause = async {
            if self.inner.conn.is_closed() {
                return Err(SandboxError::closed());
            }
            lifecycle::pause(
                self.inner.control.as_ref(),
                &self.inner.id,
                &self.inner.marks,
                Some(self.inner.ready_timeout),
            )
            .await
        };
        boxed!(Result<bool, SandboxError>, {
            op.run(pause, crate::otel::nothing).await
        })
    }

    /// Resumes the paused sandbox: ResumeMicrovm (a sandbox already running
    /// is fine), a fresh proxy token, then the readiness wait; records the
    /// agent's new resume generation. A sandbox resumed past its timeout
    /// (managed lifecycle, pause mode) is re-opened for its timeout again
    /// (`SetTimeout` AT_LEAST); otherwise its timeout is left alone.
    ///
    /// # Errors
    /// `SandboxNotFound` when it has ended; `SandboxNotReady` when the agent
    /// is not ready within the ready timeout (the sandbox is left alone);
    /// `Sandbox { closed }` after `kill()`; control-plane failures.
    pub async fn resume(&self) -> Result<(), SandboxError> {
        let op = crate::otel::Op::new(crate::otel::Name::SandboxResume).on(self);
        boxed!(Result<(), SandboxError>, {
            op.run(self.resume_inner(), |()| {
                vec![crate::otel::Attr::ResumeGeneration(self.resume_generation())]
            })
            .await
        })
    }

    /// [`Self::resume`] inside its span.
    async fn resume_inner(&self) -> Result<(), SandboxError> {
        if self.inner.conn.is_closed() {
            return Err(SandboxError::closed());
        }
        let control = self.inner.control.as_ref();
        lifecycle::request_resume(control, &self.inner.id).await?;
        self.inner.conn.remint().await?;
        let health = readiness::wait_ready(
            &self.inner.conn,
            control,
            &self.inner.id,
            self.inner.ready_timeout,
            readiness::OnNotReady::Keep,
        )
        .await?;
        self.inner
            .marks
            .set_resume_generation(health.resume_generation);
        self.inner
            .conn
            .set_resume_generation(health.resume_generation);
        self.inner.marks.set_pause_pending(false);
        lifecycle::reopen_if_expired(&self.inner.conn, &health, self.inner.request_timeout).await?;
        Ok(())
    }

    /// The agent's resume generation when this handle last saw it ready
    /// (0 for a sandbox never resumed; +1 per resume).
    pub fn resume_generation(&self) -> u64 {
        self.inner.marks.resume_generation()
    }

    /// The tracer of the handle's operation spans (feature `otel`).
    #[cfg(feature = "otel")]
    pub(crate) fn tracer(&self) -> Option<&crate::otel::Tracer> {
        self.inner.client.features().tracer.as_ref()
    }

    /// Moves the sandbox's logical timeout to `timeout` from now (it may
    /// shorten it). Needs a managed lifecycle: create the sandbox with
    /// [`SandboxBuilder::max_lifetime`] or [`SandboxBuilder::on_timeout`].
    ///
    /// # Errors
    /// `SandboxLifetime` above 28,800 s; `InvalidArgument` below 1 s or
    /// beyond the sandbox's cap; `LifecycleUnsupported` (naming the builder
    /// calls that enable it) when the sandbox has no managed lifecycle;
    /// `Timeout { scope: Sandbox }` when the deadline already passed.
    pub async fn set_timeout(&self, timeout: Duration) -> Result<(), SandboxError> {
        if timeout.as_secs() > MAX_DURATION_SECS {
            return Err(SandboxError::sandbox_lifetime(
                "timeout",
                timeout,
                Duration::from_secs(MAX_DURATION_SECS),
            ));
        }
        if timeout < Duration::from_secs(1) {
            return Err(SandboxError::invalid_argument(
                "timeout",
                "sandbox timeout must be at least 1 s; pass a positive timeout",
            ));
        }
        if self.inner.managed_lifecycle == Some(false) {
            return Err(SandboxError::lifecycle_unmanaged());
        }
        let request = pb::SetTimeoutRequest {
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            mode: pb::TimeoutMode::Exact as i32,
        };
        match self
            .inner
            .conn
            .set_timeout(request, self.inner.request_timeout)
            .await
        {
            Ok(_) => Ok(()),
            // The agent's exact token (wire-contract 3.6), for an agent whose
            // Health did not say.
            Err(err)
                if err.kind() == ErrorKind::InvalidArgument
                    && err.meta().server_message() == Some(LIFECYCLE_UNMANAGED) =>
            {
                Err(SandboxError::lifecycle_unmanaged())
            }
            Err(err) => Err(err),
        }
    }

    /// True when the agent answers Health and says it is ready to serve
    /// (probe timeout: 5 s or the request timeout, whichever is shorter).
    /// Any failure, and a killed handle, count as not running.
    pub async fn is_running(&self) -> bool {
        if self.inner.conn.is_closed() {
            return false;
        }
        let timeout = PROBE_TIMEOUT.min(self.inner.request_timeout);
        self.inner
            .conn
            .health(timeout, ConnectRetry::Never)
            .await
            .is_ok_and(|health| health.agent_ready)
    }

    /// What the sandbox's agent says of itself (Health): readiness, its
    /// version and uptime, the managed lifecycle, egress enforcement, the
    /// guest's CPUs and memory. One anonymous round trip (timeout: 5 s or
    /// the request timeout, whichever is shorter); a suspended sandbox with
    /// auto-resume wakes for it.
    ///
    /// # Errors
    /// `Sandbox{closed}` after `kill`; the transport's errors (the agent
    /// unreachable, the proxy refusing, the timeout).
    pub async fn health(&self) -> Result<SandboxHealth, SandboxError> {
        let timeout = PROBE_TIMEOUT.min(self.inner.request_timeout);
        let health = self
            .inner
            .conn
            .health(timeout, ConnectRetry::Ladder)
            .await?;
        Ok(SandboxHealth::from_pb(health))
    }

    /// What the control plane says about this sandbox (GetMicrovm).
    ///
    /// # Errors
    /// `SandboxNotFound` when it does not exist any more; other
    /// control-plane failures.
    pub async fn get_info(&self) -> Result<SandboxInfo, SandboxError> {
        let vm = self
            .inner
            .control
            .get_microvm(self.inner.id.clone())
            .await?;
        Ok(SandboxInfo::from_vm(vm))
    }

    /// The features' state on this handle (each feature reads its own
    /// part; the view entries live in the feature modules).
    pub(crate) fn parts(&self) -> &self::parts::Parts {
        &self.inner.parts
    }

    pub(crate) fn conn(&self) -> &AgentConn {
        &self.inner.conn
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// True while a `pause()` is pending or done and no resume followed:
    /// background work must not wake the sandbox.
    #[allow(dead_code)]
    pub(crate) fn pause_pending(&self) -> bool {
        self.inner.marks.pause_pending()
    }
}

impl crate::otel::Traced for Sandbox {
    fn sandbox_id(&self) -> &str {
        self.id()
    }

    fn region(&self) -> Option<&str> {
        self.client().region()
    }

    #[cfg(feature = "otel")]
    fn tracer(&self) -> Option<&crate::otel::Tracer> {
        Sandbox::tracer(self)
    }
}

impl SandboxInfo {
    pub(crate) fn from_vm(vm: crate::control::Microvm) -> Self {
        Self {
            sandbox_id: vm.id,
            state: vm.state,
            state_reason: vm.state_reason,
            image_arn: vm.image_arn,
            image_version: vm.image_version,
            started_at: vm.started_at,
            terminated_at: vm.terminated_at,
            max_duration: Duration::from_secs(u64::try_from(vm.max_duration_seconds).unwrap_or(0)),
            ingress: vm.ingress,
            egress: vm.egress,
        }
    }
}

/// Mints proxy tokens for one MicroVM and port set (used at open, on a
/// proxy 403, after a resume and by the refresher).
fn proxy_minter(
    control: Arc<dyn ControlPlane>,
    microvm_id: String,
    ports: Vec<u16>,
    ttl: Duration,
) -> ProxyMinter {
    Arc::new(move || {
        let control = control.clone();
        let request = AuthTokenRequest {
            microvm_id: microvm_id.clone(),
            expiration: ttl,
            ports: ports.clone(),
        };
        Box::pin(async move { control.create_auth_token(request).await })
    })
}
