//! Pause, resume and the by-id operations (wire contract 3.3, 3.4): what a
//! sandbox's lifecycle needs from the control plane, with or without a handle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::control::ControlPlane;
use crate::error::{ErrorKind, SandboxError, TimeoutScope};
use crate::pb;
use crate::state::SandboxState;
use crate::transport::{AgentConn, StateCheck, VmCheck};

/// Kept below the cap when a re-open is clamped to it (clock skew).
const CAP_MARGIN_MS: u64 = 2_000;
/// How often a state wait polls GetMicrovm (3.3: every 0.5 s).
const STATE_POLL: Duration = Duration::from_millis(500);

/// What a handle knows about its sandbox's lifecycle.
#[derive(Debug, Default)]
pub(crate) struct LifecycleMarks {
    /// The agent's `resume_generation` last seen ready (+1 per accepted
    /// `/resume`): a new value means every server stream was closed.
    resume_generation: AtomicU64,
    /// Set from the moment `pause()` asks for a suspension until a resume:
    /// background work must not wake the VM in between.
    pause_pending: AtomicBool,
}

impl LifecycleMarks {
    pub(crate) fn new(resume_generation: u64) -> Self {
        Self {
            resume_generation: AtomicU64::new(resume_generation),
            pause_pending: AtomicBool::new(false),
        }
    }

    pub(crate) fn resume_generation(&self) -> u64 {
        self.resume_generation.load(Ordering::SeqCst)
    }

    pub(crate) fn set_resume_generation(&self, generation: u64) {
        self.resume_generation.store(generation, Ordering::SeqCst);
    }

    pub(crate) fn pause_pending(&self) -> bool {
        self.pause_pending.load(Ordering::SeqCst)
    }

    pub(crate) fn set_pause_pending(&self, pending: bool) {
        self.pause_pending.store(pending, Ordering::SeqCst);
    }
}

/// Polls GetMicrovm every 0.5 s until the MicroVM is in `target`.
///
/// # Errors
/// `SandboxNotFound` when it ends (TERMINATING, TERMINATED or not found)
/// first; `Timeout { scope: StateWait }` after `timeout`; control-plane
/// failures.
pub(crate) async fn wait_for_state(
    control: &dyn ControlPlane,
    sandbox_id: &str,
    target: &SandboxState,
    feature: &str,
    timeout: Duration,
) -> Result<(), SandboxError> {
    // A timeout too large to add to the clock (a caller's `Duration::MAX`)
    // means no limit, never a panic.
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let vm = control.get_microvm(sandbox_id.to_owned()).await?;
        if &vm.state == target {
            return Ok(());
        }
        if vm.state.is_terminal() {
            return Err(SandboxError::sandbox_not_found(sandbox_id));
        }
        if deadline.is_some_and(|deadline| Instant::now() + STATE_POLL > deadline) {
            return Err(SandboxError::timeout(
                TimeoutScope::StateWait,
                feature,
                Some(timeout),
            ));
        }
        tokio::time::sleep(STATE_POLL).await;
    }
}

/// Asks for a suspension and, with `wait`, waits until SUSPENDED (3.3).
/// `Ok(false)` when it was already suspending or suspended, or the control
/// plane refused for its state.
///
/// # Errors
/// As [`wait_for_state`]; control-plane failures of GetMicrovm and
/// SuspendMicrovm other than a conflict.
pub(crate) async fn pause(
    control: &dyn ControlPlane,
    sandbox_id: &str,
    marks: &LifecycleMarks,
    wait: Option<Duration>,
) -> Result<bool, SandboxError> {
    let vm = control.get_microvm(sandbox_id.to_owned()).await?;
    if vm.state.is_terminal() {
        return Err(SandboxError::sandbox_not_found(sandbox_id));
    }
    // Suspend on an already suspended VM answers 200 on AWS: hence the
    // pre-read.
    if matches!(vm.state, SandboxState::Suspending | SandboxState::Suspended) {
        return Ok(false);
    }
    marks.set_pause_pending(true);
    match control.suspend_microvm(sandbox_id.to_owned()).await {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::SandboxState => {
            marks.set_pause_pending(false);
            return Ok(false);
        }
        Err(err) => {
            marks.set_pause_pending(false);
            return Err(err);
        }
    }
    if let Some(timeout) = wait {
        wait_for_state(
            control,
            sandbox_id,
            &SandboxState::Suspended,
            "pause",
            timeout,
        )
        .await?;
    }
    Ok(true)
}

/// ResumeMicrovm; a conflict is ignored unless the MicroVM has ended.
///
/// # Errors
/// `SandboxNotFound` when it does not exist or has ended; other
/// control-plane failures.
pub(crate) async fn request_resume(
    control: &dyn ControlPlane,
    sandbox_id: &str,
) -> Result<(), SandboxError> {
    match control.resume_microvm(sandbox_id.to_owned()).await {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == ErrorKind::SandboxState => {
            let vm = control.get_microvm(sandbox_id.to_owned()).await?;
            if vm.state.is_terminal() {
                Err(SandboxError::sandbox_not_found(sandbox_id))
            } else {
                Ok(())
            }
        }
        Err(err) => Err(err),
    }
}

