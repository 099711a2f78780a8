//! Which control plane a sandbox uses: AWS (the default), the embedded local
//! backend (only when chosen), or any endpoint speaking the MicroVMs API.

use std::sync::Arc;
use std::time::Duration;

use crate::aws::{config::AwsSettings, microvms::AwsControlPlane};
use crate::control::ControlPlane;
use crate::control::pacing::{Buckets, Paced, Pacing};
use crate::control::retry::Retrying;
use crate::error::{RetryPolicy, SandboxError};
use crate::local;
use crate::secret::Secret;
use crate::transport::{AgentConn, AgentRoots, InjectedAgent, ProxyMinter};

/// The environment variable that picks the backend when the code does not:
/// `local` or `aws`.
pub const BACKEND_ENV: &str = "RAYITO_BACKEND";
/// The environment variable naming the default template (image name or ARN).
pub const TEMPLATE_ENV: &str = "RAYITO_TEMPLATE";

/// How to reach AWS. Every field is optional: the aws-config chain (env,
/// profiles, SSO, instance roles) fills in what is not set.
#[derive(Clone, Default)]
pub struct AwsOptions {
    settings: AwsSettings,
    /// Extra trusted CA certificates (PEM) for the sandboxes' TLS endpoints.
    root_certificates: Vec<String>,
}

crate::secret::redacted_debug! {
    AwsOptions |o| settings, root_certificates = o.root_certificates.len()
}

impl AwsOptions {
    /// The settings an AWS client is loaded from (the pool's DynamoDB
    /// store loads its own).
    #[cfg(feature = "dynamodb")]
    pub(crate) fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// Options filled entirely from the environment and profiles.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options over an AWS configuration you loaded yourself (for example
    /// with `aws_config::defaults(..).load().await`): its region,
    /// credentials provider, endpoint and timeouts are used for every
    /// service client of the SDK (MicroVMs, S3, DynamoDB, Secrets Manager,
    /// CloudWatch Logs, STS, CloudFormation) instead of the environment's
    /// chain. The other options still override their part of it. Its
    /// retry settings are not used: the SDK's own retry policy decides
    /// (docs/errors.md, "Retries").
    pub fn from_sdk_config(config: aws_types::SdkConfig) -> Self {
        Self::new().sdk_config(config)
    }

    /// [`AwsOptions::from_sdk_config`] on these options: the loaded AWS
    /// configuration to start from. A region, endpoint, static
    /// credentials or timeouts set here override its own; a
    /// [`profile`](AwsOptions::profile) beside it is refused
    /// (`InvalidArgument` `profile`, when the client connects).
    #[must_use]
    pub fn sdk_config(mut self, config: aws_types::SdkConfig) -> Self {
        self.settings.sdk_config = Some(Box::new(config));
        self
    }

    crate::setters::setters! {
        in settings;
        /// The region (for example `us-east-1`).
        region: Some impl String;
        /// Another endpoint for the MicroVMs API (for example an emulator).
        endpoint_url: Some impl String;
        /// A named profile from `~/.aws/config`.
        profile: Some impl String;
    }

    /// Static credentials instead of the chain.
    #[must_use]
    pub fn static_credentials(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<Secret>,
    ) -> Self {
        self.settings.static_credentials = Some((access_key_id.into(), secret_access_key.into()));
        self
    }

    crate::setters::setters! {
        in settings;
        /// The session token of temporary static credentials (from STS, an
        /// assumed role); only used with [`AwsOptions::static_credentials`].
        session_token: Some impl Secret;
        /// S3's endpoint for template builds (path-style requests), e.g. an
        /// emulator's or a gateway's; by default S3's own, or the
        /// [`AwsOptions::endpoint_url`] when one is set.
        s3_endpoint_url: Some impl String;
        /// How long a control-plane call may take to connect to the endpoint
        /// (default 5 s, as the reference client; zero is refused before any
        /// call; longer than a day counts as a day). A connection that is not
        /// made in time fails the call with `Timeout { scope: Request }`.
        connect_timeout: Some Duration;
        /// How long a control-plane call may wait for the service's answer
        /// once connected (default 60 s, as the reference client; zero is
        /// refused before any call; longer than a day counts as a day). An
        /// endpoint that accepts the connection
        /// and never answers fails the call with `Timeout { scope: Request }`
        /// after this long, never after the operating system's own timeouts.
        read_timeout: Some Duration;
    }

