//! The agent's phase, watched by every live stream so that a suspend, a
//! terminate or the logical deadline can end it in its schema's form.

use rayito_proto::tokens::{detail, phase};
use tokio::sync::watch;

/// Where the agent is in its life. New streams are refused outside `Running`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Serving normally.
    Running,
    /// `/suspend` was received: new streams get UNAVAILABLE `suspending`.
    Suspending,
    /// `/terminate` was received: new streams get UNAVAILABLE `terminating`.
    Terminating,
    /// The logical deadline passed: FAILED_PRECONDITION `sandbox_timeout`.
    Expired,
}

impl Phase {
    /// The exact status message of the gate for this phase, if it gates.
    pub fn gate_message(self) -> Option<&'static str> {
        match self {
            Phase::Running => None,
            Phase::Suspending => Some(phase::SUSPENDING),
            Phase::Terminating => Some(phase::TERMINATING),
            Phase::Expired => Some(detail::SANDBOX_TIMEOUT),
        }
    }

    /// The gRPC status a new call gets in this phase, if any.
    pub fn gate_status(self) -> Option<tonic::Status> {
        match self {
            Phase::Running => None,
            Phase::Suspending => Some(tonic::Status::unavailable(phase::SUSPENDING)),
            Phase::Terminating => Some(tonic::Status::unavailable(phase::TERMINATING)),
            Phase::Expired => Some(tonic::Status::failed_precondition(detail::SANDBOX_TIMEOUT)),
        }
    }
}

/// A shared, watchable phase. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PhaseCell {
    tx: watch::Sender<Phase>,
}

impl Default for PhaseCell {
    fn default() -> Self {
        Self::new()
    }
}

impl PhaseCell {
    /// A cell in `Running`.
    pub fn new() -> Self {
        let (tx, _rx) = watch::channel(Phase::Running);
        Self { tx }
    }

    /// The current phase.
    pub fn get(&self) -> Phase {
        *self.tx.borrow()
    }

    /// Moves to `phase` and wakes every watcher.
    pub fn set(&self, phase: Phase) {
        self.tx.send_replace(phase);
    }

    /// A receiver that sees every later change (use `changed()` in a select).
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }

    /// `Ok(())` when new calls are allowed, else the gate's status.
    #[allow(clippy::result_large_err)]
    pub fn check(&self) -> Result<(), tonic::Status> {
        match self.get().gate_status() {
            None => Ok(()),
            Some(status) => Err(status),
        }
    }
}
