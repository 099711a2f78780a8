//! A MicroVM's volumes: `mount -t efs` (amazon-efs-utils: a TLS tunnel,
//! `efs-proxy`, signed with the execution role's credentials) on a
//! root-only staging directory, then a detached clone of that mount for
//! the sandbox's namespace. The helper's stderr is reduced to one closed
//! class and never copied anywhere (it names the file system, the access
//! point, the region, sometimes an address).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::attach;
use super::validate::VolumeSpec;

/// Where each mount is staged (root-only, 0700).
pub(crate) const STAGING_ROOT: &str = "/run/rayito/efs-staging";
/// The helper's bound per volume (the reference's).
pub(crate) const HELPER_BOUND: Duration = Duration::from_secs(15);
/// Between a tunnel's SIGTERM and its SIGKILL.
const PROXY_GRACE: Duration = Duration::from_millis(400);
/// The helper's PATH (its whole environment is this and `AWS_REGION`).
const HELPER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where `mount` looks for `mount.efs`.
const HELPER_DIRS: [&str; 4] = ["/sbin", "/usr/sbin", "/usr/local/sbin", "/usr/bin"];
/// The process names of the tunnels efs-utils starts (efs-proxy, or
/// stunnel on older efs-utils).
const PROXY_NAMES: [&str; 3] = ["efs-proxy", "stunnel", "stunnel5"];

/// Whether `mount.efs` is installed where `mount` finds it.
pub(crate) fn helper_present() -> bool {
    HELPER_DIRS
        .iter()
        .any(|dir| Path::new(dir).join("mount.efs").is_file())
}

/// Whether this process may mount: root with CAP_SYS_ADMIN effective
/// (a MicroVM without `additionalOsCapabilities ALL` has not).
pub(crate) fn mounting_allowed() -> bool {
    rustix::process::geteuid().is_root()
        && rustix::thread::capabilities(None).is_ok_and(|caps| {
            caps.effective
                .contains(rustix::thread::CapabilitySet::SYS_ADMIN)
        })
}

/// One mounted EFS volume: the detached clone and its tunnels.
#[derive(Debug)]
pub(crate) struct Mounted {
    pub(crate) tree: OwnedFd,
    /// pidfds of the tunnel processes this mount started.
    pub(crate) proxies: Vec<OwnedFd>,
}

/// `-o` of `mount -t efs`.
pub(crate) fn options(spec: &VolumeSpec) -> String {
    let mut options = format!("tls,iam,accesspoint={}", spec.access_point_id);
    if let Some(ip) = spec.mount_target_ip {
        options.push_str(&format!(",mounttargetip={ip}"));
    }
    if spec.read_only {
        options.push_str(",ro");
    }
    options
}

/// Mounts `spec` on a fresh staging directory and clones it (the staging
/// mount is then detached and its directory removed).
///
/// # Errors
/// The volume's class (`helper_missing`, `timeout`, or what the helper's
/// stderr says).
pub(crate) async fn mount(spec: &VolumeSpec, serial: u64) -> Result<Mounted, &'static str> {
    let staging = staging_dir(serial).map_err(|_| super::UNKNOWN)?;
    let before = proxy_pids();
    let outcome = run_helper(spec, &staging).await;
    let proxies = new_proxies(&before);
    let result = match outcome {
        Ok(()) => attach::clone_tree(&staging).map_err(|_| super::UNKNOWN),
        Err(class) => Err(class),
    };
    // Mounted or not (a helper killed at its bound may have got that far).
    let _ = attach::detach_here(&staging);
    let _ = std::fs::remove_dir(&staging);
    match result {
        Ok(tree) => Ok(Mounted { tree, proxies }),
        Err(class) => {
            stop_proxies(proxies).await;
            Err(class)
        }
    }
}

/// A root-only 0700 directory for one mount.
fn staging_dir(serial: u64) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let root = Path::new(STAGING_ROOT);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
    let dir = root.join(serial.to_string());
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => Err(err),
        _ => Ok(dir),
    }
}

async fn run_helper(spec: &VolumeSpec, staging: &Path) -> Result<(), &'static str> {
    let mut command = tokio::process::Command::new("mount");
    command
        .arg("-t")
        .arg("efs")
        .arg("-o")
        .arg(options(spec))
        .arg(format!("{}:/", spec.file_system_id))
        .arg(staging)
        .env_clear()
        .env("PATH", HELPER_PATH)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(region) =
        std::env::var_os("AWS_REGION").or_else(|| std::env::var_os("AWS_DEFAULT_REGION"))
    {
        command.env("AWS_REGION", region);
    }
    let child = command.spawn().map_err(|_| super::HELPER_MISSING)?;
    match tokio::time::timeout(HELPER_BOUND, child.wait_with_output()).await {
        Err(_) => Err(super::TIMEOUT),
        Ok(Err(_)) => Err(super::UNKNOWN),
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => Err(classify(&String::from_utf8_lossy(&output.stderr))),
    }
}

