//! The whole of one agent's state, held by the hooks and the agent (which
//! builds each service from the parts it uses), and the phase transitions
//! the hooks and the deadline drive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::code::CodeServiceImpl;
use crate::lifecycle::Lifecycle;
use crate::payload::{self, OnTimeout};
use crate::phase::{Phase, PhaseCell};
use crate::process::ProcessTable;
use crate::pty::PtyTable;
use crate::run::{RunInfo, RunState};
use crate::sandbox::SandboxEnv;
use crate::server::ServeState;
use crate::template::TemplateGate;

/// One agent's shared state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub env: SandboxEnv,
    pub phase: PhaseCell,
    pub code: CodeServiceImpl,
    pub processes: Arc<ProcessTable>,
    /// Terminal sessions (the PtyService; listed by Process.List too).
    pub ptys: Arc<PtyTable>,
    pub lifecycle: Arc<Lifecycle>,
    /// The image's template readiness (what `/ready` answers).
    pub template: TemplateGate,
    /// The template's start command, when it waits for `/run`
    /// (`AgentConfig::defer_template_start`).
    pub deferred_start: Mutex<Option<crate::template::StartSpec>>,
    pub run: Arc<RunState>,
    /// Bytes a write, import or restore leaves free on the disk.
    pub disk_reserve: Arc<AtomicU64>,
    /// The S3-staged transfers (StartImport / StartExport).
    pub transfers: Arc<crate::transfer::Transfers>,
    pub serve: watch::Sender<ServeState>,
    pub terminated: watch::Sender<bool>,
    /// Set when the deadline passed in kill mode: the moment the real
    /// agent exits with status 124 (the emulator then ends the MicroVM).
    pub deadline_exit: watch::Sender<bool>,
    /// Checkpoint and Restore: the one-at-a-time guard and the access.
    pub persist: Arc<crate::persist::Persist>,
    /// Egress enforcement (`network.enforce` in the run payload).
    pub egress: Arc<crate::egress::Egress>,
    /// The secret gateways (Configure's `secret_gateway` section).
    pub gateways: Arc<crate::gateway::Gateways>,
    /// The EFS volumes (Configure's `efs_volumes` section).
    pub volumes: Arc<crate::efs_volumes::EfsVolumes>,
    /// The S3 mounts (Configure's `s3_mounts` section).
    pub s3_mounts: Arc<crate::s3_mounts::S3Mounts>,
    /// How many Configure calls the agent answered (whatever their
    /// sections): what shows that a `create` sends one.
    pub configure_calls: Arc<AtomicU64>,
    /// The lifecycle events (Configure's `lifecycle_events` section).
    pub events: Arc<crate::lifecycle_events::LifecycleEvents>,
    /// Telemetry export (Configure's `telemetry_export` section).
    pub telemetry: Arc<crate::telemetry_export::TelemetryExports>,
}

/// How long the agent waits on its streams' readers
/// (`AgentConfig::slow_subscriber_grace`, `AgentConfig::retained_after_end`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamWaits {
    pub slow_subscriber_grace: std::time::Duration,
    pub retained_after_end: std::time::Duration,
}

/// The `/run` hook's answer body.
pub(crate) const RUN_OK: &str = "ok";
/// A repeated `/run`.
pub(crate) const RUN_ALREADY_RAN: &str = "already_ran";
/// A `/run` whose payload was invalid: accepted, but the agent stays token-less.
pub(crate) const RUN_INVALID_PAYLOAD: &str = "invalid_payload";

impl Shared {
    /// The state of a fresh agent; `streams` are its output and Reattach
    /// waits ([`StreamWaits`]).
    pub(crate) fn new(env: SandboxEnv, disk_reserve: u64, streams: StreamWaits) -> Self {
        let phase = PhaseCell::new();
        let code =
            CodeServiceImpl::retaining(env.clone(), phase.clone(), streams.retained_after_end);
        let (serve, _) = watch::channel(ServeState::Serving);
        let (terminated, _) = watch::channel(false);
        let (deadline_exit, _) = watch::channel(false);
        // Replaced by `Agent::start` with the configured one.
        let gateways = Arc::new(crate::gateway::Gateways::new(
            crate::gateway::GatewayOptions {
                enabled: false,
                ..Default::default()
            },
            env.clone(),
        ));
        let persist: Arc<crate::persist::Persist> = Arc::default();
        // Replaced by `Agent::start` with the configured one.
        let s3_mounts = Arc::new(crate::s3_mounts::S3Mounts::new(
            false,
            env.clone(),
            persist.clone(),
            crate::s3_mounts::Allowlist::default(),
        ));
        // Replaced by `Agent::start` with the configured one.
        let volumes = Arc::new(crate::efs_volumes::EfsVolumes::new(
            crate::efs_volumes::VolumeOptions::default(),
            env.clone(),
        ));
        let run = Arc::new(RunState::new());
        // Replaced by `Agent::start` with the configured one.
        let events = Arc::new(crate::lifecycle_events::LifecycleEvents::new(
            false,
            None,
            run.clone(),
        ));
        let telemetry = Arc::new(crate::telemetry_export::TelemetryExports::new(
            false,
            None,
            persist.clone(),
            run.clone(),
        ));
        Self {
            processes: Arc::new(ProcessTable::new(
                env.clone(),
                phase.clone(),
                streams.slow_subscriber_grace,
            )),
            ptys: Arc::new(PtyTable::new(env.clone(), phase.clone())),
            env,
            phase,
            code,
            lifecycle: Arc::default(),
            template: TemplateGate::default(),
            deferred_start: Mutex::new(None),
            run,
            disk_reserve: Arc::new(AtomicU64::new(disk_reserve)),
            transfers: Arc::default(),
            deadline_exit,
            serve,
            terminated,
            persist,
            egress: Arc::new(crate::egress::Egress::new(false, Vec::new())),
            gateways,
            volumes,
            s3_mounts,
            configure_calls: Arc::default(),
            events,
            telemetry,
        }
    }

