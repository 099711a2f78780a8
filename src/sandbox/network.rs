//! The sandbox's egress policy (docs/network.md): what a sandbox may
//! connect to, set at create (`SandboxBuilder::network`,
//! `allow_internet_access`), replaced at runtime (`update_network`, also by
//! id) and read back (`get_network`, never the proxy's address or
//! credentials).
//!
//! Every limit is checked before any call; a refusal names the list and the
//! entry's index, never the entry (a hostname may say more than it should).

use std::net::IpAddr;
use std::time::Duration;

use crate::control::ControlPlane;
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::client::Client;
use crate::secret::Secret;
use crate::transport::{AgentConn, NetworkAnswer};

/// Every IPv4 address: denying it denies the internet
/// (`allow_internet_access(false)` appends it to `deny_out`).
pub const ALL_TRAFFIC: &str = "0.0.0.0/0";

/// At most this many entries per list.
const MAX_ENTRIES: usize = 256;
/// At most this many hostname entries in the whole policy.
const MAX_HOSTNAMES: usize = 64;
/// The longest hostname (after `*.` and a trailing dot are stripped).
const MAX_HOSTNAME_CHARS: usize = 253;
/// RFC 1929: a SOCKS5 username or password is 1 to 255 bytes.
const MAX_CREDENTIAL_BYTES: usize = 255;
/// Where the feature is documented.
const DOC: &str = "docs/network.md";

/// An operator's proxy that the sandbox's egress goes through. Its address
/// and credentials never appear in `Debug`, an error or [`NetworkState`].
#[derive(Clone, PartialEq, Eq)]
pub struct EgressProxy {
    /// `host:port` or `[v6]:port`.
    pub address: String,
    /// The proxy's username (RFC 1929), if it asks for one.
    pub username: Option<String>,
    /// The proxy's password (needs a username).
    pub password: Option<Secret>,
}

impl EgressProxy {
    /// A proxy at `address` (`host:port` or `[v6]:port`), without credentials.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            username: None,
            password: None,
        }
    }

    /// With a username and a password.
    #[must_use]
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<Secret>) -> Self {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }
}

crate::secret::redacted_debug! {
    EgressProxy |o| address = "***", has_username = o.username.is_some(),
    has_password = o.password.is_some()
}

/// What a sandbox may connect to.
///
/// Entries are IP addresses, CIDRs or hostnames (`*.` wildcards for
/// subdomains, a trailing dot allowed; `allow_out` only). Allow beats deny;
/// no `deny_out` and no proxy means unrestricted. `Debug` shows how many
/// entries each list has, never the entries or the proxy.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Allowed destinations (they pass even when `deny_out` covers them).
    pub allow_out: Vec<String>,
    /// Denied destinations: IP addresses and CIDRs ([`ALL_TRAFFIC`] denies
    /// everything not allowed).
    pub deny_out: Vec<String>,
    /// An operator's proxy for the sandbox's egress.
    pub egress_proxy: Option<EgressProxy>,
}

crate::secret::redacted_debug! {
    NetworkPolicy |o| allow_out_len = o.allow_out.len(), deny_out_len = o.deny_out.len(),
    egress_proxy = o.egress_proxy.is_some()
}

impl NetworkPolicy {
    /// An unrestricted policy (no entries).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds allowed destinations.
    #[must_use]
    pub fn allow_out<S: Into<String>>(mut self, entries: impl IntoIterator<Item = S>) -> Self {
        self.allow_out.extend(entries.into_iter().map(Into::into));
        self
    }

    /// Adds denied destinations (IP addresses and CIDRs).
    #[must_use]
    pub fn deny_out<S: Into<String>>(mut self, entries: impl IntoIterator<Item = S>) -> Self {
        self.deny_out.extend(entries.into_iter().map(Into::into));
        self
    }

    /// Denies everything `allow_out` does not allow: appends
    /// [`ALL_TRAFFIC`] to `deny_out` (what `allow_internet_access(false)` does).
    #[must_use]
    pub fn deny_internet(mut self) -> Self {
        if !self.deny_out.iter().any(|e| e == ALL_TRAFFIC) {
            self.deny_out.push(ALL_TRAFFIC.to_owned());
        }
        self
    }

    crate::setters::setters! {
        /// Sends the sandbox's egress through `proxy`.
        egress_proxy: Some EgressProxy;
    }

    /// Whether the policy restricts anything (a deny entry or a proxy):
    /// only then is it sent, and only then must the agent enforce it.
    pub fn restricts(&self) -> bool {
        !self.deny_out.is_empty() || self.egress_proxy.is_some()
    }

