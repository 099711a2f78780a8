//! TLS mode (`EmulatorConfig::tls`): the emulator answers every MicroVM's
//! `endpoint` as a bare host, as AWS does, and serves the MicroVM's proxy
//! with TLS (ALPN h2, then http/1.1) on port 443 of a loopback address of its
//! own (`127.0.0.2`, `127.0.0.3`, ...). Certificates come from a CA the
//! emulator generates at start (with `rcgen`); its PEM is written to
//! `<root>/ca.pem` and served at `GET /_emulator/ca.pem`, so that a client
//! adds it to its roots (`GRPC_DEFAULT_SSL_ROOTS_FILE_PATH` for grpc-based
//! clients, a builder option for the SDK).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints, SanType,
};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The port every MicroVM endpoint serves TLS on, as on AWS.
pub const TLS_PORT: u16 = 443;
/// File name of the CA certificate under the emulator's root directory.
pub const CA_FILE: &str = "ca.pem";

/// How many loopback addresses a bind attempt tries before giving up.
const MAX_ADDRESS_TRIES: u32 = 4096;

/// The next loopback address to try, shared by every emulator of the
/// process (several run side by side in tests).
static NEXT_ADDRESS: AtomicU32 = AtomicU32::new(0);

/// The error when port 443 cannot be bound for lack of privilege.
pub fn bind_denied_message(ip: Ipv4Addr) -> String {
    format!(
        "TLS mode cannot bind {ip}:443: binding port 443 needs root or CAP_NET_BIND_SERVICE \
         (for example `sudo setcap cap_net_bind_service=+ep <binary>`)"
    )
}

/// The emulator's CA and what it signs.
pub(crate) struct Tls {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    ca_path: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca_path", &self.ca_path)
            .finish_non_exhaustive()
    }
}

fn other(err: impl std::fmt::Display) -> io::Error {
    io::Error::other(err.to_string())
}

