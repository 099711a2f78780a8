//! [`SecretGateway`]: what one gateway forwards, and every check of it and
//! of a sandbox's set of gateways, made before any call (docs/secrets.md,
//! "Gateways"). The limits are the agent's; the SDK is stricter where the
//! agent would only fail later (0 headers, an unknown method).

use crate::error::SandboxError;
use crate::error::messages::{self as m, Template};
use crate::secrets::SecretRef;

/// Gateways one sandbox may have.
pub const MAX_GATEWAYS: usize = 8;
/// Longest gateway name.
pub const MAX_NAME_CHARS: usize = 64;
/// Headers one gateway injects: at least one, at most this many.
pub const MAX_HEADERS: usize = 16;
/// Allow rules of one gateway: at least one, at most this many.
pub const MAX_ALLOW_RULES: usize = 32;
/// The highest `rate_per_minute` (0 means the agent's default, 600).
pub const MAX_RATE_PER_MINUTE: u32 = 6_000;

/// The methods an allow rule may name.
pub(crate) const METHODS: [&str; 7] = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"];

/// Headers a gateway may never inject: framing, hop-by-hop and `host`
/// (each could desynchronise the forwarded request or aim it at another
/// host).
const RESERVED: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "trailer",
    "upgrade",
];

/// One secret gateway: a loopback HTTP port inside the sandbox on which the
/// agent adds secret headers to each allowed request and forwards it to one
/// fixed HTTPS upstream. Sandbox code calls the gateway's URL
/// ([`GatewayStatus::url`](crate::gateway::GatewayStatus::url)) and never
/// sees the header values: they are read from Secrets Manager by the SDK
/// and held by the agent only.
///
/// Setters never fail; [`SandboxBuilder::gateway`](crate::SandboxBuilder::gateway)'s
/// `create` (and [`Pool::take_with_gateways`](crate::Pool::take_with_gateways))
/// check everything before any call: the upstream is `https://host` or
/// `https://host:port` (no path, query, userinfo or fragment), 1 to 16
/// headers, 1 to 32 allow rules, a rate of 0 or 1 to 6,000 a minute.
///
/// `Debug` shows the upstream, the header names and the rules, never a
/// secret's name (names are confidential selectors) or value.
///
/// ```
/// use rayito::gateway::SecretGateway;
/// use rayito::secrets::SecretRef;
///
/// let openai = SecretGateway::new("https://api.openai.com")
///     .header("authorization", "openai-bearer")
///     .header("openai-organization", SecretRef::new("openai-org").version_stage("AWSCURRENT"))
///     .allow("POST", "/v1/chat/completions")
///     .allow("GET", "/v1/models/*")
///     .rate_per_minute(120);
/// # let _ = openai;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct SecretGateway {
    upstream: String,
    headers: Vec<(String, SecretRef)>,
    allow: Vec<(String, String)>,
    rate_per_minute: u32,
}

impl SecretGateway {
    /// A gateway to `upstream` (`https://host` or `https://host:port`),
    /// with no header and no rule yet.
    pub fn new(upstream: impl Into<String>) -> Self {
        Self {
            upstream: upstream.into(),
            headers: Vec::new(),
            allow: Vec::new(),
            rate_per_minute: 0,
        }
    }

