//! `rayito.v1.ProcessService`: processes, their output rings and subscribers.
//! (First cut: the table exists so that terminate can kill; the RPCs follow.)

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::pb;
use crate::phase::PhaseCell;
use crate::sandbox::SandboxEnv;
use crate::state::Shared;

/// Every process the agent started.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    env: SandboxEnv,
    #[allow(dead_code)]
    phase: PhaseCell,
}

impl ProcessTable {
    pub(crate) fn new(env: SandboxEnv, phase: PhaseCell) -> Self {
        Self { env, phase }
    }

    /// Kills every process group.
    pub(crate) fn kill_all(&self) {
        self.env.kill_all();
    }
}

/// `rayito.v1.ProcessService`.
#[derive(Clone, Debug)]
pub(crate) struct ProcessServiceImpl {
    #[allow(dead_code)]
    pub(crate) shared: Arc<Shared>,
}

type EventStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<pb::ProcessEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::process_service_server::ProcessService for ProcessServiceImpl {
    type StartStream = EventStream;
    type ConnectStream = EventStream;

    async fn start(
        &self,
        _request: Request<pb::StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        Err(Status::unimplemented("Start is not implemented yet"))
    }

    async fn connect(
        &self,
        _request: Request<pb::ConnectRequest>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        Err(Status::unimplemented("Connect is not implemented yet"))
    }

    async fn send_input(
        &self,
        _request: Request<pb::SendInputRequest>,
    ) -> Result<Response<pb::SendInputResponse>, Status> {
        Err(Status::unimplemented("SendInput is not implemented yet"))
    }

    async fn close_stdin(
        &self,
        _request: Request<pb::CloseStdinRequest>,
    ) -> Result<Response<pb::CloseStdinResponse>, Status> {
        Err(Status::unimplemented("CloseStdin is not implemented yet"))
    }

    async fn send_signal(
        &self,
        _request: Request<pb::SendSignalRequest>,
    ) -> Result<Response<pb::SendSignalResponse>, Status> {
        Err(Status::unimplemented("SendSignal is not implemented yet"))
    }

    async fn list(
        &self,
        _request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        Err(Status::unimplemented("List is not implemented yet"))
    }
}
