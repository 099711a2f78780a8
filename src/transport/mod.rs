//! The agent transport: one tonic `Channel` per sandbox, the token store and
//! its interceptor, and the call wrapper that owns the transport-level
//! retries (proxy 403 re-mint, connection-not-established ladder).
//!
//! This is the only module that knows tonic. Above it, calls take and return
//! `pb` messages and `SandboxError`s; streams are [`AgentStream`]s.

mod calls;
#[cfg(test)]
mod canary_tests;
mod status;
mod tokens;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Response, Status, Streaming};

pub(crate) use self::tokens::{AGENT_PORT, HOOKS_PORT};
use self::tokens::{AuthInterceptor, TokenStore};
use crate::error::map::grpc::{
    CallContext, from_grpc, is_not_established, is_proxy_rejection, proxy_rejected,
    proxy_rejected_without_remint,
};
use crate::error::{RetryPolicy, SandboxError};
use crate::secret::Secret;

/// Largest message the SDK accepts or sends (wire-contract 2.6).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// HTTP/2 keepalive ping interval and timeout (wire-contract 2.6).
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Mints a fresh proxy token for the sandbox (CreateMicrovmAuthToken); the
/// transport calls it once on a proxy 403.
pub(crate) type ProxyMinter =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Secret, SandboxError>> + Send + Sync>;

/// How a call treats the connection-not-established ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectRetry {
    /// Retry on the policy's ladder (0.25 s .. 4 s by default; any RPC may
    /// be retried since nothing was sent).
    Ladder,
    /// Fail at once (the readiness probe has its own schedule).
    Never,
}

/// The connection to one sandbox's agent. Cheap to clone.
#[derive(Clone)]
pub(crate) struct AgentConn {
    inner: Arc<ConnInner>,
}

struct ConnInner {
    channel: Channel,
    tokens: Arc<TokenStore>,
    minter: ProxyMinter,
    /// Serialises re-mints so that a burst of 403s mints once per burst.
    remint: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    policy: RetryPolicy,
}

impl fmt::Debug for AgentConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentConn")
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Where to dial: h2c for a loopback endpoint (the local backend), TLS with
/// ALPN h2 on 443 otherwise (AWS).
fn endpoint_for(endpoint: &str) -> Result<Endpoint, SandboxError> {
    // Tolerate a scheme and a path (`https://host/x` -> `host`).
    let without_scheme = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .unwrap_or(endpoint);
    let authority = without_scheme.split('/').next().unwrap_or(without_scheme);
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _port)| host);
    let loopback = host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    let bad_endpoint = || {
        SandboxError::protocol_violation("create", "the control plane returned an invalid endpoint")
    };
    let endpoint = if loopback {
        Endpoint::from_shared(format!("http://{authority}")).map_err(|_| bad_endpoint())?
    } else {
        Endpoint::from_shared(format!("https://{host}:443"))
            .map_err(|_| bad_endpoint())?
            .tls_config(
                ClientTlsConfig::new()
                    .with_native_roots()
                    .domain_name(host.to_owned()),
            )
            .map_err(|_| bad_endpoint())?
    };
    Ok(endpoint
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5)))
}

impl AgentConn {
    /// A lazily connected channel to `endpoint` with the given tokens.
    ///
    /// # Errors
    /// `Sandbox { code: ProtocolViolation }` when the endpoint cannot be parsed.
    pub(crate) fn open(
        endpoint: &str,
        proxy_token: Secret,
        access_token: Secret,
        minter: ProxyMinter,
        policy: RetryPolicy,
    ) -> Result<Self, SandboxError> {
        let channel = endpoint_for(endpoint)?.connect_lazy();
        Ok(Self {
            inner: Arc::new(ConnInner {
                channel,
                tokens: Arc::new(TokenStore::new(Some(proxy_token), Some(access_token))),
                minter,
                remint: tokio::sync::Mutex::new(()),
                closed: AtomicBool::new(false),
                policy,
            }),
        })
    }

