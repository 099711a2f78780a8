//! `ConfigureService`: the optional agent-side sections (see
//! `crate::configure`).

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::configure_service_client::ConfigureServiceClient;
use crate::transport::{AgentConn, ConnectRetry};

impl AgentConn {
    /// `ConfigureService/Configure`. A resend carries the same
    /// `request_id`, so the agent can recognise it.
    pub(crate) async fn configure(
        &self,
        request: pb::ConfigureRequest,
        timeout: Duration,
    ) -> Result<pb::ConfigureResponse, SandboxError> {
        let rpc = |mut c: ConfigureServiceClient<Svc>, r| async move { c.configure(r).await };
        self.unary(
            CallContext::new("configure"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `ConfigureService/ConfigureStatus`.
    pub(crate) async fn configure_status(
        &self,
        timeout: Duration,
    ) -> Result<pb::ConfigureStatusResponse, SandboxError> {
        let rpc =
            |mut c: ConfigureServiceClient<Svc>, r| async move { c.configure_status(r).await };
        self.unary(
            CallContext::new("configure_status"),
            timeout,
            ConnectRetry::Ladder,
            pb::ConfigureStatusRequest {},
            rpc,
        )
        .await
    }
}
