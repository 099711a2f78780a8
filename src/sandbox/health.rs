//! `Sandbox::health`: the agent's Health as a typed value (the reference's
//! `get_health()`): readiness, the agent's version and uptime, the
//! sandbox's identity as the agent sees it, its managed lifecycle, how its
//! egress policy is enforced, and what the guest has.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::{EgressEnforcement, OnTimeout};
use crate::pb;

/// What a sandbox's agent says of itself ([`crate::Sandbox::health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxHealth {
    /// The agent serves calls.
    pub agent_ready: bool,
    /// The default code kernel answers.
    pub kernel_ready: bool,
    /// The agent's version.
    pub agent_version: String,
    /// Since the agent started, suspended time included.
    pub uptime: Duration,
    /// The sandbox id the agent was launched for (empty before its run
    /// hook).
    pub sandbox_id: String,
    /// How many times the sandbox was resumed.
    pub resume_generation: u64,
    /// The guest clock minus the host's, in milliseconds, as the agent
    /// measured it at its last resume.
    pub clock_offset_ms: i64,
    /// A resume found the code kernels' state gone (their variables must be
    /// set again).
    pub kernel_state_lost: bool,
    /// The sandbox's metadata.
    pub metadata: BTreeMap<String, String>,
    /// The instance metadata service is blocked for sandbox code.
    pub imds_blocked: bool,
    /// Calls to the agent's hooks that were refused; not 0 means something
    /// holds a token for every port.
    pub hook_anomalies: u64,
    /// The managed lifecycle, when the sandbox has one.
    pub lifecycle: Option<LifecycleHealth>,
    /// How the egress policy is enforced.
    pub egress_enforcement: EgressEnforcement,
    /// The guest's CPUs.
    pub cpu_count: u32,
    /// The guest's memory.
    pub memory_total_bytes: u64,
}

/// A managed lifecycle as the agent runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LifecycleHealth {
    /// Where the lifecycle is.
    pub phase: LifecyclePhase,
    /// When the timeout acts, if it is set.
    pub deadline: Option<SystemTime>,
    /// The latest the sandbox may live to, if capped.
    pub cap: Option<SystemTime>,
    /// The timeout each extension restarts.
    pub timeout: Duration,
    /// What the timeout does.
    pub on_timeout: OnTimeout,
    /// Traffic resumes a suspended sandbox.
    pub auto_resume: bool,
    /// How many times the timeout was extended.
    pub extensions: u32,
}

/// The phase of a managed lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LifecyclePhase {
    /// Not managed by the agent.
    Unmanaged,
    /// Counting down to its deadline.
    Active,
    /// Just resumed: the deadline waits for the grace to pass.
    ResumeGrace,
    /// The deadline passed; the timeout's action is under way.
    Expired,
    /// A phase this SDK does not know (or the agent did not say).
    Unspecified,
}

impl SandboxHealth {
    pub(crate) fn from_pb(h: pb::HealthResponse) -> Self {
        Self {
            agent_ready: h.agent_ready,
            kernel_ready: h.kernel_ready,
            agent_version: h.agent_version,
            uptime: Duration::from_millis(h.uptime_ms),
            sandbox_id: h.sandbox_id,
            resume_generation: h.resume_generation,
            clock_offset_ms: h.clock_offset_ms,
            kernel_state_lost: h.kernel_state_lost,
            metadata: h.metadata.into_iter().collect(),
            imds_blocked: h.imds_blocked,
            hook_anomalies: h.hook_anomalies,
            lifecycle: h.lifecycle.map(LifecycleHealth::from_pb),
            egress_enforcement: EgressEnforcement::from_i32(h.egress_enforcement),
            cpu_count: h.cpu_count,
            memory_total_bytes: h.memory_total_bytes,
        }
    }
}

impl LifecycleHealth {
    fn from_pb(l: pb::LifecycleState) -> Self {
        let phase = match pb::LifecyclePhase::try_from(l.phase) {
            Ok(pb::LifecyclePhase::Unmanaged) => LifecyclePhase::Unmanaged,
            Ok(pb::LifecyclePhase::Active) => LifecyclePhase::Active,
            Ok(pb::LifecyclePhase::ResumeGrace) => LifecyclePhase::ResumeGrace,
            Ok(pb::LifecyclePhase::Expired) => LifecyclePhase::Expired,
            _ => LifecyclePhase::Unspecified,
        };
        let on_timeout = match pb::TimeoutAction::try_from(l.on_timeout) {
            Ok(pb::TimeoutAction::Pause) => OnTimeout::Pause,
            _ => OnTimeout::Kill,
        };
        Self {
            phase,
            deadline: unix_ms(l.deadline_unix_ms),
            cap: unix_ms(l.cap_unix_ms),
            timeout: Duration::from_millis(l.timeout_ms),
            on_timeout,
            auto_resume: l.auto_resume,
            extensions: l.extensions,
        }
    }
}

/// A time from the wire's milliseconds; 0 or less is none.
fn unix_ms(ms: i64) -> Option<SystemTime> {
    let ms = u64::try_from(ms).ok().filter(|ms| *ms > 0)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}
