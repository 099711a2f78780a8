//! MicroVM lifecycle: create (agent + proxy), then the hooks that move the
//! state, as AWS drives them: `/run` after RunMicrovm (PENDING -> RUNNING, a
//! failure -> TERMINATING -> TERMINATED), `/suspend` (SUSPENDING ->
//! SUSPENDED), `/resume` (PENDING -> RUNNING), `/terminate` (TERMINATING ->
//! TERMINATED, `Success.`), the maximum duration, the kill-mode deadline
//! (the agent "exits 124") and idle auto-suspend.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::api_error::ApiError;
use super::hooks::{self, Hook, HookError};
use super::ids;
use super::model::MicrovmState::{self, *};
use super::proxy;
use super::registry::{Shared, Spec, Vm};
use rayito_agent::agent::{Agent, AgentConfig};
use rayito_agent::persist::{LocalS3, PersistenceAccess};

/// stateReason of a normal terminate.
pub(crate) const REASON_SUCCESS: &str = "Success.";
/// stateReason when the maximum duration is reached.
pub(crate) const REASON_MAX_DURATION: &str = "MicroVM reached its maximum duration.";
/// stateReason after [`kill_agent`] (the guest's init died of SIGKILL).
pub(crate) const REASON_KILLED: &str = "Container Stopped with Exit Code: 137";
/// stateReason when a MicroVM stayed suspended for its
/// `idlePolicy.suspendedDurationSeconds`.
pub(crate) const REASON_SUSPENDED_TOO_LONG: &str =
    "MicroVM stayed suspended for its suspendedDurationSeconds.";
/// stateReason when the agent's deadline passed in kill mode (rayd exits 124).
pub(crate) const REASON_DEADLINE_EXIT: &str = "Container Stopped with Exit Code: 124";
/// How long a terminating agent gets to finish before it is dropped.
const TERMINATE_GRACE: Duration = Duration::from_secs(5);

fn loopback0() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// The stateReason AWS gives when a hook fails.
fn hook_failure(hook: Hook, outcome: Result<http::StatusCode, HookError>) -> String {
    match outcome {
        Ok(status) => format!(
            "{} lifecycle hook returned HTTP status {}.",
            hook.title(),
            status.as_u16()
        ),
        Err(HookError::Timeout) => format!("{} lifecycle hook timed out.", hook.title()),
        Err(HookError::Unreachable) => {
            format!("{} lifecycle hook could not be reached.", hook.title())
        }
    }
}

/// A MicroVM made before its RunMicrovm: its id, root directory, proxy
/// listener and a started agent. [`create`] turns it into a [`Vm`].
pub(crate) struct Prepared {
    id: String,
    root: std::path::PathBuf,
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    proxy_addr: SocketAddr,
    endpoint: String,
    pub(crate) agent: Agent,
}

