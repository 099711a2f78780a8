//! Shared helpers for the agent's integration tests: start an [`Agent`] on
//! loopback, post `/run` with a known token through the real hooks server,
//! and hand out tonic clients that carry that token.
#![allow(dead_code)]

pub mod s3;

use std::time::Duration;

use base64::Engine as _;
use rayito_agent::pb;
use rayito_agent::{Agent, AgentConfig};
use sha2::{Digest as _, Sha256};
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// The secret behind [`token`] (32 bytes, like the SDK generates).
pub const SECRET: [u8; 32] = *b"rayito-agent-test-secret-32bytes";
/// The microvm id the tests' `/run` uses.
pub const MICROVM_ID: &str = "microvm-00000000-0000-0000-0000-000000000001";

/// The access token the client sends: base64url(secret), no padding.
pub fn token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET)
}

/// `hex(sha256(secret))`, as the run payload carries it.
pub fn token_sha256_hex() -> String {
    Sha256::digest(SECRET)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A run payload with the test token; `extra` keys are merged in.
pub fn payload(extra: serde_json::Value) -> String {
    let mut p = serde_json::json!({
        "v": 1,
        "token_sha256": token_sha256_hex(),
        "user": "user",
        "workdir": "/home/user",
    });
    if let (Some(map), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
        map.extend(extra);
    }
    p.to_string()
}

/// Adds `x-access-token` (or nothing) to every call.
#[derive(Clone, Debug)]
pub struct TokenInterceptor(Option<AsciiMetadataValue>);

impl tonic::service::Interceptor for TokenInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("x-access-token", v.clone());
        }
        Ok(req)
    }
}

/// A channel that carries a token.
pub type Authed = InterceptedService<Channel, TokenInterceptor>;

/// An agent under test and a connected channel.
#[derive(Debug)]
pub struct TestAgent {
    pub agent: Agent,
    pub channel: Channel,
}

impl TestAgent {
    /// Starts an agent and posts `/run` with the default payload.
    pub async fn start() -> Self {
        Self::start_with(serde_json::json!({})).await
    }

    /// Starts an agent and posts `/run` with `extra` merged into the payload.
    pub async fn start_with(extra: serde_json::Value) -> Self {
        let t = Self::start_without_run().await;
        let (status, body) = t.run(&payload(extra)).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        t
    }

    /// Starts an agent without posting `/run`.
    pub async fn start_without_run() -> Self {
        Self::start_config(AgentConfig::default()).await
    }

    /// Starts an agent with `config`, without posting `/run`.
    pub async fn start_config(config: AgentConfig) -> Self {
        let agent = Agent::start(config).await.expect("agent starts");
        let channel = connect(agent.grpc_addr()).await;
        TestAgent { agent, channel }
    }

    /// Posts `/run` with `payload` and the test microvm id.
    pub async fn run(&self, payload: &str) -> (u16, String) {
        self.hook(
            "run",
            Some(rayito_agent::hooks::run_body(MICROVM_ID, payload)),
        )
        .await
    }

    /// Posts a hook (`run`, `suspend`, `resume`, `terminate`).
    pub async fn hook(&self, name: &str, body: Option<String>) -> (u16, String) {
        rayito_agent::hooks::post_hook(self.agent.hooks_addr(), name, body)
            .await
            .expect("hook answered")
    }

    /// The test token's interceptor.
    pub fn interceptor(&self) -> TokenInterceptor {
        TokenInterceptor(Some(MetadataValue::try_from(token()).expect("ascii token")))
    }

    /// An interceptor that sends `value` as the token (or no header).
    pub fn raw_interceptor(&self, value: Option<&str>) -> TokenInterceptor {
        TokenInterceptor(value.map(|v| MetadataValue::try_from(v).expect("ascii value")))
    }

    /// Health client without a token (Health is anonymous).
    pub fn health(&self) -> pb::health_service_client::HealthServiceClient<Channel> {
        pb::health_service_client::HealthServiceClient::new(self.channel.clone())
    }

    /// Health's `features`.
    pub async fn features(&self) -> pb::AgentFeatures {
        self.health()
            .health(pb::HealthRequest {})
            .await
            .unwrap()
            .into_inner()
            .features
            .expect("features present")
    }

    /// Health client with the token (for Metrics).
    pub fn health_authed(&self) -> pb::health_service_client::HealthServiceClient<Authed> {
        pb::health_service_client::HealthServiceClient::with_interceptor(
            self.channel.clone(),
            self.interceptor(),
        )
    }

    /// Process client with the token.
    pub fn process(&self) -> pb::process_service_client::ProcessServiceClient<Authed> {
        self.process_with(self.interceptor())
    }

    /// Process client with a chosen interceptor.
    pub fn process_with(
        &self,
        i: TokenInterceptor,
    ) -> pb::process_service_client::ProcessServiceClient<Authed> {
        pb::process_service_client::ProcessServiceClient::with_interceptor(self.channel.clone(), i)
            .max_decoding_message_size(64 << 20)
    }

    /// Filesystem client with the token.
    pub fn files(&self) -> pb::filesystem_service_client::FilesystemServiceClient<Authed> {
        pb::filesystem_service_client::FilesystemServiceClient::with_interceptor(
            self.channel.clone(),
            self.interceptor(),
        )
        .max_decoding_message_size(64 << 20)
    }

    /// Code client with the token.
    pub fn code(&self) -> pb::code_service_client::CodeServiceClient<Authed> {
        pb::code_service_client::CodeServiceClient::with_interceptor(
            self.channel.clone(),
            self.interceptor(),
        )
        .max_decoding_message_size(64 << 20)
    }

