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
    agent_calls! {
        ConfigureServiceClient
        /// `ConfigureService/Configure`. A resend carries the same
        /// `request_id`, so the agent can recognise it.
        fn configure(pb::ConfigureRequest) -> pb::ConfigureResponse = configure,
            CallContext::new("configure");
        /// `ConfigureService/ConfigureStatus`.
        fn configure_status() -> pb::ConfigureStatusResponse = configure_status(pb::ConfigureStatusRequest {}),
            CallContext::new("configure_status");
    }
}
