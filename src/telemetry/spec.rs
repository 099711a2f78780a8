//! What a telemetry export asks for, and every check of `create` before
//! any call (the reference's, in English, plus the endpoint's).

use std::fmt;
use std::time::Duration;

use crate::error::SandboxError;
use crate::error::messages::{self as m, Template};
#[cfg(feature = "secrets")]
use crate::secret::SecretRef;

/// The argument and feature name of this module's errors.
pub(crate) const TELEMETRY: &str = "telemetry";
/// Where telemetry export is documented.
pub(crate) const DOC: &str = "docs/observability.md";
/// The default export interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The default `service.name`.
const DEFAULT_SERVICE_NAME: &str = "rayito";
/// The interval's bounds, in seconds.
const INTERVAL_S: std::ops::RangeInclusive<u64> = 15..=300;
/// Longest service name.
const MAX_SERVICE_NAME: usize = 1_024;
/// Longest endpoint URL.
const MAX_URL: usize = 2_048;

/// The gauges' names: `rayito.sandbox.*` or `e2b.sandbox.*`
/// (`cpu.used_pct`, `memory.used_bytes`, `memory.total_bytes`,
/// `memory.cache_bytes`, `disk.used_bytes`, `disk.total_bytes`,
/// `cpu.count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TelemetryNames {
    /// `rayito.sandbox.*` (the default).
    #[default]
    Rayito,
    /// `e2b.sandbox.*`, as E2B's dashboards name them.
    E2b,
}

impl TelemetryNames {
    /// Its name: `rayito` or `e2b`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rayito => "rayito",
            Self::E2b => "e2b",
        }
    }
}

impl fmt::Display for TelemetryNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TelemetryNames {
    type Err = SandboxError;

    /// `rayito` or `e2b`.
    ///
    /// # Errors
    /// `InvalidArgument` for anything else.
    fn from_str(s: &str) -> Result<Self, SandboxError> {
        match s {
            "rayito" => Ok(Self::Rayito),
            "e2b" => Ok(Self::E2b),
            other => Err(refuse(
                m::TELEMETRY_NAMES,
                &[("names", &format!("{other:?}"))],
            )),
        }
    }
}

/// How the agent signs each export.
#[derive(Clone, PartialEq, Eq)]
pub struct OtlpAuth(pub(crate) Auth);

#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    ExecutionRole,
    #[cfg(feature = "secrets")]
    Bearer(SecretRef),
}

impl OtlpAuth {
    /// SigV4 (service `monitoring`) with the sandbox's execution role
    /// (the default): what CloudWatch's OTLP endpoint takes. The role needs
    /// `cloudwatch:PutMetricData`; an official image must be of the
    /// `base-caps` variant.
    pub fn execution_role() -> Self {
        Self(Auth::ExecutionRole)
    }

    /// `Authorization: Bearer <token>`, the token the value of the secret
    /// `secret_name` in AWS Secrets Manager (a name under the secret
    /// cache's prefix, or an ARN), read through the sandbox's secret cache
    /// when `create` sends the section, and sent only to the agent.
    ///
    /// Only with the `secrets` cargo feature.
    #[cfg(feature = "secrets")]
    pub fn bearer(secret_name: impl Into<SecretRef>) -> Self {
        Self(Auth::Bearer(secret_name.into()))
    }
}

impl Default for OtlpAuth {
    fn default() -> Self {
        Self::execution_role()
    }
}

impl fmt::Debug for OtlpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Auth::ExecutionRole => f.write_str("OtlpAuth::ExecutionRole"),
            #[cfg(feature = "secrets")]
            Auth::Bearer(_) => f.write_str("OtlpAuth::Bearer(..)"),
        }
    }
}

/// A telemetry export (`SandboxBuilder::telemetry`): every interval the
/// sandbox's agent posts the newest metrics sample as seven OTLP gauges.
#[derive(Clone, PartialEq, Eq)]
pub struct TelemetryExport {
    pub(crate) interval: Duration,
    pub(crate) service_name: String,
    pub(crate) names: TelemetryNames,
    pub(crate) auth: OtlpAuth,
    pub(crate) endpoint: Option<String>,
}

