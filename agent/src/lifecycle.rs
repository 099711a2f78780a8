//! The logical deadline (`LifecycleService.SetTimeout`, the payload's
//! `lifecycle` block) and what happens when it passes.
//!
//! The deadline runs on raw monotonic time (suspended time counts). The cap is
//! `/run + cap_s - 60 s`, as the real agent computes it.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito_proto::tokens::detail;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use crate::payload::{LifecyclePlan, OnTimeout};
use crate::pb;
use crate::phase::{Phase, PhaseCell};

/// Margin between the platform's maximum duration and the agent's cap.
const CAP_MARGIN: Duration = Duration::from_secs(60);
/// How long a VM resumed after its deadline answers only Health and SetTimeout
/// before it reports EXPIRED again.
const RESUME_GRACE: Duration = Duration::from_secs(30);

/// The deadline state of one agent.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    state: Mutex<State>,
    /// The instant the deadline timer should fire at (None: no timer).
    deadline_tx: watch::Sender<Option<Instant>>,
}

#[derive(Debug, Default)]
struct State {
    plan: Option<LifecyclePlan>,
    deadline: Option<Instant>,
    cap: Option<Instant>,
    timeout_ms: u64,
    extensions: u32,
    expired: bool,
    /// Forced expiry without a lifecycle block (fault injection) behaves as kill.
    forced: bool,
    grace_until: Option<Instant>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        let (deadline_tx, _) = watch::channel(None);
        Self {
            state: Mutex::new(State::default()),
            deadline_tx,
        }
    }
}

/// Converts a monotonic instant to Unix milliseconds (wall clock).
fn unix_ms(at: Instant) -> i64 {
    let now_wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    let now = Instant::now();
    if at >= now {
        now_wall + (at - now).as_millis() as i64
    } else {
        now_wall - (now - at).as_millis() as i64
    }
}

impl Lifecycle {
    /// Installs the payload's block at `/run` and arms the timer.
    pub(crate) fn install(&self, plan: LifecyclePlan) {
        let now = Instant::now();
        let cap = now + Duration::from_secs(plan.cap_s).saturating_sub(CAP_MARGIN);
        let deadline = (now + Duration::from_secs(plan.timeout_s)).min(cap);
        let mut st = self.state.lock().expect("lifecycle lock");
        st.plan = Some(plan);
        st.cap = Some(cap);
        st.deadline = Some(deadline);
        st.timeout_ms = plan.timeout_s * 1000;
        drop(st);
        self.deadline_tx.send_replace(Some(deadline));
    }

    /// A receiver of the deadline the timer task sleeps until.
    pub(crate) fn deadline_watch(&self) -> watch::Receiver<Option<Instant>> {
        self.deadline_tx.subscribe()
    }

    /// Marks the deadline passed. Returns what to do, or `None` if it had
    /// already expired (or was moved later meanwhile and `forced` is false).
    pub(crate) fn expire(&self, forced: bool) -> Option<OnTimeout> {
        let mut st = self.state.lock().expect("lifecycle lock");
        if st.expired {
            return None;
        }
        if !forced {
            match st.deadline {
                Some(d) if d <= Instant::now() => {}
                _ => return None,
            }
        }
        st.expired = true;
        st.grace_until = None;
        if forced {
            st.deadline = Some(Instant::now());
            if st.plan.is_none() {
                st.forced = true;
            }
        }
        drop(st);
        self.deadline_tx.send_replace(None);
        Some(self.on_timeout())
    }

    fn on_timeout(&self) -> OnTimeout {
        let st = self.state.lock().expect("lifecycle lock");
        st.plan.map(|p| p.on_timeout).unwrap_or(OnTimeout::Kill)
    }

    /// Whether the deadline has passed (and no SetTimeout reopened it).
    pub(crate) fn is_expired(&self) -> bool {
        self.state.lock().expect("lifecycle lock").expired
    }

    /// Called on an accepted `/resume`: a VM resumed after its deadline gets
    /// a grace period in which only Health and SetTimeout answer.
    pub(crate) fn on_resume(&self) {
        let mut st = self.state.lock().expect("lifecycle lock");
        if st.expired {
            st.grace_until = Some(Instant::now() + RESUME_GRACE);
        }
    }

