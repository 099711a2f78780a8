//! Options named and shaped after E2B's keyword arguments, with E2B's
//! defaults where they differ from the SDK's (see `docs/e2b-compat.md`).
//! Timeouts are `Duration`s where E2B takes seconds.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rayito::{AwsOptions, EgressProxy, OnTimeout, Secret};

/// E2B's default sandbox lifetime (`timeout=300`).
pub const DEFAULT_SANDBOX_TIMEOUT: Duration = Duration::from_secs(300);
/// E2B's default command timeout (`commands.run(timeout=60)`).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// E2B's default `run_code` timeout (`timeout=None` means 300 s).
pub const DEFAULT_RUN_CODE_TIMEOUT: Duration = Duration::from_secs(300);

/// Where sandboxes run. E2B has no such choice; rayito does, and never
/// picks the local backend (which runs code on this host) by itself.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Backend {
    /// `RAYITO_BACKEND` (`local` or `aws`), else AWS.
    #[default]
    FromEnv,
    /// The embedded local backend (only with rayito's `local` feature).
    #[cfg(feature = "local")]
    Local,
    /// AWS (or another endpoint speaking the Lambda MicroVMs API).
    Aws(AwsOptions),
}

/// `lifecycle={"on_timeout": .., "auto_resume": ..}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    /// What happens at `timeout`: kill (E2B's default) or pause.
    pub on_timeout: OnTimeout,
    /// Whether traffic wakes a paused sandbox.
    pub auto_resume: bool,
    /// `on_timeout={"keep_memory": false}`: not available (suspending keeps
    /// memory and disk); `Some(false)` is `Unimplemented`.
    pub keep_memory: Option<bool>,
}

/// E2B's default: killed at the timeout, not woken by traffic.
impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            on_timeout: OnTimeout::Kill,
            auto_resume: false,
            keep_memory: None,
        }
    }
}

/// `network={..}`. `allow_out`, `deny_out` and `egress_proxy` become the
/// sandbox's egress policy (`rayito::NetworkPolicy`, docs/network.md);
/// every other field set here is `Unimplemented` on Lambda MicroVMs, named
/// by its own feature key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    /// `network.allow_out`: allowed destinations (IP addresses, CIDRs,
    /// hostnames).
    pub allow_out: Vec<String>,
    /// `network.deny_out`: denied destinations (IP addresses, CIDRs).
    pub deny_out: Vec<String>,
    /// `network.rules`: per-host request transforms.
    pub rules: Vec<String>,
    /// `network.mask_request_host`.
    pub mask_request_host: Option<String>,
    /// `network.allow_public_traffic`.
    pub allow_public_traffic: bool,
    /// `network.https_ports`.
    pub https_ports: Vec<u16>,
    /// `network.egress_proxy`: the operator's SOCKS5 proxy all egress goes
    /// through (`rayito::NetworkPolicy::egress_proxy`).
    pub egress_proxy: Option<EgressProxy>,
    /// `network.dns_servers`: `Unimplemented` when not empty.
    pub dns_servers: Vec<String>,
}

impl Network {
    /// The SDK's egress policy for the fields that have one.
    pub(crate) fn policy(&self) -> rayito::NetworkPolicy {
        let mut policy = rayito::NetworkPolicy::new()
            .allow_out(self.allow_out.clone())
            .deny_out(self.deny_out.clone());
        if let Some(proxy) = &self.egress_proxy {
            policy = policy.egress_proxy(proxy.clone());
        }
        policy
    }

    /// Whether any field with an SDK equivalent is set.
    pub(crate) fn has_policy(&self) -> bool {
        !self.allow_out.is_empty() || !self.deny_out.is_empty() || self.egress_proxy.is_some()
    }
}

