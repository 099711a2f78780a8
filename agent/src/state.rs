//! State shared by every service and the hooks of one agent, and the phase
//! transitions the hooks and the deadline drive.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::watch;

use crate::code::CodeServiceImpl;
use crate::lifecycle::Lifecycle;
use crate::payload::{self, OnTimeout};
use crate::phase::{Phase, PhaseCell};
use crate::process::ProcessTable;
use crate::pty::PtyTable;
use crate::sandbox::SandboxEnv;
use crate::template::TemplateGate;

/// How the servers should be running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServeState {
    /// Accepting and serving.
    Serving,
    /// Stop accepting, let in-flight answers finish, then close.
    Graceful,
    /// Drop every connection now.
    Abort,
}

/// What `/run` installed.
#[derive(Debug, Default)]
pub(crate) struct RunInfo {
    pub sandbox_id: String,
    pub metadata: BTreeMap<String, String>,
    pub token_sha256: Option<[u8; 32]>,
}

/// One agent's shared state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub env: SandboxEnv,
    pub phase: PhaseCell,
    pub code: CodeServiceImpl,
    pub processes: ProcessTable,
    /// Terminal sessions (the PtyService; listed by Process.List too).
    pub ptys: PtyTable,
    pub lifecycle: Lifecycle,
    /// The image's template readiness (what `/ready` answers).
    pub template: TemplateGate,
    pub started: Instant,
    /// The template's start command, when it waits for `/run`
    /// (`AgentConfig::defer_template_start`).
    pub deferred_start: Mutex<Option<crate::template::StartSpec>>,
    pub run: Mutex<Option<RunInfo>>,
    /// Set once `/run` was accepted (after the default kernel's warm-up
    /// began): what a Health probe that came first waits for.
    pub ran: watch::Sender<bool>,
    pub resume_generation: AtomicU64,
    /// Between an accepted `/suspend` and the next `/resume`.
    pub suspended: AtomicBool,
    pub hook_anomalies: AtomicU64,
    pub disk_reserve: AtomicU64,
    /// The S3-staged transfers (StartImport / StartExport).
    pub transfers: crate::transfer::Transfers,
    pub serve: watch::Sender<ServeState>,
    pub terminated: watch::Sender<bool>,
    /// Set when the deadline passed in kill mode: the moment the real
    /// agent exits with status 124 (the emulator then ends the MicroVM).
    pub deadline_exit: watch::Sender<bool>,
    /// Checkpoint and Restore: the one-at-a-time guard and the access.
    pub persist: crate::persist::Persist,
    /// Egress enforcement (`network.enforce` in the run payload).
    pub egress: crate::egress::Egress,
}

/// The `/run` hook's answer body.
pub(crate) const RUN_OK: &str = "ok";
/// A repeated `/run`.
pub(crate) const RUN_ALREADY_RAN: &str = "already_ran";
/// A `/run` whose payload was invalid: accepted, but the agent stays token-less.
pub(crate) const RUN_INVALID_PAYLOAD: &str = "invalid_payload";

impl Shared {
    pub(crate) fn new(env: SandboxEnv, disk_reserve: u64) -> Self {
        let phase = PhaseCell::new();
        let code = CodeServiceImpl::new(env.clone(), phase.clone());
        let (serve, _) = watch::channel(ServeState::Serving);
        let (terminated, _) = watch::channel(false);
        let (deadline_exit, _) = watch::channel(false);
        let (ran, _) = watch::channel(false);
        Self {
            processes: ProcessTable::new(env.clone(), phase.clone()),
            ptys: PtyTable::new(env.clone(), phase.clone()),
            env,
            phase,
            code,
            lifecycle: Lifecycle::default(),
            template: TemplateGate::default(),
            started: Instant::now(),
            deferred_start: Mutex::new(None),
            run: Mutex::new(None),
            ran,
            resume_generation: AtomicU64::new(0),
            suspended: AtomicBool::new(false),
            hook_anomalies: AtomicU64::new(0),
            disk_reserve: AtomicU64::new(disk_reserve),
            transfers: crate::transfer::Transfers::default(),
            deadline_exit,
            serve,
            terminated,
            persist: crate::persist::Persist::default(),
            egress: crate::egress::Egress::new(false, Vec::new()),
        }
    }

    /// The installed token digest, if any.
    pub(crate) fn token_digest(&self) -> Option<[u8; 32]> {
        self.run
            .lock()
            .expect("run lock")
            .as_ref()
            .and_then(|r| r.token_sha256)
    }

    /// `/run`: accepted once; an invalid payload leaves the agent token-less.
    pub(crate) fn on_run(&self, microvm_id: &str, payload_text: Option<&str>) -> &'static str {
        let mut run = self.run.lock().expect("run lock");
        if run.is_some() {
            self.hook_anomalies.fetch_add(1, Ordering::Relaxed);
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
        self.ran.send_replace(true);
        answer
    }

    /// `/suspend`: close the gate; live streams end in their schema's form
    /// (they watch the phase); processes keep running.
    pub(crate) fn on_suspend(&self) {
        if self.phase.get() == Phase::Terminating {
            return;
        }
        self.suspended.store(true, Ordering::SeqCst);
        self.phase.set(Phase::Suspending);
    }

    /// `/resume`: +1 generation for a resume that follows a suspend; reopen.
    pub(crate) fn on_resume(&self) {
        if self.phase.get() == Phase::Terminating || !self.suspended.swap(false, Ordering::SeqCst) {
            return;
        }
        self.resume_generation.fetch_add(1, Ordering::Relaxed);
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
            self.deadline_exit.send_replace(true);
        }
    }

    /// SetTimeout moved the deadline of an expired (pause-mode) sandbox.
    pub(crate) fn reopen_after_expiry(&self) {
        if self.phase.get() == Phase::Expired {
            self.phase.set(Phase::Running);
        }
    }
}