impl Tls {
    /// Generates the CA and writes its PEM to `<root>/ca.pem`;
    /// `constrain_ips`: see `EmulatorConfig::tls_ip_name_constraints`.
    pub(crate) fn new(root: &Path, constrain_ips: bool) -> io::Result<Tls> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        // A client that trusts this CA trusts it for the loopback addresses
        // the emulator serves and nothing else: a leaked CA key cannot sign
        // for a real host (IPv4 127/8, IPv6 ::1; DNS names only under
        // `.invalid`, which no real host has). Without `constrain_ips`
        // only DNS names are constrained: BoringSSL (grpc-core) refuses a
        // chain whose CA constrains iPAddress names.
        let mut permitted = Vec::new();
        if constrain_ips {
            permitted.push(GeneralSubtree::IpAddress(CidrSubnet::V4(
                [127, 0, 0, 0],
                [255, 0, 0, 0],
            )));
            permitted.push(GeneralSubtree::IpAddress(CidrSubnet::V6(
                std::net::Ipv6Addr::LOCALHOST.octets(),
                [0xff; 16],
            )));
        }
        permitted.push(GeneralSubtree::DnsName("invalid".to_owned()));
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: permitted,
            excluded_subtrees: Vec::new(),
        });
        params
            .distinguished_name
            .push(DnType::CommonName, "rayito emulator CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(other)?;
        let cert = params.self_signed(&key).map_err(other)?;
        let ca_path = root.join(CA_FILE);
        std::fs::write(&ca_path, cert.pem())?;
        Ok(Tls {
            ca_pem: cert.pem(),
            ca_der: cert.der().clone(),
            ca_path,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (PEM).
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Where the CA certificate was written.
    pub(crate) fn ca_path(&self) -> &Path {
        &self.ca_path
    }

    /// A TLS acceptor for `ip` (a leaf certificate whose only name is that
    /// address), offering h2 then http/1.1.
    pub(crate) fn acceptor(&self, ip: Ipv4Addr) -> io::Result<TlsAcceptor> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        params
            .distinguished_name
            .push(DnType::CommonName, ip.to_string());
        params.subject_alt_names = vec![SanType::IpAddress(ip.into())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(other)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(other)?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(other)?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), self.ca_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(other)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// The `n`-th candidate address: 127.0.0.2 onwards, skipping the network
/// and broadcast-looking ends of each /24.
fn candidate(n: u32) -> Ipv4Addr {
    let per_block = 253; // .2 ..= .254
    let block = n / per_block;
    let host = 2 + n % per_block;
    Ipv4Addr::new(127, (block >> 8) as u8, block as u8, host as u8)
}

/// Binds port 443 on the next free loopback address.
///
/// # Errors
/// `PermissionDenied` with [`bind_denied_message`] when the process may not
/// bind port 443; the last error when no address is free.
pub(crate) async fn bind() -> io::Result<(TcpListener, Ipv4Addr)> {
    let mut last = io::Error::other("no loopback address is free on port 443");
    for _ in 0..MAX_ADDRESS_TRIES {
        let n = NEXT_ADDRESS.fetch_add(1, Ordering::Relaxed) % (253 * 65_536);
        let ip = candidate(n);
        match TcpListener::bind(SocketAddr::from((ip, TLS_PORT))).await {
            Ok(listener) => return Ok((listener, ip)),
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    bind_denied_message(ip),
                ));
            }
            Err(err) => last = err,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_walk_loopback_addresses() {
        assert_eq!(candidate(0), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(candidate(252), Ipv4Addr::new(127, 0, 0, 254));
        assert_eq!(candidate(253), Ipv4Addr::new(127, 0, 1, 2));
        assert!((0..100_000).all(|n| candidate(n).is_loopback()));
    }

    #[test]
    fn the_ca_signs_for_loopback_only() {
        // Without IP constraints (for BoringSSL clients) a public address
        // passes; a DNS name outside `.invalid` never does.
        for constrain_ips in [true, false] {
            let (loopback_ok, public_ok, dns_ok) = ca_accepts(constrain_ips);
            assert!(loopback_ok, "constrain_ips={constrain_ips}");
            assert_eq!(public_ok, !constrain_ips, "constrain_ips={constrain_ips}");
            assert!(!dns_ok, "constrain_ips={constrain_ips}");
        }
    }

    /// Whether a verifier trusting the CA accepts leaves it signs for a
    /// loopback address, a public address and a public DNS name.
    fn ca_accepts(constrain_ips: bool) -> (bool, bool, bool) {
        use tokio_rustls::rustls::client::WebPkiServerVerifier;
        use tokio_rustls::rustls::client::danger::ServerCertVerifier as _;
        use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
        let dir = tempfile::tempdir().unwrap();
        let tls = Tls::new(dir.path(), constrain_ips).unwrap();
        let leaf = |name: SanType| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.subject_alt_names = vec![name];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let key = KeyPair::generate().unwrap();
            params.signed_by(&key, &tls.issuer).unwrap().der().clone()
        };
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots.add(tls.ca_der.clone()).unwrap();
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let verify = |cert: CertificateDer<'static>, name: ServerName<'static>| {
            verifier.verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
        };
        let loopback = Ipv4Addr::new(127, 0, 0, 7);
        let public = Ipv4Addr::new(93, 184, 215, 14);
        (
            verify(
                leaf(SanType::IpAddress(loopback.into())),
                ServerName::IpAddress(loopback.into()),
            )
            .is_ok(),
            verify(
                leaf(SanType::IpAddress(public.into())),
                ServerName::IpAddress(public.into()),
            )
            .is_ok(),
            verify(
                leaf(SanType::DnsName("example.com".try_into().unwrap())),
                ServerName::try_from("example.com").unwrap(),
            )
            .is_ok(),
        )
    }

    #[test]
    fn bind_denied_message_is_pinned() {
        assert_eq!(
            bind_denied_message(Ipv4Addr::new(127, 0, 0, 2)),
            "TLS mode cannot bind 127.0.0.2:443: binding port 443 needs root or CAP_NET_BIND_SERVICE (for example `sudo setcap cap_net_bind_service=+ep <binary>`)"
        );
    }
}
