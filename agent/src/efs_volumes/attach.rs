//! Putting a detached mount into a sandbox's mount namespace, and taking
//! it out again. The agent is multithreaded, and the kernel refuses
//! `setns(CLONE_NEWNS)` to a process sharing its fs struct with threads,
//! so both run in a short-lived child sharing the agent's memory and
//! descriptors ([`in_shared_child`]) that enters the namespace first: only
//! raw syscalls on memory prepared before the clone.
//!
//! Symlink-safe: the mount point is reached one component at a time from
//! `/mnt` or `/home/user` (directories only sandbox code's user may not
//! replace), never following a symlink, so a sandbox that put a symlink on
//! the path gets `invalid_path`, not a mount somewhere else. A volume is
//! taken out through the descriptor of its own mount root, never by path.

use std::ffi::CString;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags, StatxAttributes, StatxFlags};
use rustix::mount::{MountFlags, MoveMountFlags, UnmountFlags};

use crate::isolation::launch::in_shared_child;
use crate::isolation::user::HostIds;

/// `statfs.f_type` of a tmpfs.
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// What a child needs to reach one mount point, prepared before the clone.
#[derive(Debug)]
struct Route {
    /// `/mnt` or `/home/user`.
    base: CString,
    /// The components below `base`, the last the mount point.
    components: Vec<CString>,
    /// Below `/mnt`: the namespace's `/mnt` becomes a tmpfs of its own
    /// first (once), so that no mount point is ever made on the host's.
    cover_mnt: bool,
    /// Who owns the directories created (the sandbox's host ids below
    /// `/home/user`; root below `/mnt`).
    owner: Option<HostIds>,
}

impl Route {
    fn new(path: &str, owner: Option<HostIds>) -> std::io::Result<Self> {
        let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
        let (base, rest, cover_mnt, owner) = if let Some(rest) = path.strip_prefix("/mnt/") {
            ("/mnt", rest, true, None)
        } else if let Some(rest) = path.strip_prefix("/home/user/") {
            ("/home/user", rest, false, owner)
        } else {
            return Err(invalid());
        };
        let components = rest
            .split('/')
            .map(|c| CString::new(c).map_err(|_| invalid()))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self {
            base: CString::new(base).map_err(|_| invalid())?,
            components,
            cover_mnt,
            owner,
        })
    }

    /// In the child: makes (where missing) and opens every component,
    /// returning the mount point's `O_PATH` descriptor.
    fn walk(&self) -> std::io::Result<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir = rustix::fs::open(self.base.as_c_str(), flags, Mode::empty())?;
        let mode = Mode::from_raw_mode(if self.owner.is_some() { 0o700 } else { 0o755 });
        for component in &self.components {
            match rustix::fs::mkdirat(&dir, component.as_c_str(), mode) {
                Ok(()) => {
                    if let Some(ids) = self.owner {
                        rustix::fs::chownat(
                            &dir,
                            component.as_c_str(),
                            Some(ids.uid()),
                            Some(ids.gid()),
                            AtFlags::SYMLINK_NOFOLLOW,
                        )?;
                    }
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(err) => return Err(err.into()),
            }
            // A symlink opens as itself (NOFOLLOW) and fails DIRECTORY.
            dir = rustix::fs::openat(&dir, component.as_c_str(), flags, Mode::empty())?;
        }
        Ok(dir)
    }
}

/// In the child: makes the namespace's `/mnt` a tmpfs of its own unless it
/// already is one (an earlier volume's or S3 mount's).
fn cover_mnt() -> std::io::Result<()> {
    let stat = rustix::fs::statx(
        rustix::fs::CWD,
        c"/mnt",
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::TYPE,
    )?;
    let mount_root = stat
        .stx_attributes_mask
        .contains(StatxAttributes::MOUNT_ROOT)
        && stat.stx_attributes.contains(StatxAttributes::MOUNT_ROOT);
    let tmpfs = rustix::fs::statfs(c"/mnt").is_ok_and(|s| s.f_type as u64 == TMPFS_MAGIC);
    if mount_root && tmpfs {
        return Ok(());
    }
    rustix::mount::mount(
        c"tmpfs",
        c"/mnt",
        c"tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        c"mode=755",
    )?;
    Ok(())
}

fn enter(ns: BorrowedFd<'_>) -> std::io::Result<()> {
    rustix::thread::move_into_link_name_space(ns, Some(rustix::thread::LinkNameSpaceType::Mount))?;
    Ok(())
}

/// Attaches `tree` (a detached mount, from `open_tree(OPEN_TREE_CLONE)`)
/// at `path` (a checked guest path under `/mnt/` or `/home/user/`) in the
/// mount namespace `ns`, creating the missing directories (owned by
/// `owner` below `/home/user`). `tree` then refers to the attached mount.
///
/// # Errors
/// A component is a symlink or not a directory, or a syscall fails.
pub(crate) fn attach(
    ns: BorrowedFd<'_>,
    tree: BorrowedFd<'_>,
    path: &str,
    owner: Option<HostIds>,
) -> std::io::Result<()> {
    let route = Route::new(path, owner)?;
    let target = in_shared_child(|| {
        enter(ns)?;
        if route.cover_mnt {
            cover_mnt()?;
        }
        let target = route.walk()?;
        rustix::mount::move_mount(
            tree,
            c"",
            &target,
            c"",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )?;
        Ok(target)
    })?;
    drop(target);
    Ok(())
}

/// Detaches (lazily: a process inside keeps what it has open) the mount
/// `tree` refers to from the mount namespace `ns`.
///
/// # Errors
/// The namespace cannot be entered or the unmount fails.
pub(crate) fn detach(ns: BorrowedFd<'_>, tree: BorrowedFd<'_>) -> std::io::Result<()> {
    // The magic link leads to the descriptor's own mount, whatever path
    // it now has (the descriptor table is shared with the child).
    let link = CString::new(format!("/proc/self/fd/{}", tree.as_raw_fd()))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let held = in_shared_child(|| {
        enter(ns)?;
        rustix::mount::unmount(link.as_c_str(), UnmountFlags::DETACH)?;
        // `in_shared_child` hands back a descriptor: a copy of the
        // namespace's, closed at once by the caller.
        ns.try_clone_to_owned()
    })?;
    drop(held);
    Ok(())
}

/// Detaches the mount at `dir` from the agent's own namespace (a staging
/// mount, once cloned).
pub(crate) fn detach_here(dir: &std::path::Path) -> std::io::Result<()> {
    rustix::mount::unmount(dir, UnmountFlags::DETACH | UnmountFlags::NOFOLLOW)?;
    Ok(())
}

/// A detached copy of the mount whose root is `dir`.
///
/// # Errors
/// `dir` does not exist or cannot be cloned.
pub(crate) fn clone_tree(dir: &std::path::Path) -> std::io::Result<OwnedFd> {
    use rustix::mount::OpenTreeFlags;
    Ok(rustix::mount::open_tree(
        rustix::fs::CWD,
        dir,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
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
