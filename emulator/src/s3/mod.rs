//! The emulator's S3 endpoint: the S3 REST API on a loopback listener of
//! its own, path-style (`http://127.0.0.1:PORT/<bucket>/<key>`), over the
//! emulator's object store ([`super::objects`]), so that what the emulator
//! puts there directly and what a client puts through S3 are one store.
//!
//! [`s3s`] speaks the protocol (routing, XML, SigV4 in headers, presigned
//! URLs and POST policies, `aws-chunked` bodies with trailing checksums) and
//! [`s3s_fs`] keeps the objects as files; [`bucket::Buckets`] sits between
//! them and adds what S3 does and s3s-fs does not (the expected bucket
//! owner, keys that a file system cannot hold, S3's messages), and
//! [`auth::Keys`] requires every request to be signed with one of the
//! emulator's access keys, as the control plane does: sandbox code on this
//! host shares its loopback. Before any of it, the `Host` must be a
//! loopback one, as on the control plane ([`super::guard`]).

mod auth;
mod bucket;
mod commit;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{HttpResponse, S3Error, S3ErrorCode};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tracing::instrument::WithSubscriber as _;

use super::AccessKey;
use super::guard::is_loopback_host;
use super::objects::ObjectStore;

/// The S3 endpoint, bound and ready to serve.
#[derive(Debug)]
pub(crate) struct S3Endpoint {
    listener: TcpListener,
    service: S3Service,
}

impl S3Endpoint {
    /// Binds an ephemeral port on `ip` (a loopback address) and prepares
    /// the service over `objects`, whose root it creates (mode 0700).
    ///
    /// # Errors
    /// The root cannot be created or the port bound.
    pub(crate) async fn bind(
        ip: std::net::IpAddr,
        objects: &ObjectStore,
        keys: &[AccessKey],
        account_id: &str,
    ) -> std::io::Result<S3Endpoint> {
        tokio::fs::create_dir_all(objects.root()).await?;
        // The emulator's own: sandbox users on this host must not read
        // (or plant) what only signed requests may.
        use std::os::unix::fs::PermissionsExt as _;
        tokio::fs::set_permissions(objects.root(), std::fs::Permissions::from_mode(0o700)).await?;
        let fs = s3s_fs::FileSystem::new(objects.root())
            .map_err(|e| std::io::Error::other(format!("cannot open the object store: {e:?}")))?;
        let mut builder = S3ServiceBuilder::new(bucket::Buckets::new(
            fs,
            objects.clone(),
            account_id.to_owned(),
        ));
        builder.set_auth(auth::Keys::new(keys));
        builder.set_access(auth::Keys::new(keys));
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await?;
        Ok(S3Endpoint {
            listener,
            service: builder.build(),
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The accept loop; aborting it drops every connection.
    pub(crate) async fn serve(self) {
        let own = self
            .listener
            .local_addr()
            .map_or_else(|_| "127.0.0.1".to_owned(), |a| a.to_string());
        let own: Arc<str> = own.into();
        let mut conns = JoinSet::new();
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            while conns.try_join_next().is_some() {}
            let service = self.service.clone();
            let own = own.clone();
            let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                let service = service.clone();
                let own = own.clone();
                async move {
                    if !request_host(&req).is_some_and(is_loopback_host) {
                        return foreign_host(&own);
                    }
                    // s3s logs whole requests (their Authorization and
                    // x-amz-security-token headers, presigned URLs) at
                    // debug level, and errors with their sources: none of
                    // it may reach the application's log. (`none` is not
                    // registered with the callsites: no per-request cost.)
                    service
                        .call(req.map(s3s::Body::from))
                        .with_subscriber(tracing::Dispatch::none())
                        .await
                }
            });
            conns.spawn(async move {
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    }
}

/// The host a request names: its `Host`, or the HTTP/2 authority.
fn request_host<B>(req: &http::Request<B>) -> Option<&str> {
    req.headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// 403 AccessDenied, in S3's XML, for a request whose `Host` is not a
/// loopback one (a DNS-rebound web page names its own host).
fn foreign_host(own: &str) -> Result<HttpResponse, s3s::HttpError> {
    let err = S3Error::with_message(
        S3ErrorCode::AccessDenied,
        format!("The Host header must name this emulator ({own})."),
    );
    err.to_http_response()
        .map_err(|e| s3s::HttpError::new(Box::new(e)))
}