/// Makes a MicroVM's root directory, proxy listener and agent.
/// `prestart_kernel` starts the agent's default kernel at once (the warm
/// spare) instead of at `/run`. `layer`: the image version's layer, which
/// the sandbox runs on (`None`: the host's root as it is).
async fn prepare(
    shared: &Arc<Shared>,
    prestart_kernel: bool,
    layer: Option<std::path::PathBuf>,
) -> Result<Prepared, ApiError> {
    let id = ids::microvm_id();
    let root = shared.settings.root.join(&id);
    tokio::fs::create_dir_all(&root).await.map_err(|e| {
        tracing::warn!(error = %e, "emulator: cannot create a MicroVM root directory");
        ApiError::internal("The MicroVM could not be created.")
    })?;
    let cannot_bind = |e: std::io::Error| {
        tracing::warn!(error = %e, "emulator: cannot bind a proxy listener");
        ApiError::internal("The MicroVM could not be created.")
    };
    let (listener, acceptor) = match &shared.tls {
        Some(tls) => {
            let (listener, ip) = super::tls::bind().await.map_err(cannot_bind)?;
            (listener, Some(tls.acceptor(ip).map_err(cannot_bind)?))
        }
        None => (
            TcpListener::bind(loopback0()).await.map_err(cannot_bind)?,
            None,
        ),
    };
    let proxy_addr = listener
        .local_addr()
        .map_err(|_| ApiError::internal("The MicroVM could not be created."))?;
    // AWS answers a bare host name; TLS mode answers the bare address.
    let endpoint = if acceptor.is_some() {
        proxy_addr.ip().to_string()
    } else {
        proxy_addr.to_string()
    };
    // A template's files, when its build left them in the layer.
    let template_dir = match &layer {
        Some(layer) => {
            let dir = layer.join("etc/rayito");
            tokio::fs::try_exists(&dir)
                .await
                .unwrap_or(false)
                .then_some(dir)
        }
        None => None,
    };
    let config = AgentConfig {
        root: root.clone(),
        image_layer: layer,
        template_dir,
        // A MicroVM made ahead must not run its image's start command
        // before a sandbox is its own (see AgentConfig).
        defer_template_start: true,
        grpc_addr: loopback0(),
        hooks_addr: loopback0(),
        prestart_kernel,
        limits: shared.settings.sandbox_limits,
        hooks_token: Some(shared.hooks.token().clone()),
        // The transfers' presigned URLs name the emulator's S3 endpoint
        // (or the one `EmulatorConfig::transfer_s3_endpoint` names).
        local_s3_endpoint: Some(shared.settings.transfer_s3_addr),
        // Never AWS's: the sandbox's role is known at RunMicrovm ([`create`]).
        persistence: PersistenceAccess::Local(None),
        transfers: shared.settings.agent_transfers,
        chunked_import: shared.settings.agent_chunked_import,
        metrics_interval: shared.settings.agent_metrics,
        slow_subscriber_grace: shared.settings.agent_slow_subscriber_grace,
        retained_after_end: shared.settings.agent_retained_after_end,
        egress: shared.settings.agent_egress,
        efs_volumes: shared.settings.agent_efs_volumes,
        s3_mounts: shared.settings.agent_s3_mounts,
        gateway: rayito_agent::gateway::GatewayOptions {
            enabled: shared.settings.agent_secret_gateway,
            local_upstreams: shared.settings.gateway_upstreams.clone(),
            ..Default::default()
        },
        // Volumes are directories of the emulator's EFS.
        local_volumes: Some(shared.efs.volumes()),
        // The console the events pipeline reads (its log group's lines).
        event_lines: Some(super::events::sink(&shared.events, id.clone())),
        ..AgentConfig::default()
    };
    let agent = match Agent::start(config).await {
        Ok(agent) => agent,
        Err(e) => {
            tracing::warn!(error = %e, "emulator: the MicroVM's agent did not start");
            let _ = tokio::fs::remove_dir_all(&root).await;
            return Err(ApiError::internal("The MicroVM could not be created."));
        }
    };
    Ok(Prepared {
        id,
        root,
        listener,
        acceptor,
        proxy_addr,
        endpoint,
        agent,
    })
}

/// Creates a MicroVM: its root directory, its agent, its proxy listener
/// (the warm spare's, when there is one: its kernel is already up). It
/// starts PENDING; [`start`] then drives `/run`. The warm spare runs on
/// the host's root; a version with a `layer` has spares of its own, made
/// after its first MicroVM (its start command already running in them,
/// as in the snapshot AWS takes after `ready`).
pub(crate) async fn create(
    shared: &Arc<Shared>,
    spec: Spec,
    layer: Option<std::path::PathBuf>,
) -> Result<Arc<Vm>, ApiError> {
    let spare = shared.take_spare(layer.as_deref());
    let prepared = match spare {
        Some(prepared) => prepared,
        None => prepare(shared, false, layer.clone()).await?,
    };
    let Prepared {
        id,
        root,
        listener,
        acceptor,
        proxy_addr,
        endpoint,
        agent,
    } = prepared;
    agent.set_persistence_access(persistence_access(shared, &spec));
    let vm = Arc::new(Vm::new(id, spec, proxy_addr, endpoint, agent, root));
    if let Some(task) = shared.spawn(proxy::serve(shared.clone(), vm.clone(), listener, acceptor)) {
        vm.set_proxy_task(task);
    }
    if shared.settings.warm_spare {
        refill_after_first_answer(shared, &vm, layer);
    }
    Ok(vm)
}

/// How long the next warm spare waits, at most, for the MicroVM just
/// created to answer and go quiet.
const REFILL_WAIT: Duration = Duration::from_millis(250);
/// How long no byte must cross that MicroVM's proxy before the next spare
/// is prepared.
const REFILL_QUIET: Duration = Duration::from_millis(10);