    /// Marks the connection closed: later calls fail with `Sandbox{closed}`
    /// without any I/O.
    pub(crate) fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
    }

    /// True after [`AgentConn::close`].
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    fn interceptor(&self) -> AuthInterceptor {
        AuthInterceptor::new(self.inner.tokens.clone())
    }

    fn channel(&self) -> Channel {
        self.inner.channel.clone()
    }

    async fn remint(&self) -> Result<(), SandboxError> {
        let _guard = self.inner.remint.lock().await;
        let fresh = (self.inner.minter)().await?;
        self.inner.tokens.set_proxy(fresh);
        Ok(())
    }

    /// Runs one RPC with the transport's retries: a proxy 403 re-mints the
    /// proxy token and retries (once by default; the next 403 is
    /// `Authentication { proxy_rejected: true }`); a connection that was
    /// never established is retried on the policy's ladder. `deadline`
    /// bounds each attempt (`Timeout { scope: Request }` when it passes).
    async fn call<T, F, Fut>(
        &self,
        ctx: CallContext,
        deadline: Option<Duration>,
        connect_retry: ConnectRetry,
        mut attempt: F,
    ) -> Result<T, SandboxError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if self.is_closed() {
            return Err(SandboxError::closed());
        }
        let ladder = self.inner.policy.not_established;
        let mut connect_retries: u32 = 0;
        let mut remints: u32 = 0;
        loop {
            let outcome = match deadline {
                Some(limit) => match tokio::time::timeout(limit, attempt()).await {
                    Ok(outcome) => outcome,
                    Err(_) => return Err(from_grpc(status::deadline_failure(ctx))),
                },
                None => attempt().await,
            };
            let status = match outcome {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => status,
            };
            let failure = status::failure(&status, ctx);
            if is_proxy_rejection(&failure) {
                if remints >= self.inner.policy.proxy_remint_retries {
                    return Err(if remints == 0 {
                        proxy_rejected_without_remint(failure)
                    } else {
                        proxy_rejected(failure)
                    });
                }
                remints += 1;
                tracing::info!(
                    target: "rayito::retry",
                    operation = ctx.feature,
                    kind = "authentication",
                    attempt = remints,
                    delay_ms = 0u64,
                    "the proxy refused the token; re-minting it and retrying"
                );
                self.remint().await?;
                continue;
            }
            let may_retry_connect = connect_retry == ConnectRetry::Ladder
                && (status::is_not_established(&status) || is_not_established(&failure))
                && ladder
                    .max_attempts
                    .is_none_or(|max| connect_retries + 1 < max);
            if may_retry_connect {
                let delay = ladder.delay(connect_retries);
                connect_retries += 1;
                tracing::info!(
                    target: "rayito::retry",
                    operation = ctx.feature,
                    kind = "connection_not_established",
                    attempt = connect_retries,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "the connection was not established; retrying"
                );
                tokio::time::sleep(delay).await;
                continue;
            }
            return Err(from_grpc(failure));
        }
    }
}

impl AgentConn {
    /// Sends a call exactly once: for requests that cannot be replayed (a
    /// client stream fed by the caller is consumed by the first attempt). A
    /// proxy 403 therefore ends it at once as
    /// `Authentication { proxy_rejected: true }`, and nothing is retried.
    async fn call_once<T, Fut>(&self, ctx: CallContext, call: Fut) -> Result<T, SandboxError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if self.is_closed() {
            return Err(SandboxError::closed());
        }
        match call.await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => {
                let failure = status::failure(&status, ctx);
                if is_proxy_rejection(&failure) {
                    Err(proxy_rejected_without_remint(failure))
                } else {
                    Err(from_grpc(failure))
                }
            }
        }
    }
}

impl AgentConn {
    /// Opens a server stream and reads its first message inside the retry
    /// loop: an HTTP answer without grpc-status (the proxy's 403) only shows
    /// when the first message is read, and a stream's first message is the
    /// last point where a retry is safe. `total` bounds the whole stream,
    /// this opening included.
    async fn open_stream<T, F, Fut>(
        &self,
        ctx: CallContext,
        total: Option<Duration>,
        mut open: F,
    ) -> Result<AgentStream<T>, SandboxError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<Streaming<T>>, Status>>,
    {
        // A total too large to add to the clock means no deadline.
        let deadline = total.and_then(|d| Instant::now().checked_add(d));
        let (first, inner) = self
            .call(ctx, total, ConnectRetry::Ladder, || {
                let opening = open();
                async move {
                    let mut inner = opening.await?.into_inner();
                    let first = inner.message().await?;
                    Ok(Response::new((first, inner)))
                }
            })
            .await?;
        Ok(AgentStream {
            inner,
            ctx,
            deadline,
            first: Some(first),
        })
    }
}

/// A server stream from the agent, with its statuses mapped and an optional
/// deadline over the whole stream.
pub(crate) struct AgentStream<T> {
    inner: Streaming<T>,
    ctx: CallContext,
    deadline: Option<Instant>,
    /// The first message, read when the stream was opened.
    first: Option<Option<T>>,
}

impl<T> fmt::Debug for AgentStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentStream").finish_non_exhaustive()
    }
}

impl<T> AgentStream<T> {
    /// The next message; `Ok(None)` when the stream ended with OK.
    ///
    /// # Errors
    /// The mapped status that ended the stream, or `Timeout { scope: Request }`
    /// when the stream's deadline passed.
    pub(crate) async fn message(&mut self) -> Result<Option<T>, SandboxError> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        let next = self.inner.message();
        let outcome = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, next).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(from_grpc(status::deadline_failure(self.ctx))),
            },
            None => next.await,
        };
        outcome.map_err(|status| from_grpc(status::failure(&status, self.ctx)))
    }
}
