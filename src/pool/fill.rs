//! The filler: one task per pool that keeps `size` slots ready or
//! warming, sweeps on its interval, and pauses after failed warm-ups; and
//! the warm-up of one slot (create, settle the kernel, run the warm-up
//! steps, suspend, park).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::slot::{SlotIdle, SlotRecord, SlotState, StoredSlot};
use super::store::RemoveIf;
use super::{PoolInner, Started, WeakInner};
use crate::commands::CommandOptions;
use crate::error::SandboxError;
use crate::sandbox::Launched;

/// The longest pause after failed warm-ups.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Rounds of a `pass` cell that settle a new sandbox's kernel.
const SETTLE_ROUNDS: u32 = 3;
const SETTLE_PAUSE: Duration = Duration::from_millis(300);
/// How often the filler looks at the store when nothing wakes it (a shared
/// store changes without telling this process).
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The pause after failed warm-ups: from the base, doubling to 60 s, with
/// ±25 % jitter; a parked slot resets it.
#[derive(Debug)]
pub(super) struct FillBackoff {
    base: Duration,
    next: Duration,
    until: Option<Instant>,
}

impl FillBackoff {
    pub(super) fn new(base: Duration) -> Self {
        Self {
            base,
            next: base,
            until: None,
        }
    }

    fn failed(&mut self) {
        let jitter = 0.75 + rand::random::<f64>() * 0.5;
        self.until = Some(Instant::now() + self.next.mul_f64(jitter));
        self.next = self.next.saturating_mul(2).min(MAX_BACKOFF);
    }

    fn succeeded(&mut self) {
        self.next = self.base;
        self.until = None;
    }

    fn waiting_until(&self) -> Option<Instant> {
        self.until.filter(|t| *t > Instant::now())
    }
}

/// The filler's loop; ends when the pool is closed or dropped.
pub(super) async fn run_filler(weak: WeakInner) {
    let mut next_sweep = Instant::now();
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        if inner.is_closing() {
            return;
        }
        let Some(started) = inner.started.get() else {
            return;
        };
        if Instant::now() >= next_sweep {
            inner.sweep(started).await;
            next_sweep = Instant::now() + inner.config.sweep_interval;
        }
        let backoff = inner
            .backoff
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .waiting_until();
        if backoff.is_none()
            && let Err(err) = inner.fill(started).await
        {
            tracing::warn!(target: "rayito::pool", kind = %err.kind(), "the pool could not read its store; it tries again");
        }
        let mut wake_at = next_sweep.min(Instant::now() + IDLE_CHECK);
        if let Some(until) = backoff {
            wake_at = wake_at.min(until);
        }
        // A notify_one meanwhile is kept as a permit for the next wait.
        let wake = inner.wake_filler.clone();
        drop(inner);
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
    }
}

impl PoolInner {
    /// Starts warm-ups for the slots missing: `size` minus the slots in
    /// the store (other processes' warming ones included) minus this
    /// process's warm-ups not yet recorded, as far as the permits allow.
    async fn fill(self: &Arc<Self>, started: &Started) -> Result<(), SandboxError> {
        let slots = self.store.list(&started.image_arn).await?;
        let mine = |s: &&StoredSlot| s.owner.as_deref() == Some(self.owner.as_str());
        let others = slots.iter().filter(|s| !mine(s)).count();
        let in_flight = (self.config.fill_concurrency as usize)
            .saturating_sub(self.fill_permits.available_permits());
        let wanted = (self.config.size as usize).saturating_sub(others + in_flight);
        for _ in 0..wanted {
            let Ok(permit) = self.fill_permits.clone().try_acquire_owned() else {
                break;
            };
            let pool = self.clone();
            self.warmups
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .spawn(async move { pool.warm_up(permit).await });
        }
        // Reap finished warm-ups' entries.
        let mut warmups = self.warmups.lock().unwrap_or_else(|p| p.into_inner());
        while warmups.try_join_next().is_some() {}
        Ok(())
    }

    /// One warm-up, bounded by the pool's warm-up budget (the lease of its
    /// slot); anything it made is terminated when it fails.
    async fn warm_up(self: Arc<Self>, _permit: OwnedSemaphorePermit) {
        let Some(started) = self.started.get() else {
            return;
        };
        let recorded: Arc<Mutex<Option<SlotRecord>>> = Arc::new(Mutex::new(None));
        let budget = self.config.warmup_budget();
        let outcome = tokio::time::timeout(budget, self.warm_up_once(started, recorded.clone()))
            .await
            .unwrap_or(Err(WarmUp::Failed));
        let slot = recorded.lock().unwrap_or_else(|p| p.into_inner()).take();
        match outcome {
            Ok(()) => {
                self.backoff
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .succeeded();
                self.slot_parked.notify_waiters();
            }
            Err(outcome) => {
                if let Some(record) = slot {
                    let _ = self
                        .store
                        .remove_if(
                            &record.sandbox_id,
                            RemoveIf::WarmingOwnedBy(self.owner.clone()),
                        )
                        .await;
                    self.terminate(started, &record.sandbox_id).await;
                }
                if outcome == WarmUp::Failed {
                    self.counters.failed.fetch_add(1, Ordering::Relaxed);
                    self.backoff
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .failed();
                }
            }
        }
        self.wake_filler.notify_one();
    }

