//! Mounts made after a sandbox started, inside its mount namespace: an S3
//! mount's FUSE file system, an EFS volume's bind.
//!
//! The caller builds a *detached* mount in the agent (an fd from `fsmount`,
//! or from `open_tree(OPEN_TREE_CLONE)`), which needs no namespace; only
//! attaching it and detaching it happen inside the sandbox's namespace, in
//! a short-lived child ([`launch::in_shared_child`]): `setns(CLONE_NEWNS)`
//! is refused to a multithreaded process, which the agent is.
//!
//! - The mountpoint is reached one component at a time from the
//!   namespace's root, never following a symlink (`O_NOFOLLOW` on each
//!   component): the sandbox owns `/home/user`, and a symlink it planted
//!   there (`/home/user/data -> /etc`) must not move a mount onto `/etc`.
//!   Missing directories are created (under `/home/user` owned by the
//!   sandbox's user, so that it can remove them later).
//! - A path under `/mnt` is made on a tmpfs of the sandbox's own, mounted
//!   over `/mnt` when its first mount comes: `/mnt` is the host's
//!   directory in the namespace (or a read-only image layer), and creating
//!   a mountpoint there would leave a directory on the host that every
//!   sandbox sees.
//! - Detaching goes through the mount's own descriptor
//!   (`/proc/self/fd/N`, which names that very mount), not the path: the
//!   sandbox may have renamed a directory above the mountpoint and put a
//!   symlink in its place since, and a path could then name another of
//!   its mounts.

use std::ffi::CString;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::mount::{MountFlags, MoveMountFlags, UnmountFlags};

use super::SandboxMounts;
use super::launch;
use super::user::HostIds;

/// The most components a mountpoint may have (the section's paths have a
/// few; this bounds what the child walks).
const MAX_DEPTH: usize = 32;

/// A mount attached in a sandbox's namespace by [`SandboxMounts::attach`].
/// Holds the mount's descriptor: dropping it without
/// [`SandboxMounts::detach`] leaves the mount where it is until the
/// namespace ends (with the sandbox).
#[derive(Debug)]
pub(crate) struct NsMount {
    /// The mount (`fsmount`'s or `open_tree`'s descriptor, attached).
    mount: OwnedFd,
    /// Where it was attached (a guest path, for logs and status).
    path: String,
}

impl NsMount {
    /// The guest path the mount was attached at.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The mount's root (an `O_PATH` descriptor): `fstat` on it asks the
    /// mounted file system, whoever renamed what above it.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.mount.as_fd()
    }
}

/// The components of `path`, an absolute canonical guest path below `/`
/// (no `.`, `..`, empty component or trailing `/`), as C strings.
fn components(path: &str) -> std::io::Result<Vec<CString>> {
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let rest = path.strip_prefix('/').ok_or_else(invalid)?;
    let parts: Vec<&str> = rest.split('/').collect();
    if rest.is_empty() || parts.len() > MAX_DEPTH {
        return Err(invalid());
    }
    parts
        .into_iter()
        .map(|part| {
            if part.is_empty() || part == "." || part == ".." {
                return Err(invalid());
            }
            CString::new(part).map_err(|_| invalid())
        })
        .collect()
}

