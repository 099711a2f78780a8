//! `CodeService`: code cells and their contexts.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::code_service_client::CodeServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
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
