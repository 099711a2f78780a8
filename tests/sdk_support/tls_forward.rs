//! TLS in front of a plain-HTTP peer on loopback, with a CA of its own:
//! the shape of an AWS endpoint reached through a corporate proxy or the
//! TLS-mode local backend, for tests of a call's trust (a client that does
//! not trust the CA is refused at the handshake; one given its PEM gets
//! through to the peer, which answers). Bytes are forwarded unchanged, so
//! SigV4 signatures still verify at the peer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_rustls::TlsAcceptor;

/// A TLS acceptor for 127.0.0.1 with a certificate of a CA of its own;
/// the CA's PEM.
pub fn tls_for_loopback() -> (TlsAcceptor, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use tokio_rustls::rustls::ServerConfig;
    use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (TlsAcceptor::from(Arc::new(config)), ca_cert.pem())
}

/// A TLS front for the plain-HTTP peer on `peer_port`.
pub struct TlsForward {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The CA's PEM.
    pub ca_pem: String,
    handshakes: Arc<AtomicUsize>,
}

impl TlsForward {
    /// Listens on a free loopback port; each accepted connection that
    /// completes its handshake is joined to a new connection to the peer.
    pub async fn start(peer_port: u16) -> Self {
        let (acceptor, ca_pem) = tls_for_loopback();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counted = handshakes.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, counted) = (acceptor.clone(), counted.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    counted.fetch_add(1, Ordering::SeqCst);
                    let Ok(mut peer) =
                        tokio::net::TcpStream::connect(("127.0.0.1", peer_port)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut peer).await;
                });
            }
        });
        Self {
            url,
            ca_pem,
            handshakes,
        }
    }

    /// How many clients completed a handshake (trusted the CA).
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}
