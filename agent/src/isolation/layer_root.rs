//! A sandbox's root when it runs on an image layer (a local build's
//! overlayfs upper directory): the host's root with the layer over it,
//! read-only.
//!
//! One overlay `lowerdir=<layer>:/` is what one would write, and the kernel
//! refuses it (ELOOP, "overlapping lowerdir path"): the layer lies below
//! `/`. A directory below `/` that does not hold the layer is accepted as a
//! lower layer beside it, so the root is rebuilt one top-level entry at a
//! time on a tmpfs, then made the namespace's root (`pivot_root`):
//!
//! | host `/d` | layer `/d` | in the sandbox |
//! |---|---|---|
//! | directory | directory | overlay `lowerdir=<layer>/d:/d`, read-only |
//! | directory | — | the host's, bound recursively (its mounts come along) |
//! | anything | opaque directory, or directory over a non-directory | the layer's, bound read-only |
//! | — | directory | the layer's, bound read-only |
//! | anything | symlink | the layer's symlink |
//! | anything | whiteout (char device 0:0) | absent |
//! | symlink | — | the same symlink |
//! | file | file / — | the layer's / the host's file, bound (the layer's read-only) |
//!
//! `/proc`, `/sys` and `/dev` are always the host's (a layer never holds
//! them: the build bound them too), `/tmp` and `/home` are left empty for
//! the sandbox's own mounts. A host directory that holds the layer itself
//! cannot be a lower layer beside it: it becomes a directory of the new
//! root whose entries follow the same table, down the layer's own path.
//! Whiteouts and opaque directories deeper in the layer are overlayfs's
//! own business.
//!
//! The plan is computed before the namespace's child starts (it reads
//! directories and allocates); the child only makes the syscalls.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::Mode;
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};

/// Why a sandbox cannot run on an image layer on this host.
pub(crate) const NO_MOUNT_NAMESPACE: &str = "a sandbox on an image layer needs a mount namespace, \
     which this host does not give the agent (run it as root); sandboxes without an image \
     still run";

/// How deep [`copy_home`] goes into the layer's home.
const MAX_HOME_DEPTH: usize = 64;

/// Top-level directories always taken from the host.
const HOST_ONLY: &[&str] = &["proc", "sys", "dev"];
/// Top-level directories left empty, covered by the sandbox's own mounts.
const SANDBOX_OWN: &[&str] = &["tmp", "home"];

/// What one top-level entry of the new root is, and how it gets there.
#[derive(Debug)]
enum Entry {
    /// A directory with an overlay of `lowerdir` mounted on it, read-only.
    Overlay { options: CString },
    /// A directory with `source` bound on it.
    BindDir {
        source: CString,
        recursive: bool,
        read_only: bool,
    },
    /// A directory of the new root with `mode`: a mount point for the
    /// sandbox's own mounts, or a host directory that holds the layer,
    /// whose entries follow.
    Dir { mode: u32 },
    /// An empty file with `source` bound on it.
    BindFile { source: CString, read_only: bool },
    /// A symlink to `target`.
    Symlink { target: CString },
}

/// The new root of a sandbox on an image layer, planned.
#[derive(Debug)]
pub(crate) struct LayerRoot {
    /// (absolute path below the staging root, what goes there).
    entries: Vec<(CString, Entry)>,
}

/// What a top-level name is in one tree.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    Symlink(PathBuf),
    File,
    Whiteout,
}

fn kind_of(path: &Path) -> Option<Kind> {
    let md = std::fs::symlink_metadata(path).ok()?;
    let ft = md.file_type();
    Some(if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink(std::fs::read_link(path).ok()?)
    } else if ft.is_char_device() && std::os::unix::fs::MetadataExt::rdev(&md) == 0 {
        Kind::Whiteout
    } else {
        Kind::File
    })
}