    /// Health's view.
    pub(crate) fn snapshot(&self) -> pb::LifecycleState {
        let st = self.state.lock().expect("lifecycle lock");
        let Some(plan) = st.plan else {
            let phase = if st.forced {
                pb::LifecyclePhase::Expired
            } else {
                pb::LifecyclePhase::Unmanaged
            };
            return pb::LifecycleState {
                phase: phase as i32,
                deadline_unix_ms: st.deadline.map(unix_ms).unwrap_or(0),
                ..Default::default()
            };
        };
        let phase = if !st.expired {
            pb::LifecyclePhase::Active
        } else if st.grace_until.is_some_and(|g| g > Instant::now()) {
            pb::LifecyclePhase::ResumeGrace
        } else {
            pb::LifecyclePhase::Expired
        };
        pb::LifecycleState {
            phase: phase as i32,
            deadline_unix_ms: st.deadline.map(unix_ms).unwrap_or(0),
            cap_unix_ms: st.cap.map(unix_ms).unwrap_or(0),
            timeout_ms: st.timeout_ms,
            on_timeout: match plan.on_timeout {
                OnTimeout::Kill => pb::TimeoutAction::Kill,
                OnTimeout::Pause => pb::TimeoutAction::Pause,
            } as i32,
            auto_resume: plan.auto_resume,
            extensions: st.extensions,
        }
    }

    /// SetTimeout's rules. On success returns whether the sandbox was expired
    /// (so the caller reopens the gate).
    #[allow(clippy::result_large_err)]
    fn set_timeout(&self, timeout_ms: u64, mode: i32) -> Result<bool, Status> {
        let mut st = self.state.lock().expect("lifecycle lock");
        let Some(plan) = st.plan else {
            if st.forced {
                return Err(Status::failed_precondition(detail::SANDBOX_TIMEOUT));
            }
            return Err(Status::failed_precondition(detail::LIFECYCLE_UNMANAGED));
        };
        if st.expired && plan.on_timeout == OnTimeout::Kill {
            return Err(Status::failed_precondition(detail::SANDBOX_TIMEOUT));
        }
        let mode = pb::TimeoutMode::try_from(mode).unwrap_or(pb::TimeoutMode::Unspecified);
        if mode == pb::TimeoutMode::Unspecified {
            return Err(Status::invalid_argument("mode must be EXACT or AT_LEAST"));
        }
        if timeout_ms == 0 {
            return Err(Status::invalid_argument("timeout_ms must be positive"));
        }
        if timeout_ms < 1000 {
            return Err(Status::invalid_argument("timeout below 1 s"));
        }
        let now = Instant::now();
        let cap = st.cap.unwrap_or(now);
        // Past the clock's range is past any cap (and no panic).
        let wanted = now.checked_add(Duration::from_millis(timeout_ms));
        let Some(wanted) = wanted.filter(|w| *w <= cap) else {
            return Err(Status::invalid_argument(format!(
                "timeout beyond cap; cap_unix_ms={}",
                unix_ms(cap)
            )));
        };
        let current = st.deadline.unwrap_or(now);
        let new_deadline = match mode {
            pb::TimeoutMode::AtLeast if !st.expired => current.max(wanted),
            _ => wanted,
        };
        let was_expired = st.expired;
        st.deadline = Some(new_deadline);
        st.timeout_ms = timeout_ms;
        st.extensions += 1;
        st.expired = false;
        st.grace_until = None;
        drop(st);
        self.deadline_tx.send_replace(Some(new_deadline));
        Ok(was_expired)
    }
}

/// `rayito.v1.LifecycleService`.
#[derive(Clone, Debug)]
pub(crate) struct LifecycleServiceImpl {
    pub(crate) lifecycle: std::sync::Arc<Lifecycle>,
    /// Reopened when SetTimeout moves an expired deadline.
    pub(crate) phase: PhaseCell,
}

#[tonic::async_trait]
impl pb::lifecycle_service_server::LifecycleService for LifecycleServiceImpl {
    async fn set_timeout(
        &self,
        request: Request<pb::SetTimeoutRequest>,
    ) -> Result<Response<pb::LifecycleState>, Status> {
        let req = request.into_inner();
        let was_expired = self.lifecycle.set_timeout(req.timeout_ms, req.mode)?;
        if was_expired {
            // SetTimeout moved the deadline of an expired (pause-mode) sandbox.
            if self.phase.get() == Phase::Expired {
                self.phase.set(Phase::Running);
            }
        }
        Ok(Response::new(self.lifecycle.snapshot()))
    }
}
