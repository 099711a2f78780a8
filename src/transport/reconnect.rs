//! The reconnect contract (wire contract 2.7; docs/architecture.md,
//! "Reconnect"): after a reconnectable failure (a reset, a proxy
//! 429/502/503/504, the phase gate, an in-stream `suspending` end) the
//! sandbox's one poller asks the control plane where the MicroVM stands and
//! polls Health with jittered backoff until it is back, it is known gone,
//! or `reconnect_timeout` (the policy's `reconnect` budget) runs out.
//!
//! The control plane is reached through a [`StateCheck`] closure that the
//! sandbox module builds, so this module knows no AWS type.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::AgentConn;
use super::poller::{FirstCheck, Poller, STATE_CHECK_EVERY};
use crate::error::{Backoff, ErrorKind, SandboxError};

/// The budget when the policy sets none.
const DEFAULT_BUDGET: Duration = Duration::from_secs(60);

/// What the control plane says about the MicroVM, as the poller needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VmCheck {
    /// RUNNING.
    Running,
    /// SUSPENDING or SUSPENDED; `auto_resume` when traffic wakes it;
    /// `paused_here` when this handle's `pause()` asked for it (and no
    /// resume followed): a stream it cut sleeps until a resume instead of
    /// waking the VM.
    Suspended {
        auto_resume: bool,
        paused_here: bool,
    },
    /// TERMINATING or TERMINATED; `max_duration` when its maximum duration
    /// ended it.
    Ending { max_duration: bool },
    /// Anything else (PENDING after a resume, unknown states).
    Other,
}

/// Asks the control plane for the MicroVM's state (GetMicrovm).
pub(crate) type StateCheck =
    Arc<dyn Fn() -> BoxFuture<'static, Result<VmCheck, SandboxError>> + Send + Sync>;

/// Why the connection was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// A reset, a proxy 429/502/503/504, or the `terminating` phase gate.
    Transport,
    /// The `suspending` phase gate or an in-stream `suspending` end: back
    /// only with a new resume generation (or RUNNING read after the cut).
    Suspending,
    /// The connection could not be established (nothing was sent).
    NotEstablished,
}

/// The reconnect state of one sandbox: one poller at a time, and an epoch
/// that says whether the connection came back since a caller's failure.
pub(crate) struct Reconnector {
    sandbox_id: String,
    check: StateCheck,
    backoff: Backoff,
    poller: tokio::sync::Mutex<()>,
    /// +1 each time the sandbox is found back.
    epoch: AtomicU64,
    /// The agent's resume generation when last seen ready.
    generation: AtomicU64,
    /// Woken when a resume records a new generation: background streams
    /// asleep on a suspension read on at once instead of at their next
    /// control-plane check.
    resumed: tokio::sync::Notify,
}

crate::secret::redacted_debug! {
    non_exhaustive Reconnector |o| sandbox_id, epoch = o.epoch.load(Ordering::SeqCst)
}

/// Remedy of a sandbox suspended without auto-resume.
const CALL_RESUME: &str = "call resume() on the handle, then retry";

impl Reconnector {
    pub(crate) fn new(
        sandbox_id: String,
        check: StateCheck,
        backoff: Backoff,
        resume_generation: u64,
    ) -> Self {
        Self {
            sandbox_id,
            check,
            backoff,
            poller: tokio::sync::Mutex::new(()),
            epoch: AtomicU64::new(0),
            generation: AtomicU64::new(resume_generation),
            resumed: tokio::sync::Notify::new(),
        }
    }

    /// The epoch to pass to [`Reconnector::await_back`] for a call about
    /// to be made.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Records the generation a resume (or a connect) saw.
    pub(crate) fn set_generation(&self, generation: u64) {
        self.generation.store(generation, Ordering::SeqCst);
        self.resumed.notify_waiters();
    }

