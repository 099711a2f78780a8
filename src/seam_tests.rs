//! Fast tests through the SDK's test seam: an injected control plane and an
//! injected agent (a tonic server, or a bare HTTP/2 peer, on the other end
//! of a `tokio::io::duplex`). No process is spawned and no socket opened;
//! each test runs in milliseconds. The behaviours here also have an
//! end-to-end test on the local backend or the emulator.

mod canary;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rayito_agent::pb as agent_pb;
use rayito_agent::pb::configure_service_server::{ConfigureService, ConfigureServiceServer};
use rayito_agent::pb::health_service_server::{HealthService, HealthServiceServer};
use rayito_agent::pb::process_service_server::{ProcessService, ProcessServiceServer};
use tonic::{Request, Response, Status};

use crate::control::{AuthTokenRequest, ControlPlane, Microvm, RunRequest};
use crate::error::map::aws::{AwsFailure, from_aws};
use crate::error::{Backoff, ErrorKind, RetryPolicy, SandboxCode, SandboxError};
use crate::secret::Secret;
use crate::state::SandboxState;
use crate::transport::{AgentConn, ConnectRetry, InjectedAgent};
use crate::{Sandbox, SandboxBuilder};

const IMAGE: &str = "arn:aws:lambda:us-east-1:123456789012:microvm-image:test";

/// A fake agent service: `impl Service for Fake { ... }` with the methods
/// it serves, then the ones it does not (`name(Request) -> Response;`),
/// each answering UNIMPLEMENTED.
macro_rules! fake_service {
    (
        impl $service:ident for $fake:ident { $($served:tt)* }
        not served: $($name:ident($req:ident) -> $resp:ty;)+
    ) => {
        #[tonic::async_trait]
        impl $service for $fake {
            $($served)*
            $(
                async fn $name(
                    &self,
                    _request: Request<agent_pb::$req>,
                ) -> Result<Response<$resp>, Status> {
                    Err(Status::unimplemented("not in this fake"))
                }
            )+
        }
    };
}

/// A control plane in memory: RunMicrovm is throttled `throttles` times
/// (with a 1 ms Retry-After), then answers; every call is counted.
#[derive(Debug, Default)]
pub(crate) struct FakeControl {
    throttles: u32,
    pub(crate) runs: AtomicU32,
    tokens: AtomicU32,
    pub(crate) terminations: AtomicU32,
}

impl FakeControl {
    pub(crate) fn throttled(times: u32) -> Arc<Self> {
        Arc::new(Self {
            throttles: times,
            ..Self::default()
        })
    }

    fn vm() -> Microvm {
        Microvm {
            id: "microvm-1".to_owned(),
            state: SandboxState::Running,
            endpoint: "in-memory.invalid".to_owned(),
            image_arn: IMAGE.to_owned(),
            image_version: "1".to_owned(),
            max_duration_seconds: 3_600,
            started_at: Some(SystemTime::UNIX_EPOCH),
            terminated_at: None,
            state_reason: None,
            auto_resume: false,
            ingress: Vec::new(),
            egress: Vec::new(),
        }
    }
}

impl ControlPlane for FakeControl {
    fn run_microvm(&self, _request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let throttled = run <= self.throttles;
        async move {
            if throttled {
                let mut f = AwsFailure::new("RunMicrovm");
                f.code = Some("ThrottlingException".to_owned());
                f.http_status = Some(429);
                f.retry_after = Some(Duration::from_millis(1));
                return Err(from_aws(f));
            }
            Ok(Self::vm())
        }
        .boxed()
    }

    fn get_microvm(&self, _id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        async { Ok(Self::vm()) }.boxed()
    }

    fn terminate_microvm(&self, _id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        self.terminations.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }.boxed()
    }

    fn create_auth_token(
        &self,
        _request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>> {
        self.tokens.fetch_add(1, Ordering::SeqCst);
        async { Ok(Secret::new("proxy-token")) }.boxed()
    }
}

