//! `rayito::Client`: the AWS side of the SDK (its configuration, the
//! control-plane port with its pacing and retries), built once per process
//! or per account and cloned cheaply; and the implicit clients behind the
//! `Sandbox::create()` / `Sandbox::builder()` shortcuts.
//!
//! Handles made from one client share its control-plane client (its HTTPS
//! connector and connection pool) and its pacing buckets; two clients share
//! nothing, whatever their options. An AWS client's pooled connections
//! belong to the tokio runtime that opened them, so the shortcuts keep one
//! implicit client per runtime (and per configuration), never one for the
//! whole process.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crate::control::pacing::{Buckets, Pacing};
use crate::error::{RetryPolicy, SandboxError};
use crate::sandbox::backend::{AwsOptions, BackendChoice, ResolvedBackend};
use crate::sandbox::lifecycle::{self, check_sandbox_id};
use crate::sandbox::parts::Parts;
use crate::sandbox::{
    DEFAULT_REQUEST_TIMEOUT, ListQuery, MetricsHistoryQuery, NetworkPolicy, NetworkState, Sandbox,
    SandboxBuilder, SandboxInfo, SandboxList, SandboxMetrics, TemplateInfo,
};
use crate::secret::Secret;
use crate::state::SandboxState;

/// How long [`Client::resume_by_id`] waits for RUNNING (the default ready
/// timeout of a sandbox).
const RESUME_WAIT: Duration = Duration::from_secs(90);

/// The SDK's entry point for everything that is not one sandbox: the
/// backend (AWS, the local backend, or an endpoint speaking the MicroVMs
/// API), its credentials and region, the retry policy and the client-side
/// pacing of control-plane calls.
///
/// Build one per process (or per AWS account) and clone it freely (an
/// `Arc` inside): every sandbox made through it shares its control-plane
/// client and pacing. A client belongs to the tokio runtime it is used in:
/// the AWS SDK's pooled connections are tied to the runtime that opened
/// them, so build a client per runtime when you run several.
///
/// ```no_run
/// use rayito::{AwsOptions, Client};
///
/// # async fn tour() -> Result<(), rayito::SandboxError> {
/// let client = Client::builder()
///     .aws(AwsOptions::new().region("us-east-1"))
///     .build()
///     .await?;
/// let sandbox = client
///     .sandbox()
///     .template("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
///     .create()
///     .await?;
/// let again = client.connect(sandbox.id(), sandbox.access_token().clone()).await?;
/// client.kill_by_id(again.id()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
    /// The features that ride on this client value (its index and tracer):
    /// clones share the backend whatever these say.
    features: ClientFeatures,
}

/// What a client carries besides its backend: the features' parts (the
/// metadata index whose rows a create writes and a kill deletes), each a
/// type of its feature's module, and the tracer of the operation spans.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientFeatures {
    pub(crate) parts: Parts,
    #[cfg(feature = "otel")]
    pub(crate) tracer: Option<crate::otel::Tracer>,
}

/// What a client holds.
pub(crate) struct ClientInner {
    pub(crate) backend: ResolvedBackend,
    pub(crate) retry_policy: RetryPolicy,
    /// The options it was built with: a sandbox builder made from this
    /// client starts from them when a setter changes one.
    pub(crate) config: ClientBuilder,
    /// The caller's identity (STS, asked once per client): an image name
    /// resolves in its account, and the template clients share it.
    #[cfg(feature = "templates")]
    identity: std::sync::OnceLock<Arc<crate::aws::sts::Identity>>,
    /// What a feature makes once per client (the template clients), kept
    /// by its type so that the core never names it.
    #[cfg(feature = "templates")]
    feature_state: Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>,
}

crate::secret::redacted_debug! {
    non_exhaustive Client |o| backend = o.inner.backend
}

