//! The HTTPS client a gateway forwards with: HTTP/1.1 over TLS 1.2+,
//! verified against the roots the image trusts (plus the local backend's
//! extra roots), dialling only addresses outside the host (never loopback,
//! link-local or the instance metadata service, whether named or
//! resolved), except the local backend's host overrides.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;

use super::options::GatewayOptions;

/// Bound of each TCP connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an idle upstream connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many idle connections per upstream host.
const IDLE_PER_HOST: usize = 4;

/// What the listener sends upstream and gets back.
pub(crate) type Body = http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>;
pub(crate) type HttpsClient = Client<hyper_rustls::HttpsConnector<Dialer>, Body>;

/// The roots of the OS trust store, read once per process (an agent
/// serves one sandbox; the emulator's agents share the host's store).
fn native_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// Reads the OS trust store now (off the request path), so that the first
/// Health does not wait for it.
pub(crate) fn warm_roots() {
    std::thread::spawn(|| {
        let _ = native_roots();
    });
}

/// The root store: the OS's and the extra ones; `None` when it is empty
/// (the gateway is then unsupported: nothing could be verified).
pub(crate) fn roots(options: &GatewayOptions) -> Option<rustls::RootCertStore> {
    let mut store = rustls::RootCertStore::empty();
    for cert in native_roots() {
        let _ = store.add(cert.clone());
    }
    for pem in options.extra_roots() {
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(pem.as_bytes()).flatten() {
            let _ = store.add(cert);
        }
    }
    (!store.is_empty()).then_some(store)
}

/// The client of one apply (its routes share its pool).
pub(crate) fn client(options: &GatewayOptions) -> Option<HttpsClient> {
    let roots = roots(options)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(Dialer {
            hosts: Arc::new(options.host_overrides()),
        });
    Some(
        Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(IDLE_PER_HOST)
            .build(https),
    )
}

/// Whether an upstream may be dialled at `ip`: never the host itself, its
/// link-local neighbours or the instance metadata service.
pub(crate) fn dialable(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let refused = ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
            // fe80::/10, and fd00:ec2::254 (the metadata service on IPv6).
            IpAddr::V6(v6) => {
                (v6.segments()[0] & 0xffc0) == 0xfe80
                    || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
            }
        };
    !refused
}

/// The TCP side of the client: resolves, filters and dials.
#[derive(Clone, Debug)]
pub(crate) struct Dialer {
    /// The local backend's overrides (exempt from the filter).
    hosts: Arc<BTreeMap<String, SocketAddr>>,
}

impl tower::Service<Uri> for Dialer {
    type Response = TokioIo<TcpStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let hosts = self.hosts.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default().to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let addrs: Vec<SocketAddr> = match hosts.get(&host) {
                Some(addr) => vec![*addr],
                None => {
                    let bare = host.trim_start_matches('[').trim_end_matches(']');
                    let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
                        Ok(ip) => vec![SocketAddr::new(ip, port)],
                        Err(_) => tokio::net::lookup_host((bare, port)).await?.collect(),
                    };
                    found.into_iter().filter(|a| dialable(a.ip())).collect()
                }
            };
            let mut last = std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                "no address the gateway may dial",
            );
            for addr in addrs {
                match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                    Ok(Ok(stream)) => {
                        let _ = stream.set_nodelay(true);
                        return Ok(TokioIo::new(stream));
                    }
                    Ok(Err(err)) => last = err,
                    Err(_) => last = std::io::ErrorKind::TimedOut.into(),
                }
            }
            Err(last)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_and_metadata_addresses_are_never_dialled() {
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "169.254.169.254",
            "169.254.1.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!dialable(refused.parse().unwrap()), "{refused}");
        }
        for ok in ["93.184.216.34", "10.0.0.1", "2606:4700::1111"] {
            assert!(dialable(ok.parse().unwrap()), "{ok}");
        }
    }
}