/// The agent's Health, answering with `answer` (the other seam tests'
/// too).
#[derive(Clone)]
pub(crate) struct FakeHealth {
    pub(crate) answer: Result<agent_pb::HealthResponse, (tonic::Code, &'static str)>,
}

fake_service! {
    impl HealthService for FakeHealth {
        async fn health(
            &self,
            _request: Request<agent_pb::HealthRequest>,
        ) -> Result<Response<agent_pb::HealthResponse>, Status> {
            match &self.answer {
                Ok(health) => Ok(Response::new(health.clone())),
                Err((code, message)) => Err(Status::new(*code, *message)),
            }
        }
    }
    not served:
    metrics(MetricsRequest) -> agent_pb::MetricsResponse;
    metrics_history(MetricsHistoryRequest) -> agent_pb::MetricsHistoryResponse;
}

pub(crate) fn ready() -> agent_pb::HealthResponse {
    agent_pb::HealthResponse {
        agent_ready: true,
        kernel_ready: true,
        sandbox_id: "microvm-1".to_owned(),
        ..Default::default()
    }
}

/// The agent's ProcessService: `Start` plays `events` in order.
#[derive(Clone)]
struct FakeProcess {
    events: Vec<agent_pb::ProcessEvent>,
}

type EventStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<agent_pb::ProcessEvent, Status>> + Send>,
>;

fake_service! {
    impl ProcessService for FakeProcess {
        type StartStream = EventStream;
        type ConnectStream = EventStream;

        async fn start(
            &self,
            _request: Request<agent_pb::StartRequest>,
        ) -> Result<Response<EventStream>, Status> {
            let events = self.events.clone().into_iter().map(Ok);
            Ok(Response::new(Box::pin(tokio_stream::iter(events))))
        }
    }
    not served:
    connect(ConnectRequest) -> EventStream;
    send_input(SendInputRequest) -> agent_pb::SendInputResponse;
    close_stdin(CloseStdinRequest) -> agent_pb::CloseStdinResponse;
    send_signal(SendSignalRequest) -> agent_pb::SendSignalResponse;
    list(ListRequest) -> agent_pb::ListResponse;
}

/// An in-memory agent: each connection is a duplex pipe served by a tonic
/// server with `health`. `refusals` connection attempts fail first.
fn tonic_agent(health: FakeHealth, refusals: u32) -> (InjectedAgent, Arc<AtomicU32>) {
    tonic_agent_with(health, None, refusals)
}

/// As [`tonic_agent`], with a ProcessService too when given.
fn tonic_agent_with(
    health: FakeHealth,
    process: Option<FakeProcess>,
    refusals: u32,
) -> (InjectedAgent, Arc<AtomicU32>) {
    let attempts = Arc::new(AtomicU32::new(0));
    let counted = attempts.clone();
    let connector = tower::service_fn(move |_uri| {
        let attempt = counted.fetch_add(1, Ordering::SeqCst) + 1;
        let health = health.clone();
        let process = process.clone();
        async move {
            if attempt <= refusals {
                return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
            }
            let (client, server) = tokio::io::duplex(64 * 1024);
            let router = tonic::transport::Server::builder()
                .add_service(HealthServiceServer::new(health))
                .add_optional_service(process.map(ProcessServiceServer::new));
            tokio::spawn(
                router.serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server))),
            );
            Ok(TokioIo::new(client))
        }
    });
    (InjectedAgent::with_connector(connector), attempts)
}

/// An in-memory HTTP/2 peer that is not an agent: it answers every request
/// with HTTP `status` and no grpc-status, as the AWS proxy does.
fn plain_http_peer(status: u16) -> InjectedAgent {
    let connector = tower::service_fn(move |_uri| async move {
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let answer = hyper::service::service_fn(move |_request| async move {
                let response = tonic::codegen::http::Response::builder()
                    .status(status)
                    .body(http_body_util::Empty::<tonic::codegen::Bytes>::new())
                    .expect("a valid response");
                Ok::<_, std::convert::Infallible>(response)
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(server), answer)
                .await;
        });
        Ok::<_, std::io::Error>(TokioIo::new(client))
    });
    InjectedAgent::with_connector(connector)
}

