//! The agent transport: one tonic `Channel` per sandbox, the token store and
//! its interceptor, and the call wrapper that owns the transport-level
//! retries (proxy 403 re-mint, connection-not-established ladder).
//!
//! This is the only module that knows tonic. Above it, calls take and return
//! `pb` messages and `SandboxError`s; streams are [`AgentStream`]s.

mod calls;
pub(crate) use self::calls::{NetworkAnswer, RawFailure, RawStream};
mod grpc_only;
mod poller;
mod reconnect;
mod refresh;
mod resumable;
mod roots;
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

use self::grpc_only::GrpcOnly;
pub(crate) use self::poller::{FirstCheck, Poller};
use self::reconnect::Reconnector;
pub(crate) use self::reconnect::{Cut, StateCheck, VmCheck};
pub(crate) use self::refresh::{RefreshSchedule, Refresher};
pub(crate) use self::resumable::{
    Mark, Reopen, Reopened, Reopening, ResumableStream, Resume, Start, Step, Waiter,
};
pub(crate) use self::roots::AgentRoots;
pub(crate) use self::tokens::{AGENT_PORT, HOOKS_PORT};
use self::tokens::{AuthInterceptor, TokenStore};
use crate::backoff::{self, Schedule};
use crate::error::map::grpc::{
    CallContext, GrpcFailure, Origin, from_grpc, is_proxy_rejection, is_proxy_rejection_status,
    proxy_rejected, proxy_rejected_without_remint,
};
use crate::error::{RetryPolicy, SandboxError};
use crate::secret::Secret;

/// Largest message the SDK accepts or sends (docs/architecture.md, "Modules
/// and their one job").
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// HTTP/2 keepalive ping interval and timeout (docs/architecture.md).
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest HTTP/2 frame the SDK accepts (h2's default is 16 KiB): a Read's
/// 256 KiB messages arrive in one frame each instead of seventeen, which cut
/// the CPU of a 64 MiB read straight from an agent by about a fifth
/// (docs/performance.md, "Files: the agent's own path (session 4)").
const MAX_FRAME_BYTES: u32 = 1024 * 1024;

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
    /// Fail at once (the readiness probe and the reconnect poller have
    /// their own schedules); never reconnects.
    Never,
    /// The ladder, but a call cut after it was sent is not sent again (it
    /// may have run: a command's Start, a code cell): the reconnect
    /// contract only decides which error it ends with.
    LadderNoReplay,
}

/// A channel to an agent handed to the SDK instead of dialled from the
/// control plane's endpoint: the seam through which the SDK's fast tests
/// run against an in-memory agent (tonic over `tokio::io::duplex`).
// Only the SDK's tests make one.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Debug)]
pub(crate) struct InjectedAgent(Channel);

impl InjectedAgent {
    /// An agent reached through `connector` (a `tower` service from `Uri`
    /// to a connected stream); each connection attempt calls it.
    #[cfg(test)]
    pub(crate) fn with_connector<C>(connector: C) -> Self
    where
        C: tonic::codegen::Service<tonic::codegen::http::Uri> + Send + 'static,
        C::Response: hyper::rt::Read + hyper::rt::Write + Send + Unpin,
        C::Future: Send,
        tonic::codegen::StdError: From<C::Error> + Send,
    {
        let endpoint = Endpoint::from_static("http://in-memory.invalid");
        Self(endpoint.connect_with_connector_lazy(connector))
    }
}

/// The connection to one sandbox's agent. Cheap to clone.
#[derive(Clone)]
pub(crate) struct AgentConn {
    inner: Arc<ConnInner>,
}

struct ConnInner {
    channel: GrpcOnly<Channel>,
    tokens: Arc<TokenStore>,
    minter: ProxyMinter,
    /// Serialises re-mints so that a burst of 403s mints once per burst
    /// (see [`AgentConn::remint`]).
    remint: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    policy: RetryPolicy,
    /// Set once the sandbox handle exists (not during the readiness wait).
    reconnector: std::sync::OnceLock<Reconnector>,
}

crate::secret::redacted_debug! {
    non_exhaustive AgentConn |o| closed = o.inner.closed.load(Ordering::Relaxed)
}