    /// Injects header `name` with the value of the secret `secret` (a name
    /// under the secret cache's prefix, an ARN, or a [`SecretRef`] with a
    /// version) into every forwarded request; an inbound copy of the
    /// header is dropped first. The same name again replaces the secret.
    pub fn header(mut self, name: impl Into<String>, secret: impl Into<SecretRef>) -> Self {
        let name = name.into();
        let secret = secret.into();
        match self.headers.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = secret,
            None => self.headers.push((name, secret)),
        }
        self
    }

    /// Forwards requests with `method` (`GET`, `POST`, `PUT`, `PATCH`,
    /// `DELETE`, `HEAD` or `OPTIONS`) to `path` (absolute; `/v1/*` matches
    /// every path under `/v1/`, not `/v1` itself; the query is not
    /// matched). Everything else answers 403 and never reaches the
    /// upstream.
    pub fn allow(mut self, method: impl Into<String>, path: impl Into<String>) -> Self {
        self.allow.push((method.into(), path.into()));
        self
    }

    /// Requests a minute the gateway forwards (a token bucket, full at
    /// start); beyond it the agent answers 429. 0 (the default) leaves the
    /// agent's default, 600.
    pub fn rate_per_minute(mut self, rate: u32) -> Self {
        self.rate_per_minute = rate;
        self
    }

    /// The upstream as given.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The injected headers' names, in the order given.
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The allow rules as `(method, path)`, in the order given.
    pub fn rules(&self) -> Vec<(&str, &str)> {
        self.allow
            .iter()
            .map(|(m, p)| (m.as_str(), p.as_str()))
            .collect()
    }

    /// The rate as given (0: the agent's default).
    pub fn rate(&self) -> u32 {
        self.rate_per_minute
    }

    /// The headers and the secrets they read.
    pub(crate) fn headers(&self) -> &[(String, SecretRef)] {
        &self.headers
    }

    /// Checks this gateway, named `name` in the messages (no I/O); each
    /// secret reference by the rules of a cache with `prefix`.
    pub(crate) fn check(&self, name: &str, prefix: &str) -> Result<(), SandboxError> {
        let g = [("gateway", name)];
        let rest = match self.upstream.strip_prefix("https://") {
            Some(rest) => rest,
            None => return Err(refuse("upstream", m::GATEWAY_UPSTREAM_SCHEME, &g)),
        };
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(refuse("upstream", m::GATEWAY_UPSTREAM_REST, &g));
        }
        self.check_headers(name, prefix)?;
        self.check_allow(name)?;
        if self.rate_per_minute > MAX_RATE_PER_MINUTE {
            let rate = self.rate_per_minute.to_string();
            return Err(refuse(
                "rate_per_minute",
                m::GATEWAY_RATE,
                &[("gateway", name), ("rate", &rate)],
            ));
        }
        Ok(())
    }

    fn check_headers(&self, name: &str, prefix: &str) -> Result<(), SandboxError> {
        if !(1..=MAX_HEADERS).contains(&self.headers.len()) {
            let count = self.headers.len().to_string();
            return Err(refuse(
                "headers",
                m::GATEWAY_HEADER_COUNT,
                &[("gateway", name), ("count", &count)],
            ));
        }
        let mut seen: Vec<String> = Vec::with_capacity(self.headers.len());
        for (index, (header, secret)) in self.headers.iter().enumerate() {
            let lower = header.to_ascii_lowercase();
            if lower.is_empty() || !lower.bytes().all(is_token_byte) {
                let index = index.to_string();
                return Err(refuse(
                    "headers",
                    m::GATEWAY_HEADER_NAME,
                    &[("gateway", name), ("index", &index)],
                ));
            }
            let args = [("gateway", name), ("header", lower.as_str())];
            if RESERVED.contains(&lower.as_str()) {
                return Err(refuse("headers", m::GATEWAY_HEADER_RESERVED, &args));
            }
            if seen.contains(&lower) {
                return Err(refuse("headers", m::GATEWAY_HEADER_TWICE, &args));
            }
            secret.resolve(prefix, "headers")?;
            seen.push(lower);
        }
        Ok(())
    }

    fn check_allow(&self, name: &str) -> Result<(), SandboxError> {
        if self.allow.is_empty() {
            return Err(refuse(
                "allow",
                m::GATEWAY_ALLOW_EMPTY,
                &[("gateway", name)],
            ));
        }
        if self.allow.len() > MAX_ALLOW_RULES {
            let count = self.allow.len().to_string();
            return Err(refuse(
                "allow",
                m::GATEWAY_ALLOW_TOO_MANY,
                &[("gateway", name), ("count", &count)],
            ));
        }
        for (index, (method, path)) in self.allow.iter().enumerate() {
            let index = index.to_string();
            let args = [("gateway", name), ("index", index.as_str())];
            if !METHODS.contains(&method.as_str()) {
                return Err(refuse("allow", m::GATEWAY_METHOD, &args));
            }
            if !path.starts_with('/') {
                return Err(refuse("allow", m::GATEWAY_PATH_RELATIVE, &args));
            }
            if !super::path::is_safe(path) {
                return Err(refuse("allow", m::GATEWAY_PATH_UNSAFE, &args));
            }
        }
        Ok(())
    }
}

/// An RFC 9110 token byte (`tchar`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// `InvalidArgument` naming `argument`, with the template's reason.
pub(crate) fn refuse(argument: &'static str, t: Template, args: &[(&str, &str)]) -> SandboxError {
    SandboxError::invalid_argument(argument, t.render(args))
}

/// Whether `name` is a gateway name: 1 to 64 of `[a-z0-9-]`.
fn name_ok(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Checks a sandbox's gateways (names, count, each gateway) before any
/// call; `prefix` is the secret cache's.
///
/// # Errors
/// `InvalidArgument` naming `gateways`, `upstream`, `headers`, `allow` or
/// `rate_per_minute`.
pub(crate) fn check_all(
    gateways: &[(String, SecretGateway)],
    prefix: &str,
) -> Result<(), SandboxError> {
    if gateways.len() > MAX_GATEWAYS {
        let count = gateways.len().to_string();
        return Err(refuse(
            "gateways",
            m::GATEWAY_TOO_MANY,
            &[("count", &count)],
        ));
    }
    for (index, (name, _)) in gateways.iter().enumerate() {
        if !name_ok(name) {
            let index = index.to_string();
            return Err(refuse("gateways", m::GATEWAY_NAME, &[("index", &index)]));
        }
    }
    for (name, gateway) in gateways {
        gateway.check(name, prefix)?;
    }
    Ok(())
}