pub(crate) fn builder(control: Arc<FakeControl>, agent: Option<InjectedAgent>) -> SandboxBuilder {
    crate::Client::injected(control, agent)
        .sandbox()
        .template(IMAGE)
        .ready_timeout(Duration::from_secs(20))
}

#[tokio::test]
async fn a_call_throttled_n_times_reports_n_attempts() {
    // Always throttled: the default policy gives up after 5 attempts.
    let control = FakeControl::throttled(u32::MAX);
    let err = builder(control.clone(), None).create().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimit);
    assert_eq!(control.runs.load(Ordering::SeqCst), 5);
    assert_eq!(err.meta().attempts(), 5);
    assert_eq!(err.meta().http_status(), Some(429));
    assert_eq!(
        err.to_string(),
        "control plane call RunMicrovm was throttled; retry after 1 ms"
    );

    // Throttled twice, then it answers: the create goes on.
    let control = FakeControl::throttled(2);
    let (agent, _) = tonic_agent(
        FakeHealth {
            answer: Ok(ready()),
        },
        0,
    );
    let sandbox = builder(control.clone(), Some(agent))
        .create()
        .await
        .unwrap();
    assert_eq!(control.runs.load(Ordering::SeqCst), 3);
    assert_eq!(sandbox.id(), "microvm-1");
}

#[tokio::test]
async fn agent_text_mimicking_the_transport_is_not_a_lost_connection() {
    for text in [
        "grpc-status header missing, mapped from HTTP status code 503",
        "transport error: connection reset",
        "h2 protocol error: stream error received: RST_STREAM",
    ] {
        let control = FakeControl::throttled(0);
        let health = FakeHealth {
            answer: Err((tonic::Code::Internal, text)),
        };
        let (agent, _) = tonic_agent(health, 0);
        let err = builder(control.clone(), Some(agent))
            .create()
            .await
            .unwrap_err();
        assert!(
            matches!(err, SandboxError::Sandbox { code: None, .. }),
            "{text}: {err:?}"
        );
        assert_ne!(err.sandbox_code(), Some(&SandboxCode::ConnectionLost));
        assert!(!err.is_retryable());
        assert_eq!(err.meta().http_status(), None);
        assert_eq!(err.meta().server_message(), Some(text));
        assert_eq!(err.meta().attempts(), 1);
        // The MicroVM the create started is not left running.
        assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
    }
}

/// Asserts `err` is the proxy refusing the sandbox's token.
pub(crate) fn assert_proxy_rejected(err: &SandboxError) {
    assert!(
        matches!(
            err,
            SandboxError::Authentication {
                proxy_rejected: true,
                ..
            }
        ),
        "{err:?}"
    );
}

/// Creates a sandbox behind a plain HTTP peer answering `status` to every
/// call, and checks the error: the proxy refusing the token, after the
/// first token and one re-mint (two attempts in all).
async fn refused_by_proxy(status: u16) -> SandboxError {
    let control = FakeControl::throttled(0);
    let err = builder(control.clone(), Some(plain_http_peer(status)))
        .create()
        .await
        .unwrap_err();
    assert_proxy_rejected(&err);
    assert_eq!(err.meta().http_status(), Some(status));
    assert_eq!(control.tokens.load(Ordering::SeqCst), 2);
    assert_eq!(err.meta().attempts(), 2);
    err
}

#[tokio::test]
async fn a_proxy_403_is_recognised_by_type_and_reminted_once() {
    let err = refused_by_proxy(403).await;
    // The cause is our transport's typed error, redacted.
    let summary = std::error::Error::source(&err).expect("summary");
    let cause = summary.source().expect("cause");
    assert!(cause.to_string().contains("HTTP 403"), "{cause}");
}

fn conn_to(agent: &InjectedAgent, policy: RetryPolicy) -> AgentConn {
    AgentConn::injected(
        agent,
        Secret::new("p"),
        Secret::new("a"),
        Arc::new(|| async { Ok(Secret::new("p")) }.boxed()),
        policy,
    )
}

