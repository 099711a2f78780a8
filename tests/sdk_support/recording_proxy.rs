//! A recording HTTP proxy for request-shape tests: it sits between an AWS
//! client and a real peer (an emulator), forwards every request unchanged
//! (headers included, so SigV4 signatures still verify), hands back the
//! peer's answer, and keeps each request's method, path and body. Not a
//! mock: the peer answers.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// One request the proxy forwarded.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path and query, as sent (percent-encoding kept).
    pub path: String,
    /// The body.
    pub body: Bytes,
}

impl Recorded {
    /// The body as JSON.
    ///
    /// # Panics
    /// When the body is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{} {}: not JSON: {e}", self.method, self.path))
    }
}

/// A running proxy; dropping it stops accepting.
#[derive(Debug)]
pub struct RecordingProxy {
    addr: SocketAddr,
    records: Arc<Mutex<Vec<Recorded>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> RecordingProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().unwrap();
        let records = Arc::new(Mutex::new(Vec::new()));
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let kept = records.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let client = client.clone();
                let kept = kept.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        forward(client.clone(), kept.clone(), upstream, req)
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        RecordingProxy {
            addr,
            records,
            accept,
        }
    }

    /// `http://127.0.0.1:<port>`: the client's endpoint URL.
    pub fn endpoint_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, oldest first.
    pub fn records(&self) -> Vec<Recorded> {
        self.records.lock().unwrap().clone()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn forward(
    client: Client<HttpConnector, Full<Bytes>>,
    kept: Arc<Mutex<Vec<Recorded>>>,
    upstream: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, String> {
    let (mut parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_owned(), |p| p.as_str().to_owned());
    kept.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path: path.clone(),
        body: body.clone(),
    });
    parts.uri = format!("http://{upstream}{path}")
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| e.to_string())?;
    let answer = client
        .request(Request::from_parts(parts, Full::new(body)))
        .await
        .map_err(|e| e.to_string())?;
    let (mut parts, body) = answer.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    // The body is whole now: its length is set again by the server.
    parts.headers.remove(hyper::header::TRANSFER_ENCODING);
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Full::new(body)))
}
