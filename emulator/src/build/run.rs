//! `RUN`: one process in the build's namespace, as the step's user, in its
//! working directory, with the accumulated `ENV`, its output logged line
//! by line, bounded by the build's deadline. Whatever it leaves running
//! (a daemon started in the background) is killed when it ends: the next
//! step starts from files, not processes, as with Docker.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;

use tokio::io::AsyncReadExt as _;
use tokio::time::Instant;

use super::log::{BuildLog, Vertex};
use super::namespace::BuildNamespace;
use super::user::RunAs;
use rayito_agent::for_emulator::ChildSetup;
use rayito_agent::for_emulator::HostIds;
use rayito_agent::for_emulator::SandboxCgroup;
use rayito_agent::for_emulator::{LaunchPlan, Stdio, launch};

/// The PATH of a step whose `ENV` sets none (Docker's default).
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The file-creation mask of a step (Docker's): the image is everyone's.
const STEP_UMASK: u32 = 0o022;

/// How a `RUN` ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// Its exit code (128 + the signal for a killed process).
    Exited(i32),
    /// The build's deadline passed first; it was killed.
    TimedOut,
}

/// What a `RUN` runs with.
#[derive(Debug)]
pub(crate) struct RunContext<'a> {
    pub(crate) ns: &'a BuildNamespace,
    pub(crate) cgroup: Option<&'a SandboxCgroup>,
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) workdir: &'a str,
    pub(crate) user: &'a RunAs,
    pub(crate) deadline: Instant,
}

/// Runs `argv`, logging its output to `v`.
///
/// # Errors
/// The process cannot be started (the program is missing, the working
/// directory cannot be entered).
pub(crate) async fn run(
    ctx: &RunContext<'_>,
    argv: &[String],
    log: &mut BuildLog,
    v: &mut Vertex,
) -> std::io::Result<RunEnd> {
    let mut envs = ctx.env.clone();
    envs.entry("PATH".to_owned())
        .or_insert_with(|| DEFAULT_PATH.to_owned());
    envs.entry("HOME".to_owned())
        .or_insert_with(|| ctx.user.home.clone());
    let procs = match ctx.cgroup {
        Some(cgroup) => cgroup.procs(None)?,
        None => Vec::new(),
    };
    let setup = ChildSetup::new(
        Path::new(ctx.workdir),
        Some(&ctx.ns.mounts),
        None,
        Some(HostIds {
            uid: ctx.user.uid,
            gid: ctx.user.gid,
        }),
        procs,
        None,
    )?
    .with_umask(STEP_UMASK);
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let plan = LaunchPlan::new(
        program,
        args,
        envs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        true,
        setup,
    )?;
    let mut child = launch(&plan, Stdio::Null, Stdio::Piped, Stdio::Piped)?;
    child.kill_on_drop(true);
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut lines = [LineBuffer::default(), LineBuffer::default()];
    let mut out_buf = vec![0u8; 8192];
    let mut err_buf = vec![0u8; 8192];
    // The step ends when its process does (a daemon it started may hold
    // the pipes open: it is killed below), or at the deadline.
    let end = loop {
        tokio::select! {
            read = read_some(&mut stdout, &mut out_buf) => match read {
                Some(n) => lines[0].feed(&out_buf[..n], |l| log.output(v, l)),
                None => stdout = None,
            },
            read = read_some(&mut stderr, &mut err_buf) => match read {
                Some(n) => lines[1].feed(&err_buf[..n], |l| log.output(v, l)),
                None => stderr = None,
            },
            status = child.wait() => {
                let status = status?;
                break RunEnd::Exited(
                    status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
                );
            }
            () = tokio::time::sleep_until(ctx.deadline) => {
                kill_group(pid);
                let _ = child.wait().await;
                break RunEnd::TimedOut;
            }
        }
    };
    end_leftovers(ctx.cgroup, pid).await;
    // What is left in the pipes, now that every writer is gone (bounded:
    // a writer that escaped the kill does not hold the build).
    let drain = async {
        while stdout.is_some() || stderr.is_some() {
            tokio::select! {
                read = read_some(&mut stdout, &mut out_buf) => match read {
                    Some(n) => lines[0].feed(&out_buf[..n], |l| log.output(v, l)),
                    None => stdout = None,
                },
                read = read_some(&mut stderr, &mut err_buf) => match read {
                    Some(n) => lines[1].feed(&err_buf[..n], |l| log.output(v, l)),
                    None => stderr = None,
                },
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
    for buffer in &mut lines {
        buffer.finish(|l| log.output(v, l));
    }
    Ok(end)
}

fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills what the step left running: its whole cgroup where the build has
/// one (waiting, bounded, until it is empty), else its process group.
async fn end_leftovers(cgroup: Option<&SandboxCgroup>, pid: u32) {
    match cgroup {
        Some(cgroup) => {
            cgroup.kill();
            for _ in 0..200 {
                if !cgroup.populated() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
        None => kill_group(pid),
    }
}

/// Reads what is there from `pipe`; `None` at its end (or with no pipe,
/// pending forever so that `select!` waits on the other).
async fn read_some(
    pipe: &mut Option<tokio::net::unix::pipe::Receiver>,
    buf: &mut [u8],
) -> Option<usize> {
    match pipe {
        Some(p) => match p.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

/// Splits a stream into lines, keeping at most one line's worth (longer
/// lines are cut by the log; the rest of such a line is dropped here).
#[derive(Debug, Default)]
struct LineBuffer {
    partial: Vec<u8>,
}

impl LineBuffer {
    fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(&[u8])) {
        while let Some(at) = bytes.iter().position(|&b| b == b'\n') {
            self.push(&bytes[..at]);
            emit(&self.partial);
            self.partial.clear();
            bytes = &bytes[at + 1..];
        }
        self.push(bytes);
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = super::log::MAX_LINE_BYTES.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish(&mut self, mut emit: impl FnMut(&[u8])) {
        if !self.partial.is_empty() {
            emit(&self.partial);
            self.partial.clear();
        }
    }
}
