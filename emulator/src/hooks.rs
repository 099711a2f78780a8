//! The emulator side of the lifecycle hooks: HTTP/1.1 POSTs to an agent's
//! `/aws/lambda-microvms/runtime/v1/<hook>`, as AWS makes them
//! (docs/local.md, "Hooks"), plus the emulator's hooks token, which every
//! agent it starts requires (sandbox code on the host could reach the
//! hooks port otherwise).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use rayito_agent::hooks::HooksToken;

/// A lifecycle hook of the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hook {
    Run,
    Suspend,
    Resume,
    Terminate,
}

impl Hook {
    fn path(self) -> &'static str {
        match self {
            Hook::Run => "/aws/lambda-microvms/runtime/v1/run",
            Hook::Suspend => "/aws/lambda-microvms/runtime/v1/suspend",
            Hook::Resume => "/aws/lambda-microvms/runtime/v1/resume",
            Hook::Terminate => "/aws/lambda-microvms/runtime/v1/terminate",
        }
    }

    /// The capitalised name AWS uses in stateReason texts (`Run`, `Suspend`...).
    pub(crate) fn title(self) -> &'static str {
        match self {
            Hook::Run => "Run",
            Hook::Suspend => "Suspend",
            Hook::Resume => "Resume",
            Hook::Terminate => "Terminate",
        }
    }
}

/// Why a hook call did not produce an HTTP status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    #[error("the hook did not answer in time")]
    Timeout,
    #[error("the hook could not be reached")]
    Unreachable,
}

/// An HTTP/1.1 client for hooks; one request per connection, as rayd expects.
#[derive(Clone, Debug)]
pub(crate) struct HookClient {
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    token: HooksToken,
}

impl HookClient {
    pub(crate) fn new(timeout: Duration, token: HooksToken) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Self {
            client,
            timeout,
            token,
        }
    }

    /// The token the agents this client drives must require.
    pub(crate) fn token(&self) -> &HooksToken {
        &self.token
    }

    /// POSTs `hook` with an optional JSON body; answers the HTTP status. The
    /// response body is read and discarded.
    pub(crate) async fn post(
        &self,
        addr: SocketAddr,
        hook: Hook,
        json: Option<Vec<u8>>,
    ) -> Result<StatusCode, HookError> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}{}", hook.path()))
            .header(header::AUTHORIZATION, self.token.header_value());
        if json.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(json.unwrap_or_default())))
            .map_err(|_| HookError::Unreachable)?;
        let call = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|_| HookError::Unreachable)?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            Ok(status)
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| HookError::Timeout)?
    }
}

/// The `/run` body: `{"microvmId": .., "runHookPayload": ..}`.
pub(crate) fn run_body(microvm_id: &str, payload: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "microvmId": microvm_id,
        "runHookPayload": payload,
    }))
    .unwrap_or_default()
}
