//! Typed RPCs over [`AgentConn`]: one method per agent call the SDK makes,
//! each naming its feature and whether NOT_FOUND means a missing file. The
//! unary ones all go through [`AgentConn::unary`].

use std::future::Future;
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Response, Status};

use super::grpc_only::GrpcOnly;
use super::tokens::AuthInterceptor;
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

/// The service every generated client runs on: the channel, the
/// grpc-status check, and the token interceptor.
type Svc = InterceptedService<GrpcOnly<Channel>, AuthInterceptor>;

/// A generated client, opened on a connection with the message limits.
trait AgentClient {
    fn open(service: Svc) -> Self;
}

macro_rules! agent_clients {
    ($($client:ident),+ $(,)?) => {$(
        impl AgentClient for $client<Svc> {
            fn open(service: Svc) -> Self {
                $client::new(service)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES)
            }
        }
    )+};
}

agent_clients!(
    CodeServiceClient,
    FilesystemServiceClient,
    HealthServiceClient,
    LifecycleServiceClient,
    ProcessServiceClient,
);

impl AgentConn {
    fn client<C: AgentClient>(&self) -> C {
        C::open(InterceptedService::new(self.channel(), self.interceptor()))
    }

    /// One unary RPC: `rpc` sends `request` on a fresh client, inside the
    /// transport's retries (see `call`), bounded by `timeout` per attempt.
    async fn unary<C, Req, Resp, Fut>(
        &self,
        ctx: CallContext,
        timeout: Duration,
        connect_retry: ConnectRetry,
        request: Req,
        rpc: impl Fn(C, Req) -> Fut,
    ) -> Result<Resp, SandboxError>
    where
        C: AgentClient,
        Req: Clone,
        Fut: Future<Output = Result<Response<Resp>, Status>>,
    {
        self.call(ctx, Some(timeout), connect_retry, || {
            rpc(self.client(), request.clone())
        })
        .await
    }
}

/// The unary RPCs.
impl AgentConn {
    /// `HealthService/Health`. `connect_retry` is `Never` for the readiness
    /// probe, which has its own schedule.
    pub(crate) async fn health(
        &self,
        timeout: Duration,
        connect_retry: ConnectRetry,
    ) -> Result<pb::HealthResponse, SandboxError> {
        let ctx = CallContext::new("health");
        self.unary(
            ctx,
            timeout,
            connect_retry,
            pb::HealthRequest {},
            |mut c: HealthServiceClient<Svc>, r| async move { c.health(r).await },
        )
        .await
    }

    /// `HealthService/Health` for the reconnect poller: no ladder and no
    /// reconnect of its own (the poller is the reconnect).
    pub(crate) async fn probe_health(
        &self,
        timeout: Duration,
    ) -> Result<pb::HealthResponse, SandboxError> {
        let mut attempt = || {
            let mut client = self.client::<HealthServiceClient<Svc>>();
            async move { client.health(pb::HealthRequest {}).await }
        };
        self.call_inner(
            CallContext::new("health"),
            Some(timeout),
            ConnectRetry::Never,
            &mut attempt,
        )
        .await
        .map_err(|(err, _cut)| err)
    }

