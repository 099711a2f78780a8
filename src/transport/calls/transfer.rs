//! `FilesystemService`'s S3-staged transfers: StartImport, StartExport,
//! GetTransfer, WatchTransfer, CancelTransfer (feature `s3`).

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
    agent_calls! {
        FilesystemServiceClient
        /// `FilesystemService/StartImport`: never replayed after it was sent
        /// (a second import of the same object would race the first).
        fn start_import(pb::StartImportRequest, feature) -> pb::StartTransferResponse = start_import,
            CallContext::filesystem, LadderNoReplay;
        /// `FilesystemService/StartExport`.
        fn start_export(pb::StartExportRequest, feature) -> pb::StartTransferResponse = start_export,
            CallContext::filesystem, LadderNoReplay;
    }

    /// `FilesystemService/GetTransfer` (the empty id is the capability probe).
    pub(crate) async fn get_transfer(
        &self,
        transfer_id: &str,
        feature: &'static str,
        timeout: Duration,
    ) -> Result<pb::TransferState, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.get_transfer(r).await };
        self.unary(
            CallContext::new(feature),
            timeout,
            ConnectRetry::Ladder,
            pb::GetTransferRequest {
                transfer_id: transfer_id.to_owned(),
            },
            rpc,
        )
        .await
    }

    /// `FilesystemService/CancelTransfer` (idempotent).
    pub(crate) async fn cancel_transfer(
        &self,
        transfer_id: &str,
        feature: &'static str,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc =
            |mut c: FilesystemServiceClient<Svc>, r| async move { c.cancel_transfer(r).await };
        self.unary(
            CallContext::new(feature),
            timeout,
            ConnectRetry::Ladder,
            pb::CancelTransferRequest {
                transfer_id: transfer_id.to_owned(),
            },
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `FilesystemService/WatchTransfer`, bounded by `total`.
    pub(crate) async fn watch_transfer(
        &self,
        transfer_id: &str,
        feature: &'static str,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::TransferEvent>, SandboxError> {
        let request = pb::WatchTransferRequest {
            transfer_id: transfer_id.to_owned(),
        };
        self.open_stream(
            CallContext::new(feature),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<FilesystemServiceClient<Svc>>();
                let request = request.clone();
                async move { client.watch_transfer(request).await }
            },
        )
        .await
    }
}
