//! One kernel process (the interpreter behind a context) and the events it
//! produces while it runs a cell. The language-specific parts (how the process
//! is started, how its output is framed) live in `python.rs`, `bash.rs` and
//! `js.rs`.

use std::collections::BTreeMap;
use std::io;

use rustix::process::Signal;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use tokio::sync::mpsc;

use super::validate::Language;
use super::{bash, js, python};
use crate::isolation::launch::{LaunchedChild, Stdio};
use crate::pb;
use crate::sandbox::{SandboxEnv, SpawnSpec};

/// Events buffered between a kernel's reader tasks and the execution; when
/// full, the kernel blocks on its next write (back-pressure from the client).
pub(crate) const EVENT_BUFFER: usize = 64;

/// What a kernel reports while it runs a cell.
#[derive(Debug)]
pub(crate) enum KernelEvent {
    /// Text the cell wrote to stdout, as produced.
    Stdout(String),
    /// Text the cell wrote to stderr, as produced.
    Stderr(String),
    /// A value to show (a `display()` call or the last expression).
    Result(Box<pb::ExecutionResult>),
    /// The cell raised; the kernel survives.
    Error(pb::ExecutionError),
    /// Bash only: one of the two output streams reached the end-of-cell marker.
    Mark,
    /// Python and node only: the driver began running the cell (an interrupt sent
    /// before this could land between cells and be lost).
    Running,
    /// The cell finished and the kernel is idle again.
    Done,
    /// The kernel process exited or broke its protocol.
    Died,
}

/// A running kernel. Dropping it kills its process group.
#[derive(Debug)]
pub(crate) struct Kernel {
    language: Language,
    child: LaunchedChild,
    pgid: i32,
    stdin: pipe::Sender,
    events: mpsc::Receiver<KernelEvent>,
    /// Bash: the random end-of-code line; Python: unused.
    bash_end_line: String,
    marks_seen: u8,
    exited: bool,
    /// The cell is known to be running, so SIGINT reaches it.
    cell_running: bool,
    /// An interrupt was asked for before the cell was running.
    interrupt_pending: bool,
    /// Cells run by this kernel (its `execution_count`).
    pub(crate) count: u64,
}

/// How to start a kernel: its context's language, cwd and envs.
#[derive(Debug, Clone)]
pub(crate) struct KernelSpec {
    pub(crate) language: Language,
    pub(crate) cwd: String,
    pub(crate) envs: BTreeMap<String, String>,
}

impl Kernel {
    /// Starts a kernel through the sandbox (same isolation as commands) and
    /// waits until it can take a cell.
    pub(crate) async fn start(env: &SandboxEnv, spec: &KernelSpec) -> io::Result<Kernel> {
        let (tx, events) = mpsc::channel(EVENT_BUFFER);
        let started = match spec.language {
            Language::Python => python::spawn(env, spec, tx).await?,
            Language::Bash => bash::spawn(env, spec, tx)?,
            Language::JavaScript | Language::TypeScript => js::spawn(env, spec, tx).await?,
        };
        Ok(Kernel {
            language: spec.language,
            pgid: started.child.id() as i32,
            child: started.child,
            stdin: started.stdin,
            events,
            bash_end_line: started.bash_end_line,
            marks_seen: 0,
            exited: false,
            cell_running: false,
            interrupt_pending: false,
            count: 0,
        })
    }

