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
const VIEW_ROOTS: &[&str] = &[GUEST_HOME, "/tmp"];

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
    check_inside(env, &host)?;
    Ok(Resolved { guest, host })
}

/// The deepest existing ancestor of `host` (the path itself excluded: a
/// final symlink is never followed by these checks), canonicalised, must lie
/// inside one of the view roots, so a symlinked directory cannot lead out.
#[allow(clippy::result_large_err)]
fn check_inside(env: &SandboxEnv, host: &Path) -> Result<(), Status> {
    let roots: Vec<PathBuf> = VIEW_ROOTS
        .iter()
        .filter_map(|r| env.to_host(r).canonicalize().ok())
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        let dir = std::env::temp_dir().join(format!("rayito-path-test-{}", std::process::id()));
        let env = SandboxEnv::new(&dir).unwrap();
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
        std::os::unix::fs::symlink("/", dir.join("home/user/out")).unwrap();
        let e = resolve(&env, "/home/user/out/etc/passwd").unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
