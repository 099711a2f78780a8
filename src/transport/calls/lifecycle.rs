//! `LifecycleService`: the sandbox's timeout.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::lifecycle_service_client::LifecycleServiceClient;
use crate::transport::{AgentConn, ConnectRetry};

impl AgentConn {
    agent_calls! {
        LifecycleServiceClient
        /// `LifecycleService/SetTimeout`.
        fn set_timeout(pb::SetTimeoutRequest) -> pb::LifecycleState = set_timeout,
            CallContext::new("set_timeout");
    }
}
