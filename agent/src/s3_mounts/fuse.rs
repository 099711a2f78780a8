//! A FUSE mount made with the new mount API, detached until the section
//! attaches it in the sandbox's namespace: `/dev/fuse` opened,
//! `fsopen("fuse")` configured with that descriptor, `fsmount`. The helper
//! (the local backend's in-process server, or `mount-s3` on a MicroVM)
//! then serves the `/dev/fuse` descriptor.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};

/// How the mount checks access and whose it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FuseOptions {
    /// Every write refused by the kernel (EROFS).
    pub read_only: bool,
    /// The kernel checks each access against the modes and owners the
    /// server reports (`default_permissions`): the local server reports
    /// the sandbox's own uid. `mount-s3` reports its own uid and leaves
    /// access to its own flags, so it goes without.
    pub default_permissions: bool,
    /// The mount's owner (`user_id`, `group_id`): who may use it besides
    /// `allow_other`, which every mount sets (the sandbox's processes are
    /// not the server's uid).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
}

/// A FUSE mount not attached anywhere yet, and the descriptor its server
/// serves.
#[derive(Debug)]
pub(crate) struct DetachedFuse {
    /// `/dev/fuse`, for the server.
    pub device: OwnedFd,
    /// The mount (`fsmount`'s descriptor), for `ns_mount`.
    pub mount: OwnedFd,
}

/// Makes the mount.
///
/// # Errors
/// The errno of the step that failed (`/dev/fuse` missing or refused, a
/// kernel without FUSE or without the new mount API, no CAP_SYS_ADMIN).
pub(crate) fn make(options: FuseOptions) -> std::io::Result<DetachedFuse> {
    let device = open_device()?;
    let fs = rustix::mount::fsopen("fuse", FsOpenFlags::FSOPEN_CLOEXEC)?;
    rustix::mount::fsconfig_set_string(&fs, "fd", device.as_raw_fd().to_string())?;
    // The root is a directory (S_IFDIR, octal, as FUSE parses it).
    rustix::mount::fsconfig_set_string(&fs, "rootmode", "40000")?;
    rustix::mount::fsconfig_set_string(&fs, "user_id", options.uid.to_string())?;
    rustix::mount::fsconfig_set_string(&fs, "group_id", options.gid.to_string())?;
    rustix::mount::fsconfig_set_flag(&fs, "allow_other")?;
    if options.default_permissions {
        rustix::mount::fsconfig_set_flag(&fs, "default_permissions")?;
    }
    rustix::mount::fsconfig_create(&fs)?;
    let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
    if options.read_only {
        attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    let mount = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs)?;
    Ok(DetachedFuse { device, mount })
}

fn open_device() -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        c"/dev/fuse",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Whether this host lets the agent make FUSE mounts: `/dev/fuse` opens
/// and `fsopen("fuse")` is accepted (probed once per process; nothing is
/// mounted).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        open_device().is_ok() && rustix::mount::fsopen("fuse", FsOpenFlags::FSOPEN_CLOEXEC).is_ok()
    })
}
