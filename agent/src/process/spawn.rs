//! Starting a process: spawn through the sandbox, pump its output into the
//! entry, enforce its timeout, and record exactly one end.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
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
    let mut child = env
        .launch(spec, stdin, Stdio::Piped, Stdio::Piped)
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
    let entry = Arc::new(ProcessEntry::new(pid, config, tag, child.stdin.take()));
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
        let status = child.wait().await;
        for pump in [stdout, stderr].into_iter().flatten() {
            let abort = pump.abort_handle();
            if tokio::time::timeout(DRAIN_AFTER_EXIT, pump).await.is_err() {
                abort.abort();
            }
        }
        env.untrack(pid);
        let timed_out = waiter_entry.timed_out.load(Ordering::Acquire);
        waiter_entry.finish(end_event(status.ok(), timed_out));
    });
    Ok((entry, first))
}

/// Copies one pipe into the entry until EOF.
fn pump<R>(entry: Arc<ProcessEntry>, channel: Channel, mut pipe: R) -> tokio::task::JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    entry.wait_for_room(n).await;
                    entry.push(channel, Bytes::copy_from_slice(&buf[..n]));
                }
            }
        }
    })
}

/// SIGTERM to the group at the timeout, SIGKILL 5 s later.
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
            status: "timeout".to_owned(),
            error: Some(pb::StreamError {
                code: "deadline_exceeded".to_owned(),
                message: "process timed out".to_owned(),
            }),
            signal,
        };
    }
    let status = if exited { "exited" } else { "signaled" };
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
}
