//! `rayito.v1.NetworkService`: replace and read the egress policy.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::Egress;
use super::policy::Policy;
use crate::pb;

/// FAILED_PRECONDITION of UpdateNetwork on a sandbox without enforcement.
pub(crate) const NOT_ENFORCING: &str = "this sandbox was started without egress enforcement \
     (no network.enforce in its run payload, or the host cannot enforce); create it with a \
     restricting network policy";
/// INVALID_ARGUMENT for an operator's proxy (not supported yet).
pub(crate) const NO_EGRESS_PROXY: &str = "egress_proxy is not supported by this agent";

/// `rayito.v1.NetworkService`.
#[derive(Clone, Debug)]
pub(crate) struct NetworkServiceImpl {
    pub(crate) egress: Arc<Egress>,
}

#[tonic::async_trait]
impl pb::network_service_server::NetworkService for NetworkServiceImpl {
    async fn update_network(
        &self,
        request: Request<pb::UpdateNetworkRequest>,
    ) -> Result<Response<pb::NetworkState>, Status> {
        let egress = &self.egress;
        let Some(active) = egress.active.get() else {
            return Err(Status::failed_precondition(NOT_ENFORCING));
        };
        let policy = request.into_inner().policy.unwrap_or_default();
        if policy.egress_proxy.is_some() {
            return Err(Status::invalid_argument(NO_EGRESS_PROXY));
        }
        let parsed =
            Policy::parse(policy.allow_out, policy.deny_out).map_err(Status::invalid_argument)?;
        // New connections only: open tunnels keep going.
        active.shared.set_policy(parsed);
        Ok(Response::new(egress.state()))
    }

    async fn get_network(
        &self,
        _request: Request<pb::GetNetworkRequest>,
    ) -> Result<Response<pb::NetworkState>, Status> {
        Ok(Response::new(self.egress.state()))
    }
}
