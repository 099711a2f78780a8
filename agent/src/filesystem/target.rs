//! The directory a Write or an import puts its file in, held open: reached
//! from a descriptor of the sandbox root one component at a time with
//! `O_NOFOLLOW` (missing directories made on the way), so the temporary
//! file is created, chmodded and renamed over the target inside that very
//! directory, by descriptor. Sandbox code that swaps a directory on the way
//! for a symlink after the path was checked makes the walk fail (`path not
//! allowed`), and once the directory is held, no later swap moves the
//! write: nothing lands outside the sandbox's view.
//!
//! Symlinked directories inside the view still work: the deepest existing
//! ancestor is resolved once, must lie in the view, and the rest is walked
//! without following anything. Every call runs as the sandbox's user
//! (inside `SandboxEnv::as_user`).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use tonic::Status;

use super::beneath::{self, Blocked};
use super::info::io_status;
use super::path::{Resolved, VIEW_ROOTS};
use crate::sandbox::SandboxEnv;

/// The held directory of a target and the target's name in it.
#[derive(Debug)]
pub(crate) struct TargetDir {
    dir: OwnedFd,
    name: OsString,
}

fn not_allowed() -> Status {
    Status::permission_denied("path not allowed")
}

impl TargetDir {
    /// Holds the directory of `target`, making it when missing. A symlink
    /// on the way that does not lead to a directory of the view (one out of
    /// it, a dangling one, one swapped in meanwhile) is PERMISSION_DENIED
    /// `path not allowed`; a file on the way INVALID_ARGUMENT `not a
    /// directory`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn open(env: &SandboxEnv, target: &Resolved) -> Result<Self, Status> {
        Self::hold(env, &target.host, true)
    }

    /// Holds the directory of the existing host path `host` (of a
    /// resolved guest path), as [`TargetDir::open`] does but making
    /// nothing: a missing directory is NOT_FOUND `path not found`.
    #[allow(clippy::result_large_err)]
    pub(crate) fn existing(env: &SandboxEnv, host: &Path) -> Result<Self, Status> {
        Self::hold(env, host, false)
    }

    #[allow(clippy::result_large_err)]
    fn hold(env: &SandboxEnv, host: &Path, make: bool) -> Result<Self, Status> {
        let invalid = || Status::invalid_argument("invalid path");
        let name = host.file_name().ok_or_else(invalid)?.to_owned();
        let parent = host.parent().ok_or_else(invalid)?;
        let root_real = env.to_host("/").canonicalize().map_err(|e| io_status(&e))?;
        let rel = view_relative(parent, &name, &root_real)?;
        let root = rustix::fs::open(&root_real, beneath::WALK_FLAGS, Mode::empty())
            .map_err(|e| io_status(&e.into()))?;
        let dir = beneath::walk_beneath(&root, &rel, make).map_err(|b| match b {
            Blocked::Symlink => not_allowed(),
            Blocked::NotADirectory => Status::invalid_argument("not a directory"),
            Blocked::Io(e) => io_status(&e),
        })?;
        Ok(Self { dir, name })
    }

    /// Whether the target is a directory (not through a symlink).
    pub(crate) fn holds_dir(&self) -> bool {
        rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
    }

    /// Opens the target for reading, not through a final symlink (nor
    /// blocking on a FIFO).
    pub(crate) fn open_file(&self) -> io::Result<std::fs::File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.dir, &self.name, flags, Mode::empty())?;
        Ok(std::fs::File::from(fd))
    }

    /// Bytes available to unprivileged writers on the directory's
    /// filesystem.
    pub(crate) fn available_bytes(&self) -> io::Result<u64> {
        let st = rustix::fs::fstatvfs(&self.dir)?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// Creates a new `.rayito-tmp-*` file (mode 0600) in the directory.
    pub(crate) fn create_temp(&self) -> io::Result<(std::fs::File, OsString)> {
        let temp = OsString::from(format!(".rayito-tmp-{:016x}", rand::random::<u64>()));
        let fd = rustix::fs::openat(
            &self.dir,
            &temp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok((std::fs::File::from(fd), temp))
    }

    /// Gives `file` (the open `temp`) its mode and renames it over the
    /// target, both within the held directory.
    pub(crate) fn commit(&self, temp: &OsStr, file: &std::fs::File, mode: u32) -> io::Result<()> {
        rustix::fs::fchmod(file, Mode::from_raw_mode(mode))?;
        rustix::fs::renameat(&self.dir, temp, &self.dir, &self.name)?;
        Ok(())
    }

    /// Removes `temp` from the directory (best effort).
    pub(crate) fn remove(&self, temp: &OsStr) {
        let _ = rustix::fs::unlinkat(&self.dir, temp, AtFlags::empty());
    }
}

/// `parent` (a host path) relative to the resolved sandbox root: its
/// deepest existing ancestor resolved (the guest's symlinks followed once),
/// the missing rest appended as is. Refused unless it, with `name`, lies
/// in the view (a view root itself is read by the directory above it).
#[allow(clippy::result_large_err)]
fn view_relative(parent: &Path, name: &OsStr, root_real: &Path) -> Result<PathBuf, Status> {
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut at = parent;
    let real = loop {
        match at.canonicalize() {
            Ok(real) => break real,
            Err(_) => {
                missing.push(at.file_name().ok_or_else(not_allowed)?);
                at = at.parent().ok_or_else(not_allowed)?;
            }
        }
    };
    let mut rel = real
        .strip_prefix(root_real)
        .map_err(|_| not_allowed())?
        .to_path_buf();
    rel.extend(missing.iter().rev());
    let full = rel.join(name);
    if !VIEW_ROOTS
        .iter()
        .any(|r| full.starts_with(r.trim_start_matches('/')))
    {
        return Err(not_allowed());
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filesystem::resolve;

    /// What holding the directory of each target answers: the pinned
    /// refusals, and a symlinked directory inside the view still works.
    #[test]
    fn refusals_are_pinned_and_links_inside_the_view_work() {
        let (dir, env) = crate::filesystem::test_env();
        let home = dir.path().join("home/user");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(home.join("real")).unwrap();
        std::fs::write(home.join("file"), b"x").unwrap();
        let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, home.join(name));
        link(Path::new("../../../../no-such-dir-rayito"), "escape").unwrap();
        link(Path::new("/no-such-dir-rayito"), "dangling").unwrap();
        link(&outside, "out").unwrap();
        link(Path::new("real"), "inside").unwrap();
        let held = |guest: &str| {
            let target = resolve(&env, guest)?;
            TargetDir::open(&env, &target)
        };
        let refused = |guest: &str| {
            let e = held(guest).unwrap_err();
            (e.code(), e.message().to_owned())
        };
        let not_allowed = (tonic::Code::PermissionDenied, "path not allowed".to_owned());
        let cases = [
            ("/home/user/escape/x", not_allowed.clone()),
            ("/home/user/dangling/x", not_allowed.clone()),
            ("/home/user/dangling/deeper/x", not_allowed.clone()),
            ("/home/user/out/x", not_allowed.clone()),
            (
                "/home/user/file/x",
                (tonic::Code::InvalidArgument, "not a directory".to_owned()),
            ),
        ];
        for (guest, expected) in cases {
            assert_eq!(refused(guest), expected, "{guest}");
        }
        // Nothing was made outside the view.
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // Through a link inside the view, missing directories are made.
        let t = held("/home/user/inside/new/f").unwrap();
        let (file, temp) = t.create_temp().unwrap();
        t.commit(&temp, &file, 0o640).unwrap();
        let md = std::fs::metadata(home.join("real/new/f")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(md.permissions().mode() & 0o777, 0o640);
        assert!(held("/home/user/real").unwrap().holds_dir());
    }
}