/// Prepares the next warm spare once `vm`'s agent has answered its first
/// request through the proxy (its creator's readiness probe) and no byte
/// has crossed the proxy for [`REFILL_QUIET`] (the creator's first calls
/// are done), or after [`REFILL_WAIT`] at most: the spare's agent and
/// interpreter start (~30 ms of CPU) no longer run beside the create that
/// took the last spare and its first `run_code`, which on two cores they
/// slowed (docs/performance.md, "Create to ready against the reference
/// SDK (issue 44 §1)"). A create that follows the previous one within about 50 ms finds
/// no spare, as before.
fn refill_after_first_answer(
    shared: &Arc<Shared>,
    vm: &Arc<Vm>,
    layer: Option<std::path::PathBuf>,
) {
    let (s, v) = (shared.clone(), vm.clone());
    shared.spawn(async move {
        let deadline = tokio::time::Instant::now() + REFILL_WAIT;
        if tokio::time::timeout_at(deadline, v.first_answer())
            .await
            .is_ok()
        {
            loop {
                let quiet_at = tokio::time::Instant::from_std(v.last_activity() + REFILL_QUIET);
                let now = tokio::time::Instant::now();
                if quiet_at <= now || now >= deadline {
                    break;
                }
                tokio::time::sleep_until(quiet_at.min(deadline)).await;
            }
        }
        drop(v);
        refill_spare(&s, layer);
    });
}

/// What a sandbox's Checkpoint and Restore use: with an execution role,
/// the emulator's S3 endpoint and its first access key (in process, never
/// through an environment sandbox code could read); without one, nothing
/// (PERMISSION_DENIED, as a MicroVM without a role).
fn persistence_access(shared: &Shared, spec: &Spec) -> PersistenceAccess {
    if spec.execution_role_arn.is_none() {
        return PersistenceAccess::Local(None);
    }
    let settings = &shared.settings;
    let key = &settings.access_keys[0];
    PersistenceAccess::Local(Some(LocalS3 {
        endpoint_url: format!("http://{}", settings.s3_addr),
        region: settings.region.clone(),
        access_key_id: key.id.clone(),
        secret_access_key: key.secret.clone(),
        session_token: key.session_token.clone(),
    }))
}

/// Prepares the next warm spare in the background, unless one is ready or
/// under way.
pub(crate) fn refill_spare(shared: &Arc<Shared>, layer: Option<std::path::PathBuf>) {
    if !shared.begin_spare(layer.as_deref()) {
        return;
    }
    let s = shared.clone();
    let for_layer = layer.clone();
    let spawned = shared.spawn(async move {
        let prepared = prepare(&s, true, for_layer.clone()).await.ok();
        s.end_spare(for_layer.as_deref(), prepared);
    });
    if spawned.is_none() {
        shared.end_spare(layer.as_deref(), None);
    }
}

/// Posts `/run` in the background and arms the maximum-duration timer.
pub(crate) fn start(shared: &Arc<Shared>, vm: &Arc<Vm>, payload: String) {
    let (s, v) = (shared.clone(), vm.clone());
    shared.spawn(async move {
        // The latency profile's boot time: PENDING, the agent not ready
        // (before the lock, so that a terminate meanwhile is not held up).
        added_latency(s.settings.latency.create).await;
        let op = v.op.lock().await;
        if v.state() != Pending {
            return;
        }
        let body = hooks::run_body(&v.id, &payload);
        tracing::trace!(microvm = %v.id, "emulator: posting /run");
        match s.hooks.post(v.hooks_addr, Hook::Run, Some(body)).await {
            Ok(status) if status.is_success() => {
                tracing::trace!(microvm = %v.id, "emulator: /run answered");
                let _ = v.transition(&[Pending], Running);
            }
            outcome => {
                drop(op);
                // AWS stops the VM without calling /terminate when /run fails.
                if v.begin_termination(&hook_failure(Hook::Run, outcome)) {
                    finish_termination(s, v, false).await;
                }
            }
        }
    });
    let (s, v) = (shared.clone(), vm.clone());
    let max = Duration::from_secs(vm.spec.max_duration_seconds.max(1) as u64);
    let timer = shared.spawn(async move {
        tokio::time::sleep(max).await;
        if v.begin_termination(REASON_MAX_DURATION) {
            finish_termination(s, v, true).await;
        }
    });
    if let Some(timer) = timer {
        vm.add_timer(timer);
    }
    watch_deadline_exit(shared, vm);
    watch_idle(shared, vm);
}