    /// Checks every limit (no I/O).
    ///
    /// # Errors
    /// `InvalidArgument` naming `allow_out`, `deny_out` or `egress_proxy`
    /// (the message names the entry's index, never the entry).
    pub fn check(&self) -> Result<(), SandboxError> {
        let mut hostnames = 0usize;
        for (list, entries) in [("allow_out", &self.allow_out), ("deny_out", &self.deny_out)] {
            if entries.len() > MAX_ENTRIES {
                return Err(invalid(list, m::NETWORK_TOO_MANY.render(&[("list", list)])));
            }
            for (index, entry) in entries.iter().enumerate() {
                let index = index.to_string();
                let args = [("list", list), ("index", index.as_str())];
                match classify(entry) {
                    Entry::Empty => {
                        return Err(invalid(list, m::NETWORK_ENTRY_EMPTY.render(&args)));
                    }
                    Entry::Bad => return Err(invalid(list, m::NETWORK_ENTRY_BAD.render(&args))),
                    Entry::HostnameTooLong => {
                        return Err(invalid(list, m::NETWORK_HOSTNAME_TOO_LONG.render(&args)));
                    }
                    Entry::Hostname if list == "deny_out" => {
                        return Err(invalid(list, m::NETWORK_HOSTNAME_IN_DENY.render(&args)));
                    }
                    Entry::Hostname => hostnames += 1,
                    Entry::Ip => {}
                }
            }
        }
        if hostnames > MAX_HOSTNAMES {
            return Err(invalid(
                "allow_out",
                m::NETWORK_TOO_MANY_HOSTNAMES.render(&[]),
            ));
        }
        if let Some(proxy) = &self.egress_proxy {
            check_proxy(proxy)?;
        }
        Ok(())
    }

    pub(crate) fn to_pb(&self) -> pb::NetworkPolicy {
        pb::NetworkPolicy {
            allow_out: self.allow_out.clone(),
            deny_out: self.deny_out.clone(),
            egress_proxy: self.egress_proxy.as_ref().map(|p| pb::EgressProxy {
                address: p.address.clone(),
                username: p.username.clone(),
                password: p.password.as_ref().map(|s| s.expose().to_owned()),
            }),
        }
    }
}

fn invalid(argument: &'static str, reason: String) -> SandboxError {
    SandboxError::invalid_argument(argument, reason)
}

fn check_proxy(proxy: &EgressProxy) -> Result<(), SandboxError> {
    if !is_host_port(&proxy.address) {
        return Err(invalid(
            "egress_proxy",
            m::NETWORK_PROXY_ADDRESS.render(&[]),
        ));
    }
    if proxy.password.is_some() && proxy.username.is_none() {
        return Err(invalid(
            "egress_proxy",
            m::NETWORK_PROXY_PASSWORD_ALONE.render(&[]),
        ));
    }
    let len_ok = |n: usize| (1..=MAX_CREDENTIAL_BYTES).contains(&n);
    if let Some(user) = &proxy.username
        && !len_ok(user.len())
    {
        return Err(invalid(
            "egress_proxy",
            m::NETWORK_PROXY_CREDENTIAL.render(&[("field", "username")]),
        ));
    }
    if let Some(password) = &proxy.password
        && !len_ok(password.expose().len())
    {
        return Err(invalid(
            "egress_proxy",
            m::NETWORK_PROXY_CREDENTIAL.render(&[("field", "password")]),
        ));
    }
    Ok(())
}

/// `host:port` or `[v6]:port`, with a port of 1 to 65535.
fn is_host_port(address: &str) -> bool {
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let Some((v6, port)) = rest.split_once("]:") else {
            return false;
        };
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        (v6, port)
    } else {
        match address.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, port),
            _ => return false,
        }
    };
    !host.is_empty()
        && !host.chars().any(|c| c.is_whitespace() || c.is_control())
        && port.parse::<u16>().is_ok_and(|p| p != 0)
}

/// What an entry is.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Empty,
    Ip,
    Hostname,
    HostnameTooLong,
    Bad,
}

fn classify(entry: &str) -> Entry {
    if entry.is_empty() {
        return Entry::Empty;
    }
    if let Some((addr, prefix)) = entry.split_once('/') {
        return match (addr.parse::<IpAddr>(), prefix.parse::<u8>()) {
            (Ok(IpAddr::V4(_)), Ok(p)) if p <= 32 && !prefix.starts_with('+') => Entry::Ip,
            (Ok(IpAddr::V6(_)), Ok(p)) if p <= 128 && !prefix.starts_with('+') => Entry::Ip,
            _ => Entry::Bad,
        };
    }
    if entry.parse::<IpAddr>().is_ok() {
        return Entry::Ip;
    }
    let name = entry.strip_prefix("*.").unwrap_or(entry);
    let name = name.strip_suffix('.').unwrap_or(name);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.chars().count() > MAX_HOSTNAME_CHARS {
        return Entry::HostnameTooLong;
    }
    if name.split('.').all(label_ok) {
        Entry::Hostname
    } else {
        Entry::Bad
    }
}

