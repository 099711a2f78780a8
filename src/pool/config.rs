//! How a pool is sized and how its sandboxes are warmed: [`PoolConfig`],
//! checked whole before the pool makes any call.

use std::time::Duration;

use super::store::PoolStore;
use crate::error::SandboxError;

/// The AWS maximum of a MicroVM's duration, the pool's default timeout.
pub const POOL_DEFAULT_TIMEOUT: Duration = Duration::from_secs(28_800);
const MAX_SIZE: u32 = 64;
const MAX_FILL_CONCURRENCY: u32 = 8;

/// One warm-up step: a shell command run in each new sandbox before it is
/// parked (installing packages, starting a server, importing modules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmupStep {
    pub(crate) command: String,
    pub(crate) background: bool,
    pub(crate) timeout: Duration,
}

impl WarmupStep {
    /// A command the warm-up waits for: a non-zero exit or its timeout
    /// (default 60 s) fails the warm-up.
    pub fn run(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            background: false,
            timeout: Duration::from_secs(60),
        }
    }

    /// A command started in the background: it keeps running in the
    /// parked sandbox (a server, a watcher), and the warm-up does not wait
    /// for it.
    pub fn background(command: impl Into<String>) -> Self {
        Self {
            background: true,
            ..Self::run(command)
        }
    }

    crate::setters::setters! {
        /// How long a foreground step may take (default 60 s).
        timeout: Duration;
    }
}

/// A pool's size, lifetimes and warm-up. `PoolConfig::new(size)`, then the
/// setters; [`SandboxBuilder::pool`](crate::SandboxBuilder::pool) checks
/// it whole before any call.
#[derive(Clone, Debug)]
#[must_use]
pub struct PoolConfig {
    pub(crate) size: u32,
    pub(crate) timeout: Duration,
    pub(crate) max_idle: Duration,
    pub(crate) min_remaining: Duration,
    pub(crate) fill_concurrency: u32,
    pub(crate) sweep_interval: Duration,
    pub(crate) ready_timeout: Duration,
    pub(crate) warmup: Vec<WarmupStep>,
    pub(crate) store: PoolStore,
    pub(crate) retry_base: Duration,
    pub(crate) filler: bool,
}

impl PoolConfig {
    /// A pool that keeps `size` sandboxes (1 to 64) parked, with the
    /// defaults: MicroVM timeout 28,800 s (the AWS maximum), suspended
    /// after 300 s idle with auto-resume, slots with less than 3,600 s left
    /// are not handed out, 4 warm-ups at once, a sweep every 30 s, a
    /// 90 s ready timeout, no warm-up steps, slots in memory.
    pub fn new(size: u32) -> Self {
        Self {
            size,
            timeout: POOL_DEFAULT_TIMEOUT,
            max_idle: Duration::from_secs(300),
            min_remaining: Duration::from_secs(3_600),
            fill_concurrency: 4,
            sweep_interval: Duration::from_secs(30),
            ready_timeout: Duration::from_secs(90),
            warmup: Vec::new(),
            store: PoolStore::default(),
            retry_base: Duration::from_secs(1),
            filler: true,
        }
    }

    crate::setters::setters! {
        unmarked;
        /// Each sandbox's maximum duration (at most 28,800 s; the default).
        timeout: Duration;
        /// Idle time after which a taken sandbox suspends (auto-resume stays
        /// on; at least 60 s, below the timeout; default 300 s).
        max_idle: Duration;
        /// A slot with less lifetime left is not handed out but recycled (60 s
        /// to the timeout minus 60 s; default 3,600 s).
        min_remaining: Duration;
        /// How many sandboxes warm at once (1 to 8; default 4).
        fill_concurrency: u32;
        /// How often parked slots are checked (at least 5 s; default 30 s).
        sweep_interval: Duration;
        /// How long a new or resumed sandbox may take to be ready (default
        /// 90 s).
        ready_timeout: Duration;
        /// Where the slots are kept (default [`PoolStore::memory`]).
        store: PoolStore;
        /// Whether this pool fills (default `true`). `false` makes a pool
        /// that only takes from, stats and drains its store while another
        /// process fills it (`rayito pool take` beside a `rayito pool start`):
        /// no filler and no sweep run in this process.
        filler: bool;
    }

    /// Adds a warm-up step, run in order before a sandbox is parked.
    pub fn warmup(mut self, step: WarmupStep) -> Self {
        self.warmup.push(step);
        self
    }

    /// The first pause after a failed warm-up (default 1 s; doubling to
    /// 60 s, ±25 % jitter; reset by a sandbox parked).
    pub fn fill_retry_base(mut self, base: Duration) -> Self {
        self.retry_base = base;
        self
    }

