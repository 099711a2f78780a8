//! [`LocalGatewayUpstreams`]: what lets a test's own HTTPS server stand in
//! for the API behind a secret gateway on the local backend: a root CA the
//! sandboxes' agents trust for gateway upstreams, and host names they dial
//! at a fixed address (loopback included, which a gateway otherwise never
//! dials). Local only: nothing on AWS can set either.

use std::net::SocketAddr;

use rayito_agent::gateway::LocalUpstreams;

/// The local backend's gateway upstream settings, shared by every sandbox
/// of the process's local backend and read at each gateway apply (so set
/// them before creating the sandbox, or `refresh()` its gateways after).
/// docs/local.md describes them.
///
/// Get one from a local client:
/// [`Client::local_gateway_upstreams`](crate::Client::local_gateway_upstreams).
///
/// Only with the `local` cargo feature (on by default).
#[derive(Clone)]
pub struct LocalGatewayUpstreams {
    inner: LocalUpstreams,
}

impl std::fmt::Debug for LocalGatewayUpstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGatewayUpstreams")
            .finish_non_exhaustive()
    }
}

impl LocalGatewayUpstreams {
    pub(crate) fn new(inner: LocalUpstreams) -> Self {
        Self { inner }
    }

    /// Trusts the root certificate(s) in `pem` (PEM text) for gateway
    /// upstreams, besides the system's roots.
    pub fn trust_root_pem(&self, pem: impl Into<String>) {
        self.inner.add_root_pem(pem);
    }

    /// Dials `host` (the host of a gateway's `https://host` upstream) at
    /// `addr`, a loopback address included; the TLS name checked stays
    /// `host`.
    pub fn set_host(&self, host: impl Into<String>, addr: SocketAddr) {
        self.inner.set_host(host, addr);
    }
}
