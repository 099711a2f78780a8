//! `rayito dashboard`: a web dashboard on loopback over the SDK's fleet
//! (sandboxes with their state, metrics and events; images and versions),
//! quotas and cost, with bulk actions behind `--allow-actions` and a
//! dry-run plan's confirmation.
//!
//! The server listens on 127.0.0.1 only. Every start draws a random token
//! that the printed URL carries; the first request exchanges it for an
//! `HttpOnly; SameSite=Strict` session cookie and a 303 to `/`, so the
//! token leaves the address bar (and the history entry, the `Referer` of
//! any later request and the page's JavaScript) at once. The defences
//! (docs/dashboard.md): the Host must be `127.0.0.1:<port>` or
//! `localhost:<port>` (else 421), an Origin when present the same (else
//! 403), a `Sec-Fetch-Site` when present `same-origin` or `none`, a strict
//! Content-Security-Policy (`default-src 'self'`, no inline script or
//! style, `frame-ancestors 'none'`), no caching, and every POST a JSON body
//! of at most 64 KiB with the session's CSRF header.
//!
//! The page is a handful of small dependency-free JavaScript modules
//! embedded in the binary (`static/`), drawing its charts as SVG and
//! polling the JSON API under `/api/v1`.

mod actions;
mod api;
mod assets;
mod errors;
mod guard;
#[cfg(feature = "lambda")]
pub mod hosted;
mod secrets;
mod source;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

pub use errors::messages;
pub use source::AccessTokens;

/// How the dashboard runs.
#[derive(Debug, Clone)]
#[must_use]
pub struct DashboardOptions {
    port: u16,
    allow_actions: bool,
    poll_interval: Duration,
    access_tokens: AccessTokens,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        Self {
            port: 0,
            allow_actions: false,
            poll_interval: DEFAULT_POLL_INTERVAL,
            access_tokens: AccessTokens::none(),
        }
    }
}

/// How often the page polls the live views by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

impl DashboardOptions {
    /// Options with the defaults: a random port, no actions, a 5 s poll.
    pub fn new() -> Self {
        Self::default()
    }

    /// The port on 127.0.0.1 (0, the default: one the system picks).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Whether bulk actions (kill, pause, resume, set-timeout) are served;
    /// without it they answer 403 (`actions_disabled`).
    pub fn allow_actions(mut self, allow: bool) -> Self {
        self.allow_actions = allow;
        self
    }

    /// How often the page refreshes its live views (at least 200 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(200));
        self
    }

    /// Where the dashboard finds a sandbox's access token, which its
    /// metrics need (the CLI's cache of the sandboxes it created).
    pub fn access_tokens(mut self, tokens: AccessTokens) -> Self {
        self.access_tokens = tokens;
        self
    }
}

/// A running dashboard: its address and start URL; it stops on
/// [`Dashboard::shutdown`] or when dropped.
pub struct Dashboard {
    addr: SocketAddr,
    start_url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for Dashboard {
    // The start URL carries the token: never in a Debug.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// Starts the dashboard over `client` on 127.0.0.1.
    ///
    /// # Errors
    /// The listener's bind error (the port taken, say).
    pub async fn start(
        client: rayito::Client,
        options: DashboardOptions,
    ) -> Result<Dashboard, std::io::Error> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port)).await?;
        let addr = listener.local_addr()?;
        let secrets = secrets::Secrets::draw();
        let start_url = format!("http://{addr}/?token={}", secrets.start_token());
        let shared = Arc::new(api::Shared::new(client, addr.port(), secrets, options));
        let app = api::router(shared);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            // A serve error ends the dashboard; nothing is logged (the
            // reference logs nothing either: a URL could carry the token).
            let _ = serve.await;
        });
        Ok(Dashboard {
            addr,
            start_url,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on (127.0.0.1 and its port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The origin pages are served from: `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL to open: the origin with this start's token (a secret: show
    /// it to the user, log it nowhere).
    pub fn start_url(&self) -> &str {
        &self.start_url
    }

    /// Waits until the server ends (it runs until shut down).
    pub async fn wait(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