/// After a resume or a connect (3.3, 3.4): a sandbox resumed past its
/// logical deadline is in RESUME_GRACE (then EXPIRED), where every call but
/// Health and SetTimeout gets `sandbox_timeout`; it is re-opened for its
/// own timeout with `SetTimeout(AT_LEAST)`. In any other phase (ACTIVE,
/// UNMANAGED, an agent that sent no lifecycle) nothing is sent. Returns
/// whether it re-opened.
///
/// # Errors
/// SetTimeout's failures (e.g. `InvalidArgument` when the timeout no
/// longer fits under the sandbox's cap).
pub(crate) async fn reopen_if_expired(
    conn: &AgentConn,
    health: &pb::HealthResponse,
    request_timeout: Duration,
) -> Result<bool, SandboxError> {
    let Some(state) = &health.lifecycle else {
        return Ok(false);
    };
    let expired = state.phase == pb::LifecyclePhase::ResumeGrace as i32
        || state.phase == pb::LifecyclePhase::Expired as i32;
    if !expired || state.timeout_ms == 0 {
        return Ok(false);
    }
    // Never past the cap (the agent would refuse): what is left of it,
    // less a margin for the clocks, when that is shorter.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let timeout_ms = match u64::try_from(state.cap_unix_ms.saturating_sub(now_ms)) {
        Ok(left) if state.cap_unix_ms > 0 => {
            state.timeout_ms.min(left.saturating_sub(CAP_MARGIN_MS))
        }
        _ if state.cap_unix_ms > 0 => 0,
        _ => state.timeout_ms,
    };
    if timeout_ms < 1_000 {
        // Nothing left to re-open for: calls keep saying `sandbox_timeout`.
        return Ok(false);
    }
    let request = pb::SetTimeoutRequest {
        timeout_ms,
        mode: pb::TimeoutMode::AtLeast as i32,
    };
    conn.set_timeout(request, request_timeout).await?;
    Ok(true)
}

/// `Sandbox::kill_by_id`: TerminateMicrovm; `false` when not found.
///
/// # Errors
/// Control-plane failures other than not-found.
pub(crate) async fn kill(
    control: &dyn ControlPlane,
    sandbox_id: &str,
) -> Result<bool, SandboxError> {
    // TerminateMicrovm is idempotent (it succeeds on a terminated MicroVM),
    // so only GetMicrovm can tell that it was already gone.
    let outcome = match control.get_microvm(sandbox_id.to_owned()).await {
        Ok(vm) if vm.state.is_terminal() => Ok(false),
        Ok(_) => control
            .terminate_microvm(sandbox_id.to_owned())
            .await
            .map(|()| true),
        Err(err) => Err(err),
    };
    match outcome {
        Err(err) if err.kind() == ErrorKind::SandboxNotFound => Ok(false),
        other => other,
    }
}

/// A sandbox id as 3.4 accepts it: 1 to 256 characters, not parsed.
///
/// # Errors
/// `InvalidArgument` (`sandbox_id`).
pub(crate) fn check_sandbox_id(sandbox_id: &str) -> Result<(), SandboxError> {
    if sandbox_id.is_empty() || sandbox_id.len() > 256 {
        return Err(SandboxError::invalid_argument(
            "sandbox_id",
            "a sandbox id must be 1 to 256 characters; pass the id the sandbox was created with",
        ));
    }
    Ok(())
}

/// What the reconnect poller asks the control plane: GetMicrovm, read as
/// [`VmCheck`]. A MicroVM whose `stateReason` mentions its maximum
/// duration was ended by it (AWS and the emulator say so in that field).
pub(crate) fn state_check(
    control: Arc<dyn ControlPlane>,
    sandbox_id: String,
    marks: Arc<LifecycleMarks>,
) -> StateCheck {
    Arc::new(move || {
        let control = control.clone();
        let sandbox_id = sandbox_id.clone();
        let paused_here = marks.pause_pending();
        Box::pin(async move {
            let vm = control.get_microvm(sandbox_id).await?;
            Ok(match vm.state {
                SandboxState::Running => VmCheck::Running,
                SandboxState::Suspending | SandboxState::Suspended => VmCheck::Suspended {
                    auto_resume: vm.auto_resume,
                    paused_here,
                },
                state if state.is_terminal() => VmCheck::Ending {
                    max_duration: vm
                        .state_reason
                        .as_deref()
                        .is_some_and(|reason| reason.contains("maximum duration")),
                },
                _ => VmCheck::Other,
            })
        })
    })
}
