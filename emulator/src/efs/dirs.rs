//! The file systems' directories: `<efs>/<fs-id>` for each file system
//! (root-owned, 0755, as an EFS file system's own root), an access point's
//! root directory `<efs>/<fs-id><RootDirectory.Path>` inside it.
//!
//! As on EFS, an access point's root directory is made when a client first
//! connects through it (here: when an agent resolves the pair to mount it),
//! and only when the access point has CreationInfo: every missing
//! component is made with CreationInfo's owner and permissions (exactly
//! those bits: no umask). Without CreationInfo a missing directory means
//! the mount fails.
//!
//! The walk opens one component at a time, never following a symbolic
//! link: sandboxes write into these trees, and a link planted where an
//! access point's path goes must not lead the agent's bind mount out of
//! the file system.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Gid, Mode, OFlags, Uid};
use rustix::io::Errno;

use super::state::CreationInfo;

/// How a directory is opened on the walk.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Makes a new file system's directory (empty; root-owned, 0755).
///
/// # Errors
/// The directory cannot be made.
pub(crate) fn create_file_system(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new().mode(0o755).create(dir)?;
    // Exactly 0755, whatever the umask.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
}

/// Removes a deleted file system's directory and everything in it
/// (symbolic links are removed, never followed).
pub(crate) fn remove_file_system(dir: &Path) {
    if let Err(err) = std::fs::remove_dir_all(dir)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %dir.display(), %err, "could not remove a deleted EFS file system's files");
    }
}

/// The bytes the regular files under `dir` hold (links not followed):
/// the file system's metered size.
pub(crate) fn size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    total
}

/// Why an access point's directory could not be had.
#[derive(Debug)]
pub(crate) enum Unreachable {
    /// The file system's own directory is gone.
    FileSystem,
    /// The path does not exist and there is no CreationInfo to make it,
    /// or it crosses something that is not a directory (a file, a link).
    RootDirectory,
}

/// The access point's root directory `path` inside `fs_dir`, made with
/// `create` where missing; with the owner it has.
///
/// # Errors
/// [`Unreachable`] as documented there.
pub(crate) fn access_point_dir(
    fs_dir: &Path,
    path: &str,
    create: Option<&CreationInfo>,
) -> Result<(PathBuf, u32, u32), Unreachable> {
    let mut dir = rustix::fs::open(fs_dir, dir_flags(), Mode::empty())
        .map_err(|_| Unreachable::FileSystem)?;
    let mut full = fs_dir.to_path_buf();
    for name in path.split('/').filter(|s| !s.is_empty()) {
        dir = step(&dir, name, create).map_err(|err| {
            tracing::debug!(path, %err, "an EFS access point's directory is out of reach");
            Unreachable::RootDirectory
        })?;
        full.push(name);
    }
    let stat = rustix::fs::fstat(&dir).map_err(|_| Unreachable::RootDirectory)?;
    Ok((full, stat.st_uid, stat.st_gid))
}

/// Opens `name` below `parent`, making it first when it is missing and
/// `create` says how.
fn step(
    parent: &OwnedFd,
    name: &str,
    create: Option<&CreationInfo>,
) -> rustix::io::Result<OwnedFd> {
    match rustix::fs::openat(parent, name, dir_flags(), Mode::empty()) {
        Err(Errno::NOENT) => {}
        other => return other,
    }
    let Some(info) = create else {
        return Err(Errno::NOENT);
    };
    // Made private first, then given its owner and mode: no one else can
    // use it in between. Another resolve may make it first: then it is
    // theirs, as made.
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => {}
        Err(Errno::EXIST) => return rustix::fs::openat(parent, name, dir_flags(), Mode::empty()),
        Err(err) => return Err(err),
    }
    let dir = rustix::fs::openat(parent, name, dir_flags(), Mode::empty())?;
    own(&dir, info)?;
    // After the owner: chown clears set-id bits.
    rustix::fs::fchmod(&dir, Mode::from_raw_mode(info.mode()))?;
    Ok(dir)
}

/// Gives `dir` CreationInfo's owner. An emulator that is not root cannot
/// give a directory away: it stays the emulator's own then.
fn own(dir: &OwnedFd, info: &CreationInfo) -> rustix::io::Result<()> {
    let (Ok(uid), Ok(gid)) = (u32::try_from(info.owner_uid), u32::try_from(info.owner_gid)) else {
        return Err(Errno::INVAL);
    };
    // u32::MAX is -1 to chown ("unchanged"): leave that one as it is.
    let uid = (uid != u32::MAX).then(|| Uid::from_raw(uid));
    let gid = (gid != u32::MAX).then(|| Gid::from_raw(gid));
    match rustix::fs::fchown(dir, uid, gid) {
        Err(Errno::PERM) if !rustix::process::geteuid().is_root() => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    fn info(mode: &str) -> CreationInfo {
        CreationInfo {
            owner_uid: 4321,
            owner_gid: 4322,
            permissions: mode.into(),
        }
    }

    #[test]
    fn a_missing_directory_is_made_with_creation_info_and_only_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let fs_dir = tmp.path().join("fs-00000001");
        create_file_system(&fs_dir).unwrap();
        assert!(matches!(
            access_point_dir(&fs_dir, "/a/b", None),
            Err(Unreachable::RootDirectory)
        ));
        let (dir, uid, gid) = access_point_dir(&fs_dir, "/a/b", Some(&info("2750"))).unwrap();
        assert_eq!(dir, fs_dir.join("a/b"));
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o2750);
        if rustix::process::geteuid().is_root() {
            assert_eq!((uid, gid), (4321, 4322));
            assert_eq!((meta.uid(), meta.gid()), (4321, 4322));
            let parent = std::fs::metadata(fs_dir.join("a")).unwrap();
            assert_eq!((parent.uid(), parent.mode() & 0o7777), (4321, 0o2750));
        }
        // Made once: a later resolve with other settings finds it as it is.
        access_point_dir(&fs_dir, "/a/b", Some(&info("700"))).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o2750);
        // The whole file system: its own directory.
        assert_eq!(access_point_dir(&fs_dir, "/", None).unwrap().0, fs_dir);
    }

    #[test]
    fn a_link_on_the_path_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let fs_dir = tmp.path().join("fs-00000001");
        create_file_system(&fs_dir).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, fs_dir.join("escape")).unwrap();
        for path in ["/escape", "/escape/x"] {
            assert!(
                matches!(
                    access_point_dir(&fs_dir, path, Some(&info("755"))),
                    Err(Unreachable::RootDirectory)
                ),
                "{path}"
            );
        }
        assert!(!outside.join("x").exists());
        std::fs::write(fs_dir.join("file"), b"x").unwrap();
        assert!(access_point_dir(&fs_dir, "/file", Some(&info("755"))).is_err());
        assert!(matches!(
            access_point_dir(&tmp.path().join("gone"), "/", None),
            Err(Unreachable::FileSystem)
        ));
    }

    #[test]
    fn size_counts_file_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("d/a"), vec![0u8; 1000]).unwrap();
        std::fs::write(tmp.path().join("b"), vec![0u8; 24]).unwrap();
        assert_eq!(size(tmp.path()), 1024);
    }
}
