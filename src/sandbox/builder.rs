//! `Sandbox::builder()`: options, then `create()` or `connect()`.

use std::sync::Arc;
use std::time::Duration;

use super::backend::{AwsOptions, BackendChoice};
use super::lifecycle::{self, LifecycleMarks, check_sandbox_id};
use super::list::{ListQuery, SandboxList};
use super::options::{CreateOptions, IdleChoice, IdlePolicy, LaunchPlan, OnTimeout, grouped};
use super::parts::Parts;
use super::payload::{MAX_PAYLOAD_CHARS, run_payload};
use super::readiness::{OnNotReady, wait_ready};
use super::steps::{Launch, NewVm, Stage};
use super::{Inner, PROXY_TOKEN_TTL, Sandbox, SandboxInfo, proxy_minter};
use crate::control::pacing::Pacing;
use crate::control::{IdlePolicyParams, RunLogging, RunRequest};
use crate::error::{RetryPolicy, SandboxError};
use crate::sandbox::client::{Client, ClientSource};
use crate::secret::{Secret, decode_access_token, generate_access_token, token_sha256_hex};
use crate::state::SandboxState;
use crate::transport::{AGENT_PORT, RefreshSchedule, Refresher};

/// What RunMicrovm answered for a new sandbox, for a pool's record.
pub(crate) struct Launched {
    pub id: String,
    pub endpoint: String,
    pub image_arn: String,
    pub image_version: String,
    pub started_at: std::time::SystemTime,
    pub max_duration_secs: u64,
    /// (max idle, suspended, auto resume) in seconds.
    pub idle_policy: Option<(u64, u64, bool)>,
    pub access_token: Secret,
    pub execution_role_arn: Option<String>,
    pub region: String,
}

/// Called with [`Launched`] by [`SandboxBuilder::create_observed`].
pub(crate) type LaunchHook = dyn Fn(
        Launched,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SandboxError>> + Send>>
    + Send
    + Sync;

/// Options for a new sandbox (or for connecting to one). Setters never fail;
/// everything is checked by [`SandboxBuilder::create`] before any I/O.
#[derive(Debug, Clone)]
#[must_use]
pub struct SandboxBuilder {
    options: CreateOptions,
    /// The client given ([`Client::sandbox`]), or the options of the
    /// implicit one (`Sandbox::builder()`).
    client: ClientSource,
    refresh: RefreshSchedule,
    /// What the features' setters set (a persistence prefix, the
    /// staging, the bound secrets...), each a type of its feature.
    parts: Parts,
    /// What rides on the client the sandbox is made with (the metadata
    /// index): the given client's unless a setter changed it.
    client_parts: Parts,
    /// The egress policy and `allow_internet_access` (docs/network.md).
    network: super::network::NetworkChoice,
    /// The tracer of the operation spans (feature `otel`).
    #[cfg(feature = "otel")]
    tracer: Option<crate::otel::Tracer>,
}

/// The lifetimes a pool gives the sandboxes it makes (its config's, as
/// plain data: the core does not know the pool).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pooled {
    /// The MicroVM timeout.
    pub(crate) timeout: Duration,
    /// The idle time before a parked sandbox is suspended.
    pub(crate) max_idle: Duration,
    /// The readiness wait.
    pub(crate) ready_timeout: Duration,
}

impl Default for SandboxBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxBuilder {
    /// The defaults (see [`crate::Sandbox::create`]), on the implicit
    /// client of this runtime: the backend from `RAYITO_BACKEND`.
    pub fn new() -> Self {
        Self {
            options: CreateOptions::default(),
            client: ClientSource::default(),
            refresh: RefreshSchedule::default(),
            parts: Parts::default(),
            client_parts: Parts::default(),
            network: super::network::NetworkChoice::default(),
            #[cfg(feature = "otel")]
            tracer: None,
        }
    }

    /// The sandbox's egress policy (docs/network.md): checked in `create`
    /// before any I/O; a policy that restricts (a `deny_out` entry or a
    /// proxy) needs an agent that enforces it, else `create` terminates
    /// the sandbox and fails `Unimplemented` (feature `network`).
    pub fn network(mut self, policy: super::NetworkPolicy) -> Self {
        self.network.policy = Some(policy);
        self
    }

    /// `false` denies everything the policy's `allow_out` does not allow
    /// (appends [`super::ALL_TRAFFIC`] to `deny_out`); an agent that cannot
    /// enforce it makes `create` terminate the sandbox and fail
    /// `Unimplemented` (feature `allow_internet_access=False`). `true` (the
    /// default) adds nothing.
    pub fn allow_internet_access(mut self, allow: bool) -> Self {
        self.network.allow_internet_access = Some(allow);
        self
    }

    /// The defaults, on `client` (what [`Client::sandbox`] returns).
    pub(crate) fn on(client: Client) -> Self {
        // The client's index and tracer are the builder's defaults.
        let crate::sandbox::client::ClientFeatures {
            parts: client_parts,
            #[cfg(feature = "otel")]
            tracer,
        } = client.features().clone();
        Self {
            client: ClientSource::given(client),
            client_parts,
            #[cfg(feature = "otel")]
            tracer,
            ..Self::new()
        }
    }

    /// Use the embedded local backend (code runs on this machine with
    /// best-effort isolation; a warning is logged when it starts).
    ///
    /// This and the other client settings ([`SandboxBuilder::local_tls`],
    /// [`SandboxBuilder::aws`], [`SandboxBuilder::retry_policy`],
    /// [`SandboxBuilder::pacing`]) pick the implicit client of those
    /// settings in this tokio runtime (shared by the handles made with
    /// equal settings); on a builder from [`Client::sandbox`] they start
    /// from that client's settings and replace it.
    ///
    /// Only with the `local` cargo feature (on by default).
    #[cfg(feature = "local")]
    pub fn local(mut self) -> Self {
        *self.client.config_mut().backend_mut() = BackendChoice::Local;
        self
    }

