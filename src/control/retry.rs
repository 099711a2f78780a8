//! The one retry layer of the control plane (errors.md 5), on top of any
//! [`ControlPlane`]: capacity backoff on RunMicrovm (the same `clientToken` on
//! every attempt, since the request is reused as is), throttling honouring
//! Retry-After, and AWS 5xx faults. Each retry is a `tracing` event with target
//! `rayito::retry` (operation, kind, attempt, delay), never a token.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable as _};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use super::{AuthTokenRequest, ControlPlane, Microvm, RunRequest};
use crate::error::{Backoff, ErrorKind, RetryPolicy, SandboxCode, SandboxError};
use crate::secret::Secret;

/// A control plane whose calls are retried by a [`RetryPolicy`].
pub(crate) struct Retrying<C> {
    inner: C,
    policy: RetryPolicy,
}

impl<C: fmt::Debug> fmt::Debug for Retrying<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrying")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
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
        let state = Mutex::new(RetryState::new(&self.policy, operation));
        call.retry(ExponentialBuilder::default().without_max_times())
            .sleep(tokio::time::sleep)
            // The delay is ours entirely: backon's own schedule is ignored.
            .adjust(|err, _| lock(&state).next_delay(err))
            .notify(|err, delay| {
                let state = lock(&state);
                tracing::info!(
                    target: "rayito::retry",
                    operation,
                    kind = err.kind().as_str(),
                    attempt = state.attempts,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "retrying a control-plane call"
                );
            })
            .await
    }
}

fn lock(state: &Mutex<RetryState>) -> std::sync::MutexGuard<'_, RetryState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one call has used of each retry budget so far.
#[derive(Debug)]
struct RetryState {
    operation: &'static str,
    /// Failed attempts so far.
    attempts: u32,
    capacity: Budget,
    rate_limit: Budget,
    service_error: Budget,
}

/// One [`Backoff`] and how much of it a call has used.
#[derive(Debug)]
struct Budget {
    backoff: Backoff,
    retries: u32,
    started: Instant,
}

impl Budget {
    fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            retries: 0,
            started: Instant::now(),
        }
    }

    /// The next delay (`hint` replaces the schedule, e.g. a Retry-After), or
    /// `None` when the attempts or the time budget are spent.
    fn next(&mut self, hint: Option<Duration>) -> Option<Duration> {
        if let Some(max) = self.backoff.max_attempts
            && self.retries + 1 >= max
        {
            return None;
        }
        let delay = hint.unwrap_or_else(|| {
            jittered(
                self.backoff.delay(self.retries),
                self.backoff.jitter_percent,
            )
        });
        if let Some(budget) = self.backoff.total_budget
            && self.started.elapsed().saturating_add(delay) > budget
        {
            return None;
        }
        self.retries += 1;
        Some(delay)
    }
}

impl RetryState {
    fn new(policy: &RetryPolicy, operation: &'static str) -> Self {
        Self {
            operation,
            attempts: 0,
            capacity: Budget::new(policy.capacity),
            rate_limit: Budget::new(policy.rate_limit),
            service_error: Budget::new(policy.service_error),
        }
    }

    /// The delay before the next attempt, or `None` to give up with `err`.
    fn next_delay(&mut self, err: &SandboxError) -> Option<Duration> {
        self.attempts += 1;
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

/// `delay` moved by up to `percent` either way, so that many clients do not
/// retry in step.
fn jittered(delay: Duration, percent: u8) -> Duration {
    if percent == 0 {
        return delay;
    }
    let spread = f64::from(percent.min(100)) / 100.0;
    let factor = 1.0 - spread + rand::random::<f64>() * 2.0 * spread;
    // `mul_f64` panics past `Duration::MAX` (a caller's huge max_delay).
    Duration::try_from_secs_f64(delay.as_secs_f64() * factor).unwrap_or(delay)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(4), 25);
            assert!(d >= Duration::from_secs(3) && d <= Duration::from_secs(5));
        }
        assert_eq!(jittered(Duration::from_secs(4), 0), Duration::from_secs(4));
    }

    #[test]
    fn attempts_count_the_first_one() {
        let mut policy = RetryPolicy::default();
        policy.service_error.max_attempts = Some(3);
        let mut budget = Budget::new(policy.service_error);
        assert_eq!(budget.next(None), Some(Duration::from_millis(200)));
        assert_eq!(budget.next(None), Some(Duration::from_millis(400)));
        assert_eq!(budget.next(None), None);
    }

    #[test]
    fn the_time_budget_stops_retries() {
        let mut policy = RetryPolicy::default();
        policy.capacity.total_budget = Some(Duration::from_millis(1));
        let mut budget = Budget::new(policy.capacity);
        assert_eq!(budget.next(None), None);
    }
}
