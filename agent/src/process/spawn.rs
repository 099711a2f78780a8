//! Starting a process: spawn through the sandbox, pump its output into the
//! entry, enforce its timeout, and record exactly one end. The parts a
//! terminal's shell shares with a command (`crate::pty`) are here too: the
//! start checks, a start failure's status, the timeout's signals and the
//! end (exit status, timeout, out-of-memory kill).

use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use rayito_proto::tokens::{end_status, stream_code};
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tonic::Status;

use super::entry::ProcessEntry;
use super::ring::Channel;
use crate::isolation::launch::Stdio;
use crate::pb;
use crate::sandbox::{SandboxEnv, SpawnSpec};

/// How much one read of a pipe takes (one DataEvent at most this big).
const READ_CHUNK: usize = 32 * 1024;
/// Grace between SIGTERM and SIGKILL when a process times out.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);
/// After the process exits, how long its pipes may still drain (a background
/// descendant can hold them open forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// Refuses a start whose user or working directory a sandbox cannot have:
/// the local agent has one account, `user` (root and others are refused);
/// the working directory (`cwd`, else the one the template moved to)
/// follows the file calls' rules, checked as the sandbox's user.
#[allow(clippy::result_large_err)]
pub(crate) fn check_start(
    env: &SandboxEnv,
    user: Option<&str>,
    cwd: Option<&str>,
) -> Result<(), Status> {
    match user {
        None | Some("" | "user") => {}
        Some("root") => return Err(Status::permission_denied("running as root is not allowed")),
        Some(_) => return Err(Status::invalid_argument("unknown user")),
    }
    if let Some(cwd) = cwd.or(env.moved_workdir().as_deref()) {
        crate::filesystem::check_working_dir(env, cwd)
            .map_err(|refusal| refusal.status("invalid working directory"))?;
    }
    Ok(())
}

/// The status of a start that failed with `e`: a program that cannot be
/// executed is the caller's (`cannot execute the <program>`), anything
/// else the agent's (`cannot start the <what>`, logged).
pub(crate) fn start_failed(e: &std::io::Error, program: &str, what: &str) -> Status {
    match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
            Status::invalid_argument(format!("cannot execute the {program}"))
        }
        _ => {
            tracing::warn!(error = %e, "{what} start failed");
            Status::internal(format!("cannot start the {what}"))
        }
    }
}

/// Sends `signal` (a number from 1 to 64) to the process group led by `pid`.
pub(crate) fn signal_group(pid: u32, signal: i32) -> std::io::Result<()> {
    let pgid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    match Signal::from_named_raw(signal) {
        Some(signal) => Ok(rustix::process::kill_process_group(pgid, signal)?),
        None => {
            // rustix has no safe constructor for the real-time signals a
            // client may send (32..=64).
            // SAFETY: kill(2) with a negative pid signals a process group; it
            // takes no pointers.
            let rc = unsafe { libc::kill(-pgid.as_raw_nonzero().get(), signal) };
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        }
    }
}

