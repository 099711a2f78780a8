//! One mount made and unmade: the FUSE mount built detached, attached at
//! its path in the sandbox's namespace, its server started, and one round
//! trip through it (the server's first answer) before it counts as
//! mounted. Whatever was made is unmade if a later step fails or the
//! section's bound ends the attempt (dropping the future).

use std::os::fd::{AsFd as _, BorrowedFd};

use super::helper::{self, Helper};
use super::validate::MountSpec;
use crate::isolation::ns_mount::NsMount;
use crate::persist::PersistenceAccess;
use crate::sandbox::SandboxEnv;

/// A mount in force: where it is attached and what serves it.
#[derive(Debug)]
pub(crate) struct Live {
    attached: NsMount,
    helper: Helper,
}

/// What an attempt has made so far; unmade on drop unless taken.
struct Partial<'a> {
    env: &'a SandboxEnv,
    attached: Option<NsMount>,
    helper: Option<Helper>,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        if let Some(attached) = self.attached.take() {
            let _ = self.env.detach_mount(&attached);
        }
        if let Some(helper) = self.helper.take() {
            stop_in_background(helper);
        }
    }
}

/// Stops `helper` without waiting for it where a runtime can (the
/// in-process server's stop waits, bounded, for the sandbox's last open
/// file on the detached mount to close).
fn stop_in_background(helper: Helper) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(move || helper.stop());
        }
        Err(_) => helper.stop(),
    }
}

/// Mounts `spec` with `access` (the sandbox's S3 and key on the local
/// backend, the execution role on a MicroVM).
///
/// # Errors
/// The section's class: `iam_denied` (a local sandbox without an execution
/// role), `helper_missing` (no FUSE, no `mount-s3`, no mount namespace),
/// `invalid_path` (the path crosses a symlink or a file), or the server's
/// own (`network`, `not_found`, ...).
pub(crate) async fn mount(
    env: &SandboxEnv,
    spec: &MountSpec,
    access: PersistenceAccess,
) -> Result<Live, &'static str> {
    let local = match access {
        PersistenceAccess::Local(None) => return Err(super::IAM_DENIED),
        PersistenceAccess::Local(Some(key)) => Some(key),
        PersistenceAccess::Aws if !helper::mount_s3_on_path() => {
            return Err(super::HELPER_MISSING);
        }
        PersistenceAccess::Aws => None,
    };
    if !env.can_attach_mounts() {
        return Err(super::HELPER_MISSING);
    }
    let (uid, gid) = match (&local, env.host_ids()) {
        (None, _) => (helper::MOUNT_HELPER_ID, helper::MOUNT_HELPER_ID),
        (Some(_), Some(ids)) => (ids.uid, ids.gid),
        (Some(_), None) => (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        ),
    };
    let fuse = super::fuse::make(super::fuse::FuseOptions {
        read_only: spec.read_only,
        default_permissions: local.is_some(),
        uid,
        gid,
    })
    .map_err(|_| super::HELPER_MISSING)?;
    let mut partial = Partial {
        env,
        attached: None,
        helper: None,
    };
    let attach_env = env.clone();
    let path = spec.path.clone();
    let mount_fd = fuse.mount;
    let attached = tokio::task::spawn_blocking(move || attach_env.attach_mount(mount_fd, &path))
        .await
        .map_err(|_| super::UNKNOWN)?
        .map_err(attach_class)?;
    partial.attached = Some(attached);
    let helper = match local {
        Some(key) => {
            let fuse_spec = crate::s3fuse::FuseMountSpec {
                bucket: spec.bucket.clone(),
                prefix: spec.prefix.clone(),
                read_only: spec.read_only,
                allow_overwrite: spec.allow_overwrite,
                allow_delete: spec.allow_delete,
                uid,
                gid,
            };
            Helper::Local(
                crate::s3fuse::serve(fuse.device, fuse_spec, key)
                    .await
                    .map_err(crate::s3fuse::MountFailure::class)?,
            )
        }
        None => Helper::MountS3(helper::spawn_mount_s3(spec, fuse.device)?),
    };
    partial.helper = Some(helper);
    let root = partial
        .attached
        .as_ref()
        .map(|a| a.root().try_clone_to_owned())
        .transpose()
        .map_err(|_| super::UNKNOWN)?
        .ok_or(super::UNKNOWN)?;
    let answered = tokio::task::spawn_blocking(move || round_trip(root.as_fd()))
        .await
        .unwrap_or(false);
    if !answered {
        if let Some(Helper::MountS3(m)) = partial.helper.as_mut()
            && m.exited()
        {
            return Err(m.exit_class().await);
        }
        return Err(super::UNKNOWN);
    }
    match (partial.attached.take(), partial.helper.take()) {
        (Some(attached), Some(helper)) => Ok(Live { attached, helper }),
        _ => Err(super::UNKNOWN),
    }
}

/// The class of an attach that failed.
fn attach_class(err: std::io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR | libc::EEXIST | libc::EINVAL | libc::ENAMETOOLONG) => {
            super::INVALID_PATH
        }
        _ if err.kind() == std::io::ErrorKind::InvalidInput => super::INVALID_PATH,
        _ if err.kind() == std::io::ErrorKind::Unsupported => super::HELPER_MISSING,
        _ => super::UNKNOWN,
    }
}

/// One request the server must answer: `statx` of the mount's root with
/// `AT_STATX_FORCE_SYNC` (never from the kernel's attribute cache).
/// Blocks until it answers or the session ends.
fn round_trip(root: BorrowedFd<'_>) -> bool {
    rustix::fs::statx(
        root,
        c"",
        rustix::fs::AtFlags::EMPTY_PATH | rustix::fs::AtFlags::STATX_FORCE_SYNC,
        rustix::fs::StatxFlags::TYPE,
    )
    .is_ok()
}

impl Live {
    /// Whether it still serves: the server is up and answers a round trip
    /// within `bound`.
    pub(crate) async fn check(&mut self, bound: std::time::Duration) -> bool {
        if !self.helper.is_alive() {
            return false;
        }
        let Ok(root) = self.attached.root().try_clone_to_owned() else {
            return false;
        };
        matches!(
            tokio::time::timeout(
                bound,
                tokio::task::spawn_blocking(move || round_trip(root.as_fd()))
            )
            .await,
            Ok(Ok(true))
        )
    }

    /// Stops its server as a crash would, leaving the mount attached (its
    /// requests then fail with ENOTCONN).
    pub(crate) fn crash_helper(&mut self) {
        std::mem::replace(&mut self.helper, Helper::Stopped).crash();
    }

    /// Detaches it, then stops its server in the background (nothing new
    /// reaches the server once detached).
    pub(crate) fn unmount(self, env: &SandboxEnv) {
        if let Err(err) = env.detach_mount(&self.attached) {
            tracing::warn!(
                path = self.attached.path(),
                errno = ?err.raw_os_error(),
                "an S3 mount could not be detached"
            );
        }
        // The mount's last reference: the kernel ends the session once
        // the sandbox's open files on it are closed.
        drop(self.attached);
        stop_in_background(self.helper);
    }
}
