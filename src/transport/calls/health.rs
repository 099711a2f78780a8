//! `HealthService`: the anonymous readiness and liveness probes.

use std::time::Duration;

use tonic::Response;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::health_service_client::HealthServiceClient;
use crate::transport::{AgentConn, ConnectRetry};

/// Health's response header naming why the agent's kernel could not start.
const KERNEL_FAILURE_HEADER: &str = rayito_proto::tokens::header::KERNEL_FAILURE;

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
}

impl AgentConn {
    agent_calls! {
        HealthServiceClient
        /// `HealthService/Metrics` (the agent reads CPU over 100 ms). An agent
        /// without it answers `Unimplemented` with the feature `get_metrics`.
        fn metrics() -> pb::MetricsResponse = metrics(pb::MetricsRequest {}),
            CallContext::new("get_metrics");
        /// `HealthService/MetricsHistory`. An agent without it answers
        /// `Unimplemented` with the feature `get_metrics_history`.
        fn metrics_history(pb::MetricsHistoryRequest) -> pb::MetricsHistoryResponse = metrics_history,
            CallContext::new("get_metrics_history");
    }
}