    /// [`Reconnector::await_back`] for a background stream (2.7: only new
    /// requests and foreground calls may wake a suspended MicroVM). While
    /// the control plane says SUSPENDING or SUSPENDED, paused by this
    /// handle or with auto-resume on, the stream sleeps: it asks the
    /// control plane every 5 s (or at once when this handle resumes it)
    /// and never probes the agent, which would wake it. It holds no lock
    /// while asleep, so a foreground call may wake the sandbox meanwhile;
    /// and the budget starts once the sandbox is no longer suspended (a
    /// pause may last hours). Anything else is decided by `await_back`.
    ///
    /// # Errors
    /// As [`Reconnector::await_back`].
    pub(crate) async fn await_back_asleep(
        &self,
        conn: &AgentConn,
        seen_epoch: u64,
        cut: Cut,
        feature: &str,
    ) -> Result<(), SandboxError> {
        loop {
            if self.epoch() != seen_epoch {
                return Ok(());
            }
            // Registered before the check, so a resume in between is seen.
            let resumed = self.resumed.notified();
            match (self.check)().await {
                Ok(VmCheck::Suspended {
                    auto_resume,
                    paused_here,
                }) if auto_resume || paused_here => {
                    tracing::debug!(target: "rayito::reconnect", sandbox_id = %self.sandbox_id, feature, "suspended; the stream sleeps");
                    tokio::select! {
                        () = tokio::time::sleep(STATE_CHECK_EVERY) => {}
                        () = resumed => {}
                    }
                }
                _ => return self.await_back(conn, seen_epoch, cut, feature).await,
            }
        }
    }

    /// Waits until the sandbox is back after a cut seen by a call made at
    /// `seen_epoch`. Only one caller polls; the others wait for it and
    /// return at once when it found the sandbox back.
    ///
    /// # Errors
    /// `SandboxNotFound` (terminated), `SandboxLifetime` (its maximum
    /// duration ended it), `SandboxState` (suspended without auto-resume:
    /// call resume()), `Sandbox { connection_lost }` after the budget (the
    /// probes in `meta().attempts()`, the time waited in the message).
    pub(crate) async fn await_back(
        &self,
        conn: &AgentConn,
        seen_epoch: u64,
        cut: Cut,
        feature: &str,
    ) -> Result<(), SandboxError> {
        let _poller = self.poller.lock().await;
        if self.epoch() != seen_epoch {
            return Ok(());
        }
        let budget = self.backoff.total_budget.unwrap_or(DEFAULT_BUDGET);
        let mut poller = Poller::new(&self.backoff, Some(budget), FirstCheck::AtOnce);
        let old_generation = self.generation.load(Ordering::SeqCst);
        let mut running_after_cut = false;
        // A stream cut by this handle's own pause sleeps (GetMicrovm only)
        // until the sandbox runs again: probing Health would wake it.
        let mut sleeping = false;
        let gave_up = |poller: &Poller| {
            SandboxError::reconnect_gave_up(feature, poller.elapsed(), poller.probes())
        };
        tracing::debug!(target: "rayito::reconnect", sandbox_id = %self.sandbox_id, ?cut, feature, "connection cut; polling");
        loop {
            // The first check is at once: a sandbox that is gone is
            // reported within one GetMicrovm round trip.
            if poller.take_check() {
                sleeping = false;
                match (self.check)().await {
                    Ok(VmCheck::Running) => running_after_cut = true,
                    Ok(VmCheck::Ending { max_duration: true }) => {
                        return Err(SandboxError::lifetime_reached(&self.sandbox_id));
                    }
                    Ok(VmCheck::Ending { .. }) => {
                        return Err(SandboxError::sandbox_not_found(&self.sandbox_id));
                    }
                    Err(err) if err.kind() == ErrorKind::SandboxNotFound => {
                        return Err(SandboxError::sandbox_not_found(&self.sandbox_id));
                    }
                    Ok(VmCheck::Suspended {
                        paused_here: true, ..
                    }) if cut == Cut::Suspending => sleeping = true,
                    Ok(VmCheck::Suspended {
                        auto_resume: false, ..
                    }) => {
                        return Err(SandboxError::sandbox_state("suspended", CALL_RESUME));
                    }
                    // Health decides; a control plane that does not answer
                    // does not end the wait.
                    Ok(VmCheck::Suspended { .. } | VmCheck::Other) | Err(_) => {}
                }
            }
            if sleeping {
                if poller.expired() {
                    return Err(gave_up(&poller));
                }
                poller.sleep_until_check().await;
                continue;
            }
            let probe_timeout = poller.probe_timeout();
            if let Ok(health) = conn.probe_health(probe_timeout).await {
                let new_generation = health.resume_generation != old_generation;
                if health.agent_ready
                    && health.kernel_ready
                    && (cut != Cut::Suspending || new_generation || running_after_cut)
                {
                    self.generation
                        .store(health.resume_generation, Ordering::SeqCst);
                    self.epoch.fetch_add(1, Ordering::SeqCst);
                    tracing::debug!(target: "rayito::reconnect", sandbox_id = %self.sandbox_id, probes = poller.probes(), "sandbox back");
                    return Ok(());
                }
            }
            if poller.expired() {
                return Err(gave_up(&poller));
            }
            poller.pause().await;
        }
    }
}
