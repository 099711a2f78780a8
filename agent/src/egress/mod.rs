//! Egress enforcement (docs/network.md): with `network.enforce` in the run
//! payload, the sandbox's processes get a network namespace of their own
//! with loopback only, and the agent serves a proxy inside it that dials
//! out after checking the policy in force (`NetworkService.UpdateNetwork`
//! replaces it; each new connection reads it).
//!
//! Without root (or without network namespaces), or with
//! `AgentConfig::egress` off, nothing is installed and Health reports
//! `EGRESS_ENFORCEMENT_NONE`: the SDK then refuses a restricting policy.

mod netns;
mod policy;
mod proxy;
mod service;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) use self::netns::SandboxNetNs;
pub(crate) use self::service::NetworkServiceImpl;

use self::policy::Policy;
use crate::pb;
use crate::server::ServeState;

/// The environment variables that point sandbox processes at the proxy
/// (both spellings: curl reads `http_proxy` only in lower case, others
/// the upper).
const PROXY_ENV_NAMES: [(&str, &str); 6] = [
    ("HTTP_PROXY", "http"),
    ("http_proxy", "http"),
    ("HTTPS_PROXY", "http"),
    ("https_proxy", "http"),
    ("ALL_PROXY", "socks5h"),
    ("all_proxy", "socks5h"),
];

/// What the sandbox's clients reach without the proxy (issue 41): its own
/// loopback, so that `curl http://localhost:3000` inside the sandbox finds
/// the sandbox's server, not the host's (the proxy would refuse it anyway).
const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// What every later child of an enforced sandbox gets: the namespace to
/// enter and the proxy variables.
#[derive(Clone, Debug)]
pub(crate) struct SandboxNetwork {
    pub(crate) ns: Arc<SandboxNetNs>,
    pub(crate) envs: Vec<(String, String)>,
}

/// What the proxy tasks share with the service.
#[derive(Debug)]
pub(crate) struct EgressShared {
    policy: Mutex<Arc<Policy>>,
    /// The agent's own listeners: never dialled, whatever the policy.
    own: Vec<SocketAddr>,
}

impl EgressShared {
    /// The policy in force now.
    fn policy(&self) -> Arc<Policy> {
        self.policy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_policy(&self, policy: Policy) {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// Whether `addr` is one of the agent's own listeners, however spelt:
    /// its port on any loopback or unspecified address (Linux connects
    /// 0.0.0.0 and :: to loopback), IPv4-mapped or not, or on the exact
    /// address it listens on. (A host address it also listens on through
    /// 0.0.0.0 is caught once connected: `proxy::landed_allowed`.)
    fn is_own(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        self.own_port(addr.port())
            && (ip.is_loopback()
                || ip.is_unspecified()
                || policy::is_host_local(ip)
                || self.own.iter().any(|own| own.ip().to_canonical() == ip))
    }

    /// Whether `port` is the port of one of the agent's own listeners.
    fn own_port(&self, port: u16) -> bool {
        self.own.iter().any(|own| own.port() == port)
    }
}

/// An installed enforcement.
#[derive(Debug)]
struct Active {
    shared: Arc<EgressShared>,
    port: u16,
}

/// One agent's egress state.
#[derive(Debug)]
pub(crate) struct Egress {
    /// `AgentConfig::egress`.
    enabled: bool,
    /// The agent's own listeners (never dialled by the proxy).
    own: Vec<SocketAddr>,
    active: OnceLock<Active>,
}

impl Egress {
    /// Enforcement where `enabled` and the host allows it, never dialling
    /// `own` (the agent's listeners).
    pub(crate) fn new(enabled: bool, own: Vec<SocketAddr>) -> Self {
        Self {
            enabled,
            own,
            active: OnceLock::new(),
        }
    }

    /// Installs enforcement: the namespace and its proxy (deny-all until
    /// the first UpdateNetwork). Logs and leaves nothing installed where
    /// the host cannot (Health then says NONE). Returns the namespace for
    /// the sandbox's children and the proxy environment.
    pub(crate) fn install(
        &self,
        stop: tokio::sync::watch::Receiver<ServeState>,
    ) -> Option<SandboxNetwork> {
        if !self.enabled || self.active.get().is_some() {
            return None;
        }
        if !rustix::process::geteuid().is_root() {
            tracing::warn!(
                "the run payload asks for egress enforcement, but the agent does not run as root: \
                 nothing is enforced (Health reports none)"
            );
            return None;
        }
        let (ns, listener) = match netns::create() {
            Ok(made) => made,
            Err(err) => {
                tracing::warn!(error = %err, "no network namespace for egress enforcement: nothing is enforced");
                return None;
            }
        };
        let port = listener.local_addr().ok()?.port();
        let listener = tokio::net::TcpListener::from_std(listener).ok()?;
        let shared = Arc::new(EgressShared {
            policy: Mutex::new(Arc::new(Policy::deny_all())),
            own: self.own.clone(),
        });
        tokio::spawn(proxy::serve(listener, shared.clone(), stop));
        let _ = self.active.set(Active { shared, port });
        let envs = PROXY_ENV_NAMES
            .iter()
            .map(|(name, scheme)| ((*name).to_owned(), format!("{scheme}://127.0.0.1:{port}")))
            .chain(["NO_PROXY", "no_proxy"].map(|name| (name.to_owned(), NO_PROXY.to_owned())))
            .collect();
        Some(SandboxNetwork {
            ns: Arc::new(ns),
            envs,
        })
    }

    /// What Health and NetworkState report.
    pub(crate) fn enforcement(&self) -> pb::EgressEnforcement {
        if self.active.get().is_some() {
            pb::EgressEnforcement::GuestRoutesAndProxy
        } else {
            pb::EgressEnforcement::None
        }
    }

    fn state(&self) -> pb::NetworkState {
        match self.active.get() {
            None => pb::NetworkState {
                enforcement: pb::EgressEnforcement::None as i32,
                ..Default::default()
            },
            Some(active) => {
                let policy = active.shared.policy();
                pb::NetworkState {
                    allow_out: policy.allow_out.clone(),
                    deny_out: policy.deny_out.clone(),
                    egress_proxy_configured: false,
                    enforcement: pb::EgressEnforcement::GuestRoutesAndProxy as i32,
                    local_proxy_port: u32::from(active.port),
                }
            }
        }
    }
}
