//! `FilesystemService`: files, directories, reads, writes and watches.

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
        /// `FilesystemService/ListDir`.
        fn list_dir(pb::ListDirRequest) -> pb::ListDirResponse = list_dir,
            CallContext::filesystem("files.list");
        /// `FilesystemService/MakeDir`; the raw outcome, so that the caller can
        /// turn ALREADY_EXISTS into `false`.
        fn make_dir(pb::MakeDirRequest) -> pb::MakeDirResponse = make_dir,
            CallContext::filesystem("files.make_dir");
        /// `FilesystemService/Remove`.
        fn remove(pb::RemoveRequest) -> () = remove, CallContext::filesystem("files.remove");
        /// `FilesystemService/Move`.
        fn move_path(pb::MoveRequest) -> pb::MoveResponse = r#move,
            CallContext::filesystem("files.rename");
        /// `FilesystemService/Read`; `total` bounds the whole stream.
        stream fn read_file(pb::ReadRequest, total) -> pb::ReadResponse = read,
            CallContext::filesystem("files.read"), Ladder;
        /// `FilesystemService/WatchDir`, without a deadline (a watch lasts until
        /// it is stopped).
        stream fn watch_dir(pb::WatchDirRequest) -> pb::WatchDirResponse = watch_dir,
            CallContext::filesystem("files.watch_dir"), Ladder;
        /// `FilesystemService/GetTransfer("")`: the capability probe of
        /// what agents from 0.3.0 serve (compressed writes, metadata).
        fn write_probe(pb::GetTransferRequest) -> pb::TransferState = get_transfer,
            CallContext::filesystem("files.write");
        /// `FilesystemService/Stat`, for the SDK call named `feature`.
        fn stat(pb::StatRequest, feature) -> pb::StatResponse = stat,
            CallContext::filesystem, Ladder;
    }

    /// `FilesystemService/Write` with every message of the stream prepared;
    /// `gzip` sends it with `grpc-encoding: gzip`.
    pub(crate) async fn write_files(
        &self,
        messages: Vec<pb::WriteRequest>,
        timeout: Duration,
        gzip: bool,
    ) -> Result<pb::WriteResponse, SandboxError> {
        let rpc = move |c: FilesystemServiceClient<Svc>, r| async move {
            let mut c = if gzip {
                c.send_compressed(tonic::codec::CompressionEncoding::Gzip)
            } else {
                c
            };
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

    /// `FilesystemService/Write` fed from a stream the caller produces: sent
    /// once, never replayed (see `call_once`), with no deadline of its own
    /// because its size is unknown.
    pub(crate) async fn write_stream<S>(
        &self,
        messages: S,
        gzip: bool,
    ) -> Result<pb::WriteResponse, SandboxError>
    where
        S: futures_util::Stream<Item = pb::WriteRequest> + Send + 'static,
    {
        let mut client = self.client::<FilesystemServiceClient<Svc>>();
        if gzip {
            client = client.send_compressed(tonic::codec::CompressionEncoding::Gzip);
        }
        self.call_once(
            CallContext::filesystem("files.write"),
            client.write(messages),
        )
        .await
    }
}