/// How the agent enforces the policy (its Health, and [`NetworkState`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EgressEnforcement {
    /// The agent did not say (or said something this SDK does not know).
    Unspecified,
    /// Nothing is enforced.
    None,
    /// The guest's routes enforce IP entries.
    GuestRoutes,
    /// The guest's routes, and a proxy for hostname entries.
    GuestRoutesAndProxy,
}

impl EgressEnforcement {
    /// From the wire value (unknown values are `Unspecified`).
    pub(crate) fn from_i32(value: i32) -> Self {
        match pb::EgressEnforcement::try_from(value) {
            Ok(pb::EgressEnforcement::None) => Self::None,
            Ok(pb::EgressEnforcement::GuestRoutes) => Self::GuestRoutes,
            Ok(pb::EgressEnforcement::GuestRoutesAndProxy) => Self::GuestRoutesAndProxy,
            _ => Self::Unspecified,
        }
    }

    /// Whether anything is enforced.
    pub fn enforces(self) -> bool {
        matches!(self, Self::GuestRoutes | Self::GuestRoutesAndProxy)
    }
}

/// The policy the agent applies, as it reports it (never the proxy's
/// address or credentials). `Debug` shows the lists' lengths only.
#[derive(Clone, PartialEq, Eq)]
pub struct NetworkState {
    /// Allowed destinations.
    pub allow_out: Vec<String>,
    /// Denied destinations.
    pub deny_out: Vec<String>,
    /// Whether an operator's proxy is configured.
    pub egress_proxy_configured: bool,
    /// How the agent enforces the policy.
    pub enforcement: EgressEnforcement,
    /// The port of the agent's proxy inside the sandbox (`HTTPS_PROXY`,
    /// `ALL_PROXY` point at it), when it runs one.
    pub local_proxy_port: Option<u16>,
}

crate::secret::redacted_debug! {
    NetworkState |o| allow_out_len = o.allow_out.len(), deny_out_len = o.deny_out.len(),
    egress_proxy_configured, enforcement, local_proxy_port
}

impl NetworkState {
    /// From the agent's message (a hostile peer's lists are cut to the
    /// limits; a port above 65535 reads as none).
    fn from_pb(s: pb::NetworkState) -> Self {
        let mut allow_out = s.allow_out;
        allow_out.truncate(MAX_ENTRIES);
        let mut deny_out = s.deny_out;
        deny_out.truncate(MAX_ENTRIES);
        Self {
            allow_out,
            deny_out,
            egress_proxy_configured: s.egress_proxy_configured,
            enforcement: EgressEnforcement::from_i32(s.enforcement),
            local_proxy_port: u16::try_from(s.local_proxy_port).ok().filter(|p| *p != 0),
        }
    }
}

/// The builder's network options: the policy and the flag.
#[derive(Clone, Debug, Default)]
pub(crate) struct NetworkChoice {
    pub(crate) policy: Option<NetworkPolicy>,
    pub(crate) allow_internet_access: Option<bool>,
}

/// A checked restricting policy to send at create, and the feature the
/// gate names when the agent cannot enforce it.
#[derive(Clone, Debug)]
pub(crate) struct CreateNetwork {
    policy: NetworkPolicy,
    feature: &'static str,
}

impl NetworkChoice {
    /// The policy create sends (`None`: unrestricted, nothing sent).
    ///
    /// # Errors
    /// `InvalidArgument` as [`NetworkPolicy::check`].
    pub(crate) fn checked(&self) -> Result<Option<CreateNetwork>, SandboxError> {
        let given = self.policy.clone().unwrap_or_default();
        let flag_only = given == NetworkPolicy::default();
        let policy = if self.allow_internet_access == Some(false) {
            given.deny_internet()
        } else {
            given
        };
        policy.check()?;
        if !policy.restricts() {
            return Ok(None);
        }
        let feature = if flag_only && self.allow_internet_access == Some(false) {
            "allow_internet_access=False"
        } else {
            "network"
        };
        Ok(Some(CreateNetwork { policy, feature }))
    }
}