    /// What tells these options from others, with no secret in clear
    /// (the metadata index compares its options with it).
    #[cfg(feature = "dynamodb")]
    pub(crate) fn settings_key(&self) -> crate::aws::config::SettingsKey {
        self.settings.key()
    }

    /// Trusts one more CA certificate (PEM), besides the system roots, when
    /// dialling sandboxes over TLS: for an emulator in TLS mode (its
    /// `ca.pem`) or a TLS-intercepting proxy. May be called several times.
    /// The system roots are read once per process, the first time a
    /// sandbox is dialled over TLS.
    #[must_use]
    pub fn add_root_certificate_pem(mut self, pem: impl Into<String>) -> Self {
        self.root_certificates.push(pem.into());
        self
    }
}

/// The backend a builder was given.
#[derive(Debug, Clone, Default)]
pub(crate) enum BackendChoice {
    /// Nothing chosen in code: `RAYITO_BACKEND`, else AWS.
    #[default]
    FromEnv,
    Local,
    /// The local backend in TLS mode.
    #[cfg_attr(not(feature = "local"), allow(dead_code))]
    LocalTls,
    Aws(AwsOptions),
    /// A control plane (and optionally an agent) handed in by the SDK's own
    /// tests: the seam for tests that spawn no process.
    #[cfg_attr(not(test), allow(dead_code))]
    Injected {
        control: Arc<dyn ControlPlane>,
        agent: Option<InjectedAgent>,
    },
}

/// A resolved backend: the control plane (with the retry layer) and how to
/// name images on it.
#[derive(Clone)]
pub(crate) struct ResolvedBackend {
    pub control: Arc<dyn ControlPlane>,
    /// `Some` on the local backend: bare image names become its ARNs, and
    /// its default image is used when no template is given.
    pub local: Option<local::LocalBackend>,
    /// Extra CA certificates (PEM) trusted when dialling sandboxes over TLS
    /// (and by the quotas' and permissions' signed calls).
    #[cfg_attr(
        not(any(feature = "quotas", feature = "permissions")),
        allow(dead_code)
    )]
    pub root_certificates: Vec<String>,
    /// The same with the system's roots, as one verifier made on the first
    /// TLS dial (not per sandbox).
    pub agent_roots: AgentRoots,
    /// The region of the control plane (`None` for an injected one).
    pub region: Option<String>,
    /// An agent to use instead of dialling the endpoint (tests only).
    pub agent: Option<InjectedAgent>,
    /// The AWS configuration the control plane was built from (`None` for
    /// an injected one): what the clients of other services start from.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    pub sdk_config: Option<aws_types::SdkConfig>,
    /// S3's endpoint override (path style), from the options or the
    /// local backend.
    #[cfg_attr(not(feature = "templates"), allow(dead_code))] // template builds
    pub s3_endpoint_url: Option<String>,
}

crate::secret::redacted_debug! {
    non_exhaustive ResolvedBackend |o| local = o.local.is_some()
}

/// What tells one backend configuration from another, for the implicit
/// clients of the shortcuts: the choice `RAYITO_BACKEND` makes is read when
/// the key is made, and secrets appear only as SHA-256 digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BackendKey {
    Local,
    LocalTls,
    Aws {
        settings: Box<crate::aws::config::SettingsKey>,
        root_certificates: Vec<String>,
    },
}

