//! `FilesystemService`: files, directories, reads, writes and watches.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
    /// `FilesystemService/Write` with every message of the stream prepared.
    pub(crate) async fn write_files(
        &self,
        messages: Vec<pb::WriteRequest>,
        timeout: Duration,
    ) -> Result<pb::WriteResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move {
            c.write(tokio_stream::iter(r)).await
        };
        self.unary(
            CallContext::filesystem("files.write"),
            timeout,
            ConnectRetry::Ladder,
            messages,
            rpc,
        )
        .await
    }

    /// `FilesystemService/Stat`, for the SDK call named `feature`.
    pub(crate) async fn stat(
        &self,
        request: pb::StatRequest,
        feature: &'static str,
        timeout: Duration,
    ) -> Result<pb::StatResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.stat(r).await };
        self.unary(
            CallContext::filesystem(feature),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/ListDir`.
    pub(crate) async fn list_dir(
        &self,
        request: pb::ListDirRequest,
        timeout: Duration,
    ) -> Result<pb::ListDirResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.list_dir(r).await };
        self.unary(
            CallContext::filesystem("files.list"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/MakeDir`; the raw outcome, so that the caller can
    /// turn ALREADY_EXISTS into `false`.
    pub(crate) async fn make_dir(
        &self,
        request: pb::MakeDirRequest,
        timeout: Duration,
    ) -> Result<pb::MakeDirResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.make_dir(r).await };
        self.unary(
            CallContext::filesystem("files.make_dir"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/Remove`.
    pub(crate) async fn remove(
        &self,
        request: pb::RemoveRequest,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.remove(r).await };
        self.unary(
            CallContext::filesystem("files.remove"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
        .map(|_| ())
    }

    /// `FilesystemService/Move`.
    pub(crate) async fn move_path(
        &self,
        request: pb::MoveRequest,
        timeout: Duration,
    ) -> Result<pb::MoveResponse, SandboxError> {
        let rpc = |mut c: FilesystemServiceClient<Svc>, r| async move { c.r#move(r).await };
        self.unary(
            CallContext::filesystem("files.rename"),
            timeout,
            ConnectRetry::Ladder,
            request,
            rpc,
        )
        .await
    }

    /// `FilesystemService/Read`; `total` bounds the whole stream.
    pub(crate) async fn read_file(
        &self,
        request: pb::ReadRequest,
        total: Option<Duration>,
    ) -> Result<AgentStream<pb::ReadResponse>, SandboxError> {
        self.open_stream(
            CallContext::filesystem("files.read"),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<FilesystemServiceClient<Svc>>();
                let request = request.clone();
                async move { client.read(request).await }
            },
        )
        .await
    }

    /// `FilesystemService/Write` fed from a stream the caller produces: sent
    /// once, never replayed (see `call_once`), with no deadline of its own
    /// because its size is unknown.
    pub(crate) async fn write_stream<S>(
        &self,
        messages: S,
    ) -> Result<pb::WriteResponse, SandboxError>
    where
        S: futures_util::Stream<Item = pb::WriteRequest> + Send + 'static,
    {
        let mut client = self.client::<FilesystemServiceClient<Svc>>();
        self.call_once(
            CallContext::filesystem("files.write"),
            client.write(messages),
        )
        .await
    }

    /// `FilesystemService/WatchDir`, without a deadline (a watch lasts until
    /// it is stopped).
    pub(crate) async fn watch_dir(
        &self,
        request: pb::WatchDirRequest,
    ) -> Result<AgentStream<pb::WatchDirResponse>, SandboxError> {
        self.open_stream(
            CallContext::filesystem("files.watch_dir"),
            None,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<FilesystemServiceClient<Svc>>();
                let request = request.clone();
                async move { client.watch_dir(request).await }
            },
        )
        .await
    }
}
