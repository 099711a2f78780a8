//! Guest path rules: relative paths resolve against the home, `..`/NUL/empty
//! are refused, system paths are denied, and only the sandbox's view
//! (`/home/user/**` and `/tmp/**`) exists. Every host path used is checked
//! to stay inside that view even through symlinked directories.

use std::path::{Path, PathBuf};

use tonic::Status;

use crate::sandbox::{GUEST_HOME, SandboxEnv};

/// Paths no file RPC may touch (exact or below).
const DENIED: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/usr",
    "/run/rayito",
    "/opt/rayito",
];
/// The directories that exist in the sandbox's view.
pub(super) const VIEW_ROOTS: &[&str] = &[GUEST_HOME, "/tmp"];

fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A validated guest path and its host path.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub guest: String,
    pub host: PathBuf,
}

impl Resolved {
    /// Whether this is one of the view's roots (never removed or moved).
    pub(crate) fn is_view_root(&self) -> bool {
        VIEW_ROOTS.contains(&self.guest.as_str())
    }
}

/// Normalises and checks a guest path, and maps it to the host.
#[allow(clippy::result_large_err)]
pub(crate) fn resolve(env: &SandboxEnv, raw: &str) -> Result<Resolved, Status> {
    if raw.is_empty() || raw.contains('\0') {
        return Err(Status::invalid_argument("invalid path"));
    }
    let joined = if raw.starts_with('/') {
        raw.to_owned()
    } else {
        format!("{GUEST_HOME}/{raw}")
    };
    let mut parts = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(Status::invalid_argument("invalid path")),
            p => parts.push(p),
        }
    }
    let guest = format!("/{}", parts.join("/"));
    if DENIED.iter().any(|d| under(&guest, d)) {
        return Err(Status::permission_denied("path not allowed"));
    }
    if !VIEW_ROOTS.iter().any(|r| under(&guest, r)) {
        return Err(Status::not_found("path not found"));
    }
    let host = env.to_host(&guest);
    // As the sandbox's user: the symlinks followed are the guest's, and
    // root never follows one (to `/proc/<pid>/root` of another sandbox, say).
    env.as_user(|| check_inside(env, &host))?;
    Ok(Resolved { guest, host })
}

/// The view roots' host paths, canonicalised.
fn view_roots(env: &SandboxEnv) -> Vec<PathBuf> {
    VIEW_ROOTS
        .iter()
        .filter_map(|r| env.to_host(r).canonicalize().ok())
        .collect()
}

/// The deepest existing ancestor of `host` (the path itself excluded: a
/// final symlink is never followed by these checks), canonicalised, must lie
/// inside one of the view roots, so a symlinked directory cannot lead out.
/// Runs as the sandbox's user (see [`resolve`]).
#[allow(clippy::result_large_err)]
fn check_inside(env: &SandboxEnv, host: &Path) -> Result<(), Status> {
    let roots = view_roots(env);
    let mut ancestor = host.parent();
    while let Some(dir) = ancestor {
        if let Ok(real) = dir.canonicalize() {
            // A view root's own parent (e.g. `<root>/home`) is fine when the
            // path is the view root itself.
            if roots.iter().any(|r| real.starts_with(r))
                || roots.iter().any(|r| r.parent() == Some(&real))
            {
                return Ok(());
            }
            return Err(Status::permission_denied("path not allowed"));
        }
        ancestor = dir.parent();
    }
    Err(Status::permission_denied("path not allowed"))
}

/// Why a working directory (of a command, a terminal or a code context) is
/// refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CwdRefusal {
    /// Not an absolute clean path, outside the view, missing, or not a
    /// directory.
    Invalid,
    /// A system path, or a symlinked directory leading out of the view.
    NotAllowed,
    /// A directory (or a link on the way) the sandbox's user may not use.
    Denied,
}

impl CwdRefusal {
    /// The status of a refused working directory; `invalid` is what the
    /// caller answers for [`CwdRefusal::Invalid`].
    pub(crate) fn status(self, invalid: &str) -> Status {
        match self {
            CwdRefusal::Invalid => Status::invalid_argument(invalid),
            CwdRefusal::NotAllowed => Status::permission_denied("path not allowed"),
            CwdRefusal::Denied => Status::permission_denied("permission denied"),
        }
    }
}

/// Checks a working directory with the file calls' rules, as the sandbox's
/// user: a guest path in the view (`/home/user/**`, `/tmp/**`) that
/// resolves, through the guest's symlinks, to a directory still inside it.
/// The child enters it again as that user (see `crate::isolation`), so this
/// check is for a clear answer, not the protection.
pub(crate) fn check_working_dir(env: &SandboxEnv, cwd: &str) -> Result<(), CwdRefusal> {
    if !cwd.starts_with('/') || cwd.contains('\0') || cwd.split('/').any(|c| c == "..") {
        return Err(CwdRefusal::Invalid);
    }
    let resolved = resolve(env, cwd).map_err(|status| match status.code() {
        tonic::Code::PermissionDenied => CwdRefusal::NotAllowed,
        _ => CwdRefusal::Invalid,
    })?;
    env.as_user(|| {
        let denied_or_invalid = |e: std::io::Error| match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => CwdRefusal::Denied,
            _ => CwdRefusal::Invalid,
        };
        let real = resolved.host.canonicalize().map_err(denied_or_invalid)?;
        if !view_roots(env).iter().any(|r| real.starts_with(r)) {
            return Err(CwdRefusal::NotAllowed);
        }
        if !std::fs::metadata(&real)
            .map_err(denied_or_invalid)?
            .is_dir()
        {
            return Err(CwdRefusal::Invalid);
        }
        // `<dir>/.` resolves only for a user who may enter `<dir>`.
        std::fs::symlink_metadata(real.join("."))
            .map(|_| ())
            .map_err(denied_or_invalid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        let (dir, env) = super::super::test_env();
        assert_eq!(resolve(&env, "a/b").unwrap().guest, "/home/user/a/b");
        assert_eq!(resolve(&env, "/tmp//x/./y").unwrap().guest, "/tmp/x/y");
        assert_eq!(resolve(&env, "/home/user").unwrap().guest, "/home/user");
        for bad in ["", "a/../b", "a\0b", "/tmp/.."] {
            assert_eq!(resolve(&env, bad).unwrap_err().message(), "invalid path");
        }
        for denied in ["/etc/passwd", "/proc", "/usr/bin", "/run/rayito/x"] {
            let e = resolve(&env, denied).unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (tonic::Code::PermissionDenied, "path not allowed")
            );
        }
        assert_eq!(
            resolve(&env, "/var/log").unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            resolve(&env, "/etcetera").unwrap_err().code(),
            tonic::Code::NotFound
        );
        // A symlinked directory that leads out of the view is refused.
        std::os::unix::fs::symlink("/", dir.path().join("home/user/out")).unwrap();
        let e = resolve(&env, "/home/user/out/etc/passwd").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
    }
}
