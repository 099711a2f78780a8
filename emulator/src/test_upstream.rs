//! [`TestUpstream`]: an HTTPS server on 127.0.0.1 that stands in for an
//! API behind a secret gateway on the local backend (examples, tests,
//! benchmarks). Its certificate is signed by a CA made at start (`rcgen`),
//! which the agents are told to trust through
//! [`crate::Emulator::gateway_upstreams`] (or the CLI daemon's
//! `RAYITO_LOCAL_GATEWAY_*` variables); its host name is dialled at its
//! loopback port. It records every request and answers 200 with a JSON
//! body naming the method, the target and the header names it received
//! (never a header's value: the caller decides what to check).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// One request the upstream received.
#[derive(Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path and query as received.
    pub target: String,
    /// Every header as received (lower-case names), values included: a
    /// test compares them, never prints them.
    pub headers: Vec<(String, String)>,
}

impl SeenRequest {
    /// The values of header `name` (lower case).
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

// The values may be secrets the gateway injected: names only.
impl std::fmt::Debug for SeenRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SeenRequest")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("header_names", &names)
            .finish()
    }
}

type Seen = Arc<Mutex<Vec<SeenRequest>>>;

/// What answers each request: its head and its whole body in, the
/// response out.
type Answer = Arc<dyn Fn(&http::request::Parts, Bytes) -> http::Response<Bytes> + Send + Sync>;

/// An HTTPS upstream for secret gateways on the local backend; stopped
/// when dropped.
pub struct TestUpstream {
    host: String,
    addr: SocketAddr,
    ca_pem: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TestUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestUpstream")
            .field("host", &self.host)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for TestUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn other(err: impl std::fmt::Display) -> io::Error {
    io::Error::other(err.to_string())
}

impl TestUpstream {
    /// Serves `https://<host>` (a name of the caller's choice, such as
    /// `api.example.test`) on a free port of 127.0.0.1, with a certificate
    /// for `host` signed by a fresh CA.
    ///
    /// # Errors
    /// When the certificates cannot be made or the port bound.
    pub async fn start(host: &str) -> io::Result<TestUpstream> {
        Self::start_with(host, echo_names).await
    }

    /// [`TestUpstream::start`], each request answered by `answer` (given
    /// the request's head and whole body) instead: a scripted API on the
    /// same TLS set-up (the SDK tests' model server). Every request is
    /// recorded all the same.
    ///
    /// # Errors
    /// When the certificates cannot be made or the port bound.
    pub async fn start_with<F>(host: &str, answer: F) -> io::Result<TestUpstream>
    where
        F: Fn(&http::request::Parts, Bytes) -> http::Response<Bytes> + Send + Sync + 'static,
    {
        let ca_key = KeyPair::generate().map_err(other)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let ca_cert = ca.self_signed(&ca_key).map_err(other)?;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().map_err(other)?;
        let leaf = CertificateParams::new(vec![host.to_owned()])
            .map_err(other)?
            .signed_by(&key, &issuer)
            .map_err(other)?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(other)?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(other)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Seen::default();
        let task = tokio::spawn(serve(listener, acceptor, seen.clone(), Arc::new(answer)));
        Ok(TestUpstream {
            host: host.to_owned(),
            addr,
            ca_pem: ca_cert.pem(),
            seen,
            task,
        })
    }

    /// `https://<host>`: a gateway's upstream.
    pub fn url(&self) -> String {
        format!("https://{}", self.host)
    }

    /// The host name it serves.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Where it listens (127.0.0.1 and a free port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) its certificate chains to.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes the agents of `upstreams` (an emulator's
    /// [`crate::Emulator::gateway_upstreams`]) trust this CA and dial this
    /// host here, from their next Configure on.
    pub fn trust_on(&self, upstreams: &rayito_agent::gateway::LocalUpstreams) {
        upstreams.add_root_pem(self.ca_pem.clone());
        upstreams.set_host(self.host.clone(), self.addr);
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    seen: Seen,
    answer: Answer,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let seen = seen.clone();
        let answer = answer.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |req| respond(req, seen.clone(), answer.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// Records `req`, then answers it with `answer`.
async fn respond(
    req: hyper::Request<hyper::body::Incoming>,
    seen: Seen,
    answer: Answer,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    // Read to the end, so that the connection can be reused.
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(n, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_owned(), value)
        })
        .collect();
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(SeenRequest {
            method: parts.method.to_string(),
            target,
            headers,
        });
    Ok(answer(&parts, body).map(Full::new))
}

/// [`TestUpstream::start`]'s answer: 200 with a JSON body naming the
/// method, the target and the header names (never a value).
fn echo_names(parts: &http::request::Parts, _body: Bytes) -> http::Response<Bytes> {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let names: Vec<&str> = parts.headers.iter().map(|(n, _)| n.as_str()).collect();
    let body = serde_json::json!({
        "method": parts.method.as_str(),
        "target": target,
        "header_names": names,
    });
    http::Response::builder()
        .header("content-type", "application/json")
        .body(Bytes::from(body.to_string()))
        .unwrap_or_default()
}