/// Where to dial: h2c for a loopback endpoint with a port (the local
/// backend), TLS with ALPN h2 on 443 otherwise (AWS, and the local backend in
/// TLS mode, whose endpoints are bare loopback addresses), trusting the
/// system roots plus the client's extra ones (`roots`, parsed once per
/// client, not per dial).
fn endpoint_for(endpoint: &str, roots: &AgentRoots) -> Result<Endpoint, SandboxError> {
    // Tolerate a scheme and a path (`https://host/x` -> `host`).
    let without_scheme = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .unwrap_or(endpoint);
    let authority = without_scheme.split('/').next().unwrap_or(without_scheme);
    let (host, has_port) = authority
        .rsplit_once(':')
        .map_or((authority, false), |(host, _port)| (host, true));
    let loopback = has_port
        && (host == "localhost"
            || host == "[::1]"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback()));
    let bad_endpoint = || {
        SandboxError::protocol_violation("create", "the control plane returned an invalid endpoint")
    };
    let endpoint = if loopback {
        Endpoint::from_shared(format!("http://{authority}")).map_err(|_| bad_endpoint())?
    } else {
        let tls = ClientTlsConfig::new().domain_name(host.to_owned());
        let verifier = roots.verifier().ok_or_else(bad_endpoint)?;
        Endpoint::from_shared(format!("https://{host}:443"))
            .map_err(|_| bad_endpoint())?
            .tls_config_with_verifier(tls, verifier)
            .map_err(|_| bad_endpoint())?
    };
    Ok(endpoint
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .max_frame_size(MAX_FRAME_BYTES)
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
        roots: &AgentRoots,
    ) -> Result<Self, SandboxError> {
        let channel = endpoint_for(endpoint, roots)?.connect_lazy();
        Ok(Self::with_channel(
            channel,
            proxy_token,
            Some(access_token),
            minter,
            policy,
        ))
    }

    /// A connection without the access token, for anonymous calls (Health)
    /// on a sandbox whose token the caller does not have: `sandbox` is a
    /// connection as [`AgentConn::open`] or [`AgentConn::injected`] made it.
    pub(crate) fn anonymous(sandbox: Self) -> Self {
        sandbox.inner.tokens.clear_access();
        sandbox
    }

    /// A connection to an injected agent (see [`InjectedAgent`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn injected(
        agent: &InjectedAgent,
        proxy_token: Secret,
        access_token: Secret,
        minter: ProxyMinter,
        policy: RetryPolicy,
    ) -> Self {
        Self::with_channel(
            agent.0.clone(),
            proxy_token,
            Some(access_token),
            minter,
            policy,
        )
    }

    fn with_channel(
        channel: Channel,
        proxy_token: Secret,
        access_token: Option<Secret>,
        minter: ProxyMinter,
        policy: RetryPolicy,
    ) -> Self {
        Self {
            inner: Arc::new(ConnInner {
                channel: GrpcOnly::new(channel),
                tokens: Arc::new(TokenStore::new(Some(proxy_token), access_token)),
                minter,
                remint: tokio::sync::Mutex::new(()),
                closed: AtomicBool::new(false),
                policy,
                reconnector: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Marks the connection closed: later calls fail with `Sandbox{closed}`
    /// without any I/O.
    pub(crate) fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
    }

    /// Turns the reconnect contract on for this connection (once; later
    /// calls are ignored).
    pub(crate) fn enable_reconnect(
        &self,
        sandbox_id: String,
        check: StateCheck,
        resume_generation: u64,
    ) {
        let _ = self.inner.reconnector.set(Reconnector::new(
            sandbox_id,
            check,
            self.inner.policy.reconnect,
            resume_generation,
        ));
    }

    /// Records the resume generation a resume saw.
    pub(crate) fn set_resume_generation(&self, generation: u64) {
        if let Some(reconnector) = self.inner.reconnector.get() {
            reconnector.set_generation(generation);
        }
    }

    /// The reconnect epoch before a call (`None` without reconnect).
    pub(crate) fn reconnect_epoch(&self) -> Option<u64> {
        self.inner.reconnector.get().map(Reconnector::epoch)
    }

    /// After a cut seen by a call made at `seen_epoch`: waits until the
    /// sandbox is back (`Ok(true)`); `Ok(false)` without reconnect. A
    /// `Background` waiter sleeps while the sandbox is suspended and never
    /// wakes it (see `Reconnector::await_back_asleep`).
    ///
    /// # Errors
    /// As `Reconnector::await_back`: `SandboxNotFound`, `SandboxLifetime`,
    /// `SandboxState`, `Sandbox { connection_lost }`.
    pub(crate) async fn reconnect(
        &self,
        waiter: Waiter,
        seen_epoch: Option<u64>,
        cut: Cut,
        feature: &str,
    ) -> Result<bool, SandboxError> {
        let (Some(reconnector), Some(epoch)) = (self.inner.reconnector.get(), seen_epoch) else {
            return Ok(false);
        };
        match waiter {
            Waiter::Foreground => reconnector.await_back(self, epoch, cut, feature).await?,
            Waiter::Background => {
                reconnector
                    .await_back_asleep(self, epoch, cut, feature)
                    .await?;
            }
        }
        Ok(true)
    }

    /// True after [`AgentConn::close`].
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    fn interceptor(&self) -> AuthInterceptor {
        AuthInterceptor::new(self.inner.tokens.clone())
    }

    fn channel(&self) -> GrpcOnly<Channel> {
        self.inner.channel.clone()
    }

    /// Re-mints the proxy token now (after a resume, or by the refresher).
    ///
    /// # Errors
    /// The minter's failure; the current token is kept.
    pub(crate) async fn remint(&self) -> Result<(), SandboxError> {
        let _guard = self.inner.remint.lock().await;
        let fresh = (self.inner.minter)().await?;
        self.inner.tokens.set_proxy(fresh);
        Ok(())
    }

    /// Replaces the proxy token after a 403 met by a call sent with token
    /// generation `sent_with`. When another call replaced it meanwhile (a
    /// burst of 403s from one expired token), the fresh one is used as is.
    async fn remint_after(&self, sent_with: u64) -> Result<(), SandboxError> {
        let _guard = self.inner.remint.lock().await;
        if self.inner.tokens.proxy_generation() != sent_with {
            return Ok(());
        }
        let fresh = (self.inner.minter)().await?;
        self.inner.tokens.set_proxy(fresh);
        Ok(())
    }

    /// Runs one RPC with the transport's retries, through the SDK's one
    /// backoff driver: a proxy 403 re-mints the proxy token and retries
    /// (once by default; the next 403 is `Authentication { proxy_rejected:
    /// true }`); a connection that was never established is retried on the
    /// policy's ladder. `deadline` bounds each attempt (`Timeout { scope:
    /// Request }` when it passes). The error records every attempt made.
    ///
    /// With the reconnect contract on, a cut (a reset, a proxy
    /// 429/502/503/504, the phase gate) waits until the sandbox is back and
    /// sends the call again (`reconnect_unary_retries` times, none for
    /// [`ConnectRetry::LadderNoReplay`]), or ends with what the wait found
    /// (the sandbox gone, suspended, or not back in time).
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
        let mut resends = match connect_retry {
            ConnectRetry::Ladder => self.inner.policy.reconnect_unary_retries,
            ConnectRetry::LadderNoReplay | ConnectRetry::Never => 0,
        };
        let mut fresh_connects = 1;
        loop {
            let epoch = match connect_retry {
                ConnectRetry::Never => None,
                _ => self.reconnect_epoch(),
            };
            match self
                .call_inner(ctx, deadline, connect_retry, &mut attempt)
                .await
            {
                Ok(value) => return Ok(value),
                Err((err, Some(cut))) if epoch.is_some() => {
                    self.reconnect(Waiter::Foreground, epoch, cut, ctx.feature)
                        .await?;
                    // Nothing was sent: sending it again is always safe.
                    if cut == Cut::NotEstablished && fresh_connects > 0 {
                        fresh_connects -= 1;
                        continue;
                    }
                    if resends == 0 {
                        return Err(err);
                    }
                    resends -= 1;
                }
                Err((err, _)) => return Err(err),
            }
        }
    }

    /// One call with the transport's retries (see `call`); a failure comes
    /// with the cut it was, if it was one.
    pub(super) async fn call_inner<T, F, Fut>(
        &self,
        ctx: CallContext,
        deadline: Option<Duration>,
        connect_retry: ConnectRetry,
        attempt: &mut F,
    ) -> Result<T, (SandboxError, Option<Cut>)>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        if self.is_closed() {
            return Err((SandboxError::closed(), None));
        }
        let started = Instant::now();
        let mut ladder = Schedule::new(&self.inner.policy.not_established);
        let mut remints_left = self.inner.policy.proxy_remint_retries;
        // Whether the next attempt first replaces the proxy token, and
        // whether a fresh one was tried (the final 403 says so).
        let mut remint_first = false;
        let mut reminted = false;
        let mut attempts: u32 = 0;
        // The proxy-token generation the last attempt was sent with.
        let mut sent_with = self.inner.tokens.proxy_generation();
        loop {
            attempts = attempts.saturating_add(1);
            if remint_first {
                remint_first = false;
                if let Err(err) = self.remint_after(sent_with).await {
                    return Err((err.with_attempts(attempts), None));
                }
            }
            sent_with = self.inner.tokens.proxy_generation();
            let sent = attempt();
            let outcome = match deadline {
                Some(limit) => match tokio::time::timeout(limit, sent).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        let err = from_grpc(status::deadline_failure(ctx));
                        return Err((err.with_attempts(attempts), None));
                    }
                },
                None => sent.await,
            };
            let status = match outcome {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => status,
            };
            let failure = status::failure(&status, ctx);
            let origin = failure.origin;
            let cut = cut_of(&failure);
            let err = map_final(failure, reminted);
            let delay = match origin {
                origin if is_proxy_rejection_status(origin) && remints_left > 0 => {
                    remints_left -= 1;
                    remint_first = true;
                    reminted = true;
                    Some(Duration::ZERO)
                }
                // With the reconnect contract on, its poller replaces the
                // ladder: it asks the control plane first, so a sandbox that
                // is gone is not waited for.
                Origin::NotEstablished
                    if connect_retry != ConnectRetry::Never
                        && self.inner.reconnector.get().is_none() =>
                {
                    ladder.next(None)
                }
                _ => None,
            };
            match delay {
                Some(delay) => {
                    backoff::note_retry(ctx.feature, &err, attempts, delay, started);
                    tokio::time::sleep(delay).await;
                }
                None => {
                    let recorded = err.meta().attempts();
                    return Err((err.with_attempts(attempts.max(recorded)), cut));
                }
            }
        }
    }
}

