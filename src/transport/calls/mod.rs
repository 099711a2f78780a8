//! Typed RPCs over [`AgentConn`]: one method per agent call the SDK makes,
//! each naming its feature and whether NOT_FOUND means a missing file. The
//! unary ones all go through [`AgentConn::unary`].

/// The calls of the common shapes, one entry each, in an `impl AgentConn`
/// block, the client type first. Unary: `fn name(Request) -> Response =
/// rpc, context;` takes the request and a per-attempt timeout and retries
/// connecting on the ladder (`-> ()` drops the response); `fn name() ->
/// Response = rpc(Request {}), context;` sends that fixed request; `fn
/// name(Request, feature) -> Response = rpc, context_of_feature, retry;`
/// names the SDK call in its errors. Server
/// streams: `stream fn name(Request, total) -> Message = rpc, context,
/// retry;` is bounded by `total` (without `total`, by nothing); `raw fn
/// name(Request) -> Message = rpc, context;` opens a stream whose failures
/// come back raw (the persistence streams).
macro_rules! agent_calls {
    (@total) => { None };
    (@total $total:ident) => { $total };
    // The opener of a stream: a fresh client and the request, on each call.
    (@open $this:ident $request:ident $client:ident $rpc:ident) => {
        || {
            let mut client = $this.client::<$client<Svc>>();
            let request = $request.clone();
            async move { client.$rpc(request).await }
        }
    };
    ($client:ident) => {};
    ($client:ident $(#[$doc:meta])* stream fn $name:ident($req:ty $(, $total:ident)?) -> $msg:ty = $rpc:ident, $ctx:expr, $retry:ident; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(
            &self,
            request: $req,
            $($total: Option<Duration>,)?
        ) -> Result<AgentStream<$msg>, SandboxError> {
            let total = agent_calls!(@total $($total)?);
            let open = agent_calls!(@open self request $client $rpc);
            self.open_stream($ctx, total, ConnectRetry::$retry, open).await
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* raw fn $name:ident($req:ty) -> $msg:ty = $rpc:ident, $ctx:expr; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(
            &self,
            request: $req,
        ) -> Result<(Option<$msg>, RawStream<$msg>), RawFailure> {
            self.open_raw($ctx, agent_calls!(@open self request $client $rpc)).await
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* fn $name:ident() -> () = $rpc:ident($req:expr), $ctx:expr; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(&self, timeout: Duration) -> Result<(), SandboxError> {
            let rpc = |mut c: $client<Svc>, r| async move { c.$rpc(r).await };
            self.unary($ctx, timeout, ConnectRetry::Ladder, $req, rpc)
                .await
                .map(|_| ())
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* fn $name:ident() -> $resp:ty = $rpc:ident($req:expr), $ctx:expr; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(&self, timeout: Duration) -> Result<$resp, SandboxError> {
            let rpc = |mut c: $client<Svc>, r| async move { c.$rpc(r).await };
            self.unary($ctx, timeout, ConnectRetry::Ladder, $req, rpc).await
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* fn $name:ident($req:ty, feature) -> $resp:ty = $rpc:ident, $ctx:path, $retry:ident; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(
            &self,
            request: $req,
            feature: &'static str,
            timeout: Duration,
        ) -> Result<$resp, SandboxError> {
            let rpc = |mut c: $client<Svc>, r| async move { c.$rpc(r).await };
            self.unary($ctx(feature), timeout, ConnectRetry::$retry, request, rpc)
                .await
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* fn $name:ident($req:ty) -> () = $rpc:ident, $ctx:expr; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(&self, request: $req, timeout: Duration) -> Result<(), SandboxError> {
            let rpc = |mut c: $client<Svc>, r| async move { c.$rpc(r).await };
            self.unary($ctx, timeout, ConnectRetry::Ladder, request, rpc)
                .await
                .map(|_| ())
        }
        agent_calls!($client $($rest)*);
    };
    ($client:ident $(#[$doc:meta])* fn $name:ident($req:ty) -> $resp:ty = $rpc:ident, $ctx:expr; $($rest:tt)*) => {
        $(#[$doc])*
        pub(crate) async fn $name(&self, request: $req, timeout: Duration) -> Result<$resp, SandboxError> {
            let rpc = |mut c: $client<Svc>, r| async move { c.$rpc(r).await };
            self.unary($ctx, timeout, ConnectRetry::Ladder, request, rpc).await
        }
        agent_calls!($client $($rest)*);
    };
}

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