/// When the agent's deadline passes in kill mode, rayd exits 124 and AWS
/// ends the MicroVM (about 15 s later, measured): so does the emulator,
/// after `deadline_exit_delay`, without hooks.
fn watch_deadline_exit(shared: &Arc<Shared>, vm: &Arc<Vm>) {
    let Some(exited) = vm.with_agent(|a| a.deadline_exit()) else {
        return;
    };
    let delay = shared.settings.deadline_exit_delay;
    let (s, v) = (shared.clone(), vm.clone());
    let timer = shared.spawn(async move {
        if !exited.await {
            return;
        }
        tokio::time::sleep(delay).await;
        if v.begin_termination(REASON_DEADLINE_EXIT) {
            finish_termination(s, v, false).await;
        }
    });
    if let Some(timer) = timer {
        vm.add_timer(timer);
    }
}

/// With an idle policy, a RUNNING MicroVM through whose proxy no byte has
/// passed for `maxIdleDurationSeconds` is suspended, as by SuspendMicrovm
/// (the proxy resumes it on the next request when `autoResumeEnabled`).
fn watch_idle(shared: &Arc<Shared>, vm: &Arc<Vm>) {
    let Some(secs) = vm
        .spec
        .idle_policy
        .as_ref()
        .and_then(|p| p.max_idle_duration_seconds)
    else {
        return;
    };
    let idle = shared
        .settings
        .max_idle_override
        .unwrap_or(Duration::from_secs(secs.max(1) as u64));
    let (s, v) = (shared.clone(), vm.clone());
    let timer = shared.spawn(async move {
        loop {
            let due = v.last_activity() + idle;
            if std::time::Instant::now() < due {
                tokio::time::sleep_until(due.into()).await;
                continue;
            }
            match v.state() {
                Running => {
                    tracing::debug!(microvm = %v.id, "emulator: idle, suspending");
                    let _ = suspend(&s, &v);
                }
                Terminating | Terminated => return,
                // Not running: the idle clock starts again once it is.
                Pending | Suspending | Suspended => {}
            }
            v.touch();
        }
    });
    if let Some(timer) = timer {
        vm.add_timer(timer);
    }
}

/// TerminateMicrovm: idempotent; the work happens in the background.
pub(crate) fn terminate(shared: &Arc<Shared>, vm: &Arc<Vm>) {
    if vm.begin_termination(REASON_SUCCESS) {
        let (s, v) = (shared.clone(), vm.clone());
        shared.spawn(finish_termination(s, v, true));
    }
}

/// Ends a MicroVM already marked TERMINATING: `/terminate` (when asked),
/// a grace period for the agent, then agent and proxy stopped, tokens
/// revoked, TERMINATED, root directory removed.
async fn finish_termination(shared: Arc<Shared>, vm: Arc<Vm>, call_hook: bool) {
    let _op = vm.op.lock().await;
    let agent = vm.take_agent();
    if call_hook && let Some(agent) = &agent {
        let _ = shared
            .hooks
            .post(vm.hooks_addr, Hook::Terminate, None)
            .await;
        let _ = tokio::time::timeout(TERMINATE_GRACE, agent.terminated()).await;
    }
    vm.stop_proxy();
    drop(agent);
    shared.revoke_tokens(&vm.id);
    vm.mark_terminated();
    shared.ended(&vm);
    super::sandbox_logs::record(
        &shared,
        &vm,
        format!(
            "rayito emulator: MicroVM {} terminated ({})",
            vm.id,
            vm.to_out().state_reason.unwrap_or_default()
        ),
    );
    let _ = tokio::fs::remove_dir_all(&vm.root).await;
    // Last, with no await after it: this may be running inside one of
    // those timers, and an abort takes effect at the next await.
    vm.abort_timers();
}

fn wrong_state(vm: &Vm, verb: &str, state: MicrovmState) -> ApiError {
    ApiError::conflict(
        &vm.id,
        format!(
            "Cannot {verb} MicroVM {} in state {}.",
            vm.id,
            state.as_str()
        ),
    )
}

