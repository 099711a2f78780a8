//! `Sandbox`: E2B's handle over the SDK's, with E2B's names and defaults.
//! Running code, commands and terminals live in their own modules
//! (`code`, `commands`, `pty`); this one creates, finds and ends sandboxes.

use std::time::Duration;

use rayito::{
    Files, MetricsHistoryQuery, NetworkState, SandboxError, SandboxHost, SandboxInfo,
    SandboxMetrics, SandboxState,
};

use crate::options::{ApiParams, Backend, DEFAULT_SANDBOX_TIMEOUT, SandboxOpts};
use crate::paginator::{ListOpts, SandboxPaginator};
use crate::unimplemented::Missing;
use crate::warnings::{CompatWarning, Warnings, reason};

/// E2B's default template, which exists only at E2B.
pub const E2B_DEFAULT_TEMPLATE: &str = "code-interpreter-v1";

/// The fix a program without a template on AWS is told (a contract: pinned
/// by a test, transcribed in `docs/e2b-compat.md`).
pub(crate) const NO_TEMPLATE: &str = "no template was given and RAYITO_TEMPLATE is unset; E2B's code-interpreter-v1 exists only at E2B: build an image with `rayito template build` and pass its ARN as SandboxOpts.template or set RAYITO_TEMPLATE (the local backend needs neither)";

/// A sandbox, as E2B's code-interpreter `Sandbox` is used. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub(crate) inner: rayito::Sandbox,
    pub(crate) warnings: Warnings,
}

impl Sandbox {
    /// `Sandbox.create(**opts)`: checks every option first (an unavailable
    /// feature is `Unimplemented` before any call to AWS; an ignored option
    /// is one warning), then creates the sandbox with E2B's default timeout
    /// of 300 s, killed at its end unless `lifecycle` says pause.
    ///
    /// # Errors
    /// `Unimplemented` for a feature Lambda MicroVMs cannot provide (see
    /// [`Missing`]); `InvalidArgument` (`template`) on AWS with neither a
    /// template nor `RAYITO_TEMPLATE`; otherwise what
    /// `rayito::SandboxBuilder::create` returns.
    pub async fn create(opts: SandboxOpts) -> Result<Sandbox, SandboxError> {
        refuse_missing(&opts)?;
        let warnings = Warnings::default();
        warn_ignored(&opts, &warnings);
        let template = match opts.template.as_deref() {
            Some(E2B_DEFAULT_TEMPLATE) => {
                warnings.warn("template", reason::TEMPLATE_E2B);
                None
            }
            other => other.map(str::to_owned),
        };
        if template.is_none() && !template_from_env() && !is_local(&opts.backend) {
            return Err(SandboxError::invalid_argument("template", NO_TEMPLATE));
        }
        let mut builder = builder_for(&opts.backend)
            .timeout(opts.timeout.unwrap_or(DEFAULT_SANDBOX_TIMEOUT))
            .envs(opts.envs.clone())
            .metadata(opts.metadata.clone());
        if let Some(template) = template {
            builder = builder.template(template);
        }
        if let Some(request_timeout) = opts.request_timeout {
            builder = builder.request_timeout(request_timeout);
        }
        #[cfg(feature = "s3")]
        if let Some(staging) = &opts.staging {
            builder = builder.staging(staging.clone());
        }
        let network = opts.network.clone().unwrap_or_default();
        if network.has_policy() {
            builder = builder.network(network.policy());
        }
        if let Some(allow) = opts.allow_internet_access {
            builder = builder.allow_internet_access(allow);
        }
        let lifecycle = opts.lifecycle.unwrap_or_default();
        builder = builder.on_timeout(lifecycle.on_timeout);
        if !lifecycle.auto_resume && lifecycle.on_timeout == rayito::OnTimeout::Pause {
            builder = builder
                .idle_policy(rayito::IdlePolicy::new(DEFAULT_SANDBOX_TIMEOUT).auto_resume(false));
        }
        let inner = builder.create().await?;
        Ok(Sandbox { inner, warnings })
    }