impl NetworkChoice {
    /// Logs (once per create, at INFO) that an `allow_out` without
    /// `deny_out` or a proxy restricts nothing.
    pub(crate) fn note_unrestricted(&self) {
        if self
            .policy
            .as_ref()
            .is_some_and(|p| !p.allow_out.is_empty())
        {
            tracing::info!(
                target: "rayito::sandbox",
                "allow_out without deny_out or a proxy restricts nothing; add deny_out (0.0.0.0/0 denies everything else)"
            );
        }
    }
}

fn not_enforced(feature: &str, reason: m::Template) -> SandboxError {
    SandboxError::unimplemented(feature.to_owned(), reason.text, Some(DOC))
}

fn precondition(feature: &str) -> SandboxError {
    SandboxError::unimplemented(
        feature.to_owned(),
        m::NETWORK_PRECONDITION_REASON.text,
        Some(DOC),
    )
}

/// The create gate: with a restricting policy, an agent that enforces
/// nothing gets its sandbox terminated and the create fails
/// `Unimplemented` (whatever keep-on-failure says: the caller asked for a
/// bounded sandbox and would otherwise get an unbounded one); else the
/// policy is applied and the enforcement checked again.
pub(crate) async fn gate(
    network: Option<&CreateNetwork>,
    health: &pb::HealthResponse,
    conn: &AgentConn,
    control: &dyn ControlPlane,
    microvm_id: &str,
    timeout: Duration,
) -> Result<(), SandboxError> {
    let Some(network) = network else {
        return Ok(());
    };
    let outcome = async {
        if !EgressEnforcement::from_i32(health.egress_enforcement).enforces() {
            return Err(not_enforced(
                network.feature,
                m::NETWORK_NOT_ENFORCED_REASON,
            ));
        }
        match conn.update_network(network.policy.to_pb(), timeout).await? {
            NetworkAnswer::Precondition => Err(precondition(network.feature)),
            NetworkAnswer::State(state)
                if !EgressEnforcement::from_i32(state.enforcement).enforces() =>
            {
                Err(not_enforced(network.feature, m::NETWORK_LOST_REASON))
            }
            NetworkAnswer::State(_) => Ok(()),
        }
    }
    .await;
    if outcome.is_err() {
        let _ = control.terminate_microvm(microvm_id.to_owned()).await;
    }
    outcome
}

/// `UpdateNetwork` with a checked `policy`.
async fn update(
    conn: &AgentConn,
    policy: &NetworkPolicy,
    timeout: Duration,
) -> Result<NetworkState, SandboxError> {
    match conn.update_network(policy.to_pb(), timeout).await? {
        NetworkAnswer::State(state) => Ok(NetworkState::from_pb(state)),
        NetworkAnswer::Precondition => Err(precondition("update_network")),
    }
}

/// The sandbox's egress policy (a borrowed view: `sandbox.network()`).
#[derive(Debug, Clone, Copy)]
pub struct Network<'a> {
    sandbox: &'a super::Sandbox,
}

impl<'a> Network<'a> {
    pub(crate) fn new(sandbox: &'a super::Sandbox) -> Self {
        Self { sandbox }
    }

    /// Replaces the whole egress policy at once; connections opened after
    /// the call follow the new one (open ones are kept).
    ///
    /// # Errors
    /// `InvalidArgument` (`allow_out`, `deny_out`, `egress_proxy`) before
    /// any call; `Unimplemented` (feature `update_network`) when the agent
    /// cannot apply a policy to this sandbox (created without a restricting
    /// one, an image without CAP_NET_ADMIN) or predates NetworkService; the
    /// RPC's failures.
    pub async fn update(&self, policy: NetworkPolicy) -> Result<NetworkState, SandboxError> {
        let sandbox = self.sandbox;
        boxed!(Result<NetworkState, SandboxError>, {
            policy.check()?;
            update(sandbox.conn(), &policy, sandbox.request_timeout()).await
        })
    }

    /// The policy the agent applies and how it enforces it (never the
    /// proxy's address or credentials).
    ///
    /// # Errors
    /// `Unimplemented` (feature `get_network`) from an agent without
    /// NetworkService (or one that cannot report it); the RPC's failures.
    pub async fn get(&self) -> Result<NetworkState, SandboxError> {
        let sandbox = self.sandbox;
        boxed!(Result<NetworkState, SandboxError>, {
            match sandbox.conn().get_network(sandbox.request_timeout()).await? {
                NetworkAnswer::State(state) => Ok(NetworkState::from_pb(state)),
                NetworkAnswer::Precondition => Err(precondition("get_network")),
            }
        })
    }
}

