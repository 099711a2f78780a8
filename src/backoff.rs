//! The SDK's one backoff driver, over `backon`.
//!
//! Every retry of the SDK goes through here: the control plane's retries
//! (capacity, throttling, service faults), the transport's
//! connection-not-established ladder and proxy re-mint, and the readiness
//! probe's pauses. A [`Backoff`] from the [`RetryPolicy`] becomes backon's
//! [`ExponentialBuilder`] (min delay, max delay, factor, max attempts, total
//! budget of delays); the driver adds what backon leaves to its caller
//! through `adjust`: the server's Retry-After replaces the scheduled delay
//! (capped at the backoff's `max_delay`), the documented ±`jitter_percent`
//! spreads it, and the total budget counts the delays actually waited
//! (Retry-After included). Each error that went through the driver records
//! how many attempts were made (`meta().attempts()`), and each retry is a
//! `tracing` event with target `rayito::retry` (operation, kind, attempt,
//! delay, time elapsed since the first attempt), never a token.
//!
//! [`RetryPolicy`]: crate::error::RetryPolicy

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder, Retryable as _};

use crate::error::{Backoff, SandboxError};

/// The longest delay or budget the driver works with (about 146 billion
/// years): far beyond any real wait, and small enough that no sum of two
/// can overflow (backon adds its delays with `+`).
const LONGEST: Duration = Duration::from_secs(u64::MAX >> 2);

/// backon's builder for `backoff` (jitter is applied by [`Schedule::next`]).
/// Durations a caller's policy sets above [`LONGEST`] are taken as
/// `LONGEST`, so no policy can make the driver panic.
pub(crate) fn builder(backoff: &Backoff) -> ExponentialBuilder {
    let builder = ExponentialBuilder::default()
        .with_min_delay(backoff.initial.min(LONGEST))
        .with_max_delay(backoff.max_delay.min(LONGEST))
        // Multipliers are small integers (2 by default): exact as f32.
        .with_factor(backoff.multiplier.max(1) as f32)
        .with_total_delay(backoff.total_budget.map(|b| b.min(LONGEST)));
    match backoff.max_attempts {
        // `max_attempts` counts the first attempt; backon counts retries.
        Some(attempts) => builder.with_max_times(attempts.saturating_sub(1) as usize),
        None => builder.without_max_times(),
    }
}

/// The delays one call may still wait, for one [`Backoff`].
#[derive(Debug)]
pub(crate) struct Schedule {
    delays: ExponentialBackoff,
    jitter_percent: u8,
    /// The longest a server's Retry-After is honoured for one wait.
    max_hint: Duration,
    /// The total budget of delays, and what was waited so far.
    budget: Option<Duration>,
    waited: Duration,
}

impl Schedule {
    pub(crate) fn new(backoff: &Backoff) -> Self {
        Self {
            delays: builder(backoff).build(),
            jitter_percent: backoff.jitter_percent,
            max_hint: backoff.max_delay,
            budget: backoff.total_budget,
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
        let scheduled = to_micros(self.delays.next()?);
        let delay = match hint {
            Some(asked) => asked.min(self.max_hint),
            None => jittered(scheduled, self.jitter_percent),
        };
        let waited = self.waited.saturating_add(delay);
        if self.budget.is_some_and(|budget| waited > budget) {
            return None;
        }
        self.waited = waited;
        Some(delay)
    }
}

/// backon multiplies in `f32`: 200 ms doubled is 400.000006 ms. Delays are
/// rounded to the microsecond so the schedule is the documented one.
fn to_micros(delay: Duration) -> Duration {
    let micros = (delay.as_nanos() + 500) / 1_000;
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
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

/// Runs `call` until it succeeds or `next_delay` returns `None` for its
/// error; the error returned records every attempt made. `next_delay` picks
/// the delay before the next attempt (usually from a [`Schedule`]).
pub(crate) async fn retry<T, F, Fut, D>(
    operation: &'static str,
    mut call: F,
    next_delay: D,
) -> Result<T, SandboxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SandboxError>>,
    D: FnMut(&SandboxError) -> Option<Duration>,
{
    let started = Instant::now();
    let attempts = Mutex::new(0u32);
    let next_delay = Mutex::new(next_delay);
    let count = || {
        let mut n = attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *n += 1;
        *n
    };
    let outcome = (|| {
        count();
        call()
    })
    // The schedules are chosen per error in `adjust`; this outer one only
    // lets them run.
    .retry(ExponentialBuilder::default().without_max_times())
    .sleep(tokio::time::sleep)
    .adjust(|err, _| {
        (next_delay
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))(err)
    })
    .notify(|err, delay| {
        let attempt = *attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tracing::info!(
            target: "rayito::retry",
            operation,
            kind = err.kind().as_str(),
            attempt,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "retrying"
        );
    })
    .await;
    let made = *attempts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    outcome.map_err(|err| {
        let recorded = err.meta().attempts();
        err.with_attempts(made.max(recorded))
    })
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
        let calls = Mutex::new(0u32);
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
