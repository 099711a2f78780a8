//! The readiness wait (docs/architecture.md, "One create, step by step"):
//! Health until `agent_ready && kernel_ready && sandbox_id != ""`, pausing
//! 0.25 s then 0.5 s between probes, with a GetMicrovm every 5 s to
//! notice a MicroVM that died before it was ready: the SDK's one poller
//! ([`crate::transport::Poller`]) with its first check after 5 s.

use std::time::Duration;

use crate::control::ControlPlane;
use crate::error::{Backoff, GrpcCode, SandboxError};
use crate::pb;
use crate::transport::{AgentConn, FirstCheck, Poller};

/// The pauses between readiness probes: 0.25 s, then 0.5 s. The
/// reference doubles to 2 s, so on AWS (first answer ~1.9 s, kernel ready
/// ~5.2 s) its "ready" lands up to 2 s after the agent is; a Health probe is
/// one small anonymous call to the MicroVM's endpoint (not the control
/// plane's quota), so probing twice a second costs little and lands within
/// 0.5 s. Once the agent answers, its Health holds the reply while the
/// kernel starts, so the pause matters only while the endpoint is not up.
const PAUSES: Backoff = Backoff::doubling(Duration::from_millis(250), Duration::from_millis(500));

/// What to do with the MicroVM when it does not become ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnNotReady {
    /// `create()`: terminate it (it is ours and useless).
    Terminate,
    /// `connect()`: leave it alone (it is someone else's).
    Keep,
}

/// The ready predicate.
pub(crate) fn is_ready(health: &pb::HealthResponse) -> bool {
    health.agent_ready && health.kernel_ready && !health.sandbox_id.is_empty()
}

/// A Health failure that only means "not yet".
fn not_yet(err: &SandboxError) -> bool {
    matches!(
        err.meta().grpc_code(),
        Some(GrpcCode::Unavailable | GrpcCode::DeadlineExceeded)
    )
}

/// Waits until the agent is ready.
///
/// # Errors
/// `SandboxNotReady { state, state_reason }` when `ready_timeout` passes or
/// the MicroVM ends first; `Sandbox { code: KernelFailed }` at once when the
/// agent says its kernel cannot start; any other Health failure as mapped (after which
/// the MicroVM is terminated when `on_failure` says so).
pub(crate) async fn wait_ready(
    conn: &AgentConn,
    control: &dyn ControlPlane,
    microvm_id: &str,
    ready_timeout: Duration,
    on_failure: OnNotReady,
) -> Result<pb::HealthResponse, SandboxError> {
    // A ready_timeout too large to add to the clock means no limit.
    let mut poller = Poller::new(&PAUSES, Some(ready_timeout), FirstCheck::Later);
    while !poller.expired() {
        if poller.take_check()
            && let Ok(vm) = control.get_microvm(microvm_id.to_owned()).await
            && vm.state.is_terminal()
        {
            return Err(SandboxError::not_ready(
                Some(vm.state),
                vm.state_reason.as_deref(),
                poller.elapsed(),
            )
            .with_attempts(poller.probes()));
        }
        let probe_timeout = poller.probe_timeout();
        match conn.health_with_kernel_failure(probe_timeout).await {
            Ok((health, _)) if is_ready(&health) => return Ok(health),
            // The agent runs the sandbox but says its kernel cannot start:
            // waiting longer cannot help.
            Ok((health, Some(reason))) if health.agent_ready && !health.sandbox_id.is_empty() => {
                if on_failure == OnNotReady::Terminate {
                    let _ = control.terminate_microvm(microvm_id.to_owned()).await;
                }
                return Err(SandboxError::kernel_failed(&reason).with_attempts(poller.probes()));
            }
            Ok(_) => {}
            Err(err) if not_yet(&err) => {}
            Err(err) => {
                if on_failure == OnNotReady::Terminate {
                    let _ = control.terminate_microvm(microvm_id.to_owned()).await;
                }
                return Err(err);
            }
        }
        poller.pause().await;
    }
    let probes = poller.probes();

    // Timed out: one GetMicrovm (errors ignored) to say where it stands.
    let vm = control.get_microvm(microvm_id.to_owned()).await.ok();
    let state = vm.as_ref().map(|vm| vm.state.clone());
    let state_reason = vm.as_ref().and_then(|vm| vm.state_reason.clone());
    if on_failure == OnNotReady::Terminate && !state.as_ref().is_some_and(|s| s.is_terminal()) {
        let _ = control.terminate_microvm(microvm_id.to_owned()).await;
    }
    Err(
        SandboxError::not_ready(state, state_reason.as_deref(), ready_timeout)
            .with_attempts(probes),
    )
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    /// Probes while the endpoint does not answer: 0.25 s, then every 0.5 s
    /// (not doubling to 2 s, which made "ready" land up to 2 s late on AWS).
    #[tokio::test(start_paused = true)]
    async fn probes_come_every_half_second_after_the_first_pause() {
        let mut poller = Poller::new(&PAUSES, Some(Duration::from_secs(3)), FirstCheck::Later);
        let start = Instant::now();
        let mut probes = Vec::new();
        while !poller.expired() {
            probes.push(start.elapsed().as_millis());
            poller.probe_timeout();
            poller.pause().await;
        }
        assert_eq!(probes, [0, 250, 750, 1_250, 1_750, 2_250, 2_750]);
    }
}