    /// Use the embedded local backend in TLS mode: each sandbox is dialled
    /// as on AWS, with TLS (ALPN h2) on port 443 of a loopback address of
    /// its own, verified against the local emulator's CA. Binding port 443
    /// needs root or CAP_NET_BIND_SERVICE; without it `create` fails with
    /// `Sandbox` (the local backend could not start).
    ///
    /// Only with the `local` cargo feature (on by default).
    #[cfg(feature = "local")]
    pub fn local_tls(mut self) -> Self {
        *self.client.config_mut().backend_mut() = BackendChoice::LocalTls;
        self
    }

    /// Use AWS (or another endpoint speaking the MicroVMs API).
    ///
    /// Handles made with equal options in one tokio runtime share one
    /// implicit client (its HTTPS connector and connection pool) while any
    /// of them lives; what the options leave to the environment
    /// (credentials chain, region, profile files) is read when that client
    /// is made. Build a [`Client`] to decide the sharing yourself.
    pub fn aws(mut self, options: AwsOptions) -> Self {
        *self.client.config_mut().backend_mut() = BackendChoice::Aws(options);
        self
    }

    /// The image: a name (local backend) or an image ARN.
    pub fn template(mut self, template: impl Into<String>) -> Self {
        self.options.template = Some(template.into());
        self
    }

    /// The template's version to start (default: its newest launchable
    /// one).
    pub fn template_version(mut self, version: u32) -> Self {
        self.options.template_version = Some(version);
        self
    }

    /// The sandbox's size: a [`Size`](crate::Size), or
    /// [`SizeRequest::MemoryMib`](crate::SizeRequest) that rounds up to the
    /// next size (with a warning). The sandbox runs the image
    /// `<template>-<size>` (`rayito image publish --sizes` builds them; the
    /// baseline `2gb` is the template itself). `create` refuses, before any
    /// I/O, with `InvalidArgument` (`size`) more than 8192 MiB or a template
    /// given as an image ARN with any size but the baseline.
    pub fn size(mut self, size: impl Into<crate::SizeRequest>) -> Self {
        self.options.size = Some(size.into());
        self
    }

    /// The sandbox's lifetime (default 1 h, at most 8 h; `create` refuses a
    /// longer one with `SandboxLifetime`, a zero one with `InvalidArgument`,
    /// before any I/O; a fraction of a second counts as a whole second).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// The CPU time each command, terminal and start command of the
    /// sandbox may use (RLIMIT_CPU, 1 s to 8 h in whole seconds): at the
    /// limit the process gets SIGXCPU, and SIGKILL 5 s of CPU later; a
    /// command ended so fails `CommandExit { status: Signaled }` with a
    /// message naming the limit. Code kernels are not limited (a kernel's
    /// CPU time adds up across cells). Checked before any call.
    pub fn cpu_time_limit(mut self, limit: Duration) -> Self {
        self.options.cpu_time_limit = Some(limit);
        self
    }

    /// The cap of a managed lifecycle (makes the timeout movable with
    /// [`crate::Sandbox::set_timeout`]); default `timeout + 60 s`, at least 120 s.
    pub fn max_lifetime(mut self, max_lifetime: Duration) -> Self {
        self.options.max_lifetime = Some(max_lifetime);
        self
    }

    /// What happens at the timeout (turns on the managed lifecycle).
    pub fn on_timeout(mut self, on_timeout: OnTimeout) -> Self {
        self.options.on_timeout = Some(on_timeout);
        self
    }