    /// Every rule, before any call.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        let bad = SandboxError::invalid_argument;
        if !(1..=MAX_SIZE).contains(&self.size) {
            return Err(bad(
                "size",
                "a pool holds 1 to 64 sandboxes; pass a size in that range",
            ));
        }
        if self.timeout.is_zero() || self.timeout > POOL_DEFAULT_TIMEOUT {
            return Err(bad(
                "timeout",
                "a pooled sandbox lives 1 to 28,800 s (the AWS maximum); pass a timeout in that range",
            ));
        }
        if self.max_idle < Duration::from_secs(60) || self.max_idle >= self.timeout {
            return Err(bad(
                "max_idle",
                "the idle time before a pooled sandbox suspends is at least 60 s and below its timeout; pass one in that range",
            ));
        }
        let secs = self.min_remaining.as_secs();
        if secs < 60 || secs.saturating_add(60) > self.timeout.as_secs() {
            return Err(bad(
                "min_remaining",
                "the lifetime a taken sandbox keeps is 60 s to the timeout minus 60 s; pass one in that range",
            ));
        }
        if !(1..=MAX_FILL_CONCURRENCY).contains(&self.fill_concurrency) {
            return Err(bad(
                "fill_concurrency",
                "a pool warms 1 to 8 sandboxes at once; pass a number in that range",
            ));
        }
        if self.sweep_interval < Duration::from_secs(5) {
            return Err(bad(
                "sweep_interval",
                "a pool sweeps at most every 5 s; pass a longer interval",
            ));
        }
        if self.ready_timeout.is_zero() {
            return Err(bad(
                "ready_timeout",
                "the ready timeout must be above zero; pass one",
            ));
        }
        if self.retry_base.is_zero() {
            return Err(bad(
                "fill_retry_base",
                "the pause after a failed warm-up must be above zero; pass one",
            ));
        }
        for step in &self.warmup {
            if step.command.trim().is_empty() {
                return Err(bad("warmup", "a warm-up step needs a command; pass one"));
            }
            if step.timeout.is_zero() {
                return Err(bad(
                    "warmup",
                    "a warm-up step's timeout must be above zero; pass one",
                ));
            }
        }
        Ok(())
    }

    /// How long a warm-up may take in all: the ready wait, the kernel's
    /// settling, each foreground step, the pause; the lease of its slot.
    pub(crate) fn warmup_budget(&self) -> Duration {
        let steps: Duration = self
            .warmup
            .iter()
            .filter(|s| !s.background)
            .map(|s| s.timeout)
            .sum();
        self.ready_timeout
            .saturating_mul(3)
            .saturating_add(steps)
            .saturating_add(Duration::from_secs(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_its_argument() {
        let refused = |c: PoolConfig| c.check().unwrap_err().to_string();
        let cases: Vec<(PoolConfig, &str)> = vec![
            (
                PoolConfig::new(0),
                "invalid size: a pool holds 1 to 64 sandboxes; pass a size in that range",
            ),
            (
                PoolConfig::new(65),
                "invalid size: a pool holds 1 to 64 sandboxes; pass a size in that range",
            ),
            (
                PoolConfig::new(1).timeout(Duration::from_secs(28_801)),
                "invalid timeout: a pooled sandbox lives 1 to 28,800 s (the AWS maximum); pass a timeout in that range",
            ),
            (
                PoolConfig::new(1).max_idle(Duration::from_secs(59)),
                "invalid max_idle: the idle time before a pooled sandbox suspends is at least 60 s and below its timeout; pass one in that range",
            ),
            (
                PoolConfig::new(1)
                    .timeout(Duration::from_secs(600))
                    .max_idle(Duration::from_secs(600)),
                "invalid max_idle: the idle time before a pooled sandbox suspends is at least 60 s and below its timeout; pass one in that range",
            ),
            (
                PoolConfig::new(1).min_remaining(Duration::from_secs(59)),
                "invalid min_remaining: the lifetime a taken sandbox keeps is 60 s to the timeout minus 60 s; pass one in that range",
            ),
            (
                PoolConfig::new(1).timeout(Duration::from_secs(3_600)),
                "invalid min_remaining: the lifetime a taken sandbox keeps is 60 s to the timeout minus 60 s; pass one in that range",
            ),
            (
                PoolConfig::new(1).fill_concurrency(9),
                "invalid fill_concurrency: a pool warms 1 to 8 sandboxes at once; pass a number in that range",
            ),
            (
                PoolConfig::new(1).sweep_interval(Duration::from_secs(4)),
                "invalid sweep_interval: a pool sweeps at most every 5 s; pass a longer interval",
            ),
            (
                PoolConfig::new(1).ready_timeout(Duration::ZERO),
                "invalid ready_timeout: the ready timeout must be above zero; pass one",
            ),
            (
                PoolConfig::new(1).warmup(WarmupStep::run("  ")),
                "invalid warmup: a warm-up step needs a command; pass one",
            ),
            (
                PoolConfig::new(1).warmup(WarmupStep::run("true").timeout(Duration::ZERO)),
                "invalid warmup: a warm-up step's timeout must be above zero; pass one",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(refused(config), message);
        }
        PoolConfig::new(1).check().unwrap();
        PoolConfig::new(64)
            .timeout(Duration::from_secs(3_660))
            .min_remaining(Duration::from_secs(3_600))
            .check()
            .unwrap();
    }
}