    /// The kernel's process group (to signal it without holding the kernel).
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Whether the process is known to have exited.
    pub(crate) fn has_exited(&mut self) -> bool {
        if !self.exited && matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
            self.exited = true;
        }
        self.exited
    }

    /// Sends one cell. Output from before (a thread or a background job of an
    /// earlier cell) is dropped so that it never shows up in this cell.
    pub(crate) async fn send_cell(
        &mut self,
        code: &str,
        envs: &BTreeMap<String, String>,
        count: u64,
    ) -> io::Result<()> {
        while self.events.try_recv().is_ok() {}
        self.marks_seen = 0;
        self.interrupt_pending = false;
        // Bash has no acknowledgement: SIGINT reaches it in any state.
        self.cell_running = self.language == Language::Bash;
        let bytes = match self.language {
            Language::Python | Language::JavaScript | Language::TypeScript => {
                python::request(code, envs, count)?
            }
            Language::Bash => bash::request(code, &self.bash_end_line),
        };
        self.stdin.write_all(&bytes).await?;
        self.stdin.flush().await
    }

    /// The next event of the running cell. Cancel-safe (used in `select!`).
    pub(crate) async fn next_event(&mut self) -> KernelEvent {
        loop {
            if self.exited {
                return KernelEvent::Died;
            }
            let event = tokio::select! {
                biased;
                event = self.events.recv() => event.unwrap_or(KernelEvent::Died),
                _ = self.child.wait() => {
                    self.exited = true;
                    continue;
                }
            };
            match event {
                KernelEvent::Mark => {
                    self.marks_seen += 1;
                    if self.marks_seen == 2 {
                        return KernelEvent::Done;
                    }
                }
                KernelEvent::Running => {
                    self.cell_running = true;
                    if std::mem::take(&mut self.interrupt_pending) {
                        signal_group(self.pgid, Signal::INT);
                    }
                }
                KernelEvent::Died => {
                    self.exited = true;
                    return KernelEvent::Died;
                }
                other => return other,
            }
        }
    }

    /// Interrupts the running cell (SIGINT to the kernel's process group, so
    /// a subprocess in the foreground stops too).
    pub(crate) fn interrupt(&mut self) {
        if self.cell_running {
            signal_group(self.pgid, Signal::INT);
        } else {
            self.interrupt_pending = true;
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        signal_group(self.pgid, Signal::KILL);
    }
}

/// Sends `signal` to process group `pgid` (no-op for a non-positive id),
/// as the process service signals a command's group.
pub(crate) fn signal_group(pgid: i32, signal: Signal) {
    if let Ok(pgid) = u32::try_from(pgid) {
        let _ = crate::process::signal_group(pgid, signal.as_raw());
    }
}

/// What a language module hands back once its process is running (and,
/// for the drivers, ready).
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) child: LaunchedChild,
    /// Where the cells go.
    pub(crate) stdin: pipe::Sender,
    /// Bash: the random end-of-code line; the drivers: empty.
    pub(crate) bash_end_line: String,
}

/// A kernel process [`launch`] started: what the language module keeps
/// ([`Started`]) and the output pipes its readers take.
#[derive(Debug)]
pub(crate) struct Launched {
    pub(crate) started: Started,
    pub(crate) stdout: pipe::Receiver,
    /// Piped only when asked for.
    pub(crate) stderr: Option<pipe::Receiver>,
}

/// Starts `program args` as the kernel of `spec`, the part every language
/// shares: through the sandbox (the isolation of commands, in a process
/// group of its own, killed with its handle), with the context's envs and
/// cwd, tracked as one of the sandbox's processes, stdin and stdout piped,
/// stderr as `stderr` says.
///
/// # Errors
/// The launch fails (`NotFound` for a program not on the sandbox PATH).
pub(crate) fn launch(
    env: &SandboxEnv,
    spec: &KernelSpec,
    program: &str,
    args: Vec<String>,
    stderr: Stdio,
) -> io::Result<Launched> {
    let spawn = SpawnSpec {
        program: program.to_owned(),
        args,
        envs: spec.envs.clone(),
        cwd: Some(spec.cwd.clone()),
        cpu_limited: false,
    };
    let want_stderr = stderr == Stdio::Piped;
    let mut child = env.launch(&spawn, Stdio::Piped, Stdio::Piped, stderr)?;
    child.kill_on_drop(true);
    env.track(child.id());
    let no_pipe = || io::Error::other("a kernel pipe is missing");
    let stdin = child.stdin.take().ok_or_else(no_pipe)?;
    let stdout = child.stdout.take().ok_or_else(no_pipe)?;
    let stderr = child.stderr.take();
    if want_stderr && stderr.is_none() {
        return Err(no_pipe());
    }
    Ok(Launched {
        started: Started {
            child,
            stdin,
            bash_end_line: String::new(),
        },
        stdout,
        stderr,
    })
}
