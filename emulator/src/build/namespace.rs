//! The build's mount namespace: an overlay of the host's root
//! (`lowerdir=/`) with the version's upper directory, `/proc`, `/dev` and
//! `/sys` bound in, made the namespace's root. Every `RUN` enters it; the
//! `COPY` steps and the user lookups go through a descriptor of its root,
//! resolving paths inside the image (an absolute symlink in the image
//! stays in the image).
//!
//! The upper directory is kept self-contained, so that it can later be a
//! lower layer over other directories than `/`: no redirects, no index, no
//! metadata-only copies.

use std::ffi::CString;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};

use rayito_agent::for_emulator::{SandboxMounts, enter_staging, in_shared_child};

/// The start of every reason a build gives when this host cannot build
/// at all (the tests skip on it).
pub(crate) const HOST_CANNOT_BUILD: &str = "local image builds need";

/// The overlay options besides the directories.
const OVERLAY_OPTIONS: &str = "redirect_dir=off,index=off,metacopy=off";

/// The build's namespace and a descriptor of its root (the merged image).
#[derive(Debug)]
pub(crate) struct BuildNamespace {
    pub(crate) mounts: SandboxMounts,
    pub(crate) root: OwnedFd,
}

/// Where building the namespace stopped.
const STAGE_UNSHARE: u8 = 1;
const STAGE_OVERLAY: u8 = 2;
const STAGE_BINDS: u8 = 3;
const STAGE_PIVOT: u8 = 4;

fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| "the emulator's root path holds a NUL byte".to_owned())
}

/// An overlay option value: `\`, `:` and `,` escaped.
fn option_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '\\' | ':' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl BuildNamespace {
    /// Mounts the overlay with `upper` and `work` (empty directories) on
    /// `merged` in a new namespace and enters it.
    ///
    /// # Errors
    /// The version's reason, naming what the host lacks; never a path.
    pub(crate) fn create(upper: &Path, work: &Path, merged: &Path) -> Result<Self, String> {
        let options = format!(
            "lowerdir=/,upperdir={},workdir={},{OVERLAY_OPTIONS}",
            option_path(upper),
            option_path(work)
        );
        let options = CString::new(options).map_err(|_| "the overlay options hold a NUL byte")?;
        let merged_c = cstring(merged)?;
        let binds = ["proc", "dev", "sys"].map(|d| {
            (
                CString::new(format!("/{d}")).unwrap_or_default(),
                cstring(&merged.join(d)).unwrap_or_default(),
            )
        });
        let stage = AtomicU8::new(0);
        let root_fd = AtomicI32::new(-1);
        let ns = in_shared_child(|| {
            stage.store(STAGE_UNSHARE, Ordering::SeqCst);
            // SAFETY: CLONE_NEWNS gives this child (which shares no fs
            // struct) its own mount table; its descriptor table is the
            // agent's, so the descriptors it opens outlive it.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }?;
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
            )?;
            stage.store(STAGE_OVERLAY, Ordering::SeqCst);
            rustix::mount::mount(
                c"overlay",
                merged_c.as_c_str(),
                c"overlay",
                MountFlags::empty(),
                options.as_c_str(),
            )?;
            stage.store(STAGE_BINDS, Ordering::SeqCst);
            for (source, target) in &binds {
                rustix::mount::mount_bind_recursive(source.as_c_str(), target.as_c_str())?;
            }
            stage.store(STAGE_PIVOT, Ordering::SeqCst);
            enter_staging(merged_c.as_c_str())?;
            let root = rustix::fs::open(
                c"/",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            root_fd.store(std::os::fd::IntoRawFd::into_raw_fd(root), Ordering::SeqCst);
            Ok(rustix::fs::open(
                c"/proc/thread-self/ns/mnt",
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?)
        });
        let raw_root = root_fd.load(Ordering::SeqCst);
        // SAFETY: the child opened this descriptor in the table both share
        // and handed it over; nothing else owns it.
        let root = (raw_root >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw_root) });
        match (ns, root) {
            (Ok(ns), Some(root)) => Ok(Self {
                mounts: SandboxMounts::from_namespace(ns),
                root,
            }),
            (Ok(_), None) => Err(format!(
                "{HOST_CANNOT_BUILD} a mount namespace, which this host did not give"
            )),
            (Err(err), _) => Err(reason(stage.load(Ordering::SeqCst), &err)),
        }
    }
}

/// The version's reason for a namespace that could not be built at
/// `stage`, from the errno only (never a path).
fn reason(stage: u8, err: &std::io::Error) -> String {
    let errno = err.raw_os_error().unwrap_or(0);
    match stage {
        STAGE_UNSHARE => format!(
            "{HOST_CANNOT_BUILD} a mount namespace, which this host refused ({})",
            err.kind()
        ),
        STAGE_OVERLAY if errno == libc::ENODEV => {
            format!("{HOST_CANNOT_BUILD} overlayfs, which this kernel does not offer")
        }
        STAGE_OVERLAY => format!(
            "{HOST_CANNOT_BUILD} an overlayfs upper directory, which the filesystem holding the \
             emulator's root refused (errno {errno}); put the emulator's root on a filesystem \
             such as ext4 or xfs"
        ),
        _ => format!(
            "{HOST_CANNOT_BUILD} to make the image the build's root, which this host refused \
             (errno {errno})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_what_is_missing_and_no_path() {
        let e = |n| std::io::Error::from_raw_os_error(n);
        assert_eq!(
            reason(STAGE_OVERLAY, &e(libc::ENODEV)),
            "local image builds need overlayfs, which this kernel does not offer"
        );
        assert_eq!(
            reason(STAGE_OVERLAY, &e(libc::EINVAL)),
            "local image builds need an overlayfs upper directory, which the filesystem holding \
             the emulator's root refused (errno 22); put the emulator's root on a filesystem \
             such as ext4 or xfs"
        );
        assert_eq!(
            reason(STAGE_UNSHARE, &e(libc::EPERM)),
            "local image builds need a mount namespace, which this host refused (permission denied)"
        );
        assert_eq!(option_path(Path::new("/a:b,c")), "/a\\:b\\,c");
    }
}
