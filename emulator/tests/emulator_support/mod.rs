//! Shared helpers for the emulator's integration tests: an emulator on
//! loopback, the real `aws-sdk-lambdamicrovms` client configured as in
//! the way the SDK builds its hermetic client (static credentials, retries off), and tonic clients
//! that reach a MicroVM's agent through its emulated proxy.
#![allow(dead_code)]

pub mod s3;

use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms as lmv;
use base64::Engine as _;
use lmv::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
use lmv::types::{MicrovmState, PortSpecification};
use rayito_agent::pb;
use rayito_emulator::{Emulator, EmulatorConfig};
use sha2::{Digest as _, Sha256};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// The sandbox secret the tests use (32 bytes, like the SDK generates).
pub const SECRET: [u8; 32] = *b"emulator-test-secret-32-bytes-ok";

/// `x-access-token` for [`SECRET`].
pub fn access_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET)
}

/// A run payload carrying the digest of [`SECRET`]; `extra` keys merged in.
pub fn payload(extra: serde_json::Value) -> String {
    let digest: String = Sha256::digest(SECRET)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut p = serde_json::json!({"v": 1, "token_sha256": digest, "user": "user", "workdir": "/home/user"});
    if let (Some(map), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
        map.extend(extra);
    }
    p.to_string()
}

/// An emulator and an SDK client pointed at it.
pub struct Harness {
    pub emulator: Emulator,
    pub client: lmv::Client,
}

impl Harness {
    pub async fn start() -> Self {
        Self::start_with(EmulatorConfig::default()).await
    }

    pub async fn start_with(config: EmulatorConfig) -> Self {
        let emulator = Emulator::start(config).await.expect("emulator starts");
        let client = sdk_client(&emulator);
        Harness { emulator, client }
    }

    pub fn image(&self) -> String {
        self.emulator.image_arn("rayito-base")
    }

    /// RunMicrovm with the test payload; returns (id, endpoint) once RUNNING.
    pub async fn run_ready(&self) -> (String, String) {
        self.run_ready_with(|r| r).await
    }

    /// RunMicrovm with extra builder settings; returns (id, endpoint) once RUNNING.
    pub async fn run_ready_with(
        &self,
        f: impl FnOnce(
            lmv::operation::run_microvm::builders::RunMicrovmFluentBuilder,
        ) -> lmv::operation::run_microvm::builders::RunMicrovmFluentBuilder,
    ) -> (String, String) {
        let req = self
            .client
            .run_microvm()
            .image_identifier(self.image())
            .run_hook_payload(payload(serde_json::json!({})))
            .maximum_duration_in_seconds(600);
        let out = f(req).send().await.expect("RunMicrovm");
        let id = out.microvm_id().to_string();
        wait_state(&self.client, &id, MicrovmState::Running).await;
        (id, out.endpoint().to_string())
    }

    /// A proxy token for `ports` (a single port each).
    pub async fn mint(&self, id: &str, ports: &[i32]) -> String {
        let mut req = self
            .client
            .create_microvm_auth_token()
            .microvm_identifier(id)
            .expiration_in_minutes(60);
        for p in ports {
            req = req.allowed_ports(PortSpecification::Port(*p));
        }
        let out = req.send().await.expect("CreateMicrovmAuthToken");
        out.auth_token()
            .get("X-aws-proxy-auth")
            .expect("token key")
            .clone()
    }
}

/// The AWS SDK client set up as the SDK does for the local backend, with
/// the emulator's access key.
pub fn sdk_client(emulator: &Emulator) -> lmv::Client {
    let key = emulator.access_key();
    sdk_client_at(&emulator.endpoint_url(), &key.id, &key.secret)
}

/// [`sdk_client`] for an emulator known by its URL and key.
pub fn sdk_client_at(endpoint_url: &str, key_id: &str, secret: &str) -> lmv::Client {
    let conf = lmv::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(key_id, secret, None, None, "static-test"))
        .endpoint_url(endpoint_url)
        .retry_config(RetryConfig::disabled())
        .build();
    lmv::Client::from_conf(conf)
}

