//! `LifecycleService`: the sandbox's timeout.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::lifecycle_service_client::LifecycleServiceClient;
use crate::transport::{AgentConn, ConnectRetry};

impl AgentConn {
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
