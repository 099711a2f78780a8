//! `ProcessService`: commands, their output streams, stdin and signals.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::process_service_client::ProcessServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
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

    /// `ProcessService/Start`; `total` bounds the whole stream, `opening`
    /// (when set) the wait until the agent says the process started.
    pub(crate) async fn start_process(
        &self,
        request: pb::StartRequest,
        (total, opening): (Option<Duration>, Option<Duration>),
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream_within(
            CallContext::new("commands.run"),
            (total, opening),
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
    /// process from `from_seq` on (errors name `feature`); `total` bounds
    /// the whole stream. Idempotent, so a cut before its first message is
    /// sent again.
    pub(crate) async fn connect_process(
        &self,
        request: pb::ConnectRequest,
        total: Option<Duration>,
        feature: &'static str,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(
            CallContext::new(feature),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<ProcessServiceClient<Svc>>();
                async move { client.connect(request).await }
            },
        )
        .await
    }

    /// `ProcessService/SendSignal`.
    pub(crate) async fn send_signal(
        &self,
        request: pb::SendSignalRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: ProcessServiceClient<Svc>, r| async move { c.send_signal(r).await };
        self.unary(
            CallContext::new("commands.kill"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `ProcessService/List`.
    pub(crate) async fn list_processes(
        &self,
        timeout: Duration,
    ) -> Result<pb::ListResponse, SandboxError> {
        let rpc = |mut c: ProcessServiceClient<Svc>, r| async move { c.list(r).await };
        self.unary(
            CallContext::new("commands.list"),
            timeout,
            ConnectRetry::Ladder,
            pb::ListRequest {},
            rpc,
        )
        .await
    }
}