    /// `/run`: accepted once; an invalid payload leaves the agent token-less.
    pub(crate) fn on_run(&self, microvm_id: &str, payload_text: Option<&str>) -> &'static str {
        let mut run = self.run.info.lock().expect("run lock");
        if run.is_some() {
            self.run.hook_anomalies.fetch_add(1, Ordering::Relaxed);
            return RUN_ALREADY_RAN;
        }
        let parsed = payload_text.and_then(payload::parse);
        let mut info = RunInfo {
            sandbox_id: microvm_id.to_owned(),
            ..RunInfo::default()
        };
        let answer = match parsed {
            None => {
                tracing::warn!("run payload invalid; the agent stays token-less");
                RUN_INVALID_PAYLOAD
            }
            Some(p) => {
                info.metadata = p.metadata;
                info.token_sha256 = p.token_sha256;
                self.env.set_default_envs(p.envs);
                self.env.set_run_options(p.workdir, p.cpu_seconds);
                if let Some(plan) = p.lifecycle {
                    self.lifecycle.install(plan);
                }
                RUN_OK
            }
        };
        *run = Some(info);
        drop(run);
        self.code.warm_up();
        self.run.ran.send_replace(true);
        answer
    }

    /// `/suspend`: close the gate; live streams end in their schema's form
    /// (they watch the phase); processes keep running.
    pub(crate) fn on_suspend(&self) {
        if self.phase.get() == Phase::Terminating {
            return;
        }
        self.run.suspended.store(true, Ordering::SeqCst);
        self.phase.set(Phase::Suspending);
    }

    /// `/resume`: +1 generation for a resume that follows a suspend; reopen.
    pub(crate) fn on_resume(&self) {
        if self.phase.get() == Phase::Terminating
            || !self.run.suspended.swap(false, Ordering::SeqCst)
        {
            return;
        }
        self.run.resume_generation.fetch_add(1, Ordering::Relaxed);
        self.lifecycle.on_resume();
        if self.lifecycle.is_expired() {
            self.phase.set(Phase::Expired);
        } else {
            self.phase.set(Phase::Running);
        }
    }

    /// `/terminate` (and `Agent::shutdown`): gate, kill everything, stop serving.
    pub(crate) fn on_terminate(&self) {
        self.phase.set(Phase::Terminating);
        self.kill_everything();
        self.serve.send_if_modified(|s| {
            if *s == ServeState::Serving {
                *s = ServeState::Graceful;
                true
            } else {
                false
            }
        });
        self.terminated.send_replace(true);
    }

    /// Abrupt stop: drop connections, kill processes, no hook semantics.
    pub(crate) fn abort(&self) {
        self.processes.cut();
        self.code.cut();
        self.ptys.cut();
        self.serve.send_replace(ServeState::Abort);
        self.kill_everything();
    }

    /// Kills every process and kernel of the sandbox.
    pub(crate) fn kill_everything(&self) {
        self.gateways.stop_all();
        self.telemetry.stop();
        self.volumes.detach_all();
        // Detached first: no new lookup reaches a server that stops.
        self.s3_mounts.stop_all();
        self.processes.kill_all();
        self.code.shutdown();
        self.env.kill_all();
    }

    /// The deadline passed (or is forced to). Kill mode kills everything.
    pub(crate) fn expire(&self, forced: bool) {
        let Some(action) = self.lifecycle.expire(forced) else {
            return;
        };
        tracing::info!("sandbox deadline passed");
        // A suspended sandbox stays gated as suspending; `/resume` then
        // lands in the expired phase (resume grace).
        if matches!(self.phase.get(), Phase::Running | Phase::Expired) {
            self.phase.set(Phase::Expired);
        }
        if action == OnTimeout::Kill {
            self.kill_everything();
            // The agent ends without a `/terminate` (AWS stops the VM after
            // the exit): its `killed` line says why. Queued before the exit
            // is signalled; the VM lives on for seconds after it.
            drop(self.events.killed(rayito_events::KillReason::Timeout));
            self.deadline_exit.send_replace(true);
        }
    }

    /// Starts the template's start command (and its ready check).
    pub(crate) fn start_template(&self, spec: crate::template::StartSpec) {
        crate::template::start(
            self.template.clone(),
            &self.processes,
            &self.env,
            self.serve.subscribe(),
            spec,
        );
    }
}
