//! The template's start command, run as a managed process of the sandbox
//! (listed with tag [`TEMPLATE_START_TAG`], its output kept like any
//! process's), and its ready check: the ready command, tried every
//! interval until it exits 0 or the deadline passes.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::files::{ReadyPoll, StartSpec};
use super::{Readiness, TEMPLATE_START_TAG, TemplateGate};
use crate::isolation::launch::Stdio;
use crate::process::ManagedProcess;
use crate::process::ProcessTable;
use crate::sandbox::{SandboxEnv, SpawnSpec};
use crate::server::ServeState;

/// The first pause between two tries of the ready command.
const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The least time one try of the ready command gets, even at the
/// deadline: a try started at the deadline must be able to finish.
const MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// The shell both commands run with. Images are Amazon Linux, whose
/// `/bin/sh` is bash, and the builder's port check relies on bash's
/// `/dev/tcp`; a host whose `/bin/sh` is another shell (dash on Debian)
/// still runs them with bash where there is one.
fn shell_program() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

/// `<shell> -c <cmd>` with the start specification's envs and directory.
fn shell(cmd: &str, spec: &StartSpec) -> SpawnSpec {
    SpawnSpec {
        program: shell_program().to_owned(),
        args: vec!["-c".to_owned(), cmd.to_owned()],
        envs: spec.envs.clone(),
        cwd: spec.workdir.clone(),
        cpu_limited: true,
    }
}

/// Starts the start command and, with a ready command, the ready check in
/// the background; sets the gate's first state. Called once, when the
/// agent starts (before it answers any hook, as the snapshot AWS takes
/// after `/ready` holds the running command).
pub(crate) fn start(
    gate: TemplateGate,
    processes: &ProcessTable,
    env: &SandboxEnv,
    serve: watch::Receiver<ServeState>,
    spec: StartSpec,
) {
    let process = match processes.start_managed(&shell(&spec.start_cmd, &spec), TEMPLATE_START_TAG)
    {
        Ok(process) => process,
        Err(status) => {
            gate.fail(format!(
                "the template's start command could not start ({}); \
                 check its program and working directory",
                status.message()
            ));
            return;
        }
    };
    tracing::info!(pid = process.pid(), "template start command started");
    let Some(ready_cmd) = &spec.ready_cmd else {
        gate.set(Readiness::Ready);
        return;
    };
    gate.set(Readiness::Pending);
    let check = ReadyCheck {
        env: env.clone(),
        spec: shell(ready_cmd, &spec),
        poll: spec.poll,
        gate,
        process,
    };
    tokio::spawn(check.run(serve));
}

/// The ready command's polling.
struct ReadyCheck {
    env: SandboxEnv,
    spec: SpawnSpec,
    poll: ReadyPoll,
    gate: TemplateGate,
    process: ManagedProcess,
}

impl ReadyCheck {
    /// Polls until settled, or until the agent stops serving.
    async fn run(self, mut serve: watch::Receiver<ServeState>) {
        tokio::select! {
            () = self.poll() => {}
            _ = serve.wait_for(|s| *s != ServeState::Serving) => {}
        }
    }

    async fn poll(&self) {
        let deadline = Instant::now() + self.poll.timeout;
        // The first pauses are short (50 ms doubling up to the interval): a
        // server that starts in 100 ms is not left waiting a whole interval
        // (the interval is the longest pause between tries, not the only).
        let mut pause = FIRST_PAUSE.min(self.poll.interval);
        loop {
            let limit = deadline
                .saturating_duration_since(Instant::now())
                .max(MIN_ATTEMPT);
            match self.attempt(limit).await {
                Ok(true) => {
                    tracing::info!("template ready command passed");
                    self.gate.set(Readiness::Ready);
                    return;
                }
                Ok(false) => {}
                Err(kind) => {
                    self.gate.fail(format!(
                        "the template's ready command could not start ({kind}); \
                         check its working directory"
                    ));
                    return;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                self.gate.fail(self.timed_out());
                return;
            }
            tokio::time::sleep_until((now + pause).min(deadline)).await;
            pause = (pause * 2).min(self.poll.interval);
        }
    }

    /// One try: whether the ready command exited 0 within `limit` (else its
    /// process group is killed). An error when it cannot be started at all.
    async fn attempt(&self, limit: Duration) -> Result<bool, std::io::ErrorKind> {
        let mut child = self
            .env
            .launch(&self.spec, Stdio::Null, Stdio::Null, Stdio::Null)
            .map_err(|e| e.kind())?;
        // Killed if the agent stops serving in the middle of the try.
        child.kill_on_drop(true);
        let pid = child.id();
        self.env.track(pid);
        let passed = match tokio::time::timeout(limit, child.wait()).await {
            Ok(Ok(status)) => status.success(),
            Ok(Err(_)) => false,
            Err(_) => {
                let _ = crate::process::signal_group(pid, libc::SIGKILL);
                let _ = child.wait().await;
                false
            }
        };
        self.env.untrack(pid);
        Ok(passed)
    }

    /// `/ready`'s reason once the deadline passed, with what became of the
    /// start command (a crashed server is the usual cause).
    fn timed_out(&self) -> String {
        let start = match self.process.end() {
            None => "the start command is still running".to_owned(),
            Some(end) if end.exited => {
                format!("the start command exited with code {}", end.exit_code)
            }
            Some(end) => format!(
                "the start command was ended by signal {}",
                end.signal.unwrap_or_default()
            ),
        };
        format!(
            "the template's ready command did not exit 0 within {} s; {start}",
            self.poll.timeout.as_secs_f64()
        )
    }
}
