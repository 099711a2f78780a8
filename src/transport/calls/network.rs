//! `NetworkService`: the sandbox's egress policy (docs/network.md).

use std::time::Duration;

use tonic::{Code, Response};

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::network_service_client::NetworkServiceClient;
use crate::transport::{AgentConn, ConnectRetry};

/// The answer of a network call: the state, or the agent's
/// FAILED_PRECONDITION (it cannot apply a policy to this sandbox), which the
/// caller turns into `Unimplemented` with its own reason.
pub(crate) enum NetworkAnswer {
    State(pb::NetworkState),
    Precondition,
}

/// FAILED_PRECONDITION is an answer, not a failure: the SDK maps it to
/// `Unimplemented` (the spec's table), not to the generic `InvalidArgument`.
fn answer(
    result: Result<Response<pb::NetworkState>, tonic::Status>,
) -> Result<Response<NetworkAnswer>, tonic::Status> {
    match result {
        Ok(state) => Ok(Response::new(NetworkAnswer::State(state.into_inner()))),
        Err(status) if status.code() == Code::FailedPrecondition => {
            Ok(Response::new(NetworkAnswer::Precondition))
        }
        Err(status) => Err(status),
    }
}

impl AgentConn {
    /// `NetworkService/UpdateNetwork`: replaces the whole policy. An agent
    /// without the service answers `Unimplemented` (feature `update_network`).
    pub(crate) async fn update_network(
        &self,
        policy: pb::NetworkPolicy,
        timeout: Duration,
    ) -> Result<NetworkAnswer, SandboxError> {
        self.unary(
            CallContext::new("update_network"),
            timeout,
            ConnectRetry::Ladder,
            pb::UpdateNetworkRequest {
                policy: Some(policy),
            },
            |mut c: NetworkServiceClient<Svc>, r| async move { answer(c.update_network(r).await) },
        )
        .await
    }

    /// `NetworkService/GetNetwork`. An agent without the service answers
    /// `Unimplemented` (feature `get_network`).
    pub(crate) async fn get_network(
        &self,
        timeout: Duration,
    ) -> Result<NetworkAnswer, SandboxError> {
        self.unary(
            CallContext::new("get_network"),
            timeout,
            ConnectRetry::Ladder,
            pb::GetNetworkRequest {},
            |mut c: NetworkServiceClient<Svc>, r| async move { answer(c.get_network(r).await) },
        )
        .await
    }
}