impl SandboxMounts {
    /// Attaches `mount` (a detached mount: `fsmount`'s descriptor, or
    /// `open_tree`'s with `OPEN_TREE_CLONE`) at `path` inside this
    /// namespace, creating the missing directories (owned by `owner`,
    /// the sandbox's host ids, when given) and, for a path under `/mnt`,
    /// the sandbox's own tmpfs over `/mnt` first.
    ///
    /// Blocks the calling thread for the child's few syscalls.
    ///
    /// # Errors
    /// `InvalidInput` for a path that is not absolute and canonical; else
    /// the errno of the step that failed (`ELOOP` / `ENOTDIR`: a
    /// component is a symlink or not a directory), nothing attached.
    pub(crate) fn attach(
        &self,
        mount: OwnedFd,
        path: &str,
        owner: Option<HostIds>,
    ) -> std::io::Result<NsMount> {
        let names = components(path)?;
        // Held across the child: two attaches never both cover /mnt.
        let mut covered = self.mnt_covered.lock().unwrap_or_else(|p| p.into_inner());
        let cover = !*covered && names[0].as_bytes() == b"mnt";
        let ns = self.ns.as_fd();
        let source = mount.as_fd();
        let owner = owner.map(|ids| (ids.uid(), ids.gid()));
        launch::in_shared_child(|| {
            rustix::thread::move_into_link_name_space(
                ns,
                Some(rustix::thread::LinkNameSpaceType::Mount),
            )?;
            if cover {
                rustix::mount::mount(
                    c"tmpfs",
                    c"/mnt",
                    c"tmpfs",
                    MountFlags::NOSUID | MountFlags::NODEV,
                    c"mode=755",
                )?;
            }
            // setns made the namespace's root this child's root and cwd.
            let mut dir = rustix::fs::open(
                c"/",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            for (depth, name) in names.iter().enumerate() {
                let open = |dir: &OwnedFd| {
                    rustix::fs::openat(
                        dir,
                        name.as_c_str(),
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                };
                dir = match open(&dir) {
                    Ok(next) => next,
                    Err(rustix::io::Errno::NOENT) => {
                        match rustix::fs::mkdirat(&dir, name.as_c_str(), Mode::from_raw_mode(0o755))
                        {
                            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                            Err(err) => return Err(err.into()),
                        }
                        // Below /home/user (depth 2 and on): the sandbox's.
                        if let Some((uid, gid)) = owner.filter(|_| depth >= 2) {
                            rustix::fs::chownat(
                                &dir,
                                name.as_c_str(),
                                Some(uid),
                                Some(gid),
                                AtFlags::SYMLINK_NOFOLLOW,
                            )?;
                        }
                        open(&dir)?
                    }
                    Err(err) => return Err(err.into()),
                };
            }
            rustix::mount::move_mount(
                source,
                c"",
                &dir,
                c"",
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
            )?;
            Ok(dir)
        })?;
        if cover {
            *covered = true;
        }
        Ok(NsMount {
            mount,
            path: path.to_owned(),
        })
    }

    /// Detaches `mount` from this namespace (`MNT_DETACH`: open files on it
    /// keep working until closed; new lookups no longer reach it). The
    /// directory it was attached on stays.
    ///
    /// # Errors
    /// The errno of `umount2` (the mount then stays attached until the
    /// namespace ends).
    pub(crate) fn detach(&self, mount: &NsMount) -> std::io::Result<()> {
        let target = CString::new(format!("/proc/self/fd/{}", mount.mount.as_raw_fd()))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let ns = self.ns.as_fd();
        launch::in_shared_child(|| {
            rustix::thread::move_into_link_name_space(
                ns,
                Some(rustix::thread::LinkNameSpaceType::Mount),
            )?;
            // The child shares the agent's descriptor table: fd N is the
            // mount, and the magic link resolves to that mount's root.
            rustix::mount::unmount(target.as_c_str(), UnmountFlags::DETACH)?;
            // in_shared_child hands back a descriptor: any will do.
            Ok(rustix::fs::open(
                c"/",
                OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
            )?)
        })
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;

    use super::components;
    use crate::isolation::launch::Stdio;
    use crate::sandbox::{SandboxEnv, SpawnSpec};

    #[test]
    fn components_refuse_what_is_not_canonical() {
        assert_eq!(components("/mnt/data").unwrap().len(), 2);
        for bad in [
            "",
            "/",
            "mnt/x",
            "/mnt//x",
            "/mnt/./x",
            "/mnt/../x",
            "/mnt/x/",
        ] {
            assert!(components(bad).is_err(), "{bad:?}");
        }
    }

    /// A detached tmpfs holding `hello` (`hi`).
    fn detached_tmpfs() -> OwnedFd {
        use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
        let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).unwrap();
        rustix::mount::fsconfig_create(&fs).unwrap();
        let mount = rustix::mount::fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        )
        .unwrap();
        let file = rustix::fs::openat(
            &mount,
            "hello",
            rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&file, b"hi").unwrap();
        mount
    }

    /// `sh -c script` in the sandbox: its exit code and stdout.
    async fn sh(env: &SandboxEnv, script: &str) -> (i32, String) {
        use tokio::io::AsyncReadExt as _;
        let spec = SpawnSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            ..SpawnSpec::default()
        };
        let mut child = env
            .launch(&spec, Stdio::Null, Stdio::Piped, Stdio::Null)
            .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        let status = child.wait().await.unwrap();
        (status.code().unwrap_or(-1), out)
    }

    #[tokio::test]
    async fn a_mount_is_the_sandboxs_alone_and_never_follows_its_symlinks() {
        if !rustix::process::geteuid().is_root() || !crate::isolation::support().mount_ns {
            println!("SKIPPED: ns_mount: needs root and mount namespaces");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sbx");
        let env = SandboxEnv::new(&root).unwrap();
        let name = format!("rayito-ns-mount-{:08x}", rand::random::<u32>());
        let at_mnt = format!("/mnt/{name}/data");
        let mounted = env.attach_mount(detached_tmpfs(), &at_mnt).unwrap();
        assert_eq!(mounted.path(), at_mnt);
        assert_eq!(
            sh(&env, &format!("cat {at_mnt}/hello")).await,
            (0, "hi".into())
        );
        // The host's /mnt got nothing: the sandbox's own tmpfs covers it.
        assert!(!std::path::Path::new("/mnt").join(&name).exists());

        // Below /home/user: the created directories are the sandbox's.
        let home = env
            .attach_mount(detached_tmpfs(), "/home/user/a/b")
            .unwrap();
        assert_eq!(sh(&env, "cat /home/user/a/b/hello").await, (0, "hi".into()));
        let (code, _) = sh(&env, "test -O /home/user/a").await;
        assert_eq!(
            code, 0,
            "the created directory belongs to the sandbox's user"
        );

        // A symlink the sandbox planted is never followed.
        std::os::unix::fs::symlink("/etc", root.join("home/user/link")).unwrap();
        let err = env
            .attach_mount(detached_tmpfs(), "/home/user/link/x")
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");
        assert!(!std::path::Path::new("/etc/x").exists());

        // Detached by its descriptor, even after a rename above it.
        std::fs::rename(root.join("home/user/a"), root.join("home/user/moved")).unwrap();
        env.detach_mount(&home).unwrap();
        assert_eq!(sh(&env, "test -e /home/user/moved/b/hello").await.0, 1);
        env.detach_mount(&mounted).unwrap();
        assert_eq!(sh(&env, &format!("test -e {at_mnt}/hello")).await.0, 1);
    }
}
