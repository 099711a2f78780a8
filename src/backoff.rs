//! The SDK's one backoff driver: a plain loop over the SDK's own schedule.
//!
//! Every retry of the SDK goes through here: the control plane's retries
//! (capacity, throttling, service faults), the transport's
//! connection-not-established ladder and proxy re-mint, and the pauses of
//! the one poller (readiness and reconnect). A [`Backoff`] from the
//! [`RetryPolicy`] gives the delays (initial, doubling by its multiplier up
//! to its max delay, at most `max_attempts` attempts, a total budget of
//! delays); a server's Retry-After replaces the scheduled delay (capped at
//! the backoff's `max_delay`), the documented ±`jitter_percent` spreads it,
//! and the total budget counts the delays actually waited (Retry-After
//! included). Each error that went through the driver records how many
//! attempts were made (`meta().attempts()`), and each retry is a `tracing`
//! event with target `rayito::retry` (operation, kind, attempt, delay, time
//! elapsed since the first attempt), never a token.
//!
//! [`RetryPolicy`]: crate::error::RetryPolicy

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Backoff, SandboxError};

/// The delays one call may still wait, for one [`Backoff`].
#[derive(Debug)]
pub(crate) struct Schedule {
    backoff: Backoff,
    /// Retries scheduled so far.
    retries: u32,
    /// What was waited so far, against the total budget.
    waited: Duration,
}

impl Schedule {
    pub(crate) fn new(backoff: &Backoff) -> Self {
        Self {
            backoff: *backoff,
            retries: 0,
            waited: Duration::ZERO,
        }
    }

    /// The next delay, or `None` when the attempts or the budget are spent.
    /// `hint` (a Retry-After) replaces the scheduled delay, capped at the
    /// backoff's `max_delay` (a peer's `Retry-After: 1000000000` must not
    /// park the call for years), and still uses up one retry. The budget
    /// counts every delay returned, hints included: a delay that would go
    /// past it ends the retries instead.
    pub(crate) fn next(&mut self, hint: Option<Duration>) -> Option<Duration> {
        // `max_attempts` counts the first attempt.
        if self
            .backoff
            .max_attempts
            .is_some_and(|attempts| self.retries.saturating_add(1) >= attempts)
        {
            return None;
        }
        let delay = match hint {
            Some(asked) => asked.min(self.backoff.max_delay),
            None => jittered(
                self.backoff.delay(self.retries),
                self.backoff.jitter_percent,
            ),
        };
        let waited = self.waited.saturating_add(delay);
        if self
            .backoff
            .total_budget
            .is_some_and(|budget| waited > budget)
        {
            return None;
        }
        self.retries = self.retries.saturating_add(1);
        self.waited = waited;
        Some(delay)
    }
}

/// `delay` moved by up to `percent` either way, so that many clients do not
/// retry in step.
pub(crate) fn jittered(delay: Duration, percent: u8) -> Duration {
    if percent == 0 {
        return delay;
    }
    let spread = f64::from(percent.min(100)) / 100.0;
    let factor = 1.0 - spread + rand::random::<f64>() * 2.0 * spread;
    // `mul_f64` panics past `Duration::MAX` (a caller's huge max_delay).
    Duration::try_from_secs_f64(delay.as_secs_f64() * factor).unwrap_or(delay)
}

/// The `tracing` event of one retry (target `rayito::retry`): after
/// `attempt` failed with `err`, the next comes after `delay`.
pub(crate) fn note_retry(
    operation: &'static str,
    err: &SandboxError,
    attempt: u32,
    delay: Duration,
    started: Instant,
) {
    tracing::info!(
        target: "rayito::retry",
        operation,
        kind = err.kind().as_str(),
        attempt,
        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "retrying"
    );
}