/// Options of a [`Client`]; setters never fail, [`ClientBuilder::build`]
/// checks them.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ClientBuilder {
    backend: BackendChoice,
    retry_policy: RetryPolicy,
    pacing: Pacing,
    features: ClientFeatures,
}

impl ClientBuilder {
    /// The defaults: the backend from `RAYITO_BACKEND` (AWS when unset),
    /// the default retry policy and pacing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use the embedded local backend (code runs on this machine with
    /// best-effort isolation; a warning is logged when it starts).
    ///
    /// Only with the `local` cargo feature (on by default).
    #[cfg(feature = "local")]
    pub fn local(mut self) -> Self {
        self.backend = BackendChoice::Local;
        self
    }

    /// Use the embedded local backend in TLS mode (see
    /// [`SandboxBuilder::local_tls`]).
    ///
    /// Only with the `local` cargo feature (on by default).
    #[cfg(feature = "local")]
    pub fn local_tls(mut self) -> Self {
        self.backend = BackendChoice::LocalTls;
        self
    }

    /// Use AWS (or another endpoint speaking the MicroVMs API).
    pub fn aws(mut self, options: AwsOptions) -> Self {
        self.backend = BackendChoice::Aws(options);
        self
    }

    crate::setters::setters! {
        unmarked;
        /// The retry policy of every call (default: docs/errors.md, "Retries").
        retry_policy: RetryPolicy;
        /// Client-side pacing of control-plane calls (default: [`Pacing::new`]),
        /// shared by every sandbox of the client.
        pacing: Pacing;
    }

    /// The features' parts that ride on the clients this builds (the
    /// feature setters write them).
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn parts_mut(&mut self) -> &mut Parts {
        &mut self.features.parts
    }

    /// Sends the operation spans of this client (its by-id operations, and
    /// the handles it makes) to an OpenTelemetry tracer from `provider`
    /// (see [`SandboxBuilder::tracer_provider`], which overrides it for that
    /// builder).
    ///
    /// Only with the `otel` cargo feature.
    #[cfg(feature = "otel")]
    pub fn tracer_provider<P>(mut self, provider: &P) -> Self
    where
        P: opentelemetry::trace::TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as opentelemetry::trace::Tracer>::Span: Send + Sync + 'static,
    {
        self.features.tracer = Some(crate::otel::Tracer::from_provider(provider));
        self
    }

    /// Starts or connects the backend: loads the AWS configuration and
    /// checks that credentials and a region exist, or starts the local
    /// backend.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `RAYITO_BACKEND` or a bad option
    /// (a zero timeout, a malformed region or endpoint); `Authentication`
    /// when AWS has no credentials or region (the message says how to
    /// configure AWS or choose the local backend); `Unimplemented` for the
    /// local backend in a build without the `local` feature; `Sandbox` when
    /// the local backend cannot start.
    pub async fn build(self) -> Result<Client, SandboxError> {
        let buckets = Arc::new(Buckets::new(self.pacing));
        self.build_paced(buckets).await
    }

    /// [`ClientBuilder::build`] with the pacing state `buckets`.
    async fn build_paced(self, buckets: Arc<Buckets>) -> Result<Client, SandboxError> {
        boxed!(Result<Client, SandboxError>, {
            let backend = self
                .backend
                .resolve(&self.retry_policy, self.pacing, buckets)
                .await?;
            Ok(Client::from_resolved(backend, self))
        })
    }

    /// The backend choice, to change it (a sandbox builder's setters).
    pub(crate) fn backend_mut(&mut self) -> &mut BackendChoice {
        &mut self.backend
    }

    /// Whether the choice is an injected one (tests): never cached.
    fn is_injected(&self) -> bool {
        matches!(self.backend, BackendChoice::Injected { .. })
    }

    /// What tells two implicit clients apart (see [`implicit`]).
    fn implicit_key(&self) -> Result<ImplicitKey, SandboxError> {
        Ok(ImplicitKey {
            backend: self.backend.key()?,
            retry_policy: self.retry_policy,
            pacing: self.pacing,
        })
    }
}

