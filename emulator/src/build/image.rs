//! Files of the image being built, reached through a descriptor of its
//! root: every path resolves inside the image (`RESOLVE_IN_ROOT`), so an
//! absolute symlink the image holds (`/etc/alternatives/...`) or one a
//! hostile `RUN` planted leads into the image, never to the host's files.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

/// How every path of the image is resolved.
fn resolve() -> ResolveFlags {
    ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS
}

/// A guest path (absolute or not) as a path relative to the image root
/// (`.` for the root itself).
pub(crate) fn relative(guest: &str) -> &str {
    let rel = guest.trim_start_matches('/');
    if rel.is_empty() { "." } else { rel }
}

/// Opens the directory `guest` of the image (for `*at` calls).
pub(crate) fn open_dir(root: impl AsFd, guest: &str) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        root,
        relative(guest),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve(),
    )?)
}

/// Whether `guest` is a directory of the image.
pub(crate) fn is_dir(root: impl AsFd, guest: &str) -> bool {
    open_dir(root, guest).is_ok()
}

/// Creates the directory `guest` and its missing parents (root's, 0755,
/// as Docker creates them), and opens it.
///
/// # Errors
/// A component exists and is not a directory, or cannot be created.
pub(crate) fn create_dir_all(root: &OwnedFd, guest: &str) -> std::io::Result<OwnedFd> {
    let mut path = String::new();
    let mut dir = open_dir(root, "/")?;
    for component in guest.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(component);
        dir = match open_dir(root, &path) {
            Ok(fd) => fd,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(&dir, component, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                // The agent's umask must not narrow it.
                let made = rustix::fs::openat2(
                    root,
                    path.as_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                    resolve(),
                )?;
                rustix::fs::fchmod(&made, Mode::from_raw_mode(0o755))?;
                open_dir(root, &path)?
            }
            Err(err) => return Err(err),
        };
    }
    Ok(dir)
}

/// Reads the image's file `guest`, at most `max` bytes (a longer one is
/// refused).
///
/// # Errors
/// The file cannot be opened or read, or is longer than `max`.
pub(crate) fn read_file(root: impl AsFd, guest: &str, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let fd = rustix::fs::openat2(
        root,
        relative(guest),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve(),
    )?;
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::other("the file is too large"));
    }
    Ok(out)
}

/// Removes what `name` is in `dir` unless it is a directory (a copy
/// replaces files and symlinks, as Docker does).
///
/// # Errors
/// It is a directory, or cannot be removed.
pub(crate) fn remove_non_dir(dir: &OwnedFd, name: &str) -> std::io::Result<()> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(err) => Err(err.into()),
        Ok(st)
            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                == rustix::fs::FileType::Directory =>
        {
            Err(std::io::Error::from(std::io::ErrorKind::IsADirectory))
        }
        Ok(_) => Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?),
    }
}