    /// Lifecycle client with the token.
    pub fn lifecycle(&self) -> pb::lifecycle_service_client::LifecycleServiceClient<Authed> {
        pb::lifecycle_service_client::LifecycleServiceClient::with_interceptor(
            self.channel.clone(),
            self.interceptor(),
        )
    }

    /// The host path of a guest path in this agent's sandbox.
    pub fn host_path(&self, guest: &str) -> std::path::PathBuf {
        self.agent.env().to_host(guest)
    }
}

/// The `rayito-agent serve` binary on loopback ports, rooted at `root`,
/// its stdout piped (stderr dropped).
#[derive(Debug)]
pub struct ServedBinary {
    pub child: tokio::process::Child,
    /// Its stdout's lines after the `listening` one.
    pub stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub grpc: std::net::SocketAddr,
    pub hooks: std::net::SocketAddr,
}

impl ServedBinary {
    /// Starts the binary (`env!("CARGO_BIN_EXE_rayito-agent")`: only the
    /// agent's own tests have it, and the emulator's include this module)
    /// and reads the ports its first line announces.
    pub async fn start(binary: &str, root: &std::path::Path) -> Self {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = tokio::process::Command::new(binary)
            .args([
                "serve",
                "--grpc-addr",
                "127.0.0.1:0",
                "--hooks-addr",
                "127.0.0.1:0",
                "--root",
            ])
            .arg(root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(10), stdout.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let rest = line
            .strip_prefix("rayito-agent listening grpc=")
            .expect("listening line");
        let (grpc, hooks) = rest.split_once(" hooks=").unwrap();
        let (grpc, hooks) = (grpc.parse().unwrap(), hooks.parse().unwrap());
        Self {
            child,
            stdout,
            grpc,
            hooks,
        }
    }
}

/// Connects an h2c channel to `addr`.
pub async fn connect(addr: std::net::SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("channel connects")
}

/// Asserts a status's code and exact message.
#[track_caller]
pub fn assert_status(status: &tonic::Status, code: tonic::Code, message: &str) {
    assert_eq!(
        (status.code(), status.message()),
        (code, message),
        "unexpected status"
    );
}

/// One event of a process stream (the oneof, unwrapped).
pub type Event = pb::process_event::Event;

/// A `StartRequest` for `bash -c <script>`, as the SDK builds it.
pub fn bash(script: &str) -> pb::StartRequest {
    pb::StartRequest {
        process: Some(pb::ProcessConfig {
            cmd: "/bin/bash".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The next event of a process stream (panics after 20 s or at the end).
pub async fn next_event(stream: &mut tonic::Streaming<pb::ProcessEvent>) -> Event {
    tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .expect("event within 20 s")
        .expect("stream ok")
        .expect("stream not finished")
        .event
        .expect("event set")
}

/// Every event until the stream closes (bounded by 30 s).
pub async fn collect_events(mut stream: tonic::Streaming<pb::ProcessEvent>) -> Vec<Event> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let msg = tokio::time::timeout_at(deadline, stream.message())
            .await
            .expect("stream ends within 30 s")
            .expect("stream ok");
        match msg {
            Some(ev) => out.push(ev.event.expect("event set")),
            None => return out,
        }
    }
}

/// What a finished process stream carried.
#[derive(Debug, Default)]
pub struct Outcome {
    pub pid: u32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub seqs: Vec<u64>,
    pub end: Option<pb::EndEvent>,
}

/// Checks the stream shape (Start first, one End last) and gathers output.
pub fn outcome(events: &[Event]) -> Outcome {
    let mut o = Outcome::default();
    match events.first() {
        Some(Event::Start(s)) => o.pid = s.pid,
        other => panic!("first event is not StartEvent: {other:?}"),
    }
    for (i, ev) in events.iter().enumerate().skip(1) {
        match ev {
            Event::Start(_) => panic!("second StartEvent"),
            Event::Data(d) => {
                o.seqs.push(d.seq);
                match &d.output {
                    Some(pb::data_event::Output::Stdout(b)) => o.stdout.extend_from_slice(b),
                    Some(pb::data_event::Output::Stderr(b)) => o.stderr.extend_from_slice(b),
                    None => panic!("DataEvent without output"),
                }
            }
            Event::End(e) => {
                assert_eq!(i, events.len() - 1, "EndEvent is not last");
                o.end = Some(e.clone());
            }
            Event::Keepalive(_) => {}
        }
    }
    o
}

/// Runs `bash -c script` to completion through Start.
pub async fn run_bash(t: &TestAgent, script: &str) -> Outcome {
    let stream = t
        .process()
        .start(bash(script))
        .await
        .expect("Start")
        .into_inner();
    outcome(&collect_events(stream).await)
}

/// Whether `pid` is alive (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Runs one Python cell on the default context and returns its stdout.
pub async fn python_stdout(t: &TestAgent, code: &str) -> String {
    let mut stream = t
        .code()
        .execute(pb::ExecuteRequest {
            code: code.to_owned(),
            ..Default::default()
        })
        .await
        .expect("Execute")
        .into_inner();
    let mut out = String::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), stream.message())
        .await
        .expect("cell ends within 60 s")
        .expect("stream ok")
    {
        match event.event {
            Some(pb::execute_event::Event::Stdout(c)) => out.push_str(&c.text),
            Some(pb::execute_event::Event::Error(e)) => panic!("the cell raised: {e:?}"),
            _ => {}
        }
    }
    out
}