/// Runs `call` until it succeeds or `next_delay` returns `None` for its
/// error; the error returned records every attempt made. `next_delay` picks
/// the delay before the next attempt (usually from a [`Schedule`]).
pub(crate) async fn retry<T, F, Fut, D>(
    operation: &'static str,
    mut call: F,
    mut next_delay: D,
) -> Result<T, SandboxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SandboxError>>,
    D: FnMut(&SandboxError) -> Option<Duration>,
{
    let started = Instant::now();
    let mut attempt: u32 = 0;
    loop {
        attempt = attempt.saturating_add(1);
        let err = match call().await {
            Ok(value) => return Ok(value),
            Err(err) => err,
        };
        match next_delay(&err) {
            Some(delay) => {
                note_retry(operation, &err, attempt, delay, started);
                tokio::time::sleep(delay).await;
            }
            None => {
                let recorded = err.meta().attempts();
                return Err(err.with_attempts(attempt.max(recorded)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::RetryPolicy;

    fn delays(backoff: &Backoff) -> Vec<Duration> {
        let mut schedule = Schedule::new(backoff);
        std::iter::from_fn(|| schedule.next(None))
            .take(20)
            .collect()
    }

    #[test]
    fn the_connect_ladder_is_the_documented_one() {
        let ms = Duration::from_millis;
        assert_eq!(
            delays(&RetryPolicy::default().not_established),
            [ms(250), ms(500), ms(1_000), ms(2_000), ms(4_000)]
        );
    }

    #[test]
    fn attempts_count_the_first_one() {
        let ms = Duration::from_millis;
        assert_eq!(
            delays(&RetryPolicy::default().service_error),
            [ms(200), ms(400)]
        );
        assert_eq!(delays(&RetryPolicy::default().rate_limit).len(), 4);
        assert!(delays(&RetryPolicy::none().rate_limit).is_empty());
    }

    #[test]
    fn the_budget_bounds_the_sum_of_delays() {
        let mut capacity = RetryPolicy::default().capacity;
        capacity.jitter_percent = 0;
        let total: Duration = delays(&capacity).iter().sum();
        assert!(total <= Duration::from_secs(120), "{total:?}");
        capacity.total_budget = Some(Duration::from_millis(1));
        assert!(delays(&capacity).is_empty());
    }

    #[test]
    fn retry_after_replaces_the_delay_but_uses_a_retry() {
        let mut schedule = Schedule::new(&RetryPolicy::default().service_error);
        let hint = Some(Duration::from_millis(700));
        assert_eq!(schedule.next(hint), hint);
        assert_eq!(schedule.next(None), Some(Duration::from_millis(400)));
        assert_eq!(schedule.next(hint), None);
    }

    #[test]
    fn retry_after_is_capped_per_wait_and_counted_in_the_budget() {
        let mut rate_limit = RetryPolicy::default().rate_limit;
        rate_limit.max_attempts = None;
        rate_limit.total_budget = Some(Duration::from_secs(25));
        let mut schedule = Schedule::new(&rate_limit);
        // `Retry-After: 1000000000` waits max_delay (10 s), not 31 years.
        let years = Some(Duration::from_secs(1_000_000_000));
        assert_eq!(schedule.next(years), Some(Duration::from_secs(10)));
        assert_eq!(schedule.next(years), Some(Duration::from_secs(10)));
        // A third would pass the 25 s budget: the retries end.
        assert_eq!(schedule.next(years), None);
    }

    #[test]
    fn no_policy_makes_the_driver_panic() {
        let huge = Backoff {
            multiplier: u32::MAX,
            jitter_percent: u8::MAX,
            max_attempts: Some(u32::MAX),
            total_budget: Some(Duration::MAX),
            ..Backoff::doubling(Duration::MAX, Duration::MAX)
        };
        let mut schedule = Schedule::new(&huge);
        for _ in 0..10 {
            let _ = schedule.next(None);
            let _ = schedule.next(Some(Duration::MAX));
        }
        let _ = jittered(Duration::MAX, 100);
    }

    #[test]
    fn jitter_stays_within_its_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(4), 25);
            assert!(d >= Duration::from_secs(3) && d <= Duration::from_secs(5));
        }
        assert_eq!(jittered(Duration::from_secs(4), 0), Duration::from_secs(4));
    }

    #[tokio::test]
    async fn a_call_failing_n_times_reports_n_attempts() {
        let calls = std::sync::Mutex::new(0u32);
        let quick = Backoff {
            max_attempts: Some(5),
            ..Backoff::doubling(Duration::from_millis(1), Duration::from_millis(1))
        };
        let mut schedule = Schedule::new(&quick);
        let err = retry(
            "Test",
            || {
                *calls.lock().unwrap() += 1;
                async { Err::<(), _>(SandboxError::closed().with_attempts(1)) }
            },
            |_| schedule.next(None),
        )
        .await
        .unwrap_err();
        assert_eq!(*calls.lock().unwrap(), 5);
        assert_eq!(err.meta().attempts(), 5);
    }
}
