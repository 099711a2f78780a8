//! `PtyService`: terminals.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::pty_service_client::PtyServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

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
        self.open_stream(
            CallContext::new("pty.create"),
            None,
            ConnectRetry::LadderNoReplay,
            || {
                let mut client = self.client::<PtyServiceClient<Svc>>();
                let request = request.clone();
                async move { client.create(request).await }
            },
        )
        .await
    }

    /// `PtyService/Connect`, without a deadline.
    pub(crate) async fn pty_connect(
        &self,
        request: pb::ConnectRequest,
    ) -> Result<AgentStream<pb::PtyServerMessage>, SandboxError> {
        self.open_stream(
            CallContext::new("pty.connect"),
            None,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<PtyServiceClient<Svc>>();
                async move { client.connect(request).await }
            },
        )
        .await
    }
}