    async fn warm_up_once(
        &self,
        started: &Started,
        recorded: Arc<Mutex<Option<SlotRecord>>>,
    ) -> Result<(), WarmUp> {
        let store = self.store.clone();
        let owner = self.owner.clone();
        let lease = self.config.warmup_budget();
        let kept = recorded.clone();
        let record_slot = move |launched: Launched| {
            let record = warming_record(launched);
            *kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(record.clone());
            let slot = StoredSlot {
                record,
                owner: Some(owner.clone()),
                lease_until: Some(SystemTime::now() + lease),
            };
            let store = store.clone();
            let future: std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<(), SandboxError>> + Send>,
            > = Box::pin(async move {
                if store.record_warming(slot).await? {
                    Ok(())
                } else {
                    Err(SandboxError::internal(
                        "pool",
                        "a new sandbox's id was already in the pool's store",
                    ))
                }
            });
            future
        };
        // Secrets are bound when a sandbox is taken, not while it waits.
        let sandbox = match self
            .builder
            .clone()
            .unbound()
            .create_observed(Some(&record_slot))
            .await
        {
            Ok(sandbox) => sandbox,
            Err(err) => {
                // A fill's Capacity or RateLimit stays here: takers create
                // on their own.
                tracing::debug!(target: "rayito::pool", kind = %err.kind(), "a warm-up could not create its sandbox");
                return Err(WarmUp::Failed);
            }
        };
        self.counters.launched.fetch_add(1, Ordering::Relaxed);
        let id = sandbox.id().to_owned();
        for round in 1..=SETTLE_ROUNDS {
            if sandbox.run_code("pass").await.is_ok() {
                break;
            }
            if round == SETTLE_ROUNDS {
                return Err(WarmUp::Failed);
            }
            tokio::time::sleep(SETTLE_PAUSE).await;
        }
        for step in &self.config.warmup {
            let options = CommandOptions::new().timeout(step.timeout);
            let ran = if step.background {
                sandbox
                    .commands()
                    .spawn(&step.command, options.no_timeout())
                    .await
                    .map(|handle| {
                        let _ = handle.disconnect();
                    })
            } else {
                sandbox
                    .commands()
                    .run_with(&step.command, options)
                    .await
                    .map(drop)
            };
            if let Err(err) = ran {
                tracing::debug!(target: "rayito::pool", sandbox_id = %id, kind = %err.kind(), "a warm-up step failed");
                return Err(WarmUp::Failed);
            }
        }
        if self.is_closing() {
            return Err(WarmUp::Closed);
        }
        if sandbox.pause().await.is_err() {
            return Err(WarmUp::Failed);
        }
        let Some(mut record) = recorded.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return Err(WarmUp::Failed);
        };
        record.state = SlotState::Ready;
        record.parked_at = Some(SystemTime::now());
        match self.store.mark_ready(record, &self.owner).await {
            Ok(true) => {}
            // Reaped meanwhile (a lease ended): not ours any more.
            Ok(false) => {
                self.terminate(started, &id).await;
                self.counters.lost.fetch_add(1, Ordering::Relaxed);
                return Err(WarmUp::Closed);
            }
            Err(_) => return Err(WarmUp::Failed),
        }
        if self.is_closing() {
            // Closed while parking: close's own pass may have run already.
            if self
                .store
                .remove_if(&id, RemoveIf::Ready)
                .await
                .ok()
                .flatten()
                .is_some()
            {
                self.terminate(started, &id).await;
            }
        }
        Ok(())
    }
}

/// How a warm-up ended without parking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WarmUp {
    /// It failed: counted, and the filler backs off.
    Failed,
    /// The pool closed, or the slot was reaped: nothing to count.
    Closed,
}

/// The warming record of a sandbox RunMicrovm just answered for.
fn warming_record(launched: Launched) -> SlotRecord {
    let (max_idle, suspended, auto_resume) = launched.idle_policy.unwrap_or((0, 0, false));
    SlotRecord {
        sandbox_id: launched.id,
        access_token: launched.access_token,
        endpoint: launched.endpoint,
        template: launched.image_arn,
        template_version: launched.image_version,
        started_at: launched.started_at,
        maximum_duration_seconds: launched.max_duration_secs,
        region: launched.region,
        state: SlotState::Warming,
        idle: SlotIdle {
            max_idle_seconds: max_idle,
            suspended_duration_seconds: suspended,
            auto_resume,
        },
        execution_role_arn: launched.execution_role_arn,
        parked_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_backoff_doubles_to_a_minute_and_a_park_resets_it() {
        let mut b = FillBackoff::new(Duration::from_secs(1));
        let mut seen = Vec::new();
        for _ in 0..8 {
            b.failed();
            let wait = b.waiting_until().unwrap() - Instant::now();
            seen.push(wait);
        }
        let bounds = [1u64, 2, 4, 8, 16, 32, 60, 60];
        for (wait, base) in seen.iter().zip(bounds) {
            let base = Duration::from_secs(base);
            assert!(
                *wait >= base.mul_f64(0.75) && *wait <= base.mul_f64(1.25),
                "{wait:?} for {base:?}"
            );
        }
        b.succeeded();
        assert_eq!(b.waiting_until(), None);
        b.failed();
        assert!(b.waiting_until().unwrap() - Instant::now() <= Duration::from_millis(1_250));
    }
}
