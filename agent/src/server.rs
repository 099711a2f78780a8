//! The gRPC accept loop: HTTP/2 (h2c) with the contract's keepalive and
//! stream limits. It is ours rather than tonic's so that an abrupt stop can
//! drop every live connection at once (fault injection), while a graceful
//! stop lets in-flight answers finish.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::BodyExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::DuplexStream;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tower::Service;

/// How the servers should be running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServeState {
    /// Accepting and serving.
    Serving,
    /// Stop accepting, let in-flight answers finish, then close.
    Graceful,
    /// Drop every connection now.
    Abort,
}

/// How long a graceful stop waits for in-flight calls before dropping them.
const GRACEFUL_WAIT: Duration = Duration::from_secs(2);
/// HTTP/2 receive window of one stream: a 64 MiB Write moves in 1 MiB
/// messages, and hyper's default (1 MiB) left about one message in flight,
/// so the client waited for a window update after each (docs/performance.md,
/// "Files: the agent's own path (session 4)"). Also the most one stream can make the agent buffer.
const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
/// HTTP/2 receive window of one connection (all its streams together).
const CONNECTION_WINDOW: u32 = 2 * STREAM_WINDOW;
/// Largest HTTP/2 frame a client may send: a 1 MiB Write chunk in two
/// frames instead of 65 of hyper's default 16 KiB (less CPU per byte).
const MAX_FRAME: u32 = 1024 * 1024;

/// The agent's gRPC service, as the accept loop serves it.
pub(crate) trait GrpcService:
    Service<
        http::Request<Incoming>,
        Response = http::Response<tonic::body::Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> GrpcService for S where
    S: Service<
            http::Request<Incoming>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// How many in-process connections may wait for the accept loop.
pub(crate) const IN_PROCESS_BACKLOG: usize = 16;

/// The buffer of each direction of an in-process connection: what one
/// side may write before the other reads (a socket's buffer, in effect).
pub(crate) const IN_PROCESS_BUFFER: usize = 1024 * 1024;

/// Serves `svc` on `listener`, and on each in-process connection that
/// `in_process` hands over (a caller in the same process, such as the
/// emulator's proxy, skips the loopback socket), until `serve` leaves
/// `Serving`. Both kinds of connection stop alike.
pub(crate) async fn serve_grpc<S: GrpcService>(
    listener: TcpListener,
    mut in_process: mpsc::Receiver<DuplexStream>,
    svc: S,
    mut serve: watch::Receiver<ServeState>,
) {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10))
        .max_concurrent_streams(256)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME);
    let graceful = GracefulShutdown::new();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                serve_one(&builder, &graceful, &mut conns, stream, svc.clone());
            }
            Some(stream) = in_process.recv() => {
                serve_one(&builder, &graceful, &mut conns, stream, svc.clone());
            }
            changed = serve.changed() => {
                if changed.is_err() {
                    return;
                }
                match *serve.borrow_and_update() {
                    ServeState::Serving => {}
                    ServeState::Graceful => break,
                    // Dropping the JoinSet aborts every connection task.
                    ServeState::Abort => return,
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    drop(in_process);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(GRACEFUL_WAIT) => {}
        _ = serve.wait_for(|s| *s == ServeState::Abort) => {}
    }
}

/// Serves one connection (an accepted socket or an in-process pipe) as a
/// task of `conns`, stopped with the others.
fn serve_one<S: GrpcService, I>(
    builder: &hyper::server::conn::http2::Builder<TokioExecutor>,
    graceful: &GracefulShutdown,
    conns: &mut JoinSet<()>,
    io: I,
    svc: S,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(svc));
    let watched = graceful.watch(conn);
    conns.spawn(async move {
        let _ = watched.await;
    });
}

/// The message of the status a request stream that its client cancelled
/// fails with (nobody reads it: the client is gone).
pub(crate) const REQUEST_STREAM_CANCELLED: &str = "the client cancelled the request stream";