/// SuspendMicrovm: 200 on RUNNING (then SUSPENDING -> SUSPENDED in the
/// background) and on SUSPENDING/SUSPENDED (as measured on AWS).
///
/// # Errors
/// ConflictException in PENDING, TERMINATING, TERMINATED.
pub(crate) fn suspend(shared: &Arc<Shared>, vm: &Arc<Vm>) -> Result<(), ApiError> {
    match vm.transition(&[Running], Suspending) {
        Ok(_) => {}
        Err(Suspending | Suspended) => return Ok(()),
        Err(state) => return Err(wrong_state(vm, "suspend", state)),
    }
    let (s, v) = (shared.clone(), vm.clone());
    shared.spawn(async move {
        added_latency(s.settings.latency.suspend).await;
        let op = v.op.lock().await;
        if v.state() != Suspending {
            return;
        }
        match s.hooks.post(v.hooks_addr, Hook::Suspend, None).await {
            Ok(status) if status.is_success() => {
                if v.transition(&[Suspending], Suspended).is_ok() {
                    arm_suspended_limit(&s, &v);
                }
            }
            outcome => {
                drop(op);
                // A failed /suspend makes AWS terminate the VM.
                if v.begin_termination(&hook_failure(Hook::Suspend, outcome)) {
                    finish_termination(s, v, true).await;
                }
            }
        }
    });
    Ok(())
}

/// With an idle policy, a MicroVM suspended for `suspendedDurationSeconds`
/// (0 = at once) is terminated, without hooks (its guest is frozen). A
/// resume in between disarms the timer (the suspension count moves on).
fn arm_suspended_limit(shared: &Arc<Shared>, vm: &Arc<Vm>) {
    let Some(secs) = vm
        .spec
        .idle_policy
        .as_ref()
        .and_then(|p| p.suspended_duration_seconds)
    else {
        return;
    };
    let suspension = vm.suspensions();
    let (s, v) = (shared.clone(), vm.clone());
    let timer = shared.spawn(async move {
        tokio::time::sleep(Duration::from_secs(secs.max(0) as u64)).await;
        let still = v.state() == Suspended && v.suspensions() == suspension;
        if still && v.begin_termination(REASON_SUSPENDED_TOO_LONG) {
            finish_termination(s, v, false).await;
        }
    });
    if let Some(timer) = timer {
        vm.add_timer(timer);
    }
}

/// ResumeMicrovm: on SUSPENDED, PENDING while `/resume` runs, then RUNNING;
/// answers when the hook has answered. 200 on PENDING/RUNNING.
///
/// # Errors
/// ConflictException in SUSPENDING, TERMINATING, TERMINATED;
/// InternalServerException if the emulator stops meanwhile.
pub(crate) async fn resume(shared: &Arc<Shared>, vm: &Arc<Vm>) -> Result<(), ApiError> {
    // The work runs as an owned task so that a caller hanging up mid-call
    // cannot leave the MicroVM half-resumed.
    let (tx, rx) = oneshot::channel();
    let (s, v) = (shared.clone(), vm.clone());
    shared.spawn(async move {
        let _ = tx.send(resume_now(s, v).await);
    });
    rx.await
        .unwrap_or_else(|_| Err(ApiError::internal("The emulator is stopping.")))
}

async fn resume_now(shared: Arc<Shared>, vm: Arc<Vm>) -> Result<(), ApiError> {
    let op = vm.op.lock().await;
    match vm.transition(&[Suspended], Pending) {
        Ok(_) => {}
        Err(Pending | Running) => return Ok(()),
        Err(state) => return Err(wrong_state(&vm, "resume", state)),
    }
    added_latency(shared.settings.latency.resume).await;
    match shared.hooks.post(vm.hooks_addr, Hook::Resume, None).await {
        Ok(status) if status.is_success() => {
            let _ = vm.transition(&[Pending], Running);
        }
        outcome => {
            drop(op);
            if vm.begin_termination(&hook_failure(Hook::Resume, outcome)) {
                let (s, v) = (shared.clone(), vm.clone());
                shared.spawn(finish_termination(s, v, true));
            }
        }
    }
    Ok(())
}

/// Waits out one step of the latency profile (nothing when it is off).
async fn added_latency(time: Duration) {
    if !time.is_zero() {
        tokio::time::sleep(time).await;
    }
}

/// Fault: kills the agent abruptly; the MicroVM then terminates (no hook).
pub(crate) fn kill_agent(shared: &Arc<Shared>, microvm_id: &str) -> bool {
    let Some(vm) = shared.find(microvm_id) else {
        return false;
    };
    if vm.with_agent(|a| a.kill()).is_none() {
        return false;
    }
    if vm.begin_termination(REASON_KILLED) {
        shared.spawn(finish_termination(shared.clone(), vm, false));
    }
    true
}