/// Whether overlayfs marked the layer's directory opaque (it hides the
/// lower directory of the same name entirely).
fn is_opaque(path: &Path) -> bool {
    let mut value = [0u8; 4];
    matches!(
        rustix::fs::lgetxattr(path, c"trusted.overlay.opaque", &mut value[..]),
        Ok(n) if value[..n] == *b"y"
    )
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// A path as one overlayfs option value: `\`, `:` and `,` escaped.
fn overlay_path(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b':' | b',') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

impl LayerRoot {
    /// Plans the root for `layer` (an existing directory), staged at
    /// `staging` (an absolute path where the child mounts the tmpfs).
    ///
    /// # Errors
    /// The layer or the host's root cannot be listed, or a path holds a
    /// NUL byte.
    pub(crate) fn plan(layer: &Path, staging: &Path) -> std::io::Result<Self> {
        let layer = layer.canonicalize()?;
        let mut entries = Vec::new();
        plan_dir(&layer, Path::new("/"), &layer, staging, &mut entries)?;
        Ok(Self { entries })
    }

    /// Mounts the planned entries below the staging root (a tmpfs the
    /// caller mounted). Runs in the namespace's child: raw syscalls only,
    /// on memory prepared by [`LayerRoot::plan`].
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        for (target, entry) in &self.entries {
            match entry {
                Entry::Dir { mode } => {
                    mkdir(target)?;
                    // The mode asked, whatever the umask.
                    rustix::fs::chmod(target.as_c_str(), Mode::from_raw_mode(*mode))?;
                }
                Entry::Overlay { options } => {
                    mkdir(target)?;
                    rustix::mount::mount(
                        c"overlay",
                        target.as_c_str(),
                        c"overlay",
                        MountFlags::RDONLY,
                        options.as_c_str(),
                    )?;
                }
                Entry::BindDir {
                    source,
                    recursive,
                    read_only,
                } => {
                    mkdir(target)?;
                    let bound = bind(source, target, *recursive, *read_only);
                    // A host directory that cannot be bound (an automount
                    // point, say) stays an empty directory rather than
                    // failing the sandbox; the layer's own must be there.
                    if *read_only {
                        bound?;
                    }
                }
                Entry::BindFile { source, read_only } => {
                    drop(rustix::fs::open(
                        target.as_c_str(),
                        rustix::fs::OFlags::CREATE
                            | rustix::fs::OFlags::WRONLY
                            | rustix::fs::OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o644),
                    )?);
                    bind(source, target, false, *read_only)?;
                }
                Entry::Symlink { target: link } => {
                    rustix::fs::symlink(link.as_c_str(), target.as_c_str())?;
                }
            }
        }
        Ok(())
    }
}