    /// One environment variable of every process and kernel.
    ///
    /// The value travels in RunMicrovm's run payload (a field AWS marks
    /// sensitive, handed to the MicroVM as data of the create call): keep
    /// secrets out of it and pass them per call (`CommandOptions::env`,
    /// `RunCodeOptions::env`), over the agent's TLS connection instead
    /// (docs/aws.md, "Where a sandbox's environment values travel").
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.envs.insert(name.into(), value.into());
        self
    }

    /// Environment variables of every process and kernel (see
    /// [`SandboxBuilder::env`] for where their values travel).
    pub fn envs<K, V>(mut self, envs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.options
            .envs
            .extend(envs.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The working directory of every command, terminal and code kernel
    /// that does not give its own (default `/home/user`): an absolute path
    /// of at most 4,096 bytes without control characters, checked before
    /// any call. It must exist in the sandbox's image (on the local
    /// backend: under `/home/user` or `/tmp`); a command started while it
    /// does not fails `InvalidArgument` with the agent's
    /// `invalid working directory`.
    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.options.workdir = Some(dir.into());
        self
    }

    /// Non-secret metadata, echoed by the agent's Health.
    pub fn metadata<K, V>(mut self, metadata: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.options
            .metadata
            .extend(metadata.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// How long to wait for the agent to become ready (default 90 s; zero is
    /// refused before any I/O; a duration too large to add to the clock,
    /// like `Duration::MAX`, means no limit).
    pub fn ready_timeout(mut self, ready_timeout: Duration) -> Self {
        self.options.ready_timeout = ready_timeout;
        self
    }

    /// How long the handle waits for its sandbox to come back after a cut
    /// (default 60 s): the budget of the reconnect contract
    /// (docs/errors.md, "Reconnect") for streams (commands, `run_code`,
    /// terminals, file reads), watches and the unary calls retried after a
    /// pause, an auto-resume or a proxy 502; when it is spent the call
    /// fails `Sandbox { connection_lost }`. The shorthand of
    /// [`RetryPolicy::reconnect`]'s `total_budget`, for this sandbox only
    /// (the client's policy is left as it is). Zero is refused before any
    /// I/O.
    pub fn reconnect_timeout(mut self, budget: Duration) -> Self {
        self.options.reconnect_timeout = Some(budget);
        self
    }

    /// Deadline of unary agent calls (default 60 s; zero is refused before
    /// any I/O; a duration too large to add to the clock, like
    /// `Duration::MAX`, means no limit).
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.options.request_timeout = request_timeout;
        self
    }

    /// The platform idle policy (default: 300 s with auto-resume, dropped
    /// when the sandbox is shorter).
    pub fn idle_policy(mut self, policy: IdlePolicy) -> Self {
        self.options.idle = IdleChoice::Explicit(policy);
        self
    }

    /// No idle policy: the sandbox is never suspended for idleness.
    pub fn no_idle_policy(mut self) -> Self {
        self.options.idle = IdleChoice::Disabled;
        self
    }

    /// Extra ports the proxy token opens besides 8080 (never 9000).
    pub fn allowed_ports(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.options.allowed_ports.extend(ports);
        self
    }

    /// The ingress network connectors (RunMicrovm
    /// `ingressNetworkConnectors`): what may reach the sandbox, managed
    /// ([`NetworkConnector::AllIngress`](super::NetworkConnector),
    /// `NoIngress`, `ShellIngress`, or their names as strings) or VPC
    /// connectors of your account by ARN. At most 10; `create` refuses
    /// more, or a value that is neither, with `InvalidArgument` (`ingress`)
    /// before any call. Not given or empty: the image's defaults. Replaces
    /// what an earlier call set. [`SandboxInfo::ingress`] reports them.
    /// The local backend records and reports them but does not enforce
    /// them (docs/local.md).
    pub fn ingress<C: Into<super::NetworkConnector>>(
        mut self,
        connectors: impl IntoIterator<Item = C>,
    ) -> Self {
        self.options.connectors.ingress = Some(connectors.into_iter().map(Into::into).collect());
        self
    }

    /// The egress network connectors (RunMicrovm
    /// `egressNetworkConnectors`): where the sandbox's traffic leaves,
    /// [`NetworkConnector::InternetEgress`](super::NetworkConnector) or a
    /// VPC connector of your account by ARN (one of your own replaces the
    /// internet). At most 10; checked as [`Self::ingress`] (argument
    /// `egress`). Not given or empty: the image's defaults.
    /// [`SandboxInfo::egress`] reports them. The local backend records and
    /// reports them but does not enforce them (docs/local.md); the egress
    /// policy ([`Self::network`]) is enforced inside the sandbox either way.
    pub fn egress<C: Into<super::NetworkConnector>>(
        mut self,
        connectors: impl IntoIterator<Item = C>,
    ) -> Self {
        self.options.connectors.egress = Some(connectors.into_iter().map(Into::into).collect());
        self
    }

    /// The IAM role the MicroVM runs with.
    pub fn execution_role_arn(mut self, arn: impl Into<String>) -> Self {
        self.options.execution_role_arn = Some(arn.into());
        self
    }

    /// Where the sandbox's output goes (RunMicrovm `logging`, always sent;
    /// default [`SandboxLogging::Disabled`](super::SandboxLogging::Disabled)). CloudWatch Logs needs an
    /// execution role that may write to the group (docs/sandbox-logs.md).
    pub fn logging(mut self, logging: super::SandboxLogging) -> Self {
        self.options.logging = Some(Box::new(logging));
        self
    }

    /// Leaves the MicroVM running when `create` fails after RunMicrovm
    /// (default `false`: it is terminated), for the caller to inspect,
    /// connect to or kill: a proxy token that cannot be minted, an agent
    /// or kernel that never becomes ready, an index row that cannot be
    /// written, an automatic restore that fails. The error is returned
    /// either way and names the kept sandbox: its message, and
    /// [`ErrorMeta::kept_sandbox_id`](crate::error::ErrorMeta::kept_sandbox_id).
    ///
    /// An egress policy the agent cannot enforce still terminates the
    /// MicroVM (a sandbox with more network than asked for is never left
    /// running), and a MicroVM that ended by itself is gone either way. A
    /// pool's builder refuses it (a warming slot that fails is always
    /// terminated: nobody holds its id).
    pub fn keep_on_failure(mut self, keep: bool) -> Self {
        self.options.keep_on_failure = keep;
        self
    }

    /// Use this access token instead of a generated one (base64url, at least
    /// 16 bytes once decoded).
    pub fn access_token(mut self, token: impl Into<Secret>) -> Self {
        self.options.access_token = Some(token.into());
        self
    }

    /// The retry policy (default: docs/errors.md, "Retries").
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        let config = std::mem::take(self.client.config_mut());
        *self.client.config_mut() = config.retry_policy(policy);
        self
    }

    /// Client-side pacing of control-plane calls (default: [`Pacing::new`]),
    /// shared by every handle of the client.
    pub fn pacing(mut self, pacing: Pacing) -> Self {
        let config = std::mem::take(self.client.config_mut());
        *self.client.config_mut() = config.pacing(pacing);
        self
    }

    /// How often the handle re-mints its proxy token in the background
    /// (default 45 minutes; a token lives 60). After a failed re-mint the
    /// current token is kept and the re-mint is retried after 60 s (or
    /// `every`, when shorter). The task stops with `kill()` and when the
    /// last clone of the handle is dropped. A zero duration is taken as 1 ms.
    pub fn proxy_token_refresh(mut self, every: Duration) -> Self {
        let every = every.max(Duration::from_millis(1));
        self.refresh = RefreshSchedule {
            every,
            retry_after_failure: every.min(RefreshSchedule::default().retry_after_failure),
        };
        self
    }

    /// Traces the sandbox's operations with `provider`: create, connect,
    /// kill, pause, resume, commands, code and files are each a CLIENT span
    /// of tracer `rayito` (with the crate's version), with the closed
    /// attribute set of docs/observability.md, and every gRPC call to the
    /// agent made under a span carries its W3C `traceparent`. The handle
    /// and its clones keep the tracer; without this, no OpenTelemetry span
    /// is made (the operations are still `tracing` spans).
    ///
    /// Only with the `otel` cargo feature.
    #[cfg(feature = "otel")]
    pub fn tracer_provider<P>(mut self, provider: &P) -> Self
    where
        P: opentelemetry::trace::TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as opentelemetry::trace::Tracer>::Span: Send + Sync + 'static,
    {
        self.tracer = Some(crate::otel::Tracer::from_provider(provider));
        self
    }

    /// The operation `name` on this builder: its template, region and
    /// tracer (a span's attributes; no I/O).
    fn op(&self, name: crate::otel::Name) -> crate::otel::Op {
        let mut op = crate::otel::Op::new(name);
        if let Some(template) = &self.options.template {
            op = op.with(crate::otel::Attr::TemplateName(
                crate::otel::Attr::name_text(template),
            ));
        }
        #[cfg(feature = "otel")]
        let op = op.traced_by(self.tracer.as_ref());
        op
    }

    /// Where a `create` or `connect` of this builder stands before the
    /// launch, for the steps.
    fn at<'a>(&'a self, stage: Stage, handle: &'a Parts, client: &'a Client) -> Launch<'a> {
        Launch {
            builder: self,
            stage,
            handle,
            client,
        }
    }

    /// What the features' setters set on this builder.
    pub(crate) fn parts(&self) -> &Parts {
        &self.parts
    }

    /// What the features' setters set on this builder, to change it.
    pub(crate) fn parts_mut(&mut self) -> &mut Parts {
        &mut self.parts
    }

    /// What rides on this builder's client (the metadata index).
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn client_parts(&self) -> &Parts {
        &self.client_parts
    }

    /// What rides on this builder's client (the metadata index), to
    /// change it.
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn client_parts_mut(&mut self) -> &mut Parts {
        &mut self.client_parts
    }

    /// The names of the builder's environment variables.
    #[cfg_attr(not(feature = "secrets"), allow(dead_code))]
    pub(crate) fn env_names(&self) -> impl Iterator<Item = &String> {
        self.options.envs.keys()
    }

    /// The sandbox's metadata.
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn metadata_pairs(&self) -> &std::collections::BTreeMap<String, String> {
        &self.options.metadata
    }

    /// Whether a failed create keeps its MicroVM (`keep_on_failure`).
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn keeps_on_failure(&self) -> bool {
        self.options.keep_on_failure
    }

    /// A failure of `create` after RunMicrovm started `id`: the MicroVM
    /// is terminated, or kept (keep on failure) and named on the error.
    async fn launched_failure(
        &self,
        control: &dyn crate::control::ControlPlane,
        id: &str,
        err: SandboxError,
    ) -> SandboxError {
        if self.options.keep_on_failure {
            return err.kept_on_failure(id);
        }
        let _ = control.terminate_microvm(id.to_owned()).await;
        err
    }

    /// Whether the sandbox logs to CloudWatch Logs (lifecycle events read
    /// their lines there).
    #[cfg_attr(not(feature = "events"), allow(dead_code))]
    pub(crate) fn logs_to_cloudwatch(&self) -> bool {
        matches!(
            self.options.logging.as_deref(),
            Some(super::SandboxLogging::CloudWatch { .. })
        )
    }

    /// Whether an execution role is set.
    pub(crate) fn has_execution_role(&self) -> bool {
        self.options.execution_role_arn.is_some()
    }

    /// The egress connectors given (`None`: not given, the image's).
    #[cfg_attr(not(feature = "efs"), allow(dead_code))]
    pub(crate) fn egress_connectors(&self) -> Option<&[super::NetworkConnector]> {
        self.options.connectors.egress.as_deref()
    }

    /// The image name `create` launches as given (with the size's suffix),
    /// before it resolves to an ARN; `None`: the backend's default.
    ///
    /// # Errors
    /// `InvalidArgument` (`size`) for a size that does not resolve.
    #[cfg_attr(not(feature = "efs"), allow(dead_code))]
    pub(crate) fn image_name(&self) -> Result<Option<String>, SandboxError> {
        self.options.sized_template()
    }

    /// Creates the sandbox and waits until its agent is ready.
    ///
    /// Steps: checks (no I/O), RunMicrovm (capacity, throttling and 5xx
    /// retried with one clientToken), a proxy token for 8080 plus the allowed
    /// ports, then the readiness wait. When a step after RunMicrovm fails
    /// (readiness, the index row, the automatic restore) the MicroVM is
    /// terminated, unless [`Self::keep_on_failure`] keeps it (the error
    /// then names it: [`crate::error::ErrorMeta::kept_sandbox_id`]).
    ///
    /// # Errors
    /// - before any I/O: `SandboxLifetime` (timeout above 28,800 s),
    ///   `InvalidArgument` naming the argument;
    /// - `Authentication` (no AWS credentials or region: the message says how
    ///   to configure AWS or choose the local backend; a refused token);
    /// - `SandboxNotFound` (the image does not exist), `Capacity`,
    ///   `RateLimit`, `QuotaExceeded`, `Sandbox { code: ServiceError }`;
    /// - `SandboxNotReady { state, state_reason }` after `ready_timeout`;
    /// - with an index: `InvalidArgument` (`index`) before any I/O,
    ///   `IndexWrite { aws_code }` when the row cannot be written (the
    ///   message says whether the MicroVM was terminated or kept).
    ///
    /// With [`Self::persist`]: `InvalidArgument` (`persist` without an
    /// execution role, `bucket`, `prefix`, `name`, `region`) before any
    /// I/O, and the automatic restore's errors (the sandbox terminated
    /// unless kept on failure).
    pub async fn create(self) -> Result<Sandbox, SandboxError> {
        boxed!(Result<Sandbox, SandboxError>, {
            let op = self.op(crate::otel::Name::SandboxCreate);
            op.run(
                async move {
                    let steps = crate::feature_steps();
                    for step in &steps {
                        step.check_create(&self)?;
                    }
                    let parts = self.parts.clone();
                    let keep = self.options.keep_on_failure;
                    let mut sandbox = self.create_observed(None).await?;
                    sandbox = super::steps::configure_all(&steps, sandbox, keep).await?;
                    for step in &steps {
                        sandbox = step.after_create(&parts, keep, sandbox).await?;
                    }
                    Ok(sandbox)
                },
                handle_attrs,
            )
            .await
        })
    }

    /// [`SandboxBuilder::create`], calling `on_launch` the moment
    /// RunMicrovm answered (a pool records its warming slot there); an
    /// error from it terminates the MicroVM and is returned.
    pub(crate) async fn create_observed(
        self,
        on_launch: Option<&LaunchHook>,
    ) -> Result<Sandbox, SandboxError> {
        boxed!(Result<Sandbox, SandboxError>, {
            let (plan, access_token, payload) = self.launch()?;
            let network = self.network.checked()?;
            if network.is_none() {
                self.network.note_unrestricted();
            }
            let steps = crate::feature_steps();
            let mut parts = Parts::default();
            for step in &steps {
                step.prepare(&self, Stage::Create, &mut parts)?;
            }
            let template = self.options.sized_template()?;
            if let Some(logging) = &self.options.logging {
                logging.check()?;
            }
            for step in &steps {
                step.check_late(&self)?;
            }
            let client = self.client().await?;
            // What the features need is read before RunMicrovm: a missing
            // secret or AWS configuration never launches (and bills) a MicroVM.
            for step in &steps {
                step.before_launch(self.at(Stage::Create, &parts, &client))
                    .await?;
            }
            let backend = client.backend();
            let policy = self.options.agent_policy(client.retry_policy());
            let image_arn = client.image_arn(template.as_deref()).await?;
            let logging = self
                .options
                .logging
                .as_ref()
                .map_or(RunLogging::Disabled, |l| l.resolve(&image_arn));
            // A managed connector's ARN names the region (an injected
            // control plane, in tests, has none).
            let (ingress, egress) = self
                .options
                .connectors
                .resolved(client.region().unwrap_or("us-east-1"));
            let request = RunRequest {
                image_arn,
                image_version: self.options.template_version.map(|v| v.to_string()),
                max_duration_seconds: i32::try_from(plan.max_duration_secs).unwrap_or(i32::MAX),
                run_hook_payload: payload,
                client_token: client_token(),
                idle_policy: plan.idle_policy.map(|(max_idle, suspended, auto_resume)| {
                    IdlePolicyParams {
                        max_idle_seconds: i32::try_from(max_idle).unwrap_or(i32::MAX),
                        suspended_seconds: i32::try_from(suspended).unwrap_or(i32::MAX),
                        auto_resume,
                    }
                }),
                execution_role_arn: self.options.execution_role_arn.clone(),
                logging,
                ingress,
                egress,
            };
            let control = backend.control.clone();
            let vm = control.run_microvm(request).await?;
            tracing::trace!(target: "rayito::sandbox", sandbox_id = %vm.id, "RunMicrovm answered");
            if let Some(hook) = on_launch {
                let launched = Launched {
                    id: vm.id.clone(),
                    endpoint: vm.endpoint.clone(),
                    image_arn: vm.image_arn.clone(),
                    image_version: vm.image_version.clone(),
                    started_at: vm.started_at.unwrap_or_else(std::time::SystemTime::now),
                    max_duration_secs: plan.max_duration_secs,
                    idle_policy: plan.idle_policy,
                    access_token: access_token.clone(),
                    execution_role_arn: self.options.execution_role_arn.clone(),
                    region: client.region().unwrap_or("local").to_owned(),
                };
                if let Err(err) = hook(launched).await {
                    let _ = control.terminate_microvm(vm.id.clone()).await;
                    return Err(err);
                }
            }

            let new_vm = NewVm {
                builder: &self,
                client: &client,
                id: &vm.id,
                image_arn: &vm.image_arn,
                image_version: &vm.image_version,
                started_at: vm.started_at.unwrap_or_else(std::time::SystemTime::now),
                max_duration_secs: plan.max_duration_secs,
            };
            for step in &steps {
                let terminate = control.terminate_microvm(vm.id.clone());
                step.after_launch(&new_vm, Box::pin(terminate)).await?;
            }

            let minter = proxy_minter(
                control.clone(),
                vm.id.clone(),
                plan.token_ports.clone(),
                PROXY_TOKEN_TTL,
            );
            let proxy_token = match minter().await {
                Ok(token) => {
                    tracing::trace!(target: "rayito::sandbox", "proxy token minted");
                    token
                }
                Err(err) => {
                    return Err(self.launched_failure(control.as_ref(), &vm.id, err).await);
                }
            };
            let conn = match backend.open_agent(
                &vm.endpoint,
                proxy_token,
                access_token.clone(),
                minter,
                policy,
            ) {
                Ok(conn) => conn,
                Err(err) => {
                    return Err(self.launched_failure(control.as_ref(), &vm.id, err).await);
                }
            };
            let on_not_ready = if self.options.keep_on_failure {
                OnNotReady::Keep
            } else {
                OnNotReady::Terminate
            };
            let health = wait_ready(
                &conn,
                control.as_ref(),
                &vm.id,
                self.options.ready_timeout,
                on_not_ready,
            )
            .await
            .map_err(|err| match &err {
                // Ended by itself: nothing is left to keep.
                SandboxError::SandboxNotReady { state: Some(s), .. } if s.is_terminal() => err,
                _ if self.options.keep_on_failure => err.kept_on_failure(&vm.id),
                _ => err,
            })?;
            // Terminates the sandbox on failure, whatever keep_on_failure
            // says: a sandbox with more network than asked for is never
            // left running.
            super::network::gate(
                network.as_ref(),
                &health,
                &conn,
                control.as_ref(),
                &vm.id,
                self.options.request_timeout,
            )
            .await?;
            tracing::debug!(target: "rayito::sandbox", sandbox_id = %vm.id, "sandbox ready");
            Ok(self.handle(
                client.clone(),
                vm.id,
                access_token,
                conn,
                health.resume_generation,
                super::managed_lifecycle(&health),
                parts,
            ))
        })
    }

    /// This builder as a pool's: each sandbox lives `config`'s timeout,
    /// suspends after its idle time with auto-resume, and is ready within
    /// its ready timeout; everything checked as `create` checks it.
    ///
    /// # Errors
    /// `InvalidArgument` (`on_timeout` for a managed lifecycle, which a
    /// pool does not run; `idle_policy` for a builder without one) and
    /// every check of `create`, before any I/O.
    pub(crate) fn pooled(mut self, lifetimes: Pooled) -> Result<Self, SandboxError> {
        for step in crate::feature_steps() {
            step.check_pooled(&self)?;
        }
        if self.options.max_lifetime.is_some() || self.options.on_timeout.is_some() {
            return Err(SandboxError::invalid_argument(
                "on_timeout",
                "a pooled sandbox lives the pool's timeout without a managed lifecycle; drop max_lifetime and on_timeout from the builder",
            ));
        }
        if self.options.keep_on_failure {
            return Err(SandboxError::invalid_argument(
                "keep_on_failure",
                "a pool terminates a warming sandbox that fails (nobody holds its id); drop keep_on_failure from the pool's builder",
            ));
        }
        if self.options.idle == IdleChoice::Disabled {
            return Err(SandboxError::invalid_argument(
                "idle_policy",
                "a pooled sandbox is parked suspended and resumed on take, which needs an idle policy with auto-resume; drop no_idle_policy from the builder",
            ));
        }
        self.options.timeout = lifetimes.timeout;
        self.options.idle = IdleChoice::Explicit(IdlePolicy::new(lifetimes.max_idle));
        self.options.ready_timeout = lifetimes.ready_timeout;
        self.launch()?;
        Ok(self)
    }

    /// This builder without the secrets it binds (a pool's warm sandboxes
    /// get them when taken).
    pub(crate) fn unbound(mut self) -> Self {
        for step in crate::feature_steps() {
            step.unbind(&mut self.parts);
        }
        self
    }

    /// Reads the secrets this builder binds (nothing without any): what a
    /// pool's take checks before it claims a parked sandbox.
    ///
    /// # Errors
    /// As the secrets of [`SandboxBuilder::create`].
    pub(crate) async fn preflight(&self) -> Result<(), SandboxError> {
        for step in crate::feature_steps() {
            step.preflight(self).await?;
        }
        Ok(())
    }

    /// The client this builder's options resolve to, without the builder's
    /// index and tracer (what a pool's take reads secrets with).
    #[cfg_attr(not(feature = "secrets"), allow(dead_code))]
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::build`].
    pub(crate) async fn base_client(&self) -> Result<Client, SandboxError> {
        self.client.client().await
    }

    /// The client this builder's sandboxes are made with.
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::build`].
    pub(crate) async fn resolved_client(&self) -> Result<Client, SandboxError> {
        self.client().await
    }

    /// The template (image name or ARN) this builder names, if any.
    pub(crate) fn template_name(&self) -> Option<&str> {
        self.options.template.as_deref()
    }

    /// Every check `create` makes before any I/O, and what they give: the
    /// launch plan, the access token and the run payload.
    pub(crate) fn launch(&self) -> Result<(LaunchPlan, Secret, String), SandboxError> {
        let plan = self.options.plan()?;
        let access_token = match &self.options.access_token {
            Some(token) => token.clone(),
            None => generate_access_token(),
        };
        let token_bytes = decode_access_token(&access_token).map_err(|_| bad_token())?;
        let payload = run_payload(
            &token_sha256_hex(&token_bytes),
            &self.options.envs,
            &self.options.metadata,
            plan.lifecycle,
        );
        let payload = if self.network.checked()?.is_some() {
            super::payload::with_network_enforce(&payload)
        } else {
            payload
        };
        let payload = match self.options.cpu_seconds()? {
            Some(seconds) => super::payload::with_cpu_seconds(&payload, seconds),
            None => payload,
        };
        let payload = match self.options.workdir()? {
            Some(dir) => super::payload::with_workdir(&payload, dir),
            None => payload,
        };
        let payload_chars = payload.chars().count();
        if payload_chars > MAX_PAYLOAD_CHARS {
            let argument = if self.options.metadata.is_empty() {
                "envs"
            } else {
                "metadata"
            };
            return Err(SandboxError::invalid_argument(
                argument,
                format!(
                    "the run payload is {} characters, above the limit of 4,096; pass fewer or shorter envs and metadata",
                    grouped(u64::try_from(payload_chars).unwrap_or(u64::MAX))
                ),
            ));
        }
        Ok((plan, access_token, payload))
    }

    /// The handle of a ready sandbox, with its proxy-token refresher.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of a handle, each from a different step of create or connect"
    )]
    fn handle(
        &self,
        client: Client,
        id: String,
        access_token: Secret,
        conn: crate::transport::AgentConn,
        resume_generation: u64,
        managed_lifecycle: Option<bool>,
        mut parts: Parts,
    ) -> Sandbox {
        let control = client.backend().control.clone();
        let marks = Arc::new(LifecycleMarks::new(resume_generation));
        conn.enable_reconnect(
            id.clone(),
            lifecycle::state_check(control.clone(), id.clone(), marks.clone()),
            resume_generation,
        );
        let refresher = Refresher::spawn(conn.clone(), self.refresh);
        for step in crate::feature_steps() {
            step.bind(self, &id, &mut parts);
        }
        Sandbox {
            inner: Arc::new(Inner {
                client,
                id,
                access_token,
                control,
                conn,
                request_timeout: self.options.request_timeout,
                ready_timeout: self.options.ready_timeout,
                marks,
                refresher,
                managed_lifecycle,
                parts,
            }),
        }
    }

    /// The client a `create` on this builder uses: its backend (the client
    /// given to [`Client::sandbox`], else the implicit client of the
    /// builder's backend options), with the builder's index and tracer. The
    /// by-id operations live there: `Sandbox::builder().local().client().await?.kill_by_id(id)`.
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::build`].
    pub async fn client(&self) -> Result<Client, SandboxError> {
        boxed!(Result<Client, SandboxError>, {
            let client = self.client.client().await?;
            // The builder's index and tracer: the given client's unless a
            // setter changed them (`on` copied them).
            let features = crate::sandbox::client::ClientFeatures {
                parts: self.client_parts.clone(),
                #[cfg(feature = "otel")]
                tracer: self.tracer.clone(),
            };
            Ok(client.with_features(features))
        })
    }

    /// What the control plane says about the template a `create` on this
    /// builder would use (see [`Client::template_info`]).
    ///
    /// # Errors
    /// `InvalidArgument` (`template`) before any call; as
    /// [`Client::template_info`].
    #[deprecated(note = "use `builder.client().await?.template_info(template)`")]
    pub async fn template_info(self) -> Result<TemplateInfo, SandboxError> {
        boxed!(Result<TemplateInfo, SandboxError>, {
            let template = self.options.sized_template()?;
            let client = self.client().await?;
            client.template_info(template.as_deref()).await
        })
    }

    /// Deprecated spelling of [`Client::kill_by_id`] on [`Self::client`].
    ///
    /// # Errors
    /// As [`Client::kill_by_id`]; the client's own failures.
    #[deprecated(note = "use `builder.client().await?.kill_by_id(id)`")]
    pub async fn kill_by_id(self, sandbox_id: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            check_sandbox_id(sandbox_id)?;
            self.client().await?.kill_by_id(sandbox_id).await
        })
    }

    /// Deprecated spelling of [`Client::get_info_by_id`] on [`Self::client`].
    ///
    /// # Errors
    /// As [`Client::get_info_by_id`].
    #[deprecated(note = "use `builder.client().await?.get_info_by_id(id)`")]
    pub async fn get_info_by_id(self, sandbox_id: &str) -> Result<SandboxInfo, SandboxError> {
        check_sandbox_id(sandbox_id)?;
        self.client().await?.get_info_by_id(sandbox_id).await
    }

    /// Deprecated spelling of [`Client::get_metrics_by_id`] on
    /// [`Self::client`] (with this builder's request timeout).
    ///
    /// # Errors
    /// As [`Client::get_metrics_by_id`].
    #[deprecated(note = "use `builder.client().await?.get_metrics_by_id(id, token)`")]
    pub async fn get_metrics_by_id(
        self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<super::SandboxMetrics, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<super::SandboxMetrics, SandboxError>, {
            super::metrics::check_by_id(sandbox_id, &access_token)?;
            let client = self.client().await?;
            super::metrics::metrics_by_id(
                &client,
                sandbox_id,
                access_token,
                self.options.request_timeout,
            )
            .await
        })
    }

    /// Deprecated spelling of [`Client::get_metrics_history_by_id`] on
    /// [`Self::client`] (with this builder's request timeout).
    ///
    /// # Errors
    /// As [`Client::get_metrics_history_by_id`].
    #[deprecated(
        note = "use `builder.client().await?.get_metrics_history_by_id(id, token, query)`"
    )]
    pub async fn get_metrics_history_by_id(
        self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        query: super::MetricsHistoryQuery,
    ) -> Result<Vec<super::SandboxMetrics>, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<Vec<super::SandboxMetrics>, SandboxError>, {
            check_sandbox_id(sandbox_id)?;
            super::metrics::check_query(&query)?;
            super::metrics::check_by_id(sandbox_id, &access_token)?;
            let client = self.client().await?;
            super::metrics::metrics_history_by_id(
                &client,
                sandbox_id,
                access_token,
                query,
                self.options.request_timeout,
            )
            .await
        })
    }

    /// Deprecated spelling of [`Client::update_network_by_id`] on
    /// [`Self::client`] (with this builder's request timeout).
    ///
    /// # Errors
    /// As [`Client::update_network_by_id`].
    #[deprecated(note = "use `builder.client().await?.update_network_by_id(id, token, policy)`")]
    pub async fn update_network_by_id(
        self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        policy: super::NetworkPolicy,
    ) -> Result<super::NetworkState, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<super::NetworkState, SandboxError>, {
            check_sandbox_id(sandbox_id)?;
            policy.check()?;
            super::metrics::check_by_id(sandbox_id, &access_token)?;
            let client = self.client().await?;
            super::network::network_by_id(
                &client,
                sandbox_id,
                access_token,
                policy,
                self.options.request_timeout,
            )
            .await
        })
    }

    /// Deprecated spelling of [`Client::resume_by_id_within`] on
    /// [`Self::client`] (waiting this builder's ready timeout).
    ///
    /// # Errors
    /// As [`Client::resume_by_id_within`].
    #[deprecated(note = "use `builder.client().await?.resume_by_id(id)`")]
    pub async fn resume_by_id(self, sandbox_id: &str) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            check_sandbox_id(sandbox_id)?;
            self.client()
                .await?
                .resume_by_id_within(sandbox_id, self.options.ready_timeout)
                .await
        })
    }

    /// Deprecated spelling of [`Client::list`] on this builder's backend.
    #[deprecated(note = "use `Client::list` (or `Sandbox::list`)")]
    pub fn list(self, query: ListQuery) -> SandboxList {
        super::list::list_from(self.client, query)
    }

    /// Connects to an existing sandbox: GetMicrovm, a proxy token for 8080,
    /// the readiness wait (never terminates), and one authenticated call
    /// that proves the access token.
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`, `access_token`) before any I/O;
    /// `SandboxNotFound` when it does not exist or has ended;
    /// `Authentication` when the access token is refused;
    /// `SandboxNotReady` when the agent does not become ready.
    pub async fn connect(
        self,
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<Sandbox, SandboxError> {
        // Converted before the boxed part: `impl Into` need not be `Send`.
        let access_token: Secret = access_token.into();
        let op = self
            .op(crate::otel::Name::SandboxConnect)
            .with(crate::otel::Attr::SandboxId(crate::otel::Attr::name_text(
                sandbox_id,
            )));
        boxed!(Result<Sandbox, SandboxError>, {
            op.run(self.connect_inner(sandbox_id, access_token), handle_attrs)
                .await
        })
    }

    /// [`Self::connect`] inside its span.
    async fn connect_inner(
        self,
        sandbox_id: &str,
        access_token: Secret,
    ) -> Result<Sandbox, SandboxError> {
        let (parts, client) = self.connect_steps(sandbox_id, &access_token).await?;
        let backend = client.backend();
        let control = backend.control.clone();
        let vm = control.get_microvm(sandbox_id.to_owned()).await?;
        if vm.state.is_terminal() {
            return Err(SandboxError::sandbox_not_found(&vm.id));
        }
        // A suspended sandbox without auto-resume is resumed first (3.4);
        // with auto-resume the readiness probe wakes it. One that is still
        // suspending is waited for, then resumed.
        if !vm.auto_resume && matches!(vm.state, SandboxState::Suspending | SandboxState::Suspended)
        {
            if vm.state == SandboxState::Suspending {
                lifecycle::wait_for_state(
                    control.as_ref(),
                    &vm.id,
                    &SandboxState::Suspended,
                    "connect",
                    self.options.ready_timeout,
                )
                .await?;
            }
            lifecycle::request_resume(control.as_ref(), &vm.id).await?;
        }
        let minter = proxy_minter(control, vm.id.clone(), vec![AGENT_PORT], PROXY_TOKEN_TTL);
        let proxy_token = minter().await?;
        let (sandbox, health) = self
            .attach(
                client,
                parts,
                (vm.id, &vm.endpoint),
                access_token,
                (minter, proxy_token),
            )
            .await?;
        // A pool's take skips these: its warm slot never carries what a
        // step recovers (gateways), and the take applies its own.
        for step in &crate::feature_steps() {
            step.after_connect(&sandbox, health.features.as_ref())
                .await?;
        }
        Ok(sandbox)
    }

    /// A pool's take of its parked sandbox `sandbox_id`: [`Self::connect`]
    /// with `resume` (the pool's ResumeMicrovm), the proxy token's minting
    /// and the GetMicrovm that finds its endpoint in flight together, where
    /// connect makes them one after the other. `resume_failed` is set when
    /// the error is `resume`'s.
    ///
    /// # Errors
    /// `resume`'s errors, then those of [`Self::connect`].
    pub(crate) async fn connect_parked(
        self,
        sandbox_id: &str,
        access_token: Secret,
        resume: impl Future<Output = Result<(), SandboxError>> + Send,
        resume_failed: &mut bool,
    ) -> Result<Sandbox, SandboxError> {
        let op = self
            .op(crate::otel::Name::SandboxConnect)
            .with(crate::otel::Attr::SandboxId(crate::otel::Attr::name_text(
                sandbox_id,
            )));
        let inner = async {
            let (parts, client) = self.connect_steps(sandbox_id, &access_token).await?;
            let control = client.backend().control.clone();
            let minter = proxy_minter(
                control.clone(),
                sandbox_id.to_owned(),
                vec![AGENT_PORT],
                PROXY_TOKEN_TTL,
            );
            let (resumed, proxy_token, vm) =
                tokio::join!(resume, minter(), control.get_microvm(sandbox_id.to_owned()));
            if let Err(err) = resumed {
                *resume_failed = true;
                return Err(err);
            }
            let vm = vm?;
            if vm.state.is_terminal() {
                return Err(SandboxError::sandbox_not_found(&vm.id));
            }
            let proxy_token = proxy_token?;
            self.attach(
                client,
                parts,
                (vm.id, &vm.endpoint),
                access_token,
                (minter, proxy_token),
            )
            .await
            .map(|(sandbox, _)| sandbox)
        };
        op.run(inner, handle_attrs).await
    }

    /// A connect's checks and steps, before its first call: the parts it
    /// binds, and the client.
    async fn connect_steps(
        &self,
        sandbox_id: &str,
        access_token: &Secret,
    ) -> Result<(Parts, Client), SandboxError> {
        let steps = crate::feature_steps();
        for step in &steps {
            step.check_connect(self)?;
        }
        check_sandbox_id(sandbox_id)?;
        decode_access_token(access_token).map_err(|_| bad_token())?;
        self.options.check_reconnect_timeout()?;
        let mut parts = Parts::default();
        for step in &steps {
            step.prepare(self, Stage::Connect, &mut parts)?;
        }
        let client = self.client().await?;
        for step in &steps {
            step.before_launch(self.at(Stage::Connect, &parts, &client))
                .await?;
        }
        Ok((parts, client))
    }

    /// The end of a connect once the MicroVM is running (or resumes on the
    /// first request) and a proxy token is minted: the agent's connection,
    /// the readiness wait (never terminates), a re-open past the deadline,
    /// and one authenticated call that proves the access token.
    async fn attach(
        &self,
        client: Client,
        parts: Parts,
        (id, endpoint): (String, &str),
        access_token: Secret,
        (minter, proxy_token): (crate::transport::ProxyMinter, Secret),
    ) -> Result<(Sandbox, crate::pb::HealthResponse), SandboxError> {
        let backend = client.backend();
        let control = backend.control.clone();
        let conn = backend.open_agent(
            endpoint,
            proxy_token,
            access_token.clone(),
            minter,
            self.options.agent_policy(client.retry_policy()),
        )?;
        let health = wait_ready(
            &conn,
            control.as_ref(),
            &id,
            self.options.ready_timeout,
            OnNotReady::Keep,
        )
        .await?;
        // Past its deadline (resumed into RESUME_GRACE) only Health and
        // SetTimeout answer: re-open it first (3.4).
        lifecycle::reopen_if_expired(&conn, &health, self.options.request_timeout).await?;
        // Health is anonymous; this call is not, so a wrong token fails here
        // rather than on the caller's first call.
        conn.verify_access(self.options.request_timeout).await?;
        let sandbox = self.handle(
            client.clone(),
            id,
            access_token,
            conn,
            health.resume_generation,
            super::managed_lifecycle(&health),
            parts,
        );
        Ok((sandbox, health))
    }
}