impl BackendChoice {
    /// `RAYITO_BACKEND` read for [`BackendChoice::FromEnv`].
    ///
    /// # Errors
    /// `InvalidArgument` (`backend`) for a value other than `local`, `aws`
    /// or empty.
    fn concrete(&self) -> Result<Self, SandboxError> {
        Ok(match self {
            Self::FromEnv => match std::env::var(BACKEND_ENV) {
                Ok(value) if value == "local" => Self::Local,
                Ok(value) if value == "aws" || value.is_empty() => Self::Aws(AwsOptions::new()),
                Ok(_) => {
                    return Err(SandboxError::invalid_argument(
                        "backend",
                        "RAYITO_BACKEND must be local or aws; unset it to use AWS",
                    ));
                }
                Err(_) => Self::Aws(AwsOptions::new()),
            },
            other => other.clone(),
        })
    }

    /// The key of the implicit client for this choice (an injected choice
    /// has none: it is never shared).
    ///
    /// # Errors
    /// As [`BackendChoice::concrete`]; `Internal` for an injected choice.
    pub(crate) fn key(&self) -> Result<BackendKey, SandboxError> {
        match self.concrete()? {
            Self::Local => Ok(BackendKey::Local),
            Self::LocalTls => Ok(BackendKey::LocalTls),
            Self::Aws(options) => Ok(BackendKey::Aws {
                settings: Box::new(options.settings.key()),
                root_certificates: options.root_certificates,
            }),
            Self::FromEnv | Self::Injected { .. } => Err(SandboxError::internal(
                "create",
                "an injected backend has no shared client",
            )),
        }
    }

    /// Starts or connects the backend.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `RAYITO_BACKEND`; `Authentication`
    /// when AWS has no credentials or region (the message says how to
    /// configure AWS or choose the local backend).
    /// `buckets`: the pacing state the control plane's calls go through
    /// (an implicit client's outlives the client: see `sandbox::client`).
    pub(crate) async fn resolve(
        &self,
        policy: &RetryPolicy,
        pacing: Pacing,
        buckets: Arc<Buckets>,
    ) -> Result<ResolvedBackend, SandboxError> {
        let choice = self.concrete()?;
        match choice {
            Self::Local | Self::LocalTls => {
                let tls = matches!(choice, Self::LocalTls);
                let backend = local::backend(tls).await?;
                let control = AwsControlPlane::hermetic(
                    backend.endpoint_url(),
                    backend.region(),
                    backend.access_key_id(),
                    backend.secret_access_key(),
                );
                Ok(ResolvedBackend {
                    region: Some(control.region().to_owned()),
                    sdk_config: Some(control.sdk_config().clone()),
                    s3_endpoint_url: backend.s3_endpoint_url().map(str::to_owned),
                    control: Arc::new(Retrying::new(Paced::new(control, buckets), *policy)),
                    root_certificates: backend.ca_pem().into_iter().map(str::to_owned).collect(),
                    agent_roots: AgentRoots::new(
                        backend.ca_pem().into_iter().map(str::to_owned).collect(),
                    ),
                    local: Some(backend),
                    agent: None,
                })
            }
            Self::Aws(options) => {
                let control = AwsControlPlane::connect(&options.settings).await?;
                Ok(ResolvedBackend {
                    region: Some(control.region().to_owned()),
                    sdk_config: Some(control.sdk_config().clone()),
                    s3_endpoint_url: options
                        .settings
                        .s3_endpoint_url
                        .clone()
                        .or_else(|| options.settings.endpoint_url.clone()),
                    control: Arc::new(Retrying::new(Paced::new(control, buckets), *policy)),
                    local: None,
                    agent_roots: AgentRoots::new(options.root_certificates.clone()),
                    root_certificates: options.root_certificates,
                    agent: None,
                })
            }
            Self::Injected { control, agent } => {
                Ok(ResolvedBackend::injected(control, agent, policy, pacing))
            }
            Self::FromEnv => Err(SandboxError::internal(
                "create",
                "the backend was not resolved",
            )),
        }
    }
}