/// The one closed class a helper's stderr says (never the text itself).
pub(crate) fn classify(stderr: &str) -> &'static str {
    let text = stderr.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    if has(&[
        "unknown filesystem type",
        "mount.efs: not found",
        "command not found",
        "is not installed",
        "failed to locate",
        "no such file or directory: 'efs-proxy'",
    ]) {
        super::HELPER_MISSING
    } else if has(&[
        "access denied",
        "accessdenied",
        "permission denied",
        "not authorized",
        "unauthorized",
        "iam credentials",
        "credentials",
        "expiredtoken",
    ]) {
        super::IAM_DENIED
    } else if has(&[
        "does not exist",
        "accesspointnotfound",
        "filesystemnotfound",
        "reason given by server: no such file or directory",
    ]) {
        super::NOT_FOUND
    } else if has(&[
        "tls",
        "ssl",
        "certificate",
        "stunnel",
        "efs-proxy",
        "handshake",
    ]) {
        super::TLS
    } else if has(&[
        "timed out",
        "connection refused",
        "no route to host",
        "network is unreachable",
        "connection reset",
        "failed to resolve",
        "could not resolve",
        "name or service not known",
        "mount target",
    ]) {
        super::NETWORK
    } else {
        super::UNKNOWN
    }
}

/// The pids of every tunnel process now.
fn proxy_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| PROXY_NAMES.contains(&comm.trim_end()))
        })
        .collect()
}

/// pidfds of the tunnels that were not running `before`.
fn new_proxies(before: &[i32]) -> Vec<OwnedFd> {
    proxy_pids()
        .into_iter()
        .filter(|pid| !before.contains(pid))
        .filter_map(|pid| {
            let pid = rustix::process::Pid::from_raw(pid)?;
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        })
        .collect()
}

/// SIGTERM each tunnel, SIGKILL what is left [`PROXY_GRACE`] later.
pub(crate) async fn stop_proxies(proxies: Vec<OwnedFd>) {
    if proxies.is_empty() {
        return;
    }
    for pidfd in &proxies {
        let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::TERM);
    }
    tokio::time::sleep(PROXY_GRACE).await;
    for pidfd in &proxies {
        let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_name_the_access_point_and_what_was_asked() {
        let mut spec = VolumeSpec {
            path: "/mnt/data".into(),
            file_system_id: "fs-01234567".into(),
            access_point_id: "fsap-89abcdef".into(),
            read_only: false,
            mount_target_ip: None,
        };
        assert_eq!(options(&spec), "tls,iam,accesspoint=fsap-89abcdef");
        spec.read_only = true;
        spec.mount_target_ip = Some("10.0.1.7".parse().unwrap());
        assert_eq!(
            options(&spec),
            "tls,iam,accesspoint=fsap-89abcdef,mounttargetip=10.0.1.7,ro"
        );
    }

    #[test]
    fn stderr_reduces_to_one_class() {
        let table = [
            (
                "mount: /run/x: unknown filesystem type 'efs'.",
                "helper_missing",
            ),
            ("sh: 1: mount.efs: not found", "helper_missing"),
            (
                "mount.nfs4: access denied by server while mounting 127.0.0.1:/",
                "iam_denied",
            ),
            (
                "Failed to find credentials for IAM authentication",
                "iam_denied",
            ),
            (
                "mount.nfs4: mounting fs-1:/ failed, reason given by server: No such file or directory",
                "not_found",
            ),
            ("Access point fsap-0123 does not exist", "not_found"),
            ("Failed to initialize TLS tunnel for fs-0123", "tls"),
            ("efs-proxy exited before the mount completed", "tls"),
            ("mount.nfs4: Connection timed out", "network"),
            ("mount.nfs4: Connection refused", "network"),
            (
                "Failed to resolve \"fs-1.efs.us-east-1.amazonaws.com\" - check that your file system ID is correct",
                "network",
            ),
            ("something else entirely", "unknown"),
            ("", "unknown"),
        ];
        for (stderr, class) in table {
            assert_eq!(classify(stderr), class, "{stderr}");
        }
    }
}
