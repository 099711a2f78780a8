//! `rayito.v1.FilesystemService`. (First cut: every RPC answers
//! UNIMPLEMENTED; Read/Write/Stat/ListDir/MakeDir/Remove/Move follow.)

use std::sync::Arc;

use tonic::{Request, Response, Status, Streaming};

use crate::pb;
use crate::state::Shared;

/// `rayito.v1.FilesystemService`.
#[derive(Clone, Debug)]
pub(crate) struct FilesystemServiceImpl {
    #[allow(dead_code)]
    pub(crate) shared: Arc<Shared>,
}

type BoxStream<T> = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<T, Status>> + Send>>;

fn not_local(rpc: &str) -> Status {
    Status::unimplemented(format!("{rpc} is not implemented by the local agent"))
}

#[tonic::async_trait]
impl pb::filesystem_service_server::FilesystemService for FilesystemServiceImpl {
    type ReadStream = BoxStream<pb::ReadResponse>;
    type WatchDirStream = BoxStream<pb::WatchDirResponse>;
    type CheckpointStream = BoxStream<pb::CheckpointEvent>;
    type RestoreStream = BoxStream<pb::RestoreEvent>;
    type WatchTransferStream = BoxStream<pb::TransferEvent>;

    async fn read(
        &self,
        _r: Request<pb::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        Err(not_local("Read"))
    }
    async fn write(
        &self,
        _r: Request<Streaming<pb::WriteRequest>>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        Err(not_local("Write"))
    }
    async fn stat(
        &self,
        _r: Request<pb::StatRequest>,
    ) -> Result<Response<pb::StatResponse>, Status> {
        Err(not_local("Stat"))
    }
    async fn list_dir(
        &self,
        _r: Request<pb::ListDirRequest>,
    ) -> Result<Response<pb::ListDirResponse>, Status> {
        Err(not_local("ListDir"))
    }
    async fn make_dir(
        &self,
        _r: Request<pb::MakeDirRequest>,
    ) -> Result<Response<pb::MakeDirResponse>, Status> {
        Err(not_local("MakeDir"))
    }
    async fn r#move(
        &self,
        _r: Request<pb::MoveRequest>,
    ) -> Result<Response<pb::MoveResponse>, Status> {
        Err(not_local("Move"))
    }
    async fn remove(
        &self,
        _r: Request<pb::RemoveRequest>,
    ) -> Result<Response<pb::RemoveResponse>, Status> {
        Err(not_local("Remove"))
    }
    async fn watch_dir(
        &self,
        _r: Request<pb::WatchDirRequest>,
    ) -> Result<Response<Self::WatchDirStream>, Status> {
        Err(not_local("WatchDir"))
    }
    async fn checkpoint(
        &self,
        _r: Request<pb::CheckpointRequest>,
    ) -> Result<Response<Self::CheckpointStream>, Status> {
        Err(not_local("Checkpoint"))
    }
    async fn restore(
        &self,
        _r: Request<pb::RestoreRequest>,
    ) -> Result<Response<Self::RestoreStream>, Status> {
        Err(not_local("Restore"))
    }
    async fn start_import(
        &self,
        _r: Request<pb::StartImportRequest>,
    ) -> Result<Response<pb::StartTransferResponse>, Status> {
        Err(not_local("StartImport"))
    }
    async fn start_export(
        &self,
        _r: Request<pb::StartExportRequest>,
    ) -> Result<Response<pb::StartTransferResponse>, Status> {
        Err(not_local("StartExport"))
    }
    async fn get_transfer(
        &self,
        _r: Request<pb::GetTransferRequest>,
    ) -> Result<Response<pb::TransferState>, Status> {
        Err(not_local("GetTransfer"))
    }
    async fn watch_transfer(
        &self,
        _r: Request<pb::WatchTransferRequest>,
    ) -> Result<Response<Self::WatchTransferStream>, Status> {
        Err(not_local("WatchTransfer"))
    }
    async fn cancel_transfer(
        &self,
        _r: Request<pb::CancelTransferRequest>,
    ) -> Result<Response<pb::CancelTransferResponse>, Status> {
        Err(not_local("CancelTransfer"))
    }
}