    /// `Sandbox.connect(sandbox_id, timeout=..)`: reattaches to a sandbox,
    /// resuming it when it is paused. Lambda MicroVMs needs the sandbox's
    /// access token (from [`Sandbox::access_token`]) where E2B used its API
    /// key. With `opts.timeout`, the sandbox's timeout is then set to it
    /// (E2B only lengthens a running sandbox's; here it is set either way).
    ///
    /// # Errors
    /// `Unimplemented` (`connect(on_resume=reboot)`) before any call;
    /// otherwise what `rayito::SandboxBuilder::connect` and
    /// `rayito::Sandbox::set_timeout` return.
    pub async fn connect(
        sandbox_id: &str,
        access_token: impl Into<rayito::Secret>,
        opts: ConnectOpts,
    ) -> Result<Sandbox, SandboxError> {
        if opts.on_resume == OnResume::Reboot {
            return Err(Missing::ConnectReboot.error());
        }
        let access_token = access_token.into();
        let inner = builder_for(&opts.backend)
            .connect(sandbox_id, access_token)
            .await?;
        if let Some(timeout) = opts.timeout {
            inner.set_timeout(timeout).await?;
        }
        Ok(Sandbox {
            inner,
            warnings: Warnings::default(),
        })
    }

    /// `Sandbox.kill(sandbox_id)`: false when it was already gone.
    ///
    /// # Errors
    /// What `rayito::Client::kill_by_id` returns.
    pub async fn kill_by_id(sandbox_id: &str, opts: ConnectOpts) -> Result<bool, SandboxError> {
        builder_for(&opts.backend)
            .client()
            .await?
            .kill_by_id(sandbox_id)
            .await
    }

    /// `Sandbox.get_info(sandbox_id)`.
    ///
    /// # Errors
    /// What `rayito::Client::get_info_by_id` returns.
    pub async fn get_info_by_id(
        sandbox_id: &str,
        opts: ConnectOpts,
    ) -> Result<SandboxInfo, SandboxError> {
        builder_for(&opts.backend)
            .client()
            .await?
            .get_info_by_id(sandbox_id)
            .await
    }

    /// `Sandbox.set_timeout(sandbox_id, timeout)`: reattaches with the
    /// sandbox's access token (Lambda MicroVMs has no account-wide key) and
    /// moves its timeout.
    ///
    /// # Errors
    /// What [`Sandbox::connect`] and `rayito::Sandbox::set_timeout` return.
    pub async fn set_timeout_by_id(
        sandbox_id: &str,
        access_token: impl Into<rayito::Secret>,
        timeout: Duration,
        opts: ConnectOpts,
    ) -> Result<(), SandboxError> {
        let sandbox = Sandbox::connect(sandbox_id, access_token, opts).await?;
        sandbox.inner.set_timeout(timeout).await
    }

    /// `Sandbox.list(query, limit=, next_token=, order=)`: E2B's paginator
    /// over the SDK's listing (running and paused sandboxes unless the
    /// query names states, as E2B does).
    ///
    /// # Errors
    /// `Unimplemented` (`list(next_token)`) when `opts.next_token` is set,
    /// before any call.
    pub fn list(
        query: rayito::ListQuery,
        opts: ListOpts,
    ) -> Result<SandboxPaginator, SandboxError> {
        SandboxPaginator::new(query, opts)
    }

    /// `Sandbox.delete_snapshot(snapshot_id)`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "delete_snapshot" }`, with no call made.
    pub async fn delete_snapshot(_snapshot_id: &str) -> Result<bool, SandboxError> {
        Err(Missing::DeleteSnapshot.error())
    }

    /// `sandbox_id`.
    pub fn sandbox_id(&self) -> &str {
        self.inner.id()
    }

    /// The access token [`Sandbox::connect`] needs to reattach later.
    pub fn access_token(&self) -> &rayito::Secret {
        self.inner.access_token()
    }

    /// `traffic_access_token`: the token a client of the sandbox's ports
    /// sends is a short-lived proxy token per port, read from
    /// [`Sandbox::get_host`]'s headers; there is no single one.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "traffic_access_token" }`.
    pub fn traffic_access_token(&self) -> Result<rayito::Secret, SandboxError> {
        Err(Missing::TrafficAccessToken.error())
    }