impl Client {
    /// A builder with the defaults (see [`ClientBuilder::new`]).
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client for the backend `RAYITO_BACKEND` names (AWS when unset),
    /// with credentials and region from the usual AWS chain.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    pub async fn from_env() -> Result<Client, SandboxError> {
        ClientBuilder::new().build().await
    }

    /// A client for the embedded local backend.
    ///
    /// Only with the `local` cargo feature (on by default).
    ///
    /// # Errors
    /// `Sandbox` when the local backend cannot start.
    #[cfg(feature = "local")]
    pub async fn local() -> Result<Client, SandboxError> {
        ClientBuilder::new().local().build().await
    }

    /// A client over an injected control plane and optionally an injected
    /// agent: the seam of the SDK's fast tests (no process, no socket).
    #[cfg(test)]
    pub(crate) fn injected(
        control: Arc<dyn crate::control::ControlPlane>,
        agent: Option<crate::transport::InjectedAgent>,
    ) -> Client {
        let backend = ResolvedBackend::injected(
            control.clone(),
            agent.clone(),
            &RetryPolicy::default(),
            Pacing::default(),
        );
        let mut config = ClientBuilder::new();
        config.backend = BackendChoice::Injected { control, agent };
        Client::from_resolved(backend, config)
    }

    fn from_resolved(backend: ResolvedBackend, config: ClientBuilder) -> Client {
        Client {
            features: config.features.clone(),
            inner: Arc::new(ClientInner {
                backend,
                retry_policy: config.retry_policy,
                config,
                #[cfg(feature = "templates")]
                identity: std::sync::OnceLock::new(),
                #[cfg(feature = "templates")]
                feature_state: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The feature state of type `T` of this client, made by `make` on
    /// first use (the template clients: `Client::template_services`).
    ///
    /// # Errors
    /// What `make` returns; nothing is kept then.
    #[cfg(feature = "templates")]
    pub(crate) fn feature_state<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Result<T, SandboxError>,
    ) -> Result<Arc<T>, SandboxError> {
        let mut held = self
            .inner
            .feature_state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = held.iter().find_map(|s| Arc::clone(s).downcast::<T>().ok()) {
            return Ok(found);
        }
        let made = Arc::new(make()?);
        held.push(made.clone());
        Ok(made)
    }

    /// The caller's identity over `sdk_config` (this client's), made once.
    #[cfg(feature = "templates")]
    pub(crate) fn identity(
        &self,
        sdk_config: &aws_types::SdkConfig,
    ) -> Arc<crate::aws::sts::Identity> {
        Arc::clone(
            self.inner
                .identity
                .get_or_init(|| Arc::new(crate::aws::sts::Identity::new(sdk_config))),
        )
    }

    /// The image ARN a sandbox of `template` starts from (see
    /// `ResolvedBackend::image_arn`); with the `templates` feature, a
    /// name on AWS resolves in the caller's account (STS, once).
    pub(crate) async fn image_arn(&self, template: Option<&str>) -> Result<String, SandboxError> {
        // Boxed: STS and the template clients live in this future, and it
        // sits inside create's and template_info's.
        #[cfg(feature = "templates")]
        {
            let resolved = Box::pin(self.image_arn_by_name(template));
            if let Some(resolved) = resolved.await {
                return resolved;
            }
        }
        self.inner.backend.image_arn(template)
    }

    /// An image name on AWS resolved in the caller's account; `None` when
    /// `template` is not such a name.
    #[cfg(feature = "templates")]
    async fn image_arn_by_name(
        &self,
        template: Option<&str>,
    ) -> Option<Result<String, SandboxError>> {
        {
            let name = template
                .map(str::to_owned)
                .or_else(|| std::env::var(crate::sandbox::backend::TEMPLATE_ENV).ok())
                .filter(|t| !t.is_empty() && !t.starts_with("arn:"));
            let backend = &self.inner.backend;
            let name = name.filter(|_| backend.local.is_none())?;
            let sdk_config = backend.sdk_config.as_ref()?;
            if let Err(e) = crate::sandbox::image_name::check_template_name(&name) {
                return Some(Err(e));
            }
            let identity = self.identity(sdk_config);
            Some(identity.account().await.map(|(account, partition)| {
                crate::sandbox::image_name::image_arn_in(
                    partition,
                    backend.region.as_deref().unwrap_or_default(),
                    account,
                    &name,
                )
            }))
        }
    }

    /// The options the client was built with.
    pub(crate) fn config(&self) -> &ClientBuilder {
        &self.inner.config
    }

    pub(crate) fn backend(&self) -> &ResolvedBackend {
        &self.inner.backend
    }

    /// The retry policy of the client's calls.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry_policy
    }

    /// The AWS region the client's calls go to (given in [`AwsOptions`],
    /// else found by the AWS chain: environment, profile, instance
    /// metadata); the local backend's own region for it.
    pub fn region(&self) -> Option<&str> {
        self.inner.backend.region.as_deref()
    }

    /// True when `self` and `other` are clones of one client: they share its
    /// control-plane client (connections) and its pacing.
    pub fn is_same(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True for a client of the embedded local backend.
    pub fn is_local(&self) -> bool {
        self.inner.backend.local.is_some()
    }

    /// The gateway upstream settings of this client's embedded local
    /// backend: a root CA and host overrides that let a test's own HTTPS
    /// server stand in for a secret gateway's upstream (docs/local.md).
    ///
    /// Only with the `local` cargo feature (on by default).
    ///
    /// # Errors
    /// [`SandboxError::Unimplemented`] (`local_gateway_upstreams`) when this
    /// client is not on the local backend: a MicroVM's agent trusts only
    /// its image's roots and dials only public addresses.
    #[cfg(feature = "local")]
    pub fn local_gateway_upstreams(&self) -> Result<crate::LocalGatewayUpstreams, SandboxError> {
        self.inner
            .backend
            .local
            .as_ref()
            .map(crate::local::LocalBackend::gateway_upstreams)
            .ok_or_else(|| {
                SandboxError::unimplemented(
                    "local_gateway_upstreams",
                    "gateway upstream overrides exist on the local backend only; build the client with Client::local()",
                    Some("docs/local.md"),
                )
            })
    }

    /// Fault injection on this client's embedded local backend: throttling,
    /// capacity and quota errors, proxy statuses, cut connections, a killed
    /// agent, a full disk (docs/testing.md).
    ///
    /// Only with the `local` cargo feature (on by default).
    ///
    /// # Errors
    /// [`SandboxError::Unimplemented`] (`local_faults`) when this client is
    /// not on the local backend: AWS cannot be told to fail.
    #[cfg(feature = "local")]
    pub fn local_faults(&self) -> Result<crate::LocalFaults, SandboxError> {
        self.inner
            .backend
            .local
            .as_ref()
            .map(crate::local::LocalBackend::faults)
            .ok_or_else(|| {
                SandboxError::unimplemented(
                    "local_faults",
                    "faults are injected on the local backend only; build the client with Client::local()",
                    Some("docs/testing.md"),
                )
            })
    }

    /// A builder for a new sandbox on this client (or a connection to an
    /// existing one with options): [`SandboxBuilder::create`].
    pub fn sandbox(&self) -> SandboxBuilder {
        SandboxBuilder::on(self.clone())
    }

    /// Connects to an existing sandbox with its access token, with the
    /// default options (see [`SandboxBuilder::connect`] for the steps).
    ///
    /// # Errors
    /// As [`SandboxBuilder::connect`].
    pub async fn connect(
        &self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<Sandbox, SandboxError> {
        self.sandbox().connect(sandbox_id, access_token).await
    }

    /// The sandboxes that match `query`, as a `Stream` of summaries
    /// (ListMicrovms pages of up to 50, followed lazily). With a metadata
    /// filter each RUNNING sandbox is probed through its agent's Health; a
    /// probe that fails ends the stream with that error (a sandbox is never
    /// dropped silently).
    pub fn list(&self, query: ListQuery) -> SandboxList {
        crate::sandbox::list::list(self.clone(), query)
    }

    /// Terminates the sandbox `sandbox_id` without a handle, in a
    /// `rayito.sandbox.kill` span. With a metadata index (`ClientBuilder::index`,
    /// or the builder's the client came from), then deletes its row (a row
    /// that cannot be deleted is logged, as in [`Sandbox::kill`]). Returns
    /// `false` when it was not found (already gone).
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`) before any I/O; control-plane
    /// failures other than not-found (`Authentication`, `RateLimit` after
    /// retries, `Sandbox { service_error }`).
    pub async fn kill_by_id(&self, sandbox_id: &str) -> Result<bool, SandboxError> {
        let op = self.op(crate::otel::Name::SandboxKill, sandbox_id);
        let kill = async move {
            check_sandbox_id(sandbox_id)?;
            let killed = lifecycle::kill(self.inner.backend.control.as_ref(), sandbox_id).await?;
            for step in crate::feature_steps() {
                step.after_kill(self, sandbox_id).await;
            }
            Ok(killed)
        };
        boxed!(Result<bool, SandboxError>, {
            op.run(kill, crate::otel::nothing).await
        })
    }

    /// What the control plane says about the sandbox `sandbox_id`, without
    /// a handle (GetMicrovm).
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`) before any I/O; `SandboxNotFound`
    /// when it does not exist; other control-plane failures.
    pub async fn get_info_by_id(&self, sandbox_id: &str) -> Result<SandboxInfo, SandboxError> {
        check_sandbox_id(sandbox_id)?;
        let vm = self
            .inner
            .backend
            .control
            .get_microvm(sandbox_id.to_owned())
            .await?;
        Ok(SandboxInfo::from_vm(vm))
    }

    /// Resumes the paused sandbox `sandbox_id` without a handle:
    /// ResumeMicrovm, then GetMicrovm every 0.5 s until RUNNING (within
    /// 90 s). A running sandbox is left as it is.
    ///
    /// # Errors
    /// As [`Client::resume_by_id_within`].
    pub async fn resume_by_id(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        self.resume_by_id_within(sandbox_id, RESUME_WAIT).await
    }

    /// [`Client::resume_by_id`], waiting at most `wait` for RUNNING, in a
    /// `rayito.sandbox.resume` span.
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`) before any I/O; `SandboxNotFound`
    /// when it does not exist or has ended; `Timeout { scope: StateWait }`;
    /// other control-plane failures.
    pub async fn resume_by_id_within(
        &self,
        sandbox_id: &str,
        wait: Duration,
    ) -> Result<(), SandboxError> {
        let op = self.op(crate::otel::Name::SandboxResume, sandbox_id);
        let resume = async move {
            check_sandbox_id(sandbox_id)?;
            let control = self.inner.backend.control.as_ref();
            lifecycle::request_resume(control, sandbox_id).await?;
            lifecycle::wait_for_state(control, sandbox_id, &SandboxState::Running, "resume", wait)
                .await
        };
        boxed!(Result<(), SandboxError>, {
            op.run(resume, crate::otel::nothing).await
        })
    }

    /// The resources of the RUNNING sandbox `sandbox_id` now, without a
    /// handle (see [`crate::Metrics::current`]): GetMicrovm, one proxy
    /// token, then Metrics with `access_token` (60 s request timeout).
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`, `access_token`) before any call;
    /// `SandboxNotFound` for a terminated sandbox; `SandboxState` for one
    /// that is not running (before any proxy token is minted);
    /// `Unimplemented` (feature `get_metrics`) from an agent without it.
    pub async fn get_metrics_by_id(
        &self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<SandboxMetrics, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<SandboxMetrics, SandboxError>, {
            crate::sandbox::metrics_by_id(self, sandbox_id, access_token, DEFAULT_REQUEST_TIMEOUT)
                .await
        })
    }

    /// The sampled history of the RUNNING sandbox `sandbox_id`, without a
    /// handle (see [`crate::Metrics::history`]).
    ///
    /// # Errors
    /// As [`Self::get_metrics_by_id`]; `InvalidArgument` for `query` (see
    /// [`crate::Metrics::history`]) before any call; `Unimplemented`
    /// (feature `get_metrics_history`) from an agent without it.
    pub async fn get_metrics_history_by_id(
        &self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        query: MetricsHistoryQuery,
    ) -> Result<Vec<SandboxMetrics>, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<Vec<SandboxMetrics>, SandboxError>, {
            crate::sandbox::metrics_history_by_id(
                self,
                sandbox_id,
                access_token,
                query,
                DEFAULT_REQUEST_TIMEOUT,
            )
            .await
        })
    }

    /// Replaces the egress policy of the RUNNING sandbox `sandbox_id`
    /// without a handle (see [`crate::Network::update`]): GetMicrovm, one
    /// proxy token, then UpdateNetwork with `access_token`; never
    /// terminates.
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`, `access_token`, `allow_out`,
    /// `deny_out`, `egress_proxy`) before any call; `SandboxNotFound`,
    /// `SandboxState` as [`Self::get_metrics_by_id`]; `Unimplemented`
    /// (feature `update_network`) from an agent that cannot apply it.
    pub async fn update_network_by_id(
        &self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        policy: NetworkPolicy,
    ) -> Result<NetworkState, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<NetworkState, SandboxError>, {
            crate::sandbox::network_by_id(
                self,
                sandbox_id,
                access_token,
                policy,
                DEFAULT_REQUEST_TIMEOUT,
            )
            .await
        })
    }

    /// The operation `name` on the sandbox `sandbox_id` through this client
    /// (a span's attributes and tracer; no I/O).
    fn op(&self, name: crate::otel::Name, sandbox_id: &str) -> crate::otel::Op {
        let op = crate::otel::Op::new(name).with(crate::otel::Attr::SandboxId(
            crate::otel::Attr::name_text(sandbox_id),
        ));
        #[cfg(feature = "otel")]
        let op = op.traced_by(self.features.tracer.as_ref());
        op
    }

    /// The features riding on this client (index, tracer).
    pub(crate) fn features(&self) -> &ClientFeatures {
        &self.features
    }

    /// The features' parts riding on this client (the metadata index).
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn parts(&self) -> &Parts {
        &self.features.parts
    }

    /// This client with `features` (the backend stays shared).
    pub(crate) fn with_features(&self, features: ClientFeatures) -> Client {
        Client {
            inner: self.inner.clone(),
            features,
        }
    }

    /// What the control plane says about a template (an image name on the
    /// local backend, an image ARN; `None`: `RAYITO_TEMPLATE`, else the
    /// local backend's default image): GetMicrovmImage, a pre-flight check
    /// that makes no sandbox (`rayito doctor` runs it).
    ///
    /// # Errors
    /// `InvalidArgument` (`template`) before any call; `SandboxNotFound`
    /// (the image is probably missing) when the image does not exist;
    /// `Authentication` (no permission for `GetMicrovmImage`); other
    /// control-plane failures.
    pub async fn template_info(
        &self,
        template: Option<&str>,
    ) -> Result<TemplateInfo, SandboxError> {
        let arn = self.image_arn(template).await?;
        let image = self.inner.backend.control.get_image(arn).await?;
        Ok(TemplateInfo {
            arn: image.arn,
            name: image.name,
            state: image.state,
            latest_active_version: image.latest_active_version,
        })
    }
}

/// What tells two implicit clients apart: the backend's settings (secrets
/// only as digests), the retry policy and the pacing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ImplicitKey {
    backend: crate::sandbox::backend::BackendKey,
    retry_policy: RetryPolicy,
    pacing: Pacing,
}

/// One implicit client: the runtime it was made in, its key, and the
/// client while any handle holds it.
struct ImplicitEntry {
    runtime: tokio::runtime::Id,
    key: ImplicitKey,
    client: Weak<ClientInner>,
}

/// The implicit clients of the shortcuts, by runtime and configuration.
static IMPLICIT: Mutex<Vec<ImplicitEntry>> = Mutex::new(Vec::new());

/// The pacing state of one implicit configuration in one runtime. It
/// outlives the implicit client (forgotten once no handle holds it): one
/// task that creates and kills sandboxes in a loop drops its client
/// between them, and a fresh pacer each time would never pace it, while
/// tasks whose sandboxes live together share one and are held to the
/// rates. Kept while the runtime lives (see [`RuntimeGuard`]).
struct PacerEntry {
    runtime: tokio::runtime::Id,
    key: ImplicitKey,
    buckets: Arc<Buckets>,
}

/// The pacers of the implicit configurations, by runtime and configuration.
static PACERS: Mutex<Vec<PacerEntry>> = Mutex::new(Vec::new());

/// Forgets a runtime's pacers when dropped: held by a task parked on that
/// runtime forever, which the runtime drops when it shuts down.
struct RuntimeGuard(tokio::runtime::Id);

impl Drop for RuntimeGuard {
    fn drop(&mut self) {
        PACERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|entry| entry.runtime != self.0);
    }
}

/// The pacer of `key` in `runtime` (the current one), made on first use.
fn pacer(runtime: tokio::runtime::Id, key: &ImplicitKey) -> Arc<Buckets> {
    let mut pacers = PACERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(entry) = pacers
        .iter()
        .find(|entry| entry.runtime == runtime && &entry.key == key)
    {
        return entry.buckets.clone();
    }
    let first_of_runtime = !pacers.iter().any(|entry| entry.runtime == runtime);
    let buckets = Arc::new(Buckets::new(key.pacing));
    pacers.push(PacerEntry {
        runtime,
        key: key.clone(),
        buckets: buckets.clone(),
    });
    drop(pacers);
    if first_of_runtime {
        // After the lock: a runtime shutting down drops the task at once,
        // and the guard's drop takes the lock.
        let guard = RuntimeGuard(runtime);
        drop(tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
    }
    buckets
}
/// The client a shortcut (`Sandbox::create()`, `Sandbox::builder()...`)
/// uses: the live one made in this runtime with the same options, else a
/// new one. Nothing is shared across runtimes (an AWS client's pooled
/// connections die with the runtime that opened them), and a client is
/// forgotten once no handle holds it.
///
/// # Errors
/// As [`ClientBuilder::build`].
pub(crate) async fn implicit(builder: &ClientBuilder) -> Result<Client, SandboxError> {
    if builder.is_injected() {
        return builder.clone().build().await;
    }
    let key = builder.implicit_key()?;
    let runtime = tokio::runtime::Handle::try_current()
        .map(|handle| handle.id())
        .map_err(|_| {
            SandboxError::internal(
                "create",
                "the SDK was called outside a tokio runtime; call it from a tokio runtime",
            )
        })?;
    if let Some(inner) = find(runtime, &key) {
        return Ok(Client {
            inner,
            features: builder.features.clone(),
        });
    }
    let made = builder.clone().build_paced(pacer(runtime, &key)).await?;
    let mut entries = IMPLICIT.lock().unwrap_or_else(PoisonError::into_inner);
    entries.retain(|entry| entry.client.strong_count() > 0);
    // Two first calls at once: both converge on the first one registered.
    if let Some(inner) = entries
        .iter()
        .find(|entry| entry.runtime == runtime && entry.key == key)
        .and_then(|entry| entry.client.upgrade())
    {
        return Ok(Client {
            inner,
            features: builder.features.clone(),
        });
    }
    entries.push(ImplicitEntry {
        runtime,
        key,
        client: Arc::downgrade(&made.inner),
    });
    Ok(made)
}

fn find(runtime: tokio::runtime::Id, key: &ImplicitKey) -> Option<Arc<ClientInner>> {
    IMPLICIT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|entry| entry.runtime == runtime && &entry.key == key)
        .and_then(|entry| entry.client.upgrade())
}

/// Where a sandbox builder (or a listing) gets its client: one it was given
/// ([`Client::sandbox`]), or else the implicit client of its options.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientSource {
    given: Option<Client>,
    config: ClientBuilder,
}

impl ClientSource {
    /// The client `client`.
    pub(crate) fn given(client: Client) -> Self {
        Self {
            config: client.config().clone(),
            given: Some(client),
        }
    }

    /// The options to change. A given client is let go: a setter on
    /// `client.sandbox()` means "this client's options, but", served by
    /// the implicit client of those options.
    pub(crate) fn config_mut(&mut self) -> &mut ClientBuilder {
        self.given = None;
        &mut self.config
    }

    /// The client.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    pub(crate) async fn client(&self) -> Result<Client, SandboxError> {
        match &self.given {
            Some(client) => Ok(client.clone()),
            None => implicit(&self.config).await,
        }
    }
}

#[cfg(all(test, feature = "local"))]
mod tests {
    use super::*;
    use crate::control::layer::Operation as Op;

    fn pacers_of(runtime: tokio::runtime::Id) -> usize {
        PACERS
            .lock()
            .unwrap()
            .iter()
            .filter(|entry| entry.runtime == runtime)
            .count()
    }

    /// One task creating and killing in a loop, its implicit client
    /// dropped between sandboxes, goes through the same pacer as tasks
    /// whose sandboxes live together: every RunMicrovm of both is in its
    /// record (a fresh pacer per client paced one create each, never
    /// making the loop wait). The rates are high so that the test does
    /// not wait on them; which pacer decides is what it checks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn creates_in_a_loop_through_implicit_clients_share_one_pacer() {
        let pacing = Pacing::new().run_microvm(997).terminate_microvm(997);
        let builder = || crate::Sandbox::builder().local().pacing(pacing);
        let runtime = tokio::runtime::Handle::current().id();
        for _ in 0..3 {
            let sandbox = builder().create().await.unwrap();
            assert!(sandbox.kill().await.unwrap());
        }
        let concurrent = futures_util::future::join_all((0..2).map(|_| builder().create())).await;
        let key = ClientBuilder::new()
            .local()
            .pacing(pacing)
            .implicit_key()
            .unwrap();
        let pacer = pacer(runtime, &key);
        assert_eq!(pacer.taken(Op::Run), 5, "one pacer saw every create");
        for sandbox in concurrent {
            assert!(sandbox.unwrap().kill().await.unwrap());
        }
        assert_eq!(pacer.taken(Op::Terminate), 5);
    }

    #[test]
    fn a_runtime_s_pacers_go_with_it() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let id = runtime.handle().id();
        let key = ClientBuilder::new()
            .local()
            .pacing(Pacing::new().list_microvms(3))
            .implicit_key()
            .unwrap();
        let (a, b) = runtime.block_on(async { (pacer(id, &key), pacer(id, &key)) });
        assert!(Arc::ptr_eq(&a, &b), "one pacer per configuration");
        assert_eq!(pacers_of(id), 1);
        drop(runtime);
        assert_eq!(pacers_of(id), 0, "forgotten with its runtime");
    }
}
