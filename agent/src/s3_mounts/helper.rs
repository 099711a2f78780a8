//! The process that serves a mount's `/dev/fuse`: on the local backend the
//! agent's own FUSE server ([`crate::s3fuse`]) with the emulator's S3 and
//! the sandbox's key; on a MicroVM `mount-s3` as uid and gid 990
//! (`rayito-mount`, outside the uids the IMDS block covers, so that it
//! gets the execution role's credentials and sandbox code does not).

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::{Arc, Mutex};

use super::validate::MountSpec;

/// The uid and gid `mount-s3` runs as.
pub(crate) const MOUNT_HELPER_ID: u32 = 990;
/// The program a MicroVM's image ships (the `base-caps` variant).
pub(crate) const MOUNT_S3: &str = "mount-s3";
/// The PATH `mount-s3` is looked up on and gets, when the agent has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How much of `mount-s3`'s stderr is kept to classify an early exit
/// (the text itself never leaves the agent, nor reaches a log).
const STDERR_KEPT: usize = 16 * 1024;

/// A mount's server.
#[derive(Debug)]
pub(crate) enum Helper {
    /// The agent's own (local backend).
    Local(crate::s3fuse::FuseDaemon),
    /// `mount-s3` (MicroVM).
    MountS3(Box<MountS3>),
    /// Stopped while its mount stayed attached (fault injection:
    /// `Agent::stop_s3_mount_helpers`); `/resume` remakes the mount.
    Stopped,
}

/// A running `mount-s3`, in a process group of its own.
#[derive(Debug)]
pub(crate) struct MountS3 {
    child: tokio::process::Child,
    pgid: rustix::process::Pid,
    /// The start of its stderr.
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_done: tokio::task::JoinHandle<()>,
}

impl Helper {
    /// Whether it still serves (the in-process server's session is up,
    /// `mount-s3` has not exited).
    pub(crate) fn is_alive(&mut self) -> bool {
        match self {
            Self::Local(daemon) => daemon.is_alive(),
            Self::MountS3(m) => matches!(m.child.try_wait(), Ok(None)),
            Self::Stopped => false,
        }
    }

    /// Stops it: the in-process server's session ends (a bounded wait for
    /// its thread); `mount-s3`'s group gets SIGTERM, and SIGKILL 2 s later
    /// if it is still there (reaped in the background).
    pub(crate) fn stop(self) {
        match self {
            Self::Local(daemon) => daemon.stop(),
            Self::MountS3(m) => m.stop(),
            Self::Stopped => {}
        }
    }
}

impl Helper {
    /// Ends it at once without waiting for anything, as a crash would:
    /// the in-process server is dropped (it answers every later request
    /// EIO), `mount-s3` gets SIGKILL.
    pub(crate) fn crash(self) {
        match self {
            Self::Local(daemon) => drop(daemon),
            Self::MountS3(m) => {
                let _ = rustix::process::kill_process_group(m.pgid, rustix::process::Signal::KILL);
                m.stop();
            }
            Self::Stopped => {}
        }
    }
}