/// Spawns `spec` and starts its pumps; returns the entry and the id of its
/// first subscriber (the Start stream), attached before any output exists.
/// Its pumps wait at most `grace` for a slow subscriber.
#[allow(clippy::result_large_err, clippy::too_many_arguments)]
pub(crate) fn spawn(
    env: &SandboxEnv,
    spec: &SpawnSpec,
    config: pb::ProcessConfig,
    tag: Option<String>,
    with_stdin: bool,
    timeout: Option<Duration>,
    kill_tree: bool,
    grace: Duration,
) -> Result<(Arc<ProcessEntry>, u64), Status> {
    let stdin = if with_stdin {
        Stdio::Piped
    } else {
        Stdio::Null
    };
    // The agent reaps the child itself; dropping the handle does not kill
    // it (a background process outlives its Start stream).
    let oom_kills_before = env.oom_kills();
    let (mut child, cgroup) = env
        .launch_command(spec, stdin, Stdio::Piped, Stdio::Piped)
        .map_err(|e| start_failed(&e, "command", "process"))?;
    let pid = child.id();
    if kill_tree && cgroup.is_none() {
        // The command's own cgroup could not be made (logged): it cannot
        // be ended whole, so it does not run.
        let _ = signal_group(pid, Signal::KILL.as_raw());
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        return Err(Status::failed_precondition(super::tree::NEEDS_CGROUP));
    }
    env.track(pid);
    let entry = Arc::new(
        ProcessEntry::new(pid, config, tag, child.stdin.take())
            .in_cgroup(cgroup)
            .killing_tree(kill_tree)
            .with_grace(grace),
    );
    let first = entry
        .attach(1)
        .expect("a new process has free subscriber slots");
    let stdout = child
        .stdout
        .take()
        .map(|s| pump(entry.clone(), Channel::Stdout, s));
    let stderr = child
        .stderr
        .take()
        .map(|s| pump(entry.clone(), Channel::Stderr, s));
    if let Some(limit) = timeout {
        tokio::spawn(enforce_timeout(entry.clone(), limit, &[Signal::TERM]));
    }
    let launched_in = env;
    let env = env.clone();
    let waiter_entry = entry.clone();
    tokio::spawn(async move {
        let status = child.wait().await.ok();
        for pump in [stdout, stderr].into_iter().flatten() {
            pump.finish().await;
        }
        env.untrack(pid);
        waiter_entry.wait_for_tree().await;
        let timed_out = waiter_entry.timed_out.load(Ordering::Acquire);
        let end = final_end(&env, status, timed_out, oom_kills_before, "process");
        waiter_entry.finish(end);
        // Its cgroup goes after the next launch if nothing of the command
        // is left in the background then (else with the entry or the
        // sandbox): not here, between the end and its event.
        if let Some(cgroup) = &waiter_entry.cgroup {
            env.command_ended(cgroup);
        }
    });
    // While the child runs, off the way of this Start and of its end.
    launched_in.after_command_launch();
    Ok((entry, first))
}

/// The most a pump takes from its pipe without waiting once the process
/// has exited and the drain window has passed: more than a pipe holds
/// (64 KiB by default), less than a descendant writing on could make it
/// read forever.
const FINAL_DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// The task copying one pipe into the entry.
struct Pump {
    task: tokio::task::JoinHandle<()>,
    exited: tokio::sync::watch::Sender<bool>,
}

impl Pump {
    /// The process has exited: the pump reads on until EOF for at most
    /// [`DRAIN_AFTER_EXIT`] (a background descendant can hold the pipe open
    /// forever), then takes what the pipe still holds, and ends.
    async fn finish(self) {
        self.exited.send_replace(true);
        let _ = self.task.await;
    }
}

/// Copies one pipe into the entry until EOF, or until the process has
/// exited and the drain window passed. Output the process wrote before it
/// exited is never lost: the window is counted by the pump itself, and its
/// last step reads the pipe directly, because on a busy machine the
/// runtime may not have reported the pipe readable yet (a 200 ms abort
/// once lost the whole output of `echo` under load).
fn pump<R>(entry: Arc<ProcessEntry>, channel: Channel, mut pipe: R) -> Pump
where
    R: AsyncRead + AsFd + Unpin + Send + 'static,
{
    let (exited, mut exit_seen) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; READ_CHUNK];
        let window = async {
            // A dropped sender (the waiter gone) ends the window too.
            let _ = exit_seen.wait_for(|exited| *exited).await;
            tokio::time::sleep(DRAIN_AFTER_EXIT).await;
        };
        tokio::pin!(window);
        loop {
            tokio::select! {
                // Cancel-safe: a read that loses the race took no bytes.
                read = pipe.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        entry.wait_for_room(n).await;
                        entry.push(channel, Bytes::copy_from_slice(&buf[..n]));
                    }
                },
                () = &mut window => break,
            }
        }
        // Plain non-blocking reads until the pipe is empty (EAGAIN), at EOF,
        // or FINAL_DRAIN_BYTES were taken.
        if rustix::io::ioctl_fionbio(pipe.as_fd(), true).is_err() {
            return;
        }
        let mut taken = 0;
        while taken < FINAL_DRAIN_BYTES {
            match rustix::io::read(pipe.as_fd(), &mut buf[..]) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    entry.wait_for_room(n).await;
                    entry.push(channel, Bytes::copy_from_slice(&buf[..n]));
                    taken += n;
                }
            }
        }
    });
    Pump { task, exited }
}