    /// The SDK's own handle, for everything beyond E2B's surface.
    pub fn inner(&self) -> &rayito::Sandbox {
        &self.inner
    }

    /// Every option this handle ignored, in the order they were seen.
    pub fn compat_warnings(&self) -> Vec<CompatWarning> {
        self.warnings.all()
    }

    /// `files`: the SDK's own view (`read`, `write`, `write_files`, `list`,
    /// `exists`, `get_info`, `remove`, `rename`, `make_dir`, `watch_dir`).
    pub fn files(&self) -> Files<'_> {
        self.inner.files()
    }

    /// `git`: the SDK's git view, with E2B's method names.
    pub fn git(&self) -> rayito::git::Git<'_> {
        self.inner.git()
    }

    /// `get_host(port)`: the address of a port the sandbox exposes, with the
    /// headers (a proxy token for that port) a client must send.
    ///
    /// # Errors
    /// What `rayito::Sandbox::get_host` returns.
    pub async fn get_host(&self, port: u16) -> Result<SandboxHost, SandboxError> {
        self.inner.get_host(port).await
    }

    /// `kill()`: false when the sandbox was already gone.
    ///
    /// # Errors
    /// What `rayito::Sandbox::kill` returns.
    pub async fn kill(&self, params: ApiParams) -> Result<bool, SandboxError> {
        self.warn_api_params(&params);
        self.inner.kill().await
    }

    /// `set_timeout(timeout)`: moves the end of the sandbox's life.
    ///
    /// # Errors
    /// What `rayito::Sandbox::set_timeout` returns.
    pub async fn set_timeout(
        &self,
        timeout: Duration,
        params: ApiParams,
    ) -> Result<(), SandboxError> {
        self.warn_api_params(&params);
        self.inner.set_timeout(timeout).await
    }

    /// `is_running()`.
    pub async fn is_running(&self) -> bool {
        self.inner.is_running().await
    }

    /// `get_info()`.
    ///
    /// # Errors
    /// What `rayito::Sandbox::get_info` returns.
    pub async fn get_info(&self, params: ApiParams) -> Result<SandboxInfo, SandboxError> {
        self.warn_api_params(&params);
        self.inner.get_info().await
    }

    /// `get_metrics(start=, end=)`: the agent's samples between `start` and
    /// `end` (5 s apart, the last 8 h), oldest first.
    ///
    /// # Errors
    /// What `rayito::Metrics::history` returns.
    pub async fn get_metrics(
        &self,
        query: MetricsHistoryQuery,
    ) -> Result<Vec<SandboxMetrics>, SandboxError> {
        self.inner.metrics().history(query).await
    }

    /// `update_network(network)`: replaces the sandbox's egress policy
    /// (`allow_out`, `deny_out`, `egress_proxy`); the other fields of
    /// [`crate::Network`] are `Unimplemented` as at create.
    ///
    /// # Errors
    /// `Unimplemented` for a field with no equivalent, before any call;
    /// otherwise what `rayito::Network::update` returns.
    pub async fn update_network(
        &self,
        network: crate::Network,
    ) -> Result<NetworkState, SandboxError> {
        refuse_missing_network(&network)?;
        self.inner.network().update(network.policy()).await
    }

    /// `fork()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "fork" }`, with no call made.
    pub async fn fork(&self) -> Result<Sandbox, SandboxError> {
        Err(Missing::Fork.error())
    }

    /// `create_snapshot()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "create_snapshot" }`, with no call made.
    pub async fn create_snapshot(&self) -> Result<(), SandboxError> {
        Err(Missing::CreateSnapshot.error())
    }

    /// `list_snapshots()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "list_snapshots" }`, with no call made.
    pub async fn list_snapshots(&self) -> Result<Vec<String>, SandboxError> {
        Err(Missing::ListSnapshots.error())
    }

    /// `pause(keep_memory=, mode=, strict=)`: suspends the sandbox (memory
    /// and disk are always kept); [`Sandbox::connect`] resumes it. False
    /// when it was already paused.
    ///
    /// # Errors
    /// `Unimplemented { feature: "pause(keep_memory=false)" }` for
    /// `keep_memory: Some(false)` or `mode: Filesystem`, before any call;
    /// otherwise what `rayito::Sandbox::pause` returns.
    pub async fn pause(&self, opts: PauseOpts) -> Result<bool, SandboxError> {
        if opts.keep_memory == Some(false) || opts.mode == Some(PauseMode::Filesystem) {
            return Err(Missing::PauseWithoutMemory.error());
        }
        if opts.strict {
            self.warnings.warn("strict", reason::PAUSE_STRICT);
        }
        self.warn_api_params(&opts.api);
        self.inner.pause().await
    }

    /// `beta_pause()`: E2B's deprecated name of [`Sandbox::pause`].
    ///
    /// # Errors
    /// As [`Sandbox::pause`].
    #[deprecated(note = "E2B deprecated beta_pause: call pause")]
    pub async fn beta_pause(&self, opts: PauseOpts) -> Result<bool, SandboxError> {
        self.pause(opts).await
    }

    /// `get_mcp_url()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "get_mcp_url" }`.
    pub fn get_mcp_url(&self) -> Result<String, SandboxError> {
        Err(Missing::GetMcpUrl.error())
    }

    /// `get_mcp_token()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "get_mcp_token" }`.
    pub fn get_mcp_token(&self) -> Result<Option<rayito::Secret>, SandboxError> {
        Err(Missing::GetMcpToken.error())
    }

    /// `get_signature()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "get_signature" }`.
    pub fn get_signature(&self, _path: &str) -> Result<String, SandboxError> {
        Err(Missing::GetSignature.error())
    }

    /// `sandbox_domain`, `envd_api_url`, `envd_direct_url`,
    /// `connection_config`: E2B's endpoints; a MicroVM has none of them.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "envd_endpoints" }`.
    pub fn envd_api_url(&self) -> Result<String, SandboxError> {
        Err(Missing::EnvdEndpoints.error())
    }

    /// One warning for each `ApiParams` field set on a call of this handle,
    /// in alphabetical order as the reference does.
    pub(crate) fn warn_api_params(&self, params: &ApiParams) {
        if !params.headers.is_empty() {
            self.warnings.warn("headers", reason::ON_HANDLE);
        }
        if params.request_timeout.is_some() {
            self.warnings.warn("request_timeout", reason::ON_HANDLE);
        }
        if params.retries.is_some() {
            self.warnings.warn("retries", reason::ON_HANDLE);
        }
    }
}