#[tokio::test]
async fn a_proxy_502_is_a_lost_connection_with_its_status() {
    let conn = conn_to(&plain_http_peer(502), RetryPolicy::default());
    let err = conn
        .health(Duration::from_secs(5), ConnectRetry::Never)
        .await
        .unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::ConnectionLost));
    assert_eq!(err.meta().http_status(), Some(502));
    assert_eq!(
        err.to_string(),
        "the AWS proxy could not reach the sandbox for health (http 502); retry, or check that the sandbox is still running"
    );
}

#[tokio::test]
async fn a_connection_never_established_is_retried_on_the_ladder() {
    let policy = RetryPolicy {
        not_established: Backoff {
            max_attempts: Some(4),
            ..Backoff::doubling(Duration::from_millis(1), Duration::from_millis(2))
        },
        ..RetryPolicy::default()
    };
    let (agent, attempts) = tonic_agent(
        FakeHealth {
            answer: Ok(ready()),
        },
        2,
    );
    let conn = conn_to(&agent, policy);
    let health = conn
        .health(Duration::from_secs(5), ConnectRetry::Ladder)
        .await
        .unwrap();
    assert!(health.agent_ready);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);

    // Never connecting: every attempt of the ladder is made and counted.
    let (agent, attempts) = tonic_agent(
        FakeHealth {
            answer: Ok(ready()),
        },
        u32::MAX,
    );
    let conn = conn_to(&agent, policy);
    let err = conn
        .health(Duration::from_secs(5), ConnectRetry::Ladder)
        .await
        .unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::ConnectionLost));
    assert_eq!(err.meta().attempts(), 4);
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn an_agent_that_never_gets_ready_is_sandbox_not_ready_with_its_probes() {
    let control = FakeControl::throttled(0);
    let not_ready = agent_pb::HealthResponse {
        agent_ready: true,
        kernel_ready: false,
        ..Default::default()
    };
    let (agent, _) = tonic_agent(
        FakeHealth {
            answer: Ok(not_ready),
        },
        0,
    );
    let err = builder(control.clone(), Some(agent))
        .ready_timeout(Duration::from_millis(300))
        .create()
        .await
        .unwrap_err();
    match &err {
        SandboxError::SandboxNotReady { state, .. } => {
            assert_eq!(state.as_ref(), Some(&SandboxState::Running));
        }
        other => panic!("{other:?}"),
    }
    // Probes at 0, 250 ms and the deadline (pauses 250 ms, then the rest).
    assert!(err.meta().attempts() >= 2, "{}", err.meta().attempts());
    assert_eq!(
        err.to_string(),
        "the sandbox was not ready within 300 ms (state RUNNING); raise ready_timeout or check the image"
    );
    assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
}

fn event(event: agent_pb::process_event::Event) -> agent_pb::ProcessEvent {
    agent_pb::ProcessEvent { event: Some(event) }
}

fn stdout(bytes: &[u8], seq: u64) -> agent_pb::ProcessEvent {
    event(agent_pb::process_event::Event::Data(agent_pb::DataEvent {
        output: Some(agent_pb::data_event::Output::Stdout(bytes.to_vec())),
        seq,
    }))
}

fn stderr(bytes: &[u8], seq: u64) -> agent_pb::ProcessEvent {
    event(agent_pb::process_event::Event::Data(agent_pb::DataEvent {
        output: Some(agent_pb::data_event::Output::Stderr(bytes.to_vec())),
        seq,
    }))
}

async fn sandbox_with_process(events: Vec<agent_pb::ProcessEvent>) -> Sandbox {
    let (agent, _) = tonic_agent_with(
        FakeHealth {
            answer: Ok(ready()),
        },
        Some(FakeProcess { events }),
        0,
    );
    builder(FakeControl::throttled(0), Some(agent))
        .create()
        .await
        .unwrap()
}