/// `Sandbox.create(...)` keyword arguments.
///
/// The fields E2B needs for its own API (`api_key`, `domain`, ...) are
/// accepted, ignored with a warning each, and deprecated so the compiler
/// says so first.
#[derive(Clone)]
pub struct SandboxOpts {
    /// `template`: an image name (local backend) or image ARN. `None` (and
    /// E2B's own `code-interpreter-v1`, which exists only at E2B) use
    /// `RAYITO_TEMPLATE`, else the local backend's `rayito-base`; on AWS
    /// with neither, create fails `InvalidArgument` (`template`) naming
    /// the fix before any call.
    pub template: Option<String>,
    /// `timeout`: the sandbox lifetime; `None` is E2B's 300 s.
    pub timeout: Option<Duration>,
    /// `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// `envs`.
    pub envs: BTreeMap<String, String>,
    /// `request_timeout`: the deadline of each call of the handle.
    pub request_timeout: Option<Duration>,
    /// `allow_internet_access`: `Some(false)` denies everything
    /// `network.allow_out` does not allow (`rayito`'s
    /// `SandboxBuilder::allow_internet_access`); an agent that cannot
    /// enforce it makes create fail `Unimplemented` (feature
    /// `allow_internet_access=False`), its sandbox terminated.
    pub allow_internet_access: Option<bool>,
    /// `lifecycle`.
    pub lifecycle: Option<Lifecycle>,
    /// `network`.
    pub network: Option<Network>,
    /// `iam`: `Unimplemented` when set.
    pub iam: Option<String>,
    /// `mcp`: `Unimplemented` when set.
    pub mcp: Option<String>,
    /// `volume_mounts`: `Unimplemented` when not empty.
    pub volume_mounts: BTreeMap<String, String>,
    /// `idempotency_key`: `Unimplemented` when set.
    pub idempotency_key: Option<String>,
    /// `logger`: ignored (the SDK logs through `tracing`).
    #[deprecated(note = "ignored: the SDK emits tracing events; install a tracing subscriber")]
    pub logger: Option<String>,
    /// `http_version`: ignored.
    #[deprecated(note = "ignored: the SDK chooses HTTP/2 to the agent and its AWS client's own")]
    pub http_version: Option<String>,
    /// `api_key`: ignored (AWS credentials are used).
    #[deprecated(note = "ignored on AWS: rayito uses the AWS credentials of the session")]
    pub api_key: Option<Secret>,
    /// `domain`: ignored.
    #[deprecated(note = "ignored on AWS: Lambda MicroVMs assigns each sandbox its own endpoint")]
    pub domain: Option<String>,
    /// `debug`: ignored.
    #[deprecated(note = "ignored on AWS: there is no local debug mode; choose Backend::Local")]
    pub debug: bool,
    /// `api_url`: ignored.
    #[deprecated(note = "ignored on AWS: there is no E2B API")]
    pub api_url: Option<String>,
    /// `sandbox_url`: ignored.
    #[deprecated(note = "ignored on AWS: Lambda MicroVMs assigns each sandbox its own endpoint")]
    pub sandbox_url: Option<String>,
    /// `validate_api_key`: ignored.
    #[deprecated(note = "ignored on AWS: there is no api_key to validate")]
    pub validate_api_key: bool,
    /// `api_headers`: ignored.
    #[deprecated(note = "ignored on AWS: there is no E2B API to send them to")]
    pub api_headers: BTreeMap<String, String>,
    /// `secure`: `Some(false)` is ignored (every call carries its token).
    #[deprecated(note = "ignored on AWS: every call to a sandbox carries its access token")]
    pub secure: Option<bool>,
    /// `proxy`: ignored.
    #[deprecated(note = "ignored on AWS: set HTTPS_PROXY for the AWS client")]
    pub proxy: Option<String>,
    /// rayito only: where sandboxes run.
    pub backend: Backend,
    /// rayito only: the S3 staging of `upload_url` / `download_url` and of
    /// large reads and writes (`None`: `RAYITO_TRANSFER_BUCKET`). Only with
    /// the `s3` feature.
    #[cfg(feature = "s3")]
    pub staging: Option<rayito::transfer::S3Staging>,
}

#[allow(deprecated)]
impl Default for SandboxOpts {
    fn default() -> Self {
        Self {
            template: None,
            timeout: None,
            metadata: BTreeMap::new(),
            envs: BTreeMap::new(),
            request_timeout: None,
            allow_internet_access: None,
            lifecycle: None,
            network: None,
            iam: None,
            mcp: None,
            volume_mounts: BTreeMap::new(),
            idempotency_key: None,
            logger: None,
            http_version: None,
            api_key: None,
            domain: None,
            debug: false,
            api_url: None,
            sandbox_url: None,
            validate_api_key: false,
            api_headers: BTreeMap::new(),
            secure: None,
            proxy: None,
            backend: Backend::FromEnv,
            #[cfg(feature = "s3")]
            staging: None,
        }
    }
}

/// Names the options that were set, never their values (`envs` values and
/// the `api_key` are secrets; metadata may be).
#[allow(deprecated)]
impl fmt::Debug for SandboxOpts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxOpts")
            .field("template", &self.template)
            .field("timeout", &self.timeout)
            .field("metadata_keys", &self.metadata.keys().collect::<Vec<_>>())
            .field("env_names", &self.envs.keys().collect::<Vec<_>>())
            .field("request_timeout", &self.request_timeout)
            .field("lifecycle", &self.lifecycle)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// E2B's per-call `ApiParams` on calls of an already-built handle
/// (`sbx.kill(request_timeout=..)`): each one set is ignored with a warning.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ApiParams {
    /// `headers`.
    pub headers: BTreeMap<String, String>,
    /// `retries`.
    pub retries: Option<u32>,
    /// `request_timeout`.
    pub request_timeout: Option<Duration>,
}

/// Names the headers that were set, never their values.
impl fmt::Debug for ApiParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiParams")
            .field("header_names", &self.headers.keys().collect::<Vec<_>>())
            .field("retries", &self.retries)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}
