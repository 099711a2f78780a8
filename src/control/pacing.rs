//! Client-side pacing of control-plane calls: one token bucket per
//! operation, shared by every handle of one client configuration, so that
//! a process with many sandboxes stays under the account's API rates
//! instead of meeting them as throttling. Each attempt of the retry layer
//! takes a token (the layer sits under [`super::retry::Retrying`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::layer::{Call, Layer, Layered, Operation as Op};
use crate::error::SandboxError;

/// The paced operations: every one but GetMicrovmImage (paced with GetMicrovm).
const OPS: usize = 7;

/// How many control-plane calls per second this process makes, per
/// operation (token buckets whose burst is one second's worth). Shared by
/// every sandbox handle made with the same backend settings and the same
/// `Pacing`. Defaults: RunMicrovm 5/s, GetMicrovm 100/s, SuspendMicrovm
/// 2/s, ResumeMicrovm 5/s, TerminateMicrovm 10/s, CreateMicrovmAuthToken
/// 50/s, ListMicrovms 10/s. A rate of 0 turns pacing off for that
/// operation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct Pacing {
    per_second: [u32; OPS],
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            per_second: [5, 100, 2, 5, 10, 50, 10],
        }
    }
}

impl Pacing {
    /// The default rates.
    pub fn new() -> Self {
        Self::default()
    }

    /// No pacing at all (every rate 0).
    pub fn unlimited() -> Self {
        Self {
            per_second: [0; OPS],
        }
    }

    fn set(mut self, op: Op, per_second: u32) -> Self {
        self.per_second[op as usize] = per_second;
        self
    }
}

/// The rate setters, and `Debug` with the same names, from one list.
macro_rules! rates {
    ($($(#[$doc:meta])* $name:ident: $op:ident;)+) => {
        impl Pacing {
            $(
                $(#[$doc])*
                pub fn $name(self, per_second: u32) -> Self {
                    self.set(Op::$op, per_second)
                }
            )+
        }

        impl fmt::Debug for Pacing {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct("Pacing")
                    $(.field(stringify!($name), &self.per_second[Op::$op as usize]))+
                    .finish()
            }
        }
    };
}

rates! {
    /// RunMicrovm calls per second (default 5).
    run_microvm: Run;
    /// GetMicrovm calls per second (default 100).
    get_microvm: Get;
    /// SuspendMicrovm calls per second (default 2).
    suspend_microvm: Suspend;
    /// ResumeMicrovm calls per second (default 5).
    resume_microvm: Resume;
    /// TerminateMicrovm calls per second (default 10).
    terminate_microvm: Terminate;
    /// CreateMicrovmAuthToken calls per second (default 50).
    create_auth_token: AuthToken;
    /// ListMicrovms calls per second (default 10).
    list_microvms: List;
}

/// One token bucket: `rate` tokens per second, at most `rate` stored.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(per_second: u32) -> Option<Self> {
        (per_second > 0).then(|| Self {
            rate: f64::from(per_second),
            state: Mutex::new((f64::from(per_second), Instant::now())),
        })
    }

    /// Takes a token, waiting for it when the bucket is empty. A token is
    /// reserved before the wait, so that waiters are served in turn.
    async fn take(&self) {
        let wait = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            let (tokens, last) = *state;
            let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate)
                .min(self.rate);
            let left = refilled - 1.0;
            *state = (left, now);
            if left >= 0.0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(-left / self.rate)
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The buckets of one client configuration.
#[derive(Debug)]
pub(crate) struct Buckets {
    buckets: [Option<Bucket>; OPS],
    /// How many calls of each operation took a token (or went through
    /// unpaced): the pacer's record, which tests read.
    taken: [AtomicU64; OPS],
}

impl Buckets {
    /// The buckets of one client (every sandbox of that client shares them).
    pub(crate) fn new(pacing: Pacing) -> Self {
        Self {
            buckets: pacing.per_second.map(Bucket::new),
            taken: Default::default(),
        }
    }

    /// Read-only and rare (a doctor's check, a fleet's image listing):
    /// paced with GetMicrovm.
    fn slot(op: Op) -> usize {
        match op {
            Op::GetImage => Op::Get as usize,
            #[cfg(feature = "fleet")]
            Op::ListImages | Op::ListImageVersions => Op::Get as usize,
            op => op as usize,
        }
    }

    async fn take(&self, op: Op) {
        let slot = Self::slot(op);
        self.taken[slot].fetch_add(1, Ordering::Relaxed);
        if let Some(bucket) = &self.buckets[slot] {
            bucket.take().await;
        }
    }

    /// How many calls of `op` these buckets have paced.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn taken(&self, op: Op) -> u64 {
        self.taken[Self::slot(op)].load(Ordering::Relaxed)
    }
}

/// A control plane whose calls are paced.
pub(crate) type Paced<C> = Layered<Arc<Buckets>, C>;

impl<C: super::ControlPlane> Paced<C> {
    pub(crate) fn new(inner: C, buckets: Arc<Buckets>) -> Self {
        Layered::under(buckets, inner)
    }
}

/// Each call takes a token of its operation's bucket first.
impl Layer for Arc<Buckets> {
    const NAME: &'static str = "Paced";

    fn around<'a, T: Send + 'a>(
        &'a self,
        operation: Op,
        mut call: Call<'a, T>,
    ) -> BoxFuture<'a, Result<T, SandboxError>> {
        async move {
            self.take(operation).await;
            call().await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bucket_serves_its_burst_at_once_then_its_rate() {
        let bucket = Bucket::new(20).unwrap();
        let start = Instant::now();
        for _ in 0..20 {
            bucket.take().await;
        }
        assert!(start.elapsed() < Duration::from_millis(200));
        for _ in 0..10 {
            bucket.take().await;
        }
        // 10 more at 20/s: half a second (less whatever refilled meanwhile).
        assert!(
            start.elapsed() >= Duration::from_millis(400),
            "{:?}",
            start.elapsed()
        );
        assert!(Bucket::new(0).is_none(), "0 turns pacing off");
    }

    #[test]
    fn pacing_debug_lists_every_rate() {
        assert_eq!(
            format!("{:?}", Pacing::default()),
            "Pacing { run_microvm: 5, get_microvm: 100, suspend_microvm: 2, resume_microvm: 5, terminate_microvm: 10, create_auth_token: 50, list_microvms: 10 }"
        );
    }
}