/// E2B's sandbox constants (`Sandbox.default_template`, ...).
impl Sandbox {
    /// `Sandbox.default_template`: E2B's; see [`SandboxOpts::template`]
    /// for what rayito uses instead.
    pub const DEFAULT_TEMPLATE: &'static str = E2B_DEFAULT_TEMPLATE;
    /// `Sandbox.default_sandbox_timeout` (300 s).
    pub const DEFAULT_SANDBOX_TIMEOUT: Duration = DEFAULT_SANDBOX_TIMEOUT;
}

/// Whether `RAYITO_TEMPLATE` names a template.
fn template_from_env() -> bool {
    std::env::var(rayito::TEMPLATE_ENV).is_ok_and(|v| !v.is_empty())
}

/// Whether `backend` resolves to the local backend (`RAYITO_BACKEND=local`
/// for `FromEnv`), which has a default image.
fn is_local(backend: &Backend) -> bool {
    match backend {
        Backend::FromEnv => std::env::var(rayito::BACKEND_ENV).is_ok_and(|v| v == "local"),
        #[cfg(feature = "local")]
        Backend::Local => true,
        Backend::Aws(_) => false,
    }
}

/// The SDK builder for a backend choice.
pub(crate) fn builder_for(backend: &Backend) -> rayito::SandboxBuilder {
    let builder = rayito::Sandbox::builder();
    match backend {
        Backend::FromEnv => builder,
        #[cfg(feature = "local")]
        Backend::Local => builder.local(),
        Backend::Aws(aws) => builder.aws(aws.clone()),
    }
}

/// `Sandbox.connect(..)` and the by-id class methods' options.
#[derive(Debug, Clone, Default)]
pub struct ConnectOpts {
    /// `timeout`: the sandbox's new timeout once connected.
    pub timeout: Option<Duration>,
    /// `on_resume`: `Reboot` is `Unimplemented`.
    pub on_resume: OnResume,
    /// rayito only: where the sandbox runs.
    pub backend: Backend,
}

