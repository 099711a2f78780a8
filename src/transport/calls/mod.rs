//! Typed RPCs over [`AgentConn`]: one method per agent call the SDK makes,
//! each naming its feature and whether NOT_FOUND means a missing file. The
//! unary ones all go through [`AgentConn::unary`].

mod code;
mod configure;
mod filesystem;
mod health;
mod lifecycle;
mod network;
mod persistence;
mod process;
mod pty;
#[cfg(feature = "s3")]
mod transfer;

pub(crate) use self::network::NetworkAnswer;
pub(crate) use self::persistence::{RawFailure, RawStream};

use std::future::Future;
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Response, Status};

use super::grpc_only::GrpcOnly;
use super::tokens::AuthInterceptor;
use super::{AgentConn, ConnectRetry, MAX_MESSAGE_BYTES};
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb::code_service_client::CodeServiceClient;
use crate::pb::configure_service_client::ConfigureServiceClient;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::pb::health_service_client::HealthServiceClient;
use crate::pb::lifecycle_service_client::LifecycleServiceClient;
use crate::pb::network_service_client::NetworkServiceClient;
use crate::pb::process_service_client::ProcessServiceClient;
use crate::pb::pty_service_client::PtyServiceClient;

/// The service every generated client runs on: the channel, the
/// grpc-status check, and the token interceptor.
type Svc = InterceptedService<GrpcOnly<Channel>, AuthInterceptor>;

/// A generated client, opened on a connection with the message limits.
trait AgentClient {
    fn open(service: Svc) -> Self;
}

macro_rules! agent_clients {
    ($($client:ident),+ $(,)?) => {$(
        impl AgentClient for $client<Svc> {
            fn open(service: Svc) -> Self {
                $client::new(service)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES)
            }
        }
    )+};
}

agent_clients!(
    CodeServiceClient,
    ConfigureServiceClient,
    FilesystemServiceClient,
    HealthServiceClient,
    LifecycleServiceClient,
    NetworkServiceClient,
    ProcessServiceClient,
    PtyServiceClient,
);

impl AgentConn {
    fn client<C: AgentClient>(&self) -> C {
        C::open(InterceptedService::new(self.channel(), self.interceptor()))
    }

    /// One unary RPC: `rpc` sends `request` on a fresh client, inside the
    /// transport's retries (see `call`), bounded by `timeout` per attempt.
    async fn unary<C, Req, Resp, Fut>(
        &self,
        ctx: CallContext,
        timeout: Duration,
        connect_retry: ConnectRetry,
        request: Req,
        rpc: impl Fn(C, Req) -> Fut,
    ) -> Result<Resp, SandboxError>
    where
        C: AgentClient,
        Req: Clone,
        Fut: Future<Output = Result<Response<Resp>, Status>>,
    {
        self.call(ctx, Some(timeout), connect_retry, || {
            rpc(self.client(), request.clone())
        })
        .await
    }
}