/// Whether a failure is a cut the reconnect contract handles, and which.
fn cut_of(failure: &GrpcFailure) -> Option<Cut> {
    match failure.origin {
        Origin::Reset | Origin::HttpWithoutGrpcStatus(429 | 502 | 503 | 504) => {
            Some(Cut::Transport)
        }
        Origin::NotEstablished => Some(Cut::NotEstablished),
        Origin::Agent if failure.code == crate::error::GrpcCode::Unavailable => {
            match failure.message.as_str() {
                rayito_proto::tokens::phase::SUSPENDING => Some(Cut::Suspending),
                rayito_proto::tokens::phase::TERMINATING => Some(Cut::Transport),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The error a failure ends as once no retry is left; a proxy 403 says
/// "even after a fresh one" only when a fresh token was `reminted`.
fn map_final(failure: GrpcFailure, reminted: bool) -> SandboxError {
    if is_proxy_rejection(&failure) {
        if reminted {
            proxy_rejected(failure)
        } else {
            proxy_rejected_without_remint(failure)
        }
    } else {
        from_grpc(failure)
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
            Err(status) => Err(map_final(status::failure(&status, ctx), false)),
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
        connect_retry: ConnectRetry,
        open: F,
    ) -> Result<AgentStream<T>, SandboxError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<Streaming<T>>, Status>>,
    {
        self.open_stream_within(ctx, (total, total), connect_retry, open)
            .await
    }

    /// [`Self::open_stream`] whose opening (until the first message) has a
    /// deadline of its own: `(total, opening)`, where `opening` is at most
    /// `total` (the caller's per-call request timeout of a stream whose
    /// whole may have none).
    async fn open_stream_within<T, F, Fut>(
        &self,
        ctx: CallContext,
        (total, opening): (Option<Duration>, Option<Duration>),
        connect_retry: ConnectRetry,
        mut open: F,
    ) -> Result<AgentStream<T>, SandboxError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<Streaming<T>>, Status>>,
    {
        // A total too large to add to the clock means no deadline.
        let deadline = total.and_then(|d| Instant::now().checked_add(d));
        let opening = match (opening, total) {
            (Some(o), Some(t)) => Some(o.min(t)),
            (o, t) => o.or(t),
        };
        let (first, inner) = self
            .call(ctx, opening, connect_retry, || {
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
            cut: None,
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
    /// The cut that ended the stream, if one did.
    cut: Option<Cut>,
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
        outcome.map_err(|status| {
            let failure = status::failure(&status, self.ctx);
            self.cut = cut_of(&failure);
            from_grpc(failure)
        })
    }

    /// `waiting` bounded by the stream's deadline: the reconnect wait after
    /// a cut ends when the stream would have ended (`Timeout { scope:
    /// Request }`, as [`AgentStream::message`] reports it), not only when
    /// the reconnect budget runs out, so a command's timeout bounds its
    /// whole call, reconnects included.
    ///
    /// # Errors
    /// What `waiting` returns, or `Timeout { scope: Request }`.
    pub(crate) async fn within_deadline<R>(
        &self,
        waiting: impl Future<Output = Result<R, SandboxError>>,
    ) -> Result<R, SandboxError> {
        match self.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, waiting)
                .await
                .unwrap_or_else(|_| Err(from_grpc(status::deadline_failure(self.ctx)))),
            None => waiting.await,
        }
    }

    /// The cut that ended the stream (after `message` failed), if it was
    /// one the reconnect contract handles.
    pub(crate) fn cut(&self) -> Option<Cut> {
        self.cut
    }
}

#[cfg(test)]
mod endpoint_tests {
    use super::{AgentRoots, endpoint_for};

    fn uri(endpoint: &str) -> String {
        endpoint_for(endpoint, &AgentRoots::default())
            .unwrap()
            .uri()
            .to_string()
    }

    #[test]
    fn loopback_with_a_port_is_h2c_and_bare_hosts_are_tls_on_443() {
        assert_eq!(uri("127.0.0.1:4000"), "http://127.0.0.1:4000/");
        assert_eq!(uri("localhost:4000"), "http://localhost:4000/");
        // TLS mode of the emulator: a bare loopback address, as on AWS.
        assert_eq!(uri("127.0.0.5"), "https://127.0.0.5:443/");
        assert_eq!(
            uri("https://abc.lambda-microvm.us-east-1.on.aws/x"),
            "https://abc.lambda-microvm.us-east-1.on.aws:443/"
        );
        let pem = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".to_owned();
        assert!(endpoint_for("127.0.0.5", &AgentRoots::new(vec![pem])).is_ok());
    }

    /// The channel's first SETTINGS frame announces 1 MiB frames
    /// (SETTINGS_MAX_FRAME_SIZE, id 5), read off the wire by a bare listener.
    #[tokio::test]
    async fn the_channel_accepts_one_mib_frames() {
        use tokio::io::AsyncReadExt as _;
        const PREFACE: usize = 24;
        const SETTINGS: u8 = 4;
        const MAX_FRAME_SIZE: u16 = 5;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = endpoint_for(
            &listener.local_addr().unwrap().to_string(),
            &AgentRoots::default(),
        )
        .unwrap();
        // Connecting sends the preface and SETTINGS; no answer ever comes.
        let connecting = tokio::spawn(async move { endpoint.connect().await });
        let announced = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut preface = [0u8; PREFACE];
            socket.read_exact(&mut preface).await.unwrap();
            assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            let mut header = [0u8; 9];
            socket.read_exact(&mut header).await.unwrap();
            assert_eq!(header[3], SETTINGS);
            let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
            let mut payload = vec![0u8; len];
            socket.read_exact(&mut payload).await.unwrap();
            payload
                .chunks_exact(6)
                .find(|entry| u16::from_be_bytes([entry[0], entry[1]]) == MAX_FRAME_SIZE)
                .map(|entry| u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]))
        })
        .await
        .expect("the channel connects");
        connecting.abort();
        assert_eq!(announced, Some(1024 * 1024));
    }
}
