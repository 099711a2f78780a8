//! `FilesystemService/Checkpoint` and `/Restore` (spec B1): opened once and
//! never reconnected; a proxy 403 before the first message is retried once
//! with a fresh proxy token (like every stream's opening). Failures come
//! back raw ([`GrpcFailure`]) because the persistence table (B4) maps them,
//! not the generic gRPC table.

use std::future::Future;

use tonic::{Response, Status, Streaming};

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::{
    CallContext, GrpcFailure, is_proxy_rejection, is_proxy_rejection_status, proxy_rejected,
    proxy_rejected_without_remint,
};
use crate::pb;
use crate::pb::filesystem_service_client::FilesystemServiceClient;
use crate::transport::AgentConn;
use crate::transport::status::failure;

/// How opening or reading a persistence stream failed.
#[derive(Debug)]
pub(crate) enum RawFailure {
    /// Already an error (the handle is closed, the proxy refused the
    /// token twice, re-minting failed).
    Mapped(SandboxError),
    /// A status, for the persistence table.
    Status(GrpcFailure),
}

/// A persistence stream whose statuses are handed back raw.
pub(crate) struct RawStream<T> {
    inner: Streaming<T>,
    ctx: CallContext,
}

impl<T> std::fmt::Debug for RawStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawStream").finish_non_exhaustive()
    }
}

impl<T> RawStream<T> {
    /// The next message; `Ok(None)` when the stream ended with OK.
    pub(crate) async fn message(&mut self) -> Result<Option<T>, GrpcFailure> {
        self.inner
            .message()
            .await
            .map_err(|status| failure(&status, self.ctx))
    }
}

impl AgentConn {
    agent_calls! {
        FilesystemServiceClient
        /// Opens `Checkpoint`; the first message (or the end) comes with it.
        raw fn checkpoint(pb::CheckpointRequest) -> pb::CheckpointEvent = checkpoint,
            CallContext::new("persistence.checkpoint");
        /// Opens `Restore`; the first message (or the end) comes with it.
        raw fn restore(pb::RestoreRequest) -> pb::RestoreEvent = restore,
            CallContext::new("persistence.restore");
    }

    async fn open_raw<T, F, Fut>(
        &self,
        ctx: CallContext,
        mut open: F,
    ) -> Result<(Option<T>, RawStream<T>), RawFailure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<Streaming<T>>, Status>>,
    {
        if self.is_closed() {
            return Err(RawFailure::Mapped(SandboxError::closed()));
        }
        let mut remints_left = self.inner.policy.proxy_remint_retries.min(1);
        let mut reminted = false;
        let mut attempts: u32 = 0;
        loop {
            attempts = attempts.saturating_add(1);
            let sent_with = self.inner.tokens.proxy_generation();
            let opened = async {
                let mut inner = open().await?.into_inner();
                let first = inner.message().await?;
                Ok::<_, Status>((first, inner))
            }
            .await;
            let status = match opened {
                Ok((first, inner)) => return Ok((first, RawStream { inner, ctx })),
                Err(status) => status,
            };
            let f = failure(&status, ctx);
            if is_proxy_rejection_status(f.origin) && remints_left > 0 {
                remints_left -= 1;
                reminted = true;
                if let Err(err) = self.remint_after(sent_with).await {
                    return Err(RawFailure::Mapped(err.with_attempts(attempts)));
                }
                continue;
            }
            if is_proxy_rejection(&f) {
                let err = if reminted {
                    proxy_rejected(f)
                } else {
                    proxy_rejected_without_remint(f)
                };
                return Err(RawFailure::Mapped(err.with_attempts(attempts)));
            }
            return Err(RawFailure::Status(f));
        }
    }
}
