//! A route's token bucket: `rate` requests per minute, as many at once
//! (starts full), refilled continuously. Counted in integer milli-tokens,
//! so no float rounding drifts the rate; the fraction of a milli-token a
//! refill leaves over is kept as time not yet credited.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Milli-tokens per token.
const MILLI: u64 = 1000;

#[derive(Debug)]
pub(crate) struct TokenBucket {
    /// Requests per minute (1..=6000 once validated).
    rate: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    milli: u64,
    /// Up to when refills have been credited.
    credited: Instant,
}

impl TokenBucket {
    /// A full bucket of `rate` tokens, refilling `rate` per minute.
    pub(crate) fn new(rate: u32, now: Instant) -> Self {
        let rate = u64::from(rate.max(1));
        Self {
            rate,
            state: Mutex::new(State {
                milli: rate * MILLI,
                credited: now,
            }),
        }
    }

    /// Takes one token at `now`; `false` when the bucket is empty.
    pub(crate) fn take(&self, now: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let capacity = self.rate * MILLI;
        let elapsed = now.saturating_duration_since(s.credited);
        // rate tokens per 60 s = rate milli-tokens per 60 ms.
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let earned = micros.saturating_mul(self.rate) / 60_000;
        if s.milli + earned >= capacity {
            s.milli = capacity;
            s.credited = now;
        } else if earned > 0 {
            s.milli += earned;
            // Credit only the time those milli-tokens took (the rest
            // counts towards the next one).
            s.credited += Duration::from_micros(earned * 60_000 / self.rate);
        }
        if s.milli >= MILLI {
            s.milli -= MILLI;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_full_then_refuses() {
        let t0 = Instant::now();
        let b = TokenBucket::new(3, t0);
        assert!(b.take(t0));
        assert!(b.take(t0));
        assert!(b.take(t0));
        assert!(!b.take(t0));
    }

    #[test]
    fn refills_continuously_at_the_rate() {
        let t0 = Instant::now();
        let b = TokenBucket::new(60, t0); // one per second
        for _ in 0..60 {
            assert!(b.take(t0));
        }
        assert!(!b.take(t0 + Duration::from_millis(999)));
        assert!(b.take(t0 + Duration::from_millis(1000)));
        assert!(!b.take(t0 + Duration::from_millis(1000)));
        // Many small steps add up exactly (no fraction lost).
        let mut t = t0 + Duration::from_millis(1000);
        for _ in 0..999 {
            t += Duration::from_micros(1001);
            assert!(!b.take(t) || t >= t0 + Duration::from_millis(2000));
        }
        assert!(b.take(t0 + Duration::from_millis(2000)));
    }

    #[test]
    fn never_holds_more_than_its_capacity() {
        let t0 = Instant::now();
        let b = TokenBucket::new(2, t0);
        let later = t0 + Duration::from_secs(3600);
        assert!(b.take(later));
        assert!(b.take(later));
        assert!(!b.take(later));
    }

    #[test]
    fn a_slow_rate_earns_fractions() {
        let t0 = Instant::now();
        let b = TokenBucket::new(1, t0); // one per minute
        assert!(b.take(t0));
        let mut t = t0;
        for _ in 0..59 {
            t += Duration::from_secs(1);
            assert!(!b.take(t));
        }
        assert!(b.take(t0 + Duration::from_secs(60)));
    }
}
