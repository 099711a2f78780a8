//! The mount syscalls the volumes need beyond
//! [`crate::isolation::ns_mount`] (which attaches a detached mount in the
//! sandbox's namespace and detaches it): cloning a directory's mount,
//! setting a detached mount's attributes (an idmap, read-only), detaching
//! a staging mount, probing a mounted root.

use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, StatxFlags};
use rustix::mount::UnmountFlags;

/// Detaches the mount at `dir` from the agent's own namespace (a staging
/// mount, once cloned).
pub(crate) fn detach_here(dir: &std::path::Path) -> std::io::Result<()> {
    rustix::mount::unmount(dir, UnmountFlags::DETACH | UnmountFlags::NOFOLLOW)?;
    Ok(())
}

/// A detached copy of the mount whose root is `dir`.
///
/// `dir` is opened first without following any symbolic link on the way
/// (`RESOLVE_NO_SYMLINKS`), and the copy is made of that open directory:
/// sandboxes write into the trees volumes live in, so a directory on the
/// path swapped for a link after the emulator resolved it must not make
/// this clone (and bind into a sandbox) some other directory of the host.
/// The emulator hands out paths under a canonical root for that reason.
///
/// # Errors
/// `dir` does not exist, a component of it is a symbolic link (`ELOOP`),
/// or it cannot be cloned.
pub(crate) fn clone_tree(dir: &std::path::Path) -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::mount::OpenTreeFlags;
    let opened = rustix::fs::openat2(
        rustix::fs::CWD,
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(rustix::mount::open_tree(
        &opened,
        "",
        OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )?)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Read-only.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
/// No set-user-ID or set-group-ID.
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
/// No device files.
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
/// Ids mapped through `userns_fd`.
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// Sets `attrs` on the detached mount `tree`, idmapped through `userns`
/// when given (rustix has no wrapper for `mount_setattr`).
///
/// # Errors
/// The kernel refuses (an idmap on a file system without support for
/// them: `EINVAL`).
pub(crate) fn set_attrs(
    tree: BorrowedFd<'_>,
    attrs: u64,
    userns: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: attrs
            | if userns.is_some() {
                MOUNT_ATTR_IDMAP
            } else {
                0
            },
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.map_or(0, |fd| fd.as_raw_fd() as u64),
    };
    // SAFETY: mount_setattr reads `size_of::<MountAttr>()` bytes from a
    // live, properly laid out struct and an empty NUL-terminated path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `tree` still reaches a live directory: a bounded caller's
/// probe. `statx` with `AT_STATX_FORCE_SYNC` asks the server on a network
/// file system; a root directory removed underneath reads nlink 0.
pub(crate) fn probe(tree: BorrowedFd<'_>) -> Result<(), &'static str> {
    match rustix::fs::statx(
        tree.as_fd(),
        c"",
        AtFlags::EMPTY_PATH | AtFlags::STATX_FORCE_SYNC,
        StatxFlags::NLINK | StatxFlags::TYPE,
    ) {
        Ok(stat) if stat.stx_nlink == 0 => Err(super::GONE),
        Ok(_) => Ok(()),
        Err(rustix::io::Errno::STALE) => Err(super::STALE),
        Err(rustix::io::Errno::NOENT) => Err(super::GONE),
        Err(_) => Err(super::UNREACHABLE),
    }
}