/// Polls GetMicrovm (every 20 ms, at most 20 s) until `state`.
pub async fn wait_state(
    client: &lmv::Client,
    id: &str,
    state: MicrovmState,
) -> lmv::operation::get_microvm::GetMicrovmOutput {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = client
            .get_microvm()
            .microvm_identifier(id)
            .send()
            .await
            .expect("GetMicrovm");
        if *out.state() == state {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "MicroVM {id} stuck in {:?}, wanted {state:?}",
            out.state()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Adds the proxy and access headers the SDK sends to every call.
#[derive(Clone, Debug, Default)]
pub struct ProxyHeaders {
    pub proxy_auth: Option<String>,
    pub proxy_port: Option<String>,
    pub access_token: Option<String>,
    pub extra: Vec<(&'static str, String)>,
}

impl tonic::service::Interceptor for ProxyHeaders {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let md = req.metadata_mut();
        let mut put = |k: &'static str, v: &str| {
            md.insert(k, AsciiMetadataValue::try_from(v).expect("ascii header"));
        };
        if let Some(v) = &self.proxy_auth {
            put("x-aws-proxy-auth", v);
        }
        if let Some(v) = &self.proxy_port {
            put("x-aws-proxy-port", v);
        }
        put("x-aws-proxy-force-h2", "true");
        if let Some(v) = &self.access_token {
            put("x-access-token", v);
        }
        for (k, v) in &self.extra {
            put(k, v);
        }
        Ok(req)
    }
}

impl ProxyHeaders {
    /// The headers of a well-behaved client: token, port 8080, access token.
    pub fn sdk(proxy_token: &str) -> Self {
        ProxyHeaders {
            proxy_auth: Some(proxy_token.to_string()),
            proxy_port: Some("8080".into()),
            access_token: Some(access_token()),
            extra: Vec::new(),
        }
    }
}

pub type Proxied = InterceptedService<Channel, ProxyHeaders>;

/// An h2c channel to a MicroVM endpoint (`127.0.0.1:<port>`).
pub async fn channel(endpoint: &str) -> Channel {
    Endpoint::from_shared(format!("http://{endpoint}"))
        .expect("endpoint uri")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("proxy accepts h2c")
}

pub fn health(
    ch: &Channel,
    h: ProxyHeaders,
) -> pb::health_service_client::HealthServiceClient<Proxied> {
    pb::health_service_client::HealthServiceClient::with_interceptor(ch.clone(), h)
}

pub fn process(
    ch: &Channel,
    h: ProxyHeaders,
) -> pb::process_service_client::ProcessServiceClient<Proxied> {
    pb::process_service_client::ProcessServiceClient::with_interceptor(ch.clone(), h)
}

pub fn files(
    ch: &Channel,
    h: ProxyHeaders,
) -> pb::filesystem_service_client::FilesystemServiceClient<Proxied> {
    pb::filesystem_service_client::FilesystemServiceClient::with_interceptor(ch.clone(), h)
}

/// Health through the proxy until the ready predicate holds (bounded, 30 s:
/// the kernel may start slowly on a loaded machine).
pub async fn wait_ready(ch: &Channel, proxy_token: &str) -> pb::HealthResponse {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = health(ch, ProxyHeaders::sdk(proxy_token))
            .health(pb::HealthRequest {})
            .await
        {
            let r = r.into_inner();
            if r.agent_ready && r.kernel_ready && !r.sandbox_id.is_empty() {
                return r;
            }
        }
        assert!(
            Instant::now() < deadline,
            "agent never became ready through the proxy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The HTTP status, error code and message of an SDK error.
pub fn err_parts<E>(
    e: &lmv::error::SdkError<E, lmv::config::http::HttpResponse>,
) -> (u16, String, String)
where
    E: lmv::error::ProvideErrorMetadata,
{
    use lmv::error::ProvideErrorMetadata as _;
    let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
    (
        status,
        e.code().unwrap_or("").to_string(),
        e.message().unwrap_or("").to_string(),
    )
}

/// The header `name` of an SDK error's raw response.
pub fn err_header<E>(
    e: &lmv::error::SdkError<E, lmv::config::http::HttpResponse>,
    name: &str,
) -> Option<String> {
    e.raw_response()
        .and_then(|r| r.headers().get(name))
        .map(str::to_string)
}

/// An `aws-sdk-efs` client for the emulator's EFS, signed with the
/// emulator's key id and `secret` (retries off).
pub fn efs_client(emulator: &Emulator, secret: &str) -> aws_sdk_efs::Client {
    use aws_sdk_efs::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
    let conf = aws_sdk_efs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            &emulator.access_key().id,
            secret,
            None,
            None,
            "static-test",
        ))
        .endpoint_url(emulator.endpoint_url())
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_efs::Client::from_conf(conf)
}