impl super::Sandbox {
    /// Deprecated spelling of [`Network::update`].
    ///
    /// # Errors
    /// As [`Network::update`].
    #[deprecated(note = "use `sandbox.network().update(policy)`")]
    pub async fn update_network(
        &self,
        policy: NetworkPolicy,
    ) -> Result<NetworkState, SandboxError> {
        self.network().update(policy).await
    }

    /// Deprecated spelling of [`Network::get`].
    ///
    /// # Errors
    /// As [`Network::get`].
    #[deprecated(note = "use `sandbox.network().get()`")]
    pub async fn get_network(&self) -> Result<NetworkState, SandboxError> {
        self.network().get().await
    }

    /// As [`Network::update`] for the RUNNING sandbox `sandbox_id`, without
    /// a handle, on the default backend: connects, updates, closes; never
    /// terminates (a shortcut of [`Client::update_network_by_id`]).
    ///
    /// # Errors
    /// As [`Client::update_network_by_id`]; the implicit client's failures.
    pub async fn update_network_by_id(
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        policy: NetworkPolicy,
    ) -> Result<NetworkState, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<NetworkState, SandboxError>, {
            super::lifecycle::check_sandbox_id(sandbox_id)?;
            policy.check()?;
            super::metrics::check_by_id(sandbox_id, &access_token)?;
            super::SandboxBuilder::new()
                .client()
                .await?
                .update_network_by_id(sandbox_id, access_token, policy)
                .await
        })
    }
}

/// [`Client::update_network_by_id`] (and its shortcut): checks, then
/// the update over a connection for it.
pub(crate) async fn network_by_id(
    client: &Client,
    sandbox_id: &str,
    access_token: Secret,
    policy: NetworkPolicy,
    timeout: Duration,
) -> Result<NetworkState, SandboxError> {
    super::lifecycle::check_sandbox_id(sandbox_id)?;
    policy.check()?;
    super::metrics::check_by_id(sandbox_id, &access_token)?;
    let conn = super::metrics::open_running(client, sandbox_id, access_token).await?;
    update(&conn, &policy, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_classified() {
        for ip in ["10.0.0.1", "0.0.0.0/0", "::1", "fd00::/8", "127.0.0.1/32"] {
            assert_eq!(classify(ip), Entry::Ip, "{ip}");
        }
        for host in [
            "example.com",
            "*.example.com",
            "Example.COM.",
            "a_b.io",
            "localhost",
        ] {
            assert_eq!(classify(host), Entry::Hostname, "{host}");
        }
        for bad in [
            "10.0.0.0/33",
            "a b",
            "http://x",
            "*",
            "*.",
            "x..y",
            "::/129",
            "1.2.3.4/+8",
        ] {
            assert_eq!(classify(bad), Entry::Bad, "{bad}");
        }
        assert_eq!(classify(""), Entry::Empty);
    }

    #[test]
    fn proxy_addresses() {
        for ok in ["proxy:3128", "[::1]:8080", "10.0.0.1:1"] {
            assert!(is_host_port(ok), "{ok}");
        }
        for bad in [
            "",
            "proxy",
            ":80",
            "proxy:0",
            "proxy:70000",
            "::1:80",
            "[::1]",
            "a b:1",
        ] {
            assert!(!is_host_port(bad), "{bad}");
        }
    }

    #[test]
    fn the_flag_alone_names_its_own_feature() {
        let flag = NetworkChoice {
            policy: None,
            allow_internet_access: Some(false),
        };
        let checked = flag.checked().unwrap().unwrap();
        assert_eq!(checked.feature, "allow_internet_access=False");
        assert_eq!(checked.policy.deny_out, vec![ALL_TRAFFIC.to_owned()]);
        let both = NetworkChoice {
            policy: Some(NetworkPolicy::new().allow_out(["1.1.1.1"])),
            allow_internet_access: Some(false),
        };
        assert_eq!(both.checked().unwrap().unwrap().feature, "network");
        let open = NetworkChoice {
            policy: Some(NetworkPolicy::new().allow_out(["1.1.1.1"])),
            allow_internet_access: Some(true),
        };
        assert!(open.checked().unwrap().is_none());
    }

    #[test]
    fn hostile_states_are_bounded() {
        let s = NetworkState::from_pb(pb::NetworkState {
            allow_out: vec!["x".into(); 1000],
            local_proxy_port: 70_000,
            enforcement: 99,
            ..Default::default()
        });
        assert_eq!(s.allow_out.len(), MAX_ENTRIES);
        assert_eq!(s.local_proxy_port, None);
        assert_eq!(s.enforcement, EgressEnforcement::Unspecified);
    }
}