/// The entry of `pid` in `table` (a command's or a terminal's), after
/// `prune` dropped what is kept no longer: `<what> not found` when there is
/// none, or when `live` asks for a running one and it has ended (signals,
/// input and resizes reach running ones only).
#[allow(clippy::result_large_err)]
pub(crate) fn lookup<T: Timed>(
    table: &std::sync::Mutex<std::collections::HashMap<u32, Arc<T>>>,
    prune: fn(&mut std::collections::HashMap<u32, Arc<T>>),
    pid: u32,
    live: bool,
    what: &str,
) -> Result<Arc<T>, Status> {
    let mut map = table.lock().expect("process table lock");
    prune(&mut map);
    map.get(&pid)
        .filter(|found| !(live && found.has_ended()))
        .cloned()
        .ok_or_else(|| Status::not_found(format!("{what} not found")))
}

/// What a timeout ends: a command's entry or a terminal's session.
pub(crate) trait Timed: Send + Sync + 'static {
    /// The leader of its process group, and the flag that says its end
    /// came from its timeout (set before the first signal).
    fn leader(&self) -> (u32, &AtomicBool);
    /// Whether it has ended (its end recorded).
    fn has_ended(&self) -> bool;
    /// The timeout's first `signal`: to the process group.
    fn signal_first(&self, signal: Signal) {
        let _ = signal_group(self.leader().0, signal.as_raw());
    }
    /// After the SIGKILL: ends what moved out of the process group.
    fn kill_rest(&self) {}
}

impl Timed for ProcessEntry {
    fn leader(&self) -> (u32, &AtomicBool) {
        (self.pid, &self.timed_out)
    }
    fn has_ended(&self) -> bool {
        ProcessEntry::has_ended(self)
    }
    /// With `kill_tree`, every process of the command; else its group.
    fn signal_first(&self, signal: Signal) {
        if !self.signal_tree(signal) {
            let _ = signal_group(self.pid, signal.as_raw());
        }
    }
    /// Whatever the command started that still runs in its cgroup, where it
    /// has one (what moved out of its process group, `setsid` or a double
    /// fork, which the SIGTERM did not reach without `kill_tree`): a
    /// command that timed out is ended whole, even when its first process
    /// obeyed the SIGTERM.
    fn kill_rest(&self) {
        self.kill_whole();
    }
}

/// At the timeout, `first` (in order) to the group; [`KILL_GRACE`] later
/// SIGKILL to the group if the process still runs, then
/// [`Timed::kill_rest`].
pub(crate) async fn enforce_timeout<T: Timed>(target: Arc<T>, limit: Duration, first: &[Signal]) {
    tokio::time::sleep(limit).await;
    if target.has_ended() {
        return;
    }
    let (pid, timed_out) = target.leader();
    timed_out.store(true, Ordering::Release);
    for signal in first {
        target.signal_first(*signal);
    }
    tokio::time::sleep(KILL_GRACE).await;
    if !target.has_ended() {
        let _ = signal_group(pid, Signal::KILL.as_raw());
    }
    target.kill_rest();
}

/// The end of a process `what` (`process`, `pty`) that ended with
/// `status`: its [`end_event`], with the out-of-memory error when the
/// kernel ended it for the sandbox's memory (see [`killed_for_memory`]).
pub(crate) fn final_end(
    env: &SandboxEnv,
    status: Option<ExitStatus>,
    timed_out: bool,
    oom_kills_before: u64,
    what: &str,
) -> pb::EndEvent {
    let mut end = end_event(status, timed_out, what);
    if !timed_out && killed_for_memory(env, status, oom_kills_before) {
        end.error = Some(out_of_memory(env));
    }
    end
}

/// Whether a process that ended with `status` was ended by the kernel's
/// out-of-memory killer: SIGKILL while the sandbox's count of such kills
/// rose past `oom_kills_before` (counted per sandbox, so a SIGKILL sent by
/// hand while another of its processes was killed for memory reads as one
/// too).
pub(crate) fn killed_for_memory(
    env: &SandboxEnv,
    status: Option<ExitStatus>,
    oom_kills_before: u64,
) -> bool {
    status.and_then(|s| s.signal()) == Some(libc::SIGKILL) && env.oom_kills() > oom_kills_before
}

