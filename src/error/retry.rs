//! The SDK's one retry policy, as data (docs/errors.md, "Retries").
//!
//! The AWS SDK's own retries are off; the SDK's transport and control
//! layers read these numbers, so attempts never multiply.

use std::time::Duration;

/// One exponential backoff: `initial`, multiplied by `multiplier` after each
/// retry, capped at `max_delay`, with `±jitter_percent` jitter, bounded by
/// `max_attempts` (counting the first attempt) and/or `total_budget`. A
/// server's Retry-After replaces the scheduled delay, capped at
/// `max_delay`; `total_budget` counts every delay waited, Retry-After
/// included. Any value is accepted: durations beyond about 146 billion
/// years are taken as that.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry.
    pub initial: Duration,
    /// The largest delay between two attempts.
    pub max_delay: Duration,
    /// The factor applied to the delay after each retry.
    pub multiplier: u32,
    /// Jitter applied to each delay, in percent (25 = ±25 %); 0 for none.
    pub jitter_percent: u8,
    /// At most this many attempts in all, the first one included.
    pub max_attempts: Option<u32>,
    /// Stop retrying once the delays waited would pass this much in all.
    pub total_budget: Option<Duration>,
}

impl Backoff {
    /// A backoff from `initial` doubling to `max_delay`, without jitter or limits.
    pub const fn doubling(initial: Duration, max_delay: Duration) -> Self {
        Self {
            initial,
            max_delay,
            multiplier: 2,
            jitter_percent: 0,
            max_attempts: None,
            total_budget: None,
        }
    }

    /// The delay before retry number `retry` (0 = the first retry), before
    /// jitter.
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = u64::from(self.multiplier.max(1)).saturating_pow(retry);
        let nanos = self.initial.as_nanos().saturating_mul(u128::from(factor));
        let max = self.max_delay.as_nanos();
        let capped = nanos.min(max);
        Duration::from_nanos(u64::try_from(capped).unwrap_or(u64::MAX))
    }
}

/// Every retry decision of the SDK, as data. `Default` is the documented
/// policy (docs/errors.md, "Retries").
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `Capacity` on RunMicrovm: 1 s doubling to 20 s, ±25 % jitter, 120 s
    /// in all; the same `clientToken` on every attempt.
    pub capacity: Backoff,
    /// `RateLimit` from AWS: `retry_after` when given (at most `max_delay`
    /// per wait), else 0.5 s doubling to 10 s; 5 attempts, 30 s of waiting
    /// in all.
    pub rate_limit: Backoff,
    /// `Sandbox{service_error}` from AWS: 0.2 s doubling; 3 attempts.
    pub service_error: Backoff,
    /// Proxy 403: how many times every proxy token of the sandbox is
    /// re-minted and the call retried (1).
    pub proxy_remint_retries: u32,
    /// Connection not yet established (nothing was sent): retry after
    /// 0.25, 0.5, 1, 2, 4 s (6 attempts in all).
    pub not_established: Backoff,
    /// The reconnect contract: poll Health from 0.5 s doubling to 4 s with
    /// ±25 % jitter; `total_budget` (60 s) is the longest a call waits for
    /// the sandbox to come back (`max_attempts` is not used: the budget
    /// ends the wait). [`crate::SandboxBuilder::reconnect_timeout`] sets it
    /// for one sandbox.
    pub reconnect: Backoff,
    /// After a reconnect, a unary call is sent again this many times (1).
    /// A command's Start and a code cell are never sent again.
    pub reconnect_unary_retries: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            capacity: Backoff {
                jitter_percent: 25,
                total_budget: Some(Duration::from_secs(120)),
                ..Backoff::doubling(Duration::from_secs(1), Duration::from_secs(20))
            },
            rate_limit: Backoff {
                max_attempts: Some(5),
                total_budget: Some(Duration::from_secs(30)),
                ..Backoff::doubling(Duration::from_millis(500), Duration::from_secs(10))
            },
            service_error: Backoff {
                max_attempts: Some(3),
                ..Backoff::doubling(Duration::from_millis(200), Duration::from_millis(800))
            },
            proxy_remint_retries: 1,
            not_established: Backoff {
                max_attempts: Some(6),
                ..Backoff::doubling(Duration::from_millis(250), Duration::from_secs(4))
            },
            reconnect: Backoff {
                jitter_percent: 25,
                total_budget: Some(Duration::from_secs(60)),
                ..Backoff::doubling(Duration::from_millis(500), Duration::from_secs(4))
            },
            reconnect_unary_retries: 1,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries (useful in tests).
    pub fn none() -> Self {
        let once = Backoff {
            max_attempts: Some(1),
            total_budget: Some(Duration::ZERO),
            ..Backoff::doubling(Duration::ZERO, Duration::ZERO)
        };
        Self {
            capacity: once,
            rate_limit: once,
            service_error: once,
            proxy_remint_retries: 0,
            not_established: once,
            reconnect: once,
            reconnect_unary_retries: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_numbers() {
        let p = RetryPolicy::default();
        let ms = Duration::from_millis;
        let ladder: Vec<_> = (0..5).map(|r| p.not_established.delay(r)).collect();
        assert_eq!(ladder, [ms(250), ms(500), ms(1_000), ms(2_000), ms(4_000)]);
        assert_eq!(p.not_established.max_attempts, Some(6));
        let cap: Vec<_> = (0..7).map(|r| p.capacity.delay(r)).collect();
        assert_eq!(
            cap,
            [
                ms(1_000),
                ms(2_000),
                ms(4_000),
                ms(8_000),
                ms(16_000),
                ms(20_000),
                ms(20_000)
            ]
        );
        assert_eq!(p.capacity.total_budget, Some(Duration::from_secs(120)));
        assert_eq!(p.capacity.jitter_percent, 25);
        assert_eq!(p.rate_limit.delay(0), ms(500));
        assert_eq!(p.rate_limit.delay(10), ms(10_000));
        assert_eq!(p.rate_limit.max_attempts, Some(5));
        assert_eq!(p.rate_limit.total_budget, Some(Duration::from_secs(30)));
        assert_eq!(p.service_error.delay(0), ms(200));
        assert_eq!(p.service_error.delay(1), ms(400));
        assert_eq!(p.service_error.max_attempts, Some(3));
        assert_eq!(p.proxy_remint_retries, 1);
        assert_eq!(p.reconnect.delay(0), ms(500));
        assert_eq!(p.reconnect.delay(5), ms(4_000));
        assert_eq!(p.reconnect.jitter_percent, 25);
        assert_eq!(p.reconnect.total_budget, Some(Duration::from_secs(60)));
        assert_eq!(p.reconnect_unary_retries, 1);
    }

    #[test]
    fn delay_saturates_instead_of_overflowing() {
        let b = Backoff::doubling(Duration::from_secs(1), Duration::MAX);
        assert!(b.delay(u32::MAX) >= Duration::from_secs(1));
        assert_eq!(RetryPolicy::none().rate_limit.delay(3), Duration::ZERO);
    }
}