/// The names in `dir`, none when it does not exist.
fn names(dir: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| Ok(e?.file_name())).collect(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// Plans the entries of `host_dir` (a host directory) and `layer_dir` (the
/// same directory in `layer`) below `target_dir`. A host directory that
/// holds the layer itself cannot be a lower layer beside it (the kernel's
/// ELOOP again): it becomes a directory of the new root whose entries are
/// planned one by one, down the layer's own path.
fn plan_dir(
    layer: &Path,
    host_dir: &Path,
    layer_dir: &Path,
    target_dir: &Path,
    entries: &mut Vec<(CString, Entry)>,
) -> std::io::Result<()> {
    let top = host_dir == Path::new("/");
    let mut all = std::collections::BTreeSet::new();
    all.extend(names(host_dir)?);
    all.extend(names(layer_dir)?);
    for name in all {
        let host_path = host_dir.join(&name);
        let layer_path = layer_dir.join(&name);
        let target_path = target_dir.join(&name);
        let target = cstring(target_path.as_os_str().as_bytes())?;
        let name = name.to_string_lossy();
        let sandbox_own = top && SANDBOX_OWN.contains(&name.as_ref());
        let host_only = top && HOST_ONLY.contains(&name.as_ref());
        let host = kind_of(&host_path);
        let own = if sandbox_own || host_only {
            None
        } else {
            kind_of(&layer_path)
        };
        let host_bind = || -> std::io::Result<Entry> {
            Ok(Entry::BindDir {
                source: cstring(host_path.as_os_str().as_bytes())?,
                recursive: true,
                read_only: false,
            })
        };
        let entry = match (own, host) {
            _ if sandbox_own => Entry::Dir { mode: 0o755 },
            (Some(Kind::Whiteout), _) => continue,
            (Some(Kind::Symlink(target)), _) | (None, Some(Kind::Symlink(target))) => {
                Entry::Symlink {
                    target: cstring(target.as_os_str().as_bytes())?,
                }
            }
            (Some(Kind::Dir), Some(Kind::Dir))
                if layer.starts_with(&host_path) && !is_opaque(&layer_path) =>
            {
                use std::os::unix::fs::PermissionsExt as _;
                let mode = std::fs::metadata(&host_path)?.permissions().mode() & 0o7777;
                entries.push((target, Entry::Dir { mode }));
                plan_dir(layer, &host_path, &layer_path, &target_path, entries)?;
                continue;
            }
            (Some(Kind::Dir), Some(Kind::Dir)) if !is_opaque(&layer_path) => {
                let mut options = b"lowerdir=".to_vec();
                options.extend(overlay_path(&layer_path));
                options.push(b':');
                options.extend(overlay_path(&host_path));
                Entry::Overlay {
                    options: cstring(&options)?,
                }
            }
            (Some(Kind::Dir), _) => Entry::BindDir {
                source: cstring(layer_path.as_os_str().as_bytes())?,
                recursive: false,
                read_only: true,
            },
            (Some(Kind::File), _) => Entry::BindFile {
                source: cstring(layer_path.as_os_str().as_bytes())?,
                read_only: true,
            },
            (None, Some(Kind::Dir)) => host_bind()?,
            (None, Some(Kind::File)) => Entry::BindFile {
                source: cstring(host_path.as_os_str().as_bytes())?,
                read_only: false,
            },
            (None, Some(Kind::Whiteout) | None) => continue,
        };
        entries.push((target, entry));
    }
    Ok(())
}

fn mkdir(path: &CString) -> std::io::Result<()> {
    rustix::fs::mkdir(path.as_c_str(), Mode::from_raw_mode(0o755))?;
    Ok(())
}

fn bind(
    source: &CString,
    target: &CString,
    recursive: bool,
    read_only: bool,
) -> std::io::Result<()> {
    if recursive {
        rustix::mount::mount_bind_recursive(source.as_c_str(), target.as_c_str())?;
    } else {
        rustix::mount::mount_bind(source.as_c_str(), target.as_c_str())?;
    }
    if read_only {
        rustix::mount::mount_remount(
            target.as_c_str(),
            MountFlags::BIND | MountFlags::RDONLY,
            c"",
        )?;
    }
    Ok(())
}

/// Mounts a tmpfs at `staging` for the new root, kept out of every
/// recursive bind made afterwards (a host directory bound whole would
/// otherwise carry a copy of the root being built inside it).
pub(crate) fn mount_staging(staging: &std::ffi::CStr) -> std::io::Result<()> {
    rustix::mount::mount(
        c"tmpfs",
        staging,
        c"tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        c"mode=755",
    )?;
    rustix::mount::mount_change(staging, MountPropagationFlags::UNBINDABLE)?;
    Ok(())
}

/// Makes `staging` the namespace's root: the old root is stacked on it
/// (`pivot_root(".", ".")`) and detached, so nothing of the host's root
/// stays reachable but what was bound into the new one.
pub fn enter_staging(staging: &std::ffi::CStr) -> std::io::Result<()> {
    rustix::process::chdir(staging)?;
    rustix::process::pivot_root(c".", c".")?;
    rustix::mount::unmount(c".", UnmountFlags::DETACH)?;
    rustix::process::chdir(c"/")?;
    Ok(())
}

/// Whether the layer decides what the guest path `guest` (absolute) is:
/// `Some(true)` when it holds an entry there, `Some(false)` when it hides
/// it (a whiteout at the path or above), `None` when the host's shows.
pub(crate) fn layer_entry(layer: &Path, guest: &Path) -> Option<bool> {
    let mut path = layer.to_path_buf();
    for component in guest.components().skip(1) {
        path.push(component);
        match kind_of(&path) {
            Some(Kind::Whiteout) => return Some(false),
            Some(_) => {}
            None => return None,
        }
    }
    Some(true)
}

/// Copies the layer's `/home/user` (a template may put files there) into a
/// new sandbox's own home `dest`, given to the sandbox's `ids` when the
/// agent switches uids. Symlinks are copied as symlinks, never followed;
/// whiteouts and special files are skipped.
///
/// # Errors
/// A file cannot be read, created or given to the sandbox's uid.
pub(crate) fn copy_home(
    layer: &Path,
    dest: &Path,
    ids: Option<super::user::HostIds>,
) -> std::io::Result<()> {
    let source = layer.join("home/user");
    if !std::fs::symlink_metadata(&source).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    copy_tree(&source, dest, ids, 0)
}

fn copy_tree(
    from: &Path,
    to: &Path,
    ids: Option<super::user::HostIds>,
    depth: usize,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if depth > MAX_HOME_DEPTH {
        return Err(std::io::Error::other(
            "the image's /home/user is nested too deep to copy into the sandbox",
        ));
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let md = std::fs::symlink_metadata(&src)?;
        let ft = md.file_type();
        let mode = md.permissions().mode() & 0o7777;
        if ft.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst, ids, depth + 1)?;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode))?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_file() {
            std::fs::copy(&src, &dst)?;
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode & 0o777))?;
        } else {
            continue;
        }
        if let Some(ids) = ids {
            ids.chown(&dst)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_paths_escape_separators() {
        assert_eq!(
            overlay_path(Path::new("/a:b,c\\d")),
            b"/a\\:b\\,c\\\\d".to_vec()
        );
    }

    #[test]
    fn the_plan_follows_the_table() {
        use std::os::unix::fs::symlink;
        let layer = tempfile::tempdir().unwrap();
        let l = layer.path();
        std::fs::create_dir_all(l.join("usr/local/bin")).unwrap();
        std::fs::create_dir_all(l.join("app")).unwrap();
        std::fs::create_dir_all(l.join("proc/x")).unwrap();
        std::fs::create_dir_all(l.join("home/user")).unwrap();
        symlink("usr/lib", l.join("newlink")).unwrap();
        let staging = Path::new("/staging");
        let plan = LayerRoot::plan(l, staging).unwrap();
        let find = |name: &str| {
            let want = staging.join(name);
            plan.entries
                .iter()
                .find(|(t, _)| t.as_bytes() == want.as_os_str().as_bytes())
                .map(|(_, e)| e)
        };
        let canonical = l.canonicalize().unwrap();
        match find("usr") {
            Some(Entry::Overlay { options }) => assert_eq!(
                options.to_bytes(),
                format!("lowerdir={}/usr:/usr", canonical.display()).as_bytes()
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            find("app"),
            Some(Entry::BindDir {
                read_only: true,
                recursive: false,
                ..
            })
        ));
        assert!(matches!(
            find("proc"),
            Some(Entry::BindDir {
                read_only: false,
                recursive: true,
                ..
            })
        ));
        assert!(matches!(find("home"), Some(Entry::Dir { mode: 0o755 })));
        assert!(matches!(find("tmp"), Some(Entry::Dir { mode: 0o755 })));
        assert!(
            matches!(find("newlink"), Some(Entry::Symlink { target }) if target.as_bytes() == b"usr/lib")
        );
        // A host directory the layer does not touch is the host's.
        assert!(matches!(
            find("etc"),
            Some(Entry::BindDir {
                read_only: false,
                recursive: true,
                ..
            })
        ));
    }
}