/// `on_resume=`: what a resumed sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnResume {
    /// Its memory and disk as they were (the only choice on Lambda MicroVMs).
    #[default]
    Restore,
    /// A fresh boot: not available.
    Reboot,
}

/// `pause(keep_memory=, mode=, strict=)` keyword arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseOpts {
    /// `keep_memory` (E2B deprecated it for `mode`): `Some(false)` is
    /// `Unimplemented`.
    pub keep_memory: Option<bool>,
    /// `mode`: `Filesystem` is `Unimplemented`.
    pub mode: Option<PauseMode>,
    /// `strict`: ignored with a warning.
    pub strict: bool,
    /// `request_timeout`, `headers`, `retries`: ignored with a warning.
    pub api: ApiParams,
}

/// `mode=` of `pause`: what a pause keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseMode {
    /// Memory and filesystem (what a MicroVM suspend always keeps).
    Full,
    /// The filesystem only: not available.
    Filesystem,
}

/// The states E2B lists by default: running and paused.
pub(crate) const E2B_LISTED: [SandboxState; 2] = [SandboxState::Running, SandboxState::Suspended];

/// Every feature set in `opts` that Lambda MicroVMs cannot provide, as the
/// first `Unimplemented` (checked before any I/O).
fn refuse_missing(opts: &SandboxOpts) -> Result<(), SandboxError> {
    let lifecycle = opts.lifecycle.unwrap_or_default();
    let checks = [
        (
            lifecycle.keep_memory == Some(false),
            Missing::PauseWithoutMemory,
        ),
        (opts.iam.is_some(), Missing::Iam),
        (opts.mcp.is_some(), Missing::Mcp),
        (!opts.volume_mounts.is_empty(), Missing::VolumeMounts),
        (opts.idempotency_key.is_some(), Missing::IdempotencyKey),
    ];
    refuse_missing_network(&opts.network.clone().unwrap_or_default())?;
    match checks.into_iter().find(|(set, _)| *set) {
        Some((_, missing)) => Err(missing.error()),
        None => Ok(()),
    }
}

/// The first field of `network` with no equivalent, as `Unimplemented`.
fn refuse_missing_network(network: &crate::Network) -> Result<(), SandboxError> {
    let checks = [
        (!network.rules.is_empty(), Missing::NetworkRules),
        (
            network.mask_request_host.is_some(),
            Missing::NetworkMaskRequestHost,
        ),
        (
            network.allow_public_traffic,
            Missing::NetworkAllowPublicTraffic,
        ),
        (!network.https_ports.is_empty(), Missing::NetworkHttpsPorts),
        (!network.dns_servers.is_empty(), Missing::NetworkDnsServers),
    ];
    match checks.into_iter().find(|(set, _)| *set) {
        Some((_, missing)) => Err(missing.error()),
        None => Ok(()),
    }
}

/// One warning for each ignored option the caller set.
#[allow(deprecated)]
fn warn_ignored(opts: &SandboxOpts, warnings: &Warnings) {
    let ignored = [
        (opts.api_key.is_some(), "api_key", reason::API_KEY),
        (
            !opts.api_headers.is_empty(),
            "api_headers",
            reason::API_HEADERS,
        ),
        (opts.api_url.is_some(), "api_url", reason::API_URL),
        (opts.debug, "debug", reason::DEBUG),
        (opts.domain.is_some(), "domain", reason::DOMAIN),
        (
            opts.http_version.is_some(),
            "http_version",
            reason::HTTP_VERSION,
        ),
        (opts.logger.is_some(), "logger", reason::LOGGER),
        (opts.proxy.is_some(), "proxy", reason::PROXY),
        (
            opts.sandbox_url.is_some(),
            "sandbox_url",
            reason::SANDBOX_URL,
        ),
        (opts.secure == Some(false), "secure", reason::SECURE),
        (
            opts.validate_api_key,
            "validate_api_key",
            reason::VALIDATE_API_KEY,
        ),
    ];
    for (set, option, why) in ignored {
        if set {
            warnings.warn(option, why);
        }
    }
}