    /// `HealthService/Health` for the readiness wait: the response and the
    /// agent's `rayito-kernel-failure` header (why its kernel could not
    /// start), which ends the wait at once. Never retried on connect (the
    /// wait has its own schedule).
    pub(crate) async fn health_with_kernel_failure(
        &self,
        timeout: Duration,
    ) -> Result<(pb::HealthResponse, Option<String>), SandboxError> {
        self.unary(
            CallContext::new("health"),
            timeout,
            ConnectRetry::Never,
            pb::HealthRequest {},
            |mut c: HealthServiceClient<Svc>, r| async move {
                let response = c.health(r).await?;
                let failure = response
                    .metadata()
                    .get(KERNEL_FAILURE_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                Ok(Response::new((response.into_inner(), failure)))
            },
        )
        .await
    }

    /// `ProcessService/SendInput`.
    pub(crate) async fn send_input(
        &self,
        request: pb::SendInputRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: ProcessServiceClient<Svc>, r| async move { c.send_input(r).await };
        self.unary(
            CallContext::new("commands.send_stdin"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
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
        let rpc = |mut c: ProcessServiceClient<Svc>, r| async move { c.close_stdin(r).await };
        self.unary(
            CallContext::new("commands.close_stdin"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `ProcessService/List`, used to prove an access token on connect
    /// (Health is anonymous; this is the cheapest authenticated call).
    pub(crate) async fn verify_access(&self, timeout: Duration) -> Result<(), SandboxError> {
        let rpc = |mut c: ProcessServiceClient<Svc>, r| async move { c.list(r).await };
        self.unary(
            CallContext::new("connect"),
            timeout,
            ConnectRetry::Ladder,
            pb::ListRequest {},
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `FilesystemService/Write` with every message of the stream prepared.
    pub(crate) async fn write_files(
        &self,
        messages: Vec<pb::WriteRequest>,
        timeout: Duration,
    ) -> Result<pb::WriteResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move {
            c.write(tokio_stream::iter(r)).await
        };
        self.unary(
            CallContext::filesystem("files.write"),
            timeout,
            ConnectRetry::Ladder,
            messages,
            rpc,
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
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.stat(r).await };
        self.unary(
            CallContext::filesystem(feature),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/ListDir`.
    pub(crate) async fn list_dir(
        &self,
        request: pb::ListDirRequest,
        timeout: Duration,
    ) -> Result<pb::ListDirResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.list_dir(r).await };
        self.unary(
            CallContext::filesystem("files.list"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
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
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.make_dir(r).await };
        self.unary(
            CallContext::filesystem("files.make_dir"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/Remove`.
    pub(crate) async fn remove(
        &self,
        request: pb::RemoveRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.remove(r).await };
        self.unary(
            CallContext::filesystem("files.remove"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
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
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.r#move(r).await };
        self.unary(
            CallContext::filesystem("files.rename"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `CodeService/CreateContext`.
    pub(crate) async fn create_context(
        &self,
        request: pb::CreateContextRequest,
        timeout: Duration,
    ) -> Result<pb::CreateContextResponse, SandboxError> {
        let rpc = |mut c: CodeServiceClient<Svc>, r| async move { c.create_context(r).await };
        self.unary(
            CallContext::new("code.create_context"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `CodeService/DestroyContext`.
    pub(crate) async fn destroy_context(
        &self,
        request: pb::DestroyContextRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: CodeServiceClient<Svc>, r| async move { c.destroy_context(r).await };
        self.unary(
            CallContext::new("code.remove_context"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
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
        let rpc = |mut c: LifecycleServiceClient<Svc>, r| async move { c.set_timeout(r).await };
        self.unary(
            CallContext::new("set_timeout"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }
}

/// The streaming RPCs.
impl AgentConn {
    /// `ProcessService/Start`; `total` bounds the whole stream.
    pub(crate) async fn start_process(
        &self,
        request: pb::StartRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(
            CallContext::new("commands.run"),
            total,
            ConnectRetry::LadderNoReplay,
            || {
                let mut client = self.client::<ProcessServiceClient<Svc>>();
                let request = request.clone();
                async move { client.start(request).await }
            },
        )
        .await
    }

    /// `ProcessService/Connect`: the events of a running (or just ended)
    /// process from `from_seq` on; `total` bounds the whole stream.
    /// Idempotent, so a cut before its first message is sent again.
    pub(crate) async fn connect_process(
        &self,
        request: pb::ConnectRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(
            CallContext::new("commands.run"),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<ProcessServiceClient<Svc>>();
                async move { client.connect(request).await }
            },
        )
        .await
    }

    /// `FilesystemService/Read`; `total` bounds the whole stream.
    pub(crate) async fn read_file(
        &self,
        request: pb::ReadRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ReadResponse>, SandboxError> {
        self.open_stream(
            CallContext::filesystem("files.read"),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<FilesystemServiceClient<Svc>>();
                let request = request.clone();
                async move { client.read(request).await }
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
        let mut client = self.client::<FilesystemServiceClient<Svc>>();
        self.call_once(
            CallContext::filesystem("files.write"),
            client.write(messages),
        )
        .await
    }

    /// `CodeService/Execute`; `total` bounds the whole stream.
    pub(crate) async fn execute(
        &self,
        request: pb::ExecuteRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ExecuteEvent>, SandboxError> {
        self.open_stream(
            CallContext::new("run_code"),
            total,
            ConnectRetry::LadderNoReplay,
            || {
                let mut client = self.client::<CodeServiceClient<Svc>>();
                let request = request.clone();
                async move { client.execute(request).await }
            },
        )
        .await
    }

    /// `CodeService/Reattach`: the events of a running (or just ended)
    /// execution from `from_seq` on; `total` bounds the whole stream.
    /// Idempotent (it only reads), so a cut before its first message is
    /// sent again.
    pub(crate) async fn reattach(
        &self,
        request: pb::ReattachRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ExecuteEvent>, SandboxError> {
        self.open_stream(
            CallContext::new("run_code"),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<CodeServiceClient<Svc>>();
                let request = request.clone();
                async move { client.reattach(request).await }
            },
        )
        .await
    }
}

// Background commands, watch, contexts: kept apart to ease merges.
mod surface;