#[tokio::test]
async fn command_output_keeps_its_order_and_rebuilds_split_characters() {
    let end = event(agent_pb::process_event::Event::End(agent_pb::EndEvent {
        exit_code: 3,
        exited: true,
        status: "exited".to_owned(),
        error: None,
        signal: None,
    }));
    // "é" is 0xC3 0xA9: split across two chunks.
    let events = vec![
        event(agent_pb::process_event::Event::Start(
            agent_pb::StartEvent { pid: 7 },
        )),
        stdout(b"h\xC3", 1),
        stderr(b"warn\n", 2),
        stdout(b"\xA9llo", 3),
        event(agent_pb::process_event::Event::Keepalive(
            agent_pb::KeepAlive::default(),
        )),
        stdout(b" world\n", 4),
        end,
    ];
    let sandbox = sandbox_with_process(events).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (out, err) = (seen.clone(), seen.clone());
    let options = crate::CommandOptions::new()
        .on_stdout(move |t| out.lock().unwrap().push(format!("out:{t}")))
        .on_stderr(move |t| err.lock().unwrap().push(format!("err:{t}")));
    let failure = sandbox
        .commands()
        .run_with("./build.sh", options)
        .await
        .unwrap_err();
    match &failure {
        SandboxError::CommandExit {
            exit_code,
            stdout,
            stderr,
            ..
        } => {
            assert_eq!(*exit_code, 3);
            assert_eq!(stdout, "h\u{e9}llo world\n");
            assert_eq!(stderr, "warn\n");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        failure.to_string(),
        "command ./build.sh exited with code 3; its stdout and stderr are in the error"
    );
    // Callbacks see the output in the order it came, whole characters only.
    assert_eq!(
        *seen.lock().unwrap(),
        ["out:h", "err:warn\n", "out:\u{e9}llo", "out: world\n"]
    );
}

#[tokio::test]
async fn a_process_stream_without_a_start_event_is_a_protocol_violation() {
    let sandbox = sandbox_with_process(vec![stdout(b"early", 1)]).await;
    let err = sandbox.commands().run("true").await.unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::ProtocolViolation));
    assert_eq!(
        err.to_string(),
        "the agent broke the protocol during commands.run: the process stream did not start with a start event; the call was abandoned, report this with the image version"
    );
}

#[tokio::test]
async fn a_proxy_401_takes_the_proxy_route() {
    // tonic reads an HTTP 401 as UNAUTHENTICATED; it is the proxy refusing
    // the token, not "the agent refused the access token".
    let err = refused_by_proxy(401).await;
    assert_eq!(
        err.to_string(),
        "the AWS proxy refused the sandbox's token for health even after a fresh one; check the IAM permission to create MicroVM auth tokens"
    );
}

