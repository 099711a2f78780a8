//! [`GatewayOptions`]: how an agent's secret gateways are set up. On a
//! MicroVM only the defaults apply (the OS trust store, no override); the
//! local backend adds what its tests need to stand in for a real API: a
//! CA of their own and names that resolve to a port on this host.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long an upstream may take to send its response head by default.
pub const DEFAULT_RESPONSE_HEAD_TIMEOUT: Duration = Duration::from_secs(600);

/// The secret gateway's setup for one agent (`AgentConfig::gateway`).
///
/// Clones share the local upstream settings: what the emulator changes
/// after an agent started applies to that agent's next Configure.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// Serve the gateway section at all (default `true`). `false` reports
    /// `features.secret_gateway = false` and answers the section
    /// UNSUPPORTED, as an agent built before it: how tests reach the SDK's
    /// `Unimplemented`.
    pub enabled: bool,
    /// How long an upstream may take to send its response head before the
    /// gateway answers 504 `upstream_timeout` (default 600 s; tests
    /// shorten it).
    pub response_head_timeout: Duration,
    /// The local backend's upstream settings (default: none, as on a
    /// MicroVM, where nothing sets them).
    pub local_upstreams: LocalUpstreams,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            response_head_timeout: DEFAULT_RESPONSE_HEAD_TIMEOUT,
            local_upstreams: LocalUpstreams::default(),
        }
    }
}

impl GatewayOptions {
    pub(crate) fn extra_roots(&self) -> Vec<String> {
        self.local_upstreams.read().roots_pem.clone()
    }

    pub(crate) fn host_overrides(&self) -> BTreeMap<String, SocketAddr> {
        self.local_upstreams.read().hosts.clone()
    }
}

/// The local backend's gateway upstream settings, shared by every agent
/// of one emulator and changeable while they run: extra trusted root CAs
/// (PEM) and host names dialled at a fixed address, exempt from the
/// refusal of loopback addresses. Never set on a MicroVM.
#[derive(Clone, Debug, Default)]
pub struct LocalUpstreams {
    inner: Arc<RwLock<LocalUpstreamsInner>>,
}

#[derive(Clone, Debug, Default)]
struct LocalUpstreamsInner {
    roots_pem: Vec<String>,
    hosts: BTreeMap<String, SocketAddr>,
}

impl LocalUpstreams {
    fn read(&self) -> LocalUpstreamsInner {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Trusts the root certificate(s) in `pem` for gateway upstreams too
    /// (from the next Configure on).
    pub fn add_root_pem(&self, pem: impl Into<String>) {
        self.inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .roots_pem
            .push(pem.into());
    }

    /// Dials `host` (an upstream's host name, as in `https://host`) at
    /// `addr`, a loopback address included (from the next Configure on).
    pub fn set_host(&self, host: impl Into<String>, addr: SocketAddr) {
        self.inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .hosts
            .insert(host.into(), addr);
    }
}