impl fmt::Debug for TelemetryExport {
    // The endpoint may carry a collector's key in its query: only whether
    // one is set is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryExport")
            .field("interval", &self.interval)
            .field("service_name", &self.service_name)
            .field("names", &self.names)
            .field("auth", &self.auth)
            .field("endpoint", &self.endpoint.as_ref().map(|_| ".."))
            .finish()
    }
}

impl Default for TelemetryExport {
    fn default() -> Self {
        Self::new()
    }
}

impl TelemetryExport {
    /// Every 60 s, `service.name` `rayito`, `rayito.sandbox.*` names, the
    /// execution role's SigV4, CloudWatch's OTLP endpoint of the
    /// sandbox's region.
    pub fn new() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            names: TelemetryNames::Rayito,
            auth: OtlpAuth::execution_role(),
            endpoint: None,
        }
    }

    /// How often the agent exports (15 to 300 whole seconds; the first
    /// export goes as soon as the section is applied).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The resource's `service.name` (not blank).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// The gauges' names.
    pub fn names(mut self, names: TelemetryNames) -> Self {
        self.names = names;
        self
    }

    /// How exports are signed.
    pub fn auth(mut self, auth: OtlpAuth) -> Self {
        self.auth = auth;
        self
    }

    /// The collector's OTLP/HTTP metrics URL (`https://`, or `http://` to a
    /// loopback host) instead of CloudWatch's
    /// `https://monitoring.<region>.amazonaws.com/v1/metrics`. A rayito
    /// extension of the agent's contract; the local backend needs it.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }
}

pub(crate) fn refuse(template: Template, args: &[(&str, &str)]) -> SandboxError {
    SandboxError::invalid_argument(TELEMETRY, template.render(args))
}

/// An export URL the agent accepts: `https://host[:port][/path]`, or
/// `http://` to a loopback host; no userinfo or fragment.
fn endpoint_ok(url: &str) -> bool {
    if url.len() > MAX_URL || url.contains('#') || url.chars().any(char::is_control) {
        return false;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return false;
    }
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    scheme == "https" || (scheme == "http" && loopback)
}

/// Every check of `create` for `export`, before any call; `image`: the
/// builder's image name (an official one gates the execution role).
///
/// # Errors
/// `InvalidArgument` (argument `telemetry`) with the pinned messages;
/// `Unimplemented` (feature `telemetry`) for the execution role on an
/// official image that is not of the `base-caps` variant.
pub(crate) fn check(export: &TelemetryExport, image: Option<&str>) -> Result<(), SandboxError> {
    let whole = export.interval.subsec_nanos() == 0;
    if !whole || !INTERVAL_S.contains(&export.interval.as_secs()) {
        return Err(refuse(
            m::TELEMETRY_INTERVAL,
            &[("interval", &format!("{:?}", export.interval))],
        ));
    }
    if export.service_name.trim().is_empty() || export.service_name.len() > MAX_SERVICE_NAME {
        return Err(refuse(m::TELEMETRY_SERVICE_NAME, &[]));
    }
    if let Some(url) = &export.endpoint
        && !endpoint_ok(url)
    {
        return Err(refuse(m::TELEMETRY_ENDPOINT, &[]));
    }
    match &export.auth.0 {
        #[cfg(feature = "secrets")]
        Auth::Bearer(secret) => {
            if secret.name().trim().is_empty() {
                return Err(refuse(m::TELEMETRY_BEARER_NAME, &[]));
            }
            Ok(())
        }
        Auth::ExecutionRole => match crate::sandbox::image_variant::official_variant(image) {
            Some(variant) if !CAPS_VARIANTS.contains(&variant) => Err(SandboxError::unimplemented(
                TELEMETRY,
                m::TELEMETRY_VARIANT_REASON.render(&[("variant", variant)]),
                Some(DOC),
            )),
            _ => Ok(()),
        },
    }
}

/// The official variants whose agent signs with the execution role.
const CAPS_VARIANTS: [&str; 2] = ["base-caps", "base-caps-efs"];