/// The request, with its body's failures kept as failures. tonic reads a
/// request body that fails with CANCEL (the RST_STREAM a client sends when
/// it gives up, or a proxy when its own client vanished) as the clean end
/// of the stream, dropping a message it had half received: a
/// client-streaming `Write` cut that way committed a truncated file. Here
/// such a failure stays one (ABORTED, [`REQUEST_STREAM_CANCELLED`]).
pub(crate) fn cancel_is_not_the_end(
    req: http::Request<Incoming>,
) -> http::Request<UnsyncBoxBody<bytes::Bytes, tonic::Status>> {
    req.map(|body| body.map_err(cancellation_as_failure).boxed_unsync())
}

/// A body error as the status tonic gives it, except that a cancellation
/// becomes ABORTED instead of CANCELLED (which tonic would read as the end).
fn cancellation_as_failure(err: hyper::Error) -> tonic::Status {
    let status = tonic::Status::from_error(Box::new(err));
    if status.code() == tonic::Code::Cancelled {
        tonic::Status::aborted(REQUEST_STREAM_CANCELLED)
    } else {
        status
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt as _;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::sync::mpsc;

    use super::{REQUEST_STREAM_CANCELLED, cancel_is_not_the_end};
    use crate::pb;

    /// How a request body that its client cancelled after one message ends,
    /// read raw (`raw: true`) or through [`cancel_is_not_the_end`]: the
    /// code and message of the failure, or `None` for a clean end.
    async fn cancelled_body_ends(raw: bool) -> Option<(tonic::Code, String)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (first_tx, mut first_rx) = mpsc::channel::<()>(1);
        let (end_tx, mut end_rx) = mpsc::channel(1);
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (first_tx, end_tx) = (first_tx.clone(), end_tx.clone());
                    async move {
                        let end = if raw {
                            let mut body = req.into_body();
                            let _ = body.frame().await;
                            let _ = first_tx.send(()).await;
                            loop {
                                match body.frame().await {
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => {
                                        let s = tonic::Status::from_error(Box::new(e));
                                        break Some((s.code(), s.message().to_owned()));
                                    }
                                    None => break None,
                                }
                            }
                        } else {
                            let mut body = cancel_is_not_the_end(req).into_body();
                            let _ = body.frame().await;
                            let _ = first_tx.send(()).await;
                            loop {
                                match body.frame().await {
                                    Some(Ok(_)) => {}
                                    Some(Err(s)) => break Some((s.code(), s.message().to_owned())),
                                    None => break None,
                                }
                            }
                        };
                        let _ = end_tx.send(end).await;
                        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
                    }
                });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(4);
        tx.send(pb::WriteRequest {
            path: Some("/home/user/f".into()),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let cancel = request.cancellation_handle();
        let mut client = pb::filesystem_service_client::FilesystemServiceClient::new(channel);
        let call = tokio::spawn(async move { client.write(request).await });
        tokio::time::timeout(Duration::from_secs(30), first_rx.recv())
            .await
            .expect("the first message arrives");
        cancel.cancel();
        let end = tokio::time::timeout(Duration::from_secs(30), end_rx.recv())
            .await
            .expect("the body ends")
            .expect("an outcome");
        call.abort();
        drop(tx);
        end
    }

    /// tonic takes a CANCELLED body failure for the end of a request stream
    /// (and the agent would commit a partial Write); through
    /// `cancel_is_not_the_end` it stays a failure, with its exact message.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_request_stream_ends_in_a_failure_not_its_end() {
        let raw = cancelled_body_ends(true).await;
        assert_eq!(raw.map(|(code, _)| code), Some(tonic::Code::Cancelled));
        assert_eq!(
            cancelled_body_ends(false).await,
            Some((tonic::Code::Aborted, REQUEST_STREAM_CANCELLED.to_owned()))
        );
    }
}
