//! Typed RPCs of the wider surface: background processes (Connect,
//! SendSignal, List), directory watches and code-context management.

use std::time::Duration;

use super::{AgentClient, AgentConn, AgentStream, ConnectRetry, MAX_MESSAGE_BYTES, Svc};
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::code_service_client::CodeServiceClient;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::pb::process_service_client::ProcessServiceClient;
use crate::pb::pty_service_client::PtyServiceClient;

agent_clients!(PtyServiceClient);

/// The unary RPCs.
impl AgentConn {
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

    /// `CodeService/ListContexts`.
    pub(crate) async fn list_contexts(
        &self,
        timeout: Duration,
    ) -> Result<pb::ListContextsResponse, SandboxError> {
        let rpc = |mut c: CodeServiceClient<Svc>, r| async move { c.list_contexts(r).await };
        self.unary(
            CallContext::new("code.list_contexts"),
            timeout,
            ConnectRetry::Ladder,
            pb::ListContextsRequest {},
            rpc,
        )
        .await
    }

    /// `CodeService/RestartContext`.
    pub(crate) async fn restart_context(
        &self,
        request: pb::RestartContextRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: CodeServiceClient<Svc>, r| async move { c.restart_context(r).await };
        self.unary(
            CallContext::new("code.restart_context"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }
}

/// The terminal RPCs.
impl AgentConn {
    /// `PtyService/SendInput`.
    pub(crate) async fn pty_send_input(
        &self,
        request: pb::SendInputRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: PtyServiceClient<Svc>, r| async move { c.send_input(r).await };
        self.unary(
            CallContext::new("pty.send_input"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `PtyService/Resize`.
    pub(crate) async fn pty_resize(
        &self,
        request: pb::ResizeRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: PtyServiceClient<Svc>, r| async move { c.resize(r).await };
        self.unary(
            CallContext::new("pty.resize"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `PtyService/Kill`.
    pub(crate) async fn pty_kill(
        &self,
        request: pb::KillPtyRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: PtyServiceClient<Svc>, r| async move { c.kill(r).await };
        self.unary(
            CallContext::new("pty.kill"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `PtyService/Create`, without a deadline (a terminal lasts until it
    /// ends; the agent enforces the session's own timeout).
    pub(crate) async fn pty_create(
        &self,
        request: pb::PtyStart,
    ) -> Result<AgentStream<pb::PtyServerMessage>, SandboxError> {
        self.open_stream(CallContext::new("pty.create"), None, || {
            let mut client = self.client::<PtyServiceClient<Svc>>();
            let request = request.clone();
            async move { client.create(request).await }
        })
        .await
    }

    /// `PtyService/Connect`, without a deadline.
    pub(crate) async fn pty_connect(
        &self,
        request: pb::ConnectRequest,
    ) -> Result<AgentStream<pb::PtyServerMessage>, SandboxError> {
        self.open_stream(CallContext::new("pty.connect"), None, || {
            let mut client = self.client::<PtyServiceClient<Svc>>();
            async move { client.connect(request).await }
        })
        .await
    }
}

/// The streaming RPCs.
impl AgentConn {
    /// `ProcessService/Connect`; `total` bounds the whole stream.
    pub(crate) async fn connect_process(
        &self,
        request: pb::ConnectRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(CallContext::new("commands.connect"), total, || {
            let mut client = self.client::<ProcessServiceClient<Svc>>();
            async move { client.connect(request).await }
        })
        .await
    }

    /// `FilesystemService/WatchDir`, without a deadline (a watch lasts until
    /// it is stopped).
    pub(crate) async fn watch_dir(
        &self,
        request: pb::WatchDirRequest,
    ) -> Result<AgentStream<pb::WatchDirResponse>, SandboxError> {
        self.open_stream(CallContext::filesystem("files.watch_dir"), None, || {
            let mut client = self.client::<FilesystemServiceClient<Svc>>();
            let request = request.clone();
            async move { client.watch_dir(request).await }
        })
        .await
    }
}