/// Whether `mount-s3` is an executable on the agent's PATH.
pub(crate) fn mount_s3_on_path() -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
    path.split(':').filter(|d| !d.is_empty()).any(|dir| {
        std::fs::metadata(std::path::Path::new(dir).join(MOUNT_S3))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The arguments of `mount-s3` for `spec`, serving descriptor 3.
pub(crate) fn mount_s3_args(spec: &MountSpec) -> Vec<String> {
    let mut args = vec![
        "--foreground".to_owned(),
        spec.bucket.clone(),
        "/dev/fd/3".to_owned(),
    ];
    if !spec.prefix.is_empty() {
        args.extend(["--prefix".to_owned(), spec.prefix.clone()]);
    }
    if spec.read_only {
        args.push("--read-only".to_owned());
    } else if spec.allow_overwrite {
        args.push("--allow-overwrite".to_owned());
    }
    if spec.allow_delete && !spec.read_only {
        args.push("--allow-delete".to_owned());
    }
    args
}

/// Starts `mount-s3` on `device` (its descriptor 3) as uid and gid 990,
/// with only `AWS_REGION` and `PATH`, stdin and stdout on /dev/null, in a
/// process group of its own.
///
/// # Errors
/// `helper_missing` when it cannot be started.
pub(crate) fn spawn_mount_s3(
    spec: &MountSpec,
    device: OwnedFd,
) -> Result<Box<MountS3>, &'static str> {
    use std::os::unix::process::CommandExt as _;
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
    let mut command = std::process::Command::new(MOUNT_S3);
    command
        .args(mount_s3_args(spec))
        .env_clear()
        .env("PATH", &path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .uid(MOUNT_HELPER_ID)
        .gid(MOUNT_HELPER_ID)
        .process_group(0);
    if let Ok(region) = std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
    {
        command.env("AWS_REGION", region);
    }
    let raw = device.as_raw_fd();
    // SAFETY: between fork and exec the hook only makes two
    // async-signal-safe syscalls (dup2, fcntl) on a descriptor number read
    // before the fork; it touches no lock and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if raw == 3 {
                // dup2 onto itself keeps FD_CLOEXEC: clear it instead.
                if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .map_err(|_| super::HELPER_MISSING)?;
    // Only the helper holds /dev/fuse now: its exit ends the session.
    drop(device);
    let pgid = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32))
        .ok_or(super::HELPER_MISSING)?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let pipe = child.stderr.take();
    let kept = stderr.clone();
    let stderr_done = tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        let Some(mut pipe) = pipe else { return };
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
            let room = STDERR_KEPT.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
    });
    Ok(Box::new(MountS3 {
        child,
        pgid,
        stderr,
        stderr_done,
    }))
}

impl MountS3 {
    /// The class of an exit: what its stderr says, as one closed class.
    pub(crate) async fn exit_class(&mut self) -> &'static str {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), &mut self.stderr_done)
            .await;
        let text = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        classify(&String::from_utf8_lossy(&text))
    }

    /// Whether it exited.
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    fn stop(mut self) {
        let _ = rustix::process::kill_process_group(self.pgid, rustix::process::Signal::TERM);
        let pgid = self.pgid;
        let reap = async move {
            if tokio::time::timeout(std::time::Duration::from_secs(2), self.child.wait())
                .await
                .is_err()
            {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                let _ = self.child.wait().await;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(reap);
            }
            Err(_) => {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// One closed class for what `mount-s3` printed before it exited.
pub(crate) fn classify(stderr: &str) -> &'static str {
    let lower = stderr.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if any(&[
        "accessdenied",
        "access denied",
        "forbidden",
        "403",
        "no credentials",
        "credentials",
    ]) {
        "iam_denied"
    } else if any(&["nosuchbucket", "does not exist", "not found", "404"]) {
        "not_found"
    } else if any(&[
        "dispatch failure",
        "timed out",
        "timeout",
        "connect",
        "dns",
        "network",
    ]) {
        "network"
    } else {
        "unknown"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(read_only: bool, overwrite: bool, delete: bool, prefix: &str) -> MountSpec {
        MountSpec {
            path: "/mnt/d".into(),
            bucket: "b-1".into(),
            prefix: prefix.into(),
            read_only,
            allow_overwrite: overwrite,
            allow_delete: delete,
        }
    }

    #[test]
    fn mount_s3_gets_the_references_arguments() {
        assert_eq!(
            mount_s3_args(&spec(true, false, false, "team7/")),
            [
                "--foreground",
                "b-1",
                "/dev/fd/3",
                "--prefix",
                "team7/",
                "--read-only"
            ]
        );
        assert_eq!(
            mount_s3_args(&spec(false, true, true, "")),
            [
                "--foreground",
                "b-1",
                "/dev/fd/3",
                "--allow-overwrite",
                "--allow-delete"
            ]
        );
        assert_eq!(
            mount_s3_args(&spec(false, false, false, "")),
            ["--foreground", "b-1", "/dev/fd/3"]
        );
    }

    #[test]
    fn an_exit_is_one_closed_class() {
        assert_eq!(
            classify("Error: Failed to create mount process\nCaused by: AccessDenied"),
            "iam_denied"
        );
        assert_eq!(classify("bucket my-b does not exist"), "not_found");
        assert_eq!(classify("dispatch failure: connection refused"), "network");
        assert_eq!(classify("something else"), "unknown");
    }
}
