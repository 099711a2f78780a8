//! The one poller: the schedule both waits for a sandbox share, the
//! readiness wait after create or connect (`sandbox::readiness`) and the
//! reconnect wait after a cut (`reconnect`). It probes the agent's Health
//! with pauses from the SDK's backoff driver, asks the control plane
//! (GetMicrovm) at its own slower pace, never sleeps past the next check or
//! the deadline, and counts its probes. What a probe or a check means is
//! the caller's: this module only says when.

use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Schedule;
use crate::error::Backoff;

/// How often the control plane is asked (2.7: every 5 s).
pub(crate) const STATE_CHECK_EVERY: Duration = Duration::from_secs(5);
/// After a cut the first checks come sooner (at once, then after 0.25 s and
/// 1 s in all): the control plane may still say RUNNING for a moment after
/// the cut of a MicroVM that is going away.
const EARLY_CHECKS: [Duration; 2] = [Duration::from_millis(250), Duration::from_millis(750)];
/// Bounds of one Health probe's deadline.
const MIN_PROBE_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// When the control plane is first asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstCheck {
    /// At once, then soon again ([`EARLY_CHECKS`]), then every 5 s: after a
    /// cut, a sandbox that is gone is reported within one round trip.
    AtOnce,
    /// After 5 s, then every 5 s: a sandbox just created or found is
    /// there; the checks only notice one that died before it was ready.
    Later,
}

/// One wait's schedule.
#[derive(Debug)]
pub(crate) struct Poller {
    start: Instant,
    /// `None`: no limit.
    deadline: Option<Instant>,
    pauses: Schedule,
    /// The pause once the schedule has none left.
    max_pause: Duration,
    first_check: FirstCheck,
    last_check: Option<Instant>,
    checks: u32,
    probes: u32,
}

impl Poller {
    /// A wait that starts now and ends `limit` from now (`None`, or a
    /// limit too large to add to the clock: no limit), pausing between
    /// probes as `pauses` says (its attempts and budget are ignored: the
    /// deadline ends the wait, not the schedule).
    pub(crate) fn new(pauses: &Backoff, limit: Option<Duration>, first_check: FirstCheck) -> Self {
        let start = Instant::now();
        Self {
            start,
            deadline: limit.and_then(|limit| start.checked_add(limit)),
            pauses: Schedule::new(&Backoff {
                total_budget: None,
                max_attempts: None,
                ..*pauses
            }),
            max_pause: pauses.max_delay,
            first_check,
            last_check: None,
            checks: 0,
            probes: 0,
        }
    }

    /// When the next control-plane check is due.
    fn check_due_at(&self) -> Instant {
        match (self.last_check, self.first_check) {
            (None, FirstCheck::AtOnce) => self.start,
            (None, FirstCheck::Later) => self.start + STATE_CHECK_EVERY,
            (Some(at), FirstCheck::AtOnce) => {
                let early = usize::try_from(self.checks)
                    .ok()
                    .and_then(|n| EARLY_CHECKS.get(n.wrapping_sub(1)))
                    .copied();
                at + early.unwrap_or(STATE_CHECK_EVERY)
            }
            (Some(at), FirstCheck::Later) => at + STATE_CHECK_EVERY,
        }
    }

    /// True when the control plane should be asked now; the check is then
    /// counted as made.
    pub(crate) fn take_check(&mut self) -> bool {
        let now = Instant::now();
        if now < self.check_due_at() {
            return false;
        }
        self.last_check = Some(now);
        self.checks = self.checks.saturating_add(1);
        true
    }

    /// The deadline of the next Health probe (the time left, within 0.5 to
    /// 5 s); the probe is counted.
    pub(crate) fn probe_timeout(&mut self) -> Duration {
        self.probes = self.probes.saturating_add(1);
        self.remaining().clamp(MIN_PROBE_TIMEOUT, MAX_PROBE_TIMEOUT)
    }

    /// Time left until the deadline (`Duration::MAX` without one).
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        })
    }

    /// True once the deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// Sleeps until the next probe: the schedule's next pause, never past
    /// the next control-plane check or the deadline.
    pub(crate) async fn pause(&mut self) {
        let pause = self.pauses.next(None).unwrap_or(self.max_pause);
        let until = Instant::now()
            .checked_add(pause)
            .unwrap_or_else(|| self.check_due_at())
            .min(self.check_due_at());
        tokio::time::sleep_until(self.bounded(until)).await;
    }

    /// Sleeps until the next control-plane check (or the deadline), with
    /// no probe in between: a sandbox that must not be woken.
    pub(crate) async fn sleep_until_check(&self) {
        tokio::time::sleep_until(self.bounded(self.check_due_at())).await;
    }

    fn bounded(&self, until: Instant) -> Instant {
        self.deadline.map_or(until, |deadline| until.min(deadline))
    }

    /// Health probes made so far.
    pub(crate) fn probes(&self) -> u32 {
        self.probes
    }

    /// Time since the wait started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn after_a_cut_the_checks_come_at_once_then_soon_then_every_five_seconds() {
        let mut poller = Poller::new(
            &Backoff::doubling(Duration::from_millis(500), Duration::from_secs(4)),
            Some(Duration::from_secs(60)),
            FirstCheck::AtOnce,
        );
        let start = Instant::now();
        let mut checks = Vec::new();
        while start.elapsed() < Duration::from_secs(16) {
            if poller.take_check() {
                checks.push(start.elapsed().as_millis());
            }
            poller.probe_timeout();
            poller.pause().await;
        }
        assert_eq!(checks[..3], [0, 250, 1_000]);
        assert_eq!(checks[3..], [6_000, 11_000]);
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_checks_start_after_five_seconds_and_the_deadline_ends_the_wait() {
        let mut poller = Poller::new(
            &Backoff::doubling(Duration::from_millis(250), Duration::from_secs(2)),
            Some(Duration::from_secs(7)),
            FirstCheck::Later,
        );
        let start = Instant::now();
        let mut checks = Vec::new();
        while !poller.expired() {
            if poller.take_check() {
                checks.push(start.elapsed().as_millis());
            }
            assert!(poller.probe_timeout() >= MIN_PROBE_TIMEOUT);
            poller.pause().await;
        }
        assert_eq!(checks, [5_000]);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        // 0.25, 0.5, 1, 2, then 2 s pauses, cut at the check and the end.
        assert!(poller.probes() >= 6, "{}", poller.probes());
    }

    #[test]
    fn no_limit_is_never_expired() {
        let poller = Poller::new(
            &Backoff::doubling(Duration::from_millis(250), Duration::from_secs(2)),
            Some(Duration::MAX),
            FirstCheck::Later,
        );
        assert!(!poller.expired());
        assert_eq!(poller.remaining(), Duration::MAX);
    }
}
