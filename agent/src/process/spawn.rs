//! Starting a process: spawn through the sandbox, pump its output into the
//! entry, enforce its timeout, and record exactly one end.

use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::Ordering;
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
const KILL_GRACE: Duration = Duration::from_secs(5);
/// After the process exits, how long its pipes may still drain (a background
/// descendant can hold them open forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

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
#[allow(clippy::result_large_err)]
pub(crate) fn spawn(
    env: &SandboxEnv,
    spec: &SpawnSpec,
    config: pb::ProcessConfig,
    tag: Option<String>,
    with_stdin: bool,
    timeout: Option<Duration>,
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
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                Status::invalid_argument("cannot execute the command")
            }
            _ => {
                tracing::warn!(error = %e, "spawn failed");
                Status::internal("cannot start the process")
            }
        })?;
    let pid = child.id();
    env.track(pid);
    let entry = Arc::new(ProcessEntry::new(pid, config, tag, child.stdin.take()).in_cgroup(cgroup));
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
        tokio::spawn(enforce_timeout(entry.clone(), limit));
    }
    let env = env.clone();
    let waiter_entry = entry.clone();
    tokio::spawn(async move {
        let status = child.wait().await.ok();
        for pump in [stdout, stderr].into_iter().flatten() {
            pump.finish().await;
        }
        env.untrack(pid);
        let timed_out = waiter_entry.timed_out.load(Ordering::Acquire);
        let mut end = end_event(status, timed_out);
        if !timed_out && killed_for_memory(&env, status, oom_kills_before) {
            end.error = Some(out_of_memory(&env));
        }
        waiter_entry.finish(end);
        // Nothing of the command left in the background: its cgroup goes now
        // (else with the entry or the sandbox).
        if let Some(cgroup) = &waiter_entry.cgroup {
            cgroup.remove_if_empty();
        }
    });
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

/// SIGTERM to the group at the timeout; 5 s later SIGKILL to the group if
/// the process still runs, and to whatever the command started that still
/// runs in its cgroup, where it has one (what moved out of its process
/// group, `setsid` or a double fork, which the SIGTERM did not reach): a
/// command that timed out is ended whole, even when its first process
/// obeyed the SIGTERM.
async fn enforce_timeout(entry: Arc<ProcessEntry>, limit: Duration) {
    tokio::time::sleep(limit).await;
    if entry.has_ended() {
        return;
    }
    entry.timed_out.store(true, Ordering::Release);
    let _ = signal_group(entry.pid, Signal::TERM.as_raw());
    tokio::time::sleep(KILL_GRACE).await;
    if !entry.has_ended() {
        let _ = signal_group(entry.pid, Signal::KILL.as_raw());
    }
    if let Some(cgroup) = &entry.cgroup {
        cgroup.kill();
    }
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

/// The EndEvent for an exit status (`exit_code` is 128+signal when killed).
pub(crate) fn end_event(status: Option<ExitStatus>, timed_out: bool) -> pb::EndEvent {
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
                message: "process timed out".to_owned(),
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
        let ok = end_event(Some(ExitStatus::from_raw(0)), false);
        assert_eq!(
            (ok.exit_code, ok.exited, ok.status.as_str()),
            (0, true, "exited")
        );
        let three = end_event(Some(ExitStatus::from_raw(3 << 8)), false);
        assert_eq!(three.exit_code, 3);
        let killed = end_event(Some(ExitStatus::from_raw(9)), false);
        assert_eq!(
            (
                killed.exit_code,
                killed.exited,
                killed.status.as_str(),
                killed.signal
            ),
            (137, false, "signaled", Some(9))
        );
        let timeout = end_event(Some(ExitStatus::from_raw(9)), true);
        assert_eq!(timeout.status, "timeout");
        assert_eq!(timeout.error.unwrap().code, "deadline_exceeded");
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