/// What a hostile agent chooses: a status and an error code carrying a key
/// id, and a 16 MiB message of `x-amz-` (the old redaction was quadratic).
#[tokio::test]
async fn a_hostile_agents_tokens_are_redacted_and_bounded() {
    const KEY: &str = "AKIAIOSFODNN7EXAMPLE";
    let start = event(agent_pb::process_event::Event::Start(
        agent_pb::StartEvent { pid: 7 },
    ));
    let end = |status: String, error: Option<agent_pb::StreamError>| {
        event(agent_pb::process_event::Event::End(agent_pb::EndEvent {
            exit_code: 5,
            exited: true,
            status,
            error,
            signal: None,
        }))
    };
    let started = std::time::Instant::now();
    let status = format!("{KEY}_{}", "x".repeat(100_000));
    let sandbox = sandbox_with_process(vec![start.clone(), end(status, None)]).await;
    let err = sandbox.commands().run("true").await.unwrap_err();
    let SandboxError::CommandExit { status, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(!status.is_known());
    assert!(status.as_str().chars().count() <= 64, "{status:?}");
    assert_eq!(
        err.to_string(),
        "command true ended with status (redacted) and exit code 5; its stdout and stderr are in the error"
    );
    let shown = format!("{err} {err:?} {}", err.to_wire());
    assert!(
        !shown.contains(KEY)
            && !shown
                .contains("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
    );
    // One 100 kB token cannot be looked at whole: none of it is kept.
    assert_eq!(err.meta().reason(), None);

    let error = agent_pb::StreamError {
        code: format!("{KEY}_code"),
        message: "x-amz-x ".repeat(16 * 1024 * 1024 / 8),
    };
    let sandbox = sandbox_with_process(vec![start, end("weird".to_owned(), Some(error))]).await;
    let err = sandbox.commands().run("true").await.unwrap_err();
    assert!(
        matches!(err, SandboxError::Sandbox { code: None, .. }),
        "{err:?}"
    );
    let shown = format!("{err} {err:?} {}", err.to_wire());
    assert!(!shown.contains(KEY), "{shown}");
    assert!(
        err.to_string()
            .starts_with("the agent ended commands.run with error code (redacted)"),
        "{err}"
    );
    assert!(
        err.meta()
            .server_message()
            .is_some_and(|m| m.chars().count() <= 2_048)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

// ---- an agent with ConfigureService, for the features' seam tests ----

/// The agent's ConfigureService: answers every section a request sets with
/// `answer` (code, error class), records each request, and answers
/// ConfigureStatus with `status`, counting the reads. Clones share every
/// field, so a test changes the answers between calls.
#[derive(Clone, Default)]
pub(crate) struct FakeConfigure {
    pub(crate) answer: Arc<Mutex<(agent_pb::SectionCode, String)>>,
    pub(crate) status: Arc<Mutex<agent_pb::ConfigureStatusResponse>>,
    pub(crate) requests: Arc<Mutex<Vec<agent_pb::ConfigureRequest>>>,
    pub(crate) status_reads: Arc<AtomicU32>,
}

impl FakeConfigure {
    /// Answering APPLIED, with `status`.
    pub(crate) fn applying(status: agent_pb::ConfigureStatusResponse) -> Self {
        let fake = Self::default();
        fake.answer_with(agent_pb::SectionCode::Applied, "");
        *fake.status.lock().unwrap() = status;
        fake
    }

    /// Every later Configure answers `code` with `class`.
    pub(crate) fn answer_with(&self, code: agent_pb::SectionCode, class: &str) {
        *self.answer.lock().unwrap() = (code, class.to_owned());
    }

    /// The requests received so far.
    pub(crate) fn received(&self) -> Vec<agent_pb::ConfigureRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[tonic::async_trait]
impl ConfigureService for FakeConfigure {
    async fn configure(
        &self,
        request: Request<agent_pb::ConfigureRequest>,
    ) -> Result<Response<agent_pb::ConfigureResponse>, Status> {
        use agent_pb::ConfigSection as S;
        let request = request.into_inner();
        let set = [
            (request.s3_mounts.is_some(), S::S3Mounts),
            (request.efs_volumes.is_some(), S::EfsVolumes),
            (request.lifecycle_events.is_some(), S::LifecycleEvents),
            (request.telemetry_export.is_some(), S::TelemetryExport),
            (request.secret_gateway.is_some(), S::SecretGateway),
        ];
        self.requests.lock().unwrap().push(request);
        let (code, class) = self.answer.lock().unwrap().clone();
        let results = set
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, section)| agent_pb::SectionResult {
                section: section as i32,
                code: code as i32,
                error_class: class.clone(),
            })
            .collect();
        Ok(Response::new(agent_pb::ConfigureResponse {
            results,
            config_generation: 1,
        }))
    }

    async fn configure_status(
        &self,
        _request: Request<agent_pb::ConfigureStatusRequest>,
    ) -> Result<Response<agent_pb::ConfigureStatusResponse>, Status> {
        self.status_reads.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(self.status.lock().unwrap().clone()))
    }
}

/// An in-memory agent serving Health (`health`), ConfigureService
/// (`configure`) and a ProcessService that answers nothing.
pub(crate) fn configure_agent(health: FakeHealth, configure: FakeConfigure) -> InjectedAgent {
    let connector = tower::service_fn(move |_uri| {
        let health = health.clone();
        let configure = configure.clone();
        async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let router = tonic::transport::Server::builder()
                .add_service(HealthServiceServer::new(health))
                .add_service(ConfigureServiceServer::new(configure));
            tokio::spawn(
                router.serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server))),
            );
            Ok::<_, std::io::Error>(TokioIo::new(client))
        }
    });
    InjectedAgent::with_connector(connector)
}
