//! The gRPC accept loop: HTTP/2 (h2c) with the contract's keepalive and
//! stream limits. It is ours rather than tonic's so that an abrupt stop can
//! drop every live connection at once (fault injection), while a graceful
//! stop lets in-flight answers finish.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::Service;

use crate::state::ServeState;

/// How long a graceful stop waits for in-flight calls before dropping them.
const GRACEFUL_WAIT: Duration = Duration::from_secs(2);
/// HTTP/2 receive window of one stream: a 64 MiB Write moves in 1 MiB
/// messages, and hyper's default (1 MiB) left about one message in flight,
/// so the client waited for a window update after each (docs/performance.md,
/// "File transfer"). Also the most one stream can make the agent buffer.
const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
/// HTTP/2 receive window of one connection (all its streams together).
const CONNECTION_WINDOW: u32 = 2 * STREAM_WINDOW;
/// Largest HTTP/2 frame a client may send: a 1 MiB Write chunk in two
/// frames instead of 65 of hyper's default 16 KiB (less CPU per byte).
const MAX_FRAME: u32 = 1024 * 1024;

/// Serves `svc` on `listener` until `serve` leaves `Serving`.
pub(crate) async fn serve_grpc<S>(
    listener: TcpListener,
    svc: S,
    mut serve: watch::Receiver<ServeState>,
) where
    S: Service<
            http::Request<Incoming>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
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
                let conn = builder.serve_connection(
                    TokioIo::new(stream),
                    TowerToHyperService::new(svc.clone()),
                );
                let watched = graceful.watch(conn);
                conns.spawn(async move {
                    let _ = watched.await;
                });
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
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(GRACEFUL_WAIT) => {}
        _ = serve.wait_for(|s| *s == ServeState::Abort) => {}
    }
}
