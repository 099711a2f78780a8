//! Typed RPCs over [`AgentConn`]: one method per agent call the SDK makes,
//! each naming its feature and whether NOT_FOUND means a missing file.

use std::time::Duration;

use super::{AgentConn, AgentStream, ConnectRetry, MAX_MESSAGE_BYTES};
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::code_service_client::CodeServiceClient;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::pb::health_service_client::HealthServiceClient;
use crate::pb::lifecycle_service_client::LifecycleServiceClient;
use crate::pb::process_service_client::ProcessServiceClient;

/// Health's response header naming why the agent's kernel could not start.
const KERNEL_FAILURE_HEADER: &str = "rayito-kernel-failure";

macro_rules! client {
    ($conn:expr, $client:ident) => {
        $client::with_interceptor($conn.channel(), $conn.interceptor())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    };
}

impl AgentConn {
    /// `HealthService/Health`. `connect_retry` is `Never` for the readiness
    /// probe, which has its own schedule.
    pub(crate) async fn health(
        &self,
        timeout: Duration,
        connect_retry: ConnectRetry,
    ) -> Result<pb::HealthResponse, SandboxError> {
        self.call(
            CallContext::new("health"),
            Some(timeout),
            connect_retry,
            || {
                let mut client = client!(self, HealthServiceClient);
                async move { client.health(pb::HealthRequest {}).await }
            },
        )
        .await
    }

    /// `HealthService/Health` for the readiness wait: the response and the
    /// agent's `rayito-kernel-failure` header (why its kernel could not
    /// start), which ends the wait at once. Never retried on connect (the
    /// wait has its own schedule).
    pub(crate) async fn health_with_kernel_failure(
        &self,
        timeout: Duration,
    ) -> Result<(pb::HealthResponse, Option<String>), SandboxError> {
        self.call(
            CallContext::new("health"),
            Some(timeout),
            ConnectRetry::Never,
            || {
                let mut client = client!(self, HealthServiceClient);
                async move {
                    let response = client.health(pb::HealthRequest {}).await?;
                    let failure = response
                        .metadata()
                        .get(KERNEL_FAILURE_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    Ok(tonic::Response::new((response.into_inner(), failure)))
                }
            },
        )
        .await
    }

    /// `ProcessService/Start`; `total` bounds the whole stream.
    pub(crate) async fn start_process(
        &self,
        request: pb::StartRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(CallContext::new("commands.run"), total, || {
            let mut client = client!(self, ProcessServiceClient);
            let request = request.clone();
            async move { client.start(request).await }
        })
        .await
    }

    /// `ProcessService/SendInput`.
    pub(crate) async fn send_input(
        &self,
        request: pb::SendInputRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        self.call(
            CallContext::new("commands.send_stdin"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, ProcessServiceClient);
                let request = request.clone();
                async move { client.send_input(request).await }
            },
        )
        .await
        .map(|_| ())
    }