/// The `StreamError` of a process the kernel ended for the sandbox's memory.
pub(crate) fn out_of_memory(env: &SandboxEnv) -> pb::StreamError {
    let limit = env
        .memory_max_bytes()
        .map(|bytes| format!(" ({} MiB)", crate::text::group_thousands(bytes >> 20)))
        .unwrap_or_default();
    pb::StreamError {
        code: "resource_exhausted".to_owned(),
        message: format!(
            "the sandbox reached its memory limit{limit} and the kernel ended the process; \
             use less memory, or give the sandbox a higher limit"
        ),
    }
}

/// The EndEvent for an exit status (`exit_code` is 128+signal when killed)
/// of a process `what` (`process`, `pty`: the timeout's message names it).
pub(crate) fn end_event(status: Option<ExitStatus>, timed_out: bool, what: &str) -> pb::EndEvent {
    let (exit_code, exited, signal) = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => (code, true, None),
            (None, Some(sig)) => (128 + sig, false, Some(sig)),
            (None, None) => (-1, false, None),
        },
        None => (-1, false, None),
    };
    if timed_out {
        return pb::EndEvent {
            exit_code,
            exited: false,
            status: end_status::TIMEOUT.to_owned(),
            error: Some(pb::StreamError {
                code: stream_code::DEADLINE_EXCEEDED.to_owned(),
                message: format!("{what} timed out"),
            }),
            signal,
        };
    }
    let status = if exited {
        end_status::EXITED
    } else {
        end_status::SIGNALED
    };
    pb::EndEvent {
        exit_code,
        exited,
        status: status.to_owned(),
        error: None,
        signal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_event_shapes() {
        let ok = end_event(Some(ExitStatus::from_raw(0)), false, "process");
        assert_eq!(
            (ok.exit_code, ok.exited, ok.status.as_str()),
            (0, true, "exited")
        );
        let three = end_event(Some(ExitStatus::from_raw(3 << 8)), false, "process");
        assert_eq!(three.exit_code, 3);
        let killed = end_event(Some(ExitStatus::from_raw(9)), false, "process");
        assert_eq!(
            (
                killed.exit_code,
                killed.exited,
                killed.status.as_str(),
                killed.signal
            ),
            (137, false, "signaled", Some(9))
        );
        let timeout = end_event(Some(ExitStatus::from_raw(9)), true, "pty");
        assert_eq!(timeout.status, "timeout");
        let error = timeout.error.unwrap();
        assert_eq!(
            (error.code.as_str(), error.message.as_str()),
            ("deadline_exceeded", "pty timed out")
        );
    }

    /// A pipe whose readiness never arrives, as on a machine too busy for
    /// the runtime to have seen it yet.
    struct ReadinessNeverSeen(std::io::PipeReader);

    impl AsyncRead for ReadinessNeverSeen {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Pending
        }
    }

    impl AsFd for ReadinessNeverSeen {
        fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
            self.0.as_fd()
        }
    }

    fn output(entry: &ProcessEntry) -> Vec<u8> {
        let chunks = entry.snapshot(1).chunks.expect("nothing dropped");
        chunks.iter().flat_map(|c| c.data.to_vec()).collect()
    }

    #[tokio::test]
    async fn output_written_before_the_exit_is_kept_when_readiness_lags() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"6\n").unwrap();
        let entry = Arc::new(ProcessEntry::new(
            1,
            pb::ProcessConfig::default(),
            None,
            None,
        ));
        let pump = pump(entry.clone(), Channel::Stdout, ReadinessNeverSeen(reader));
        // The writer stays open, as a background descendant would keep it.
        pump.finish().await;
        assert_eq!(output(&entry), b"6\n");
        drop(writer);
    }

    #[tokio::test]
    async fn the_pump_ends_at_eof_before_the_exit() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"all of it").unwrap();
        drop(writer);
        let reader =
            tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into()).expect("a pipe");
        let entry = Arc::new(ProcessEntry::new(
            1,
            pb::ProcessConfig::default(),
            None,
            None,
        ));
        let pump = pump(entry.clone(), Channel::Stdout, reader);
        pump.task.await.unwrap();
        assert_eq!(output(&entry), b"all of it");
    }
}