/// What a created or connected handle adds to its span: its id, region
/// and resume generation.
fn handle_attrs(sandbox: &Sandbox) -> crate::otel::Learned {
    vec![
        crate::otel::Attr::SandboxId(sandbox.id().to_owned()),
        crate::otel::Attr::Region(sandbox.client().region().unwrap_or("local").to_owned()),
        crate::otel::Attr::ResumeGeneration(sandbox.resume_generation()),
    ]
}

pub(super) fn bad_token() -> SandboxError {
    SandboxError::invalid_argument(
        "access_token",
        "the access token must be base64url without padding and decode to at least 16 bytes; pass the token the sandbox was created with",
    )
}

/// A fresh idempotency token: a random (version 4) UUID, hyphenated.
fn client_token() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_token_is_a_v4_uuid() {
        let token = client_token();
        let parsed = uuid::Uuid::parse_str(&token).unwrap();
        assert_eq!(parsed.get_version(), Some(uuid::Version::Random));
        assert_eq!(token.len(), 36);
        assert_ne!(token, client_token());
    }
}

/// What the control plane says about a template (an image): see
/// [`SandboxBuilder::template_info`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TemplateInfo {
    /// The image ARN.
    pub arn: String,
    /// The image name.
    pub name: String,
    /// Its state as the service spells it (`ACTIVE`, `CREATING`, `FAILED`,
    /// ...).
    pub state: String,
    /// The newest version that can run sandboxes, if any.
    pub latest_active_version: Option<String>,
}