impl ResolvedBackend {
    /// An injected control plane (and agent), behind the same pacing and
    /// retry layers as a real one.
    pub(crate) fn injected(
        control: Arc<dyn ControlPlane>,
        agent: Option<InjectedAgent>,
        policy: &RetryPolicy,
        pacing: Pacing,
    ) -> Self {
        Self {
            control: Arc::new(Retrying::new(
                Paced::new(control, Arc::new(Buckets::new(pacing))),
                *policy,
            )),
            local: None,
            root_certificates: Vec::new(),
            agent_roots: AgentRoots::default(),
            region: None,
            agent,
            sdk_config: None,
            s3_endpoint_url: None,
        }
    }

    /// The connection to the agent of a MicroVM at `endpoint`.
    ///
    /// # Errors
    /// `Sandbox { code: ProtocolViolation }` when the endpoint cannot be parsed.
    pub(crate) fn open_agent(
        &self,
        endpoint: &str,
        proxy_token: Secret,
        access_token: Secret,
        minter: ProxyMinter,
        policy: RetryPolicy,
    ) -> Result<AgentConn, SandboxError> {
        match &self.agent {
            Some(agent) => Ok(AgentConn::injected(
                agent,
                proxy_token,
                access_token,
                minter,
                policy,
            )),
            None => AgentConn::open(
                endpoint,
                proxy_token,
                access_token,
                minter,
                policy,
                &self.agent_roots,
            ),
        }
    }

    /// An anonymous connection (no access token) to the agent at
    /// `endpoint`: for Health probes of sandboxes the caller has no token of.
    ///
    /// # Errors
    /// As [`ResolvedBackend::open_agent`].
    pub(crate) fn open_anonymous_agent(
        &self,
        endpoint: &str,
        proxy_token: Secret,
        minter: ProxyMinter,
        policy: RetryPolicy,
    ) -> Result<AgentConn, SandboxError> {
        // The placeholder is never sent: the connection forgets it at once.
        let conn = self.open_agent(
            endpoint,
            proxy_token,
            Secret::new(String::new()),
            minter,
            policy,
        )?;
        Ok(AgentConn::anonymous(conn))
    }

    /// The image ARN for a template (name or ARN), or the default.
    ///
    /// # Errors
    /// `InvalidArgument` (`template`) when no template is given on AWS, or a
    /// bare name is given on AWS (only ARNs are accepted there for now).
    pub(crate) fn image_arn(&self, template: Option<&str>) -> Result<String, SandboxError> {
        let from_env = std::env::var(TEMPLATE_ENV).ok().filter(|v| !v.is_empty());
        let template = template.map(str::to_owned).or(from_env);
        match (template, &self.local) {
            (Some(t), _) if t.starts_with("arn:") => Ok(t),
            (Some(name), Some(local)) => {
                check_image_name(&name)?;
                Ok(local.image_arn(&name))
            }
            (None, Some(local)) => Ok(local.image_arn(local::DEFAULT_IMAGE)),
            (Some(name), None) => {
                check_image_name(&name)?;
                Err(SandboxError::invalid_argument(
                    "template",
                    "a template on AWS must be an image ARN (arn:aws:lambda:<region>:<account>:microvm-image:<name>); pass the image ARN",
                ))
            }
            (None, None) => Err(SandboxError::invalid_argument(
                "template",
                "no template was given; pass an image ARN with .template(..) or set RAYITO_TEMPLATE",
            )),
        }
    }
}

/// Image names: 1 to 64 of `[A-Za-z0-9_-]`.
fn check_image_name(name: &str) -> Result<(), SandboxError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "template",
            "a template name must be 1 to 64 letters, digits, '_' or '-'; pass an image name or ARN",
        ))
    }
}
