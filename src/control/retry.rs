//! The one retry layer of the control plane (docs/errors.md, "Retries"),
//! on top of any [`ControlPlane`]: capacity backoff on RunMicrovm (the same
//! `clientToken` on every attempt, since the request is reused as is),
//! throttling honouring Retry-After, and AWS 5xx faults. The delays come
//! from the SDK's one backoff driver ([`crate::backoff`]).

use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use super::{
    AuthTokenRequest, ControlPlane, ImageSummary, ListPage, ListRequest, Microvm, RunRequest,
};
use crate::backoff::{self, Schedule};
use crate::error::{ErrorKind, RetryPolicy, SandboxCode, SandboxError};
use crate::secret::Secret;

/// A control plane whose calls are retried by a [`RetryPolicy`].
pub(crate) struct Retrying<C> {
    inner: C,
    policy: RetryPolicy,
}

crate::secret::redacted_debug! {
    non_exhaustive Retrying<C> |o| inner
}

impl<C: ControlPlane> Retrying<C> {
    pub(crate) fn new(inner: C, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    async fn retry<T, F, Fut>(&self, operation: &'static str, call: F) -> Result<T, SandboxError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SandboxError>>,
    {
        let mut schedules = Schedules::new(&self.policy, operation);
        backoff::retry(operation, call, |err| schedules.next_delay(err)).await
    }
}

/// What one call has left of each retry budget.
#[derive(Debug)]
struct Schedules {
    operation: &'static str,
    capacity: Schedule,
    rate_limit: Schedule,
    service_error: Schedule,
}

impl Schedules {
    fn new(policy: &RetryPolicy, operation: &'static str) -> Self {
        Self {
            operation,
            capacity: Schedule::new(&policy.capacity),
            rate_limit: Schedule::new(&policy.rate_limit),
            service_error: Schedule::new(&policy.service_error),
        }
    }

    /// The delay before the next attempt, or `None` to give up with `err`.
    fn next_delay(&mut self, err: &SandboxError) -> Option<Duration> {
        match err.kind() {
            // Only RunMicrovm can meet a capacity error, and it is idempotent
            // by its clientToken.
            ErrorKind::Capacity if self.operation == "RunMicrovm" => self.capacity.next(None),
            ErrorKind::RateLimit => self.rate_limit.next(err.retry_after()),
            ErrorKind::Sandbox if is_service_error(err) => self.service_error.next(None),
            _ => None,
        }
    }
}

fn is_service_error(err: &SandboxError) -> bool {
    matches!(
        err,
        SandboxError::Sandbox {
            code: Some(SandboxCode::ServiceError),
            ..
        }
    )
}

impl<C: ControlPlane> ControlPlane for Retrying<C> {
    fn run_microvm(&self, request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        // The same request, hence the same clientToken, on every attempt.
        async move {
            self.retry("RunMicrovm", || self.inner.run_microvm(request.clone()))
                .await
        }
        .boxed()
    }

    fn get_microvm(&self, id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        async move {
            self.retry("GetMicrovm", || self.inner.get_microvm(id.clone()))
                .await
        }
        .boxed()
    }

    fn terminate_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            self.retry("TerminateMicrovm", || {
                self.inner.terminate_microvm(id.clone())
            })
            .await
        }
        .boxed()
    }

    fn create_auth_token(
        &self,
        request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>> {
        async move {
            self.retry("CreateMicrovmAuthToken", || {
                self.inner.create_auth_token(request.clone())
            })
            .await
        }
        .boxed()
    }

    fn suspend_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            self.retry("SuspendMicrovm", || self.inner.suspend_microvm(id.clone()))
                .await
        }
        .boxed()
    }

    fn resume_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            self.retry("ResumeMicrovm", || self.inner.resume_microvm(id.clone()))
                .await
        }
        .boxed()
    }

    fn list_microvms(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage, SandboxError>> {
        async move {
            self.retry("ListMicrovms", || self.inner.list_microvms(request.clone()))
                .await
        }
        .boxed()
    }

    fn get_image(&self, image: String) -> BoxFuture<'_, Result<ImageSummary, SandboxError>> {
        async move {
            self.retry("GetMicrovmImage", || self.inner.get_image(image.clone()))
                .await
        }
        .boxed()
    }
}