    /// `ProcessService/CloseStdin`.
    pub(crate) async fn close_stdin(
        &self,
        request: pb::CloseStdinRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        self.call(
            CallContext::new("commands.close_stdin"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, ProcessServiceClient);
                async move { client.close_stdin(request).await }
            },
        )
        .await
        .map(|_| ())
    }

    /// `ProcessService/List`, used to prove an access token on connect
    /// (Health is anonymous; this is the cheapest authenticated call).
    pub(crate) async fn verify_access(&self, timeout: Duration) -> Result<(), SandboxError> {
        self.call(
            CallContext::new("connect"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, ProcessServiceClient);
                async move { client.list(pb::ListRequest {}).await }
            },
        )
        .await
        .map(|_| ())
    }

    /// `FilesystemService/Read`; `total` bounds the whole stream.
    pub(crate) async fn read_file(
        &self,
        request: pb::ReadRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ReadResponse>, SandboxError> {
        self.open_stream(CallContext::filesystem("files.read"), total, || {
            let mut client = client!(self, FilesystemServiceClient);
            let request = request.clone();
            async move { client.read(request).await }
        })
        .await
    }

    /// `FilesystemService/Write` with every message of the stream prepared.
    pub(crate) async fn write_files(
        &self,
        messages: Vec<pb::WriteRequest>,
        timeout: Duration,
    ) -> Result<pb::WriteResponse, SandboxError> {
        self.call(
            CallContext::filesystem("files.write"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let messages = tokio_stream::iter(messages.clone());
                async move { client.write(messages).await }
            },
        )
        .await
    }

    /// `FilesystemService/Write` fed from a stream the caller produces: sent
    /// once, never replayed (see `call_once`), with no deadline of its own
    /// because its size is unknown.
    pub(crate) async fn write_stream<S>(
        &self,
        messages: S,
    ) -> Result<pb::WriteResponse, SandboxError>
    where
        S: futures_util::Stream<Item = pb::WriteRequest> + Send + 'static,
    {
        let mut client = client!(self, FilesystemServiceClient);
        self.call_once(
            CallContext::filesystem("files.write"),
            client.write(messages),
        )
        .await
    }

    /// `FilesystemService/Stat`, for the SDK call named `feature`.
    pub(crate) async fn stat(
        &self,
        request: pb::StatRequest,
        feature: &'static str,
        timeout: Duration,
    ) -> Result<pb::StatResponse, SandboxError> {
        self.call(
            CallContext::filesystem(feature),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let request = request.clone();
                async move { client.stat(request).await }
            },
        )
        .await
    }

    /// `FilesystemService/ListDir`.
    pub(crate) async fn list_dir(
        &self,
        request: pb::ListDirRequest,
        timeout: Duration,
    ) -> Result<pb::ListDirResponse, SandboxError> {
        self.call(
            CallContext::filesystem("files.list"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let request = request.clone();
                async move { client.list_dir(request).await }
            },
        )
        .await
    }

    /// `FilesystemService/MakeDir`; the raw outcome, so that the caller can
    /// turn ALREADY_EXISTS into `false`.
    pub(crate) async fn make_dir(
        &self,
        request: pb::MakeDirRequest,
        timeout: Duration,
    ) -> Result<pb::MakeDirResponse, SandboxError> {
        self.call(
            CallContext::filesystem("files.make_dir"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let request = request.clone();
                async move { client.make_dir(request).await }
            },
        )
        .await
    }

    /// `FilesystemService/Remove`.
    pub(crate) async fn remove(
        &self,
        request: pb::RemoveRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        self.call(
            CallContext::filesystem("files.remove"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let request = request.clone();
                async move { client.remove(request).await }
            },
        )
        .await
        .map(|_| ())
    }

    /// `FilesystemService/Move`.
    pub(crate) async fn move_path(
        &self,
        request: pb::MoveRequest,
        timeout: Duration,
    ) -> Result<pb::MoveResponse, SandboxError> {
        self.call(
            CallContext::filesystem("files.rename"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, FilesystemServiceClient);
                let request = request.clone();
                async move { client.r#move(request).await }
            },
        )
        .await
    }

    /// `CodeService/Execute`; `total` bounds the whole stream.
    pub(crate) async fn execute(
        &self,
        request: pb::ExecuteRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ExecuteEvent>, SandboxError> {
        self.open_stream(CallContext::new("run_code"), total, || {
            let mut client = client!(self, CodeServiceClient);
            let request = request.clone();
            async move { client.execute(request).await }
        })
        .await
    }

    /// `CodeService/CreateContext`.
    pub(crate) async fn create_context(
        &self,
        request: pb::CreateContextRequest,
        timeout: Duration,
    ) -> Result<pb::CreateContextResponse, SandboxError> {
        self.call(
            CallContext::new("code.create_context"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, CodeServiceClient);
                let request = request.clone();
                async move { client.create_context(request).await }
            },
        )
        .await
    }

    /// `CodeService/DestroyContext`.
    pub(crate) async fn destroy_context(
        &self,
        request: pb::DestroyContextRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        self.call(
            CallContext::new("code.remove_context"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, CodeServiceClient);
                let request = request.clone();
                async move { client.destroy_context(request).await }
            },
        )
        .await
        .map(|_| ())
    }

    /// `LifecycleService/SetTimeout`.
    pub(crate) async fn set_timeout(
        &self,
        request: pb::SetTimeoutRequest,
        timeout: Duration,
    ) -> Result<pb::LifecycleState, SandboxError> {
        self.call(
            CallContext::new("set_timeout"),
            Some(timeout),
            ConnectRetry::Ladder,
            || {
                let mut client = client!(self, LifecycleServiceClient);
                async move { client.set_timeout(request).await }
            },
        )
        .await
    }
}
