//! The one retry layer of the control plane (docs/errors.md, "Retries"),
//! on top of any [`ControlPlane`]: capacity backoff on RunMicrovm (the same
//! `clientToken` on every attempt, since the request is reused as is),
//! throttling honouring Retry-After, and AWS 5xx faults. The delays come
//! from the SDK's one backoff driver ([`crate::backoff`]).

use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use super::ControlPlane;
use super::layer::{Call, Layer, Layered, Operation};
use crate::backoff::{self, Schedule};
use crate::error::{ErrorKind, RetryPolicy, SandboxCode, SandboxError};

/// A control plane whose calls are retried by a [`RetryPolicy`].
pub(crate) type Retrying<C> = Layered<RetryPolicy, C>;

impl<C: ControlPlane> Retrying<C> {
    pub(crate) fn new(inner: C, policy: RetryPolicy) -> Self {
        Layered::under(policy, inner)
    }
}

/// Each call is made again while the policy has a delay for its error.
impl Layer for RetryPolicy {
    const NAME: &'static str = "Retrying";

    fn around<'a, T: Send + 'a>(
        &'a self,
        operation: Operation,
        call: Call<'a, T>,
    ) -> BoxFuture<'a, Result<T, SandboxError>> {
        let mut schedules = Schedules::new(self, operation);
        backoff::retry(operation.name(), call, move |err| schedules.next_delay(err)).boxed()
    }
}

/// What one call has left of each retry budget.
#[derive(Debug)]
struct Schedules {
    operation: Operation,
    capacity: Schedule,
    rate_limit: Schedule,
    service_error: Schedule,
}

impl Schedules {
    fn new(policy: &RetryPolicy, operation: Operation) -> Self {
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
            ErrorKind::Capacity if self.operation == Operation::Run => self.capacity.next(None),
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
