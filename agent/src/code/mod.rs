//! The Code service: stateful kernels ("contexts") driven by a small driver
//! program the agent ships. (Being written: every RPC answers UNIMPLEMENTED.)

use std::pin::Pin;

use futures_util::Stream;
use tonic::{Request, Response, Status};

use crate::pb;
use crate::phase::PhaseCell;
use crate::sandbox::SandboxEnv;

/// The Code service of one agent. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CodeServiceImpl {
    #[allow(dead_code)]
    env: SandboxEnv,
    #[allow(dead_code)]
    phase: PhaseCell,
}

impl CodeServiceImpl {
    /// A service whose kernels run in `env` and whose live streams follow `phase`.
    pub fn new(env: SandboxEnv, phase: PhaseCell) -> Self {
        Self { env, phase }
    }

    /// Starts the default Python context in the background (called at `/run`).
    pub fn warm_up(&self) {}

    /// Whether the default kernel is ready (Health's `kernel_ready`).
    pub fn kernel_ready(&self) -> bool {
        true
    }

    /// Stops every kernel (called at `/terminate` and on drop of the agent).
    pub fn shutdown(&self) {}
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::ExecuteEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::code_service_server::CodeService for CodeServiceImpl {
    async fn create_context(
        &self,
        _request: Request<pb::CreateContextRequest>,
    ) -> Result<Response<pb::CreateContextResponse>, Status> {
        Err(Status::unimplemented(
            "CreateContext is not implemented yet",
        ))
    }

    type ExecuteStream = EventStream;

    async fn execute(
        &self,
        _request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        Err(Status::unimplemented("Execute is not implemented yet"))
    }

    type ReattachStream = EventStream;

    async fn reattach(
        &self,
        _request: Request<pb::ReattachRequest>,
    ) -> Result<Response<Self::ReattachStream>, Status> {
        Err(Status::unimplemented("Reattach is not implemented"))
    }

    async fn list_contexts(
        &self,
        _request: Request<pb::ListContextsRequest>,
    ) -> Result<Response<pb::ListContextsResponse>, Status> {
        Err(Status::unimplemented("ListContexts is not implemented yet"))
    }

    async fn destroy_context(
        &self,
        _request: Request<pb::DestroyContextRequest>,
    ) -> Result<Response<pb::DestroyContextResponse>, Status> {
        Err(Status::unimplemented(
            "DestroyContext is not implemented yet",
        ))
    }

    async fn restart_context(
        &self,
        _request: Request<pb::RestartContextRequest>,
    ) -> Result<Response<pb::RestartContextResponse>, Status> {
        Err(Status::unimplemented(
            "RestartContext is not implemented yet",
        ))
    }
}
