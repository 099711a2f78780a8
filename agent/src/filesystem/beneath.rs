//! Directories reached from a root descriptor one component at a time with
//! `O_NOFOLLOW`, never by a path the kernel resolves again later: sandbox
//! code that swaps a directory for a symlink after a path was checked makes
//! the walk fail instead of leading it out of the sandbox's view. The
//! checkpoint walker reads with these; Write and imports write with them
//! ([`super::target`]).

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Flags of every directory opened here: never through a symlink.
pub(crate) const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Flags of the directories a write walks through and holds: never through
/// a symlink, and `O_PATH`, which needs only the search permission a path
/// lookup needs (the sandbox user may enter the sandbox root, not list
/// it); `openat`, `mkdirat`, `renameat`, `unlinkat`, `fstatvfs` work on
/// such a descriptor.
pub(crate) const WALK_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A descriptor of the directory `path` itself (its last component not
/// through a symlink).
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, DIR_FLAGS, Mode::empty())?)
}

/// Opens the `root`-relative directory `rel` one component at a time with
/// `O_NOFOLLOW`.
pub(crate) fn open_beneath(root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let mut fd = rustix::fs::openat(root, ".", DIR_FLAGS, Mode::empty())?;
    for c in rel.components() {
        fd = rustix::fs::openat(&fd, c.as_os_str(), DIR_FLAGS, Mode::empty())?;
    }
    Ok(fd)
}

/// Why [`make_beneath`] stopped.
#[derive(Debug)]
pub(crate) enum Blocked {
    /// A component is a symlink (never followed here).
    Symlink,
    /// A component is a file, a socket or anything else but a directory.
    NotADirectory,
    /// Any other failure (permission, disk full...).
    Io(io::Error),
}

/// As [`open_beneath`] with [`WALK_FLAGS`]; with `make`, each missing
/// directory on the way is made (mode 0777 less the umask, as
/// `create_dir_all`).
pub(crate) fn walk_beneath(root: &OwnedFd, rel: &Path, make: bool) -> Result<OwnedFd, Blocked> {
    let io = |e: rustix::io::Errno| Blocked::Io(e.into());
    let mut fd = rustix::fs::openat(root, ".", WALK_FLAGS, Mode::empty()).map_err(io)?;
    for c in rel.components() {
        let name = c.as_os_str();
        let opened = match rustix::fs::openat(&fd, name, WALK_FLAGS, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) if make => {
                match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(io(e)),
                }
                rustix::fs::openat(&fd, name, WALK_FLAGS, Mode::empty())
            }
            other => other,
        };
        fd = match opened {
            Ok(next) => next,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Err(blocked_by(&fd, name));
            }
            Err(e) => return Err(io(e)),
        };
    }
    Ok(fd)
}

/// What `name` in `dir` is, that a walk could not enter (`O_NOFOLLOW` with
/// `O_DIRECTORY` answers a symlink with ENOTDIR or ELOOP alike).
fn blocked_by(dir: &OwnedFd, name: &std::ffi::OsStr) -> Blocked {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => Blocked::Symlink,
        Ok(_) => Blocked::NotADirectory,
        Err(e) => Blocked::Io(e.into()),
    }
}
