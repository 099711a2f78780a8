//! What the machine lets the agent do to contain a sandbox's processes, and
//! the setup every child gets between fork and exec.
//!
//! Three independent layers, each probed once per process and used where the
//! host allows it (one warning each where it does not):
//! - a cgroup v2 per sandbox ([`cgroup`]): every process of the sandbox, and
//!   every descendant whatever it does (`setsid`, `env -i`, a double fork),
//!   stays in it, and `cgroup.kill` ends them all at once;
//! - a mount namespace per sandbox ([`SandboxMounts`]), built once when the
//!   sandbox is created and entered by every child (`setns`): a tmpfs covers
//!   `/home`, the sandbox's `<root>/home/user` is bound at `/home/user`,
//!   `<root>/tmp` at `/tmp`, an empty tmpfs of its own at `/dev/shm`,
//!   `/var/tmp` and `/run/lock`, an IPC namespace of its own (System V
//!   IPC, POSIX message queues), and (when the uid is switched) a generated
//!   `/etc/passwd` and `/etc/group` name the sandbox's user `user`; on an
//!   image layer, its root is the host's with the layer over it, read-only
//!   ([`layer_root`]). Only root
//!   in the agent's own user namespace can change it, which no sandbox
//!   process is, so sharing it between a sandbox's processes gives them
//!   nothing they did not have with one copy each (building one per child
//!   cost a copy of the host's mount table and five mounts per command);
//! - when the agent runs as root, an unprivileged host uid per sandbox
//!   ([`user`]), seen inside as uid 1000 through a user namespace, also
//!   built once per sandbox ([`SandboxUserNs`], owned by the agent's root,
//!   mapping only uid and gid 1000 to the sandbox's host ids) and entered by
//!   every child before it drops to uid 1000, which leaves it no capability.
//!
//! No pid namespace is used: the command would become its namespace's init,
//! which ignores SIGTERM without a handler and would change the contract's
//! `signaled`/`timeout` outcomes; the cgroup already holds every descendant.
//!
//! All of it is done with plain syscalls in the child between clone and
//! exec (no helper binary, see [`launch`]), so the child keeps its pid:
//! signals and exit statuses are exactly the command's.

pub(crate) mod cgroup;
pub(crate) mod clone_into;
pub(crate) mod command_dirs;
pub(crate) mod exit_cleanup;
pub(crate) mod launch;
pub(crate) mod layer_root;
pub(crate) mod marker;
pub(crate) mod ns_mount;
pub(crate) mod sockets;
pub(crate) mod uids;
pub(crate) mod user;

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::process::{Resource, Rlimit};

use self::uids::UidLease;
use self::user::{GUEST_GID, GUEST_UID, HostIds};

/// The file-creation mask of every sandbox process: what it creates is its
/// own alone (its group is the sandbox's own gid, so 027 would share nothing
/// either, but 077 says so without needing that argument).
pub(crate) const CHILD_UMASK: u32 = 0o077;

/// What this host allows, probed once per process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Support {
    /// Children get a mount namespace with the sandbox's `/home/user`, `/tmp`.
    pub(crate) mount_ns: bool,
    /// The agent runs as root, so children drop to an unprivileged host uid.
    pub(crate) switch_uid: bool,
    /// Children get a user namespace in which they are uid 1000.
    pub(crate) user_ns: bool,
}

/// The probed [`Support`] (logs one warning per missing layer).
pub(crate) fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let switch_uid = rustix::process::geteuid().is_root();
        let try_plan = |mount_ns: bool, user_ns: bool| {
            probe(Support {
                mount_ns,
                switch_uid,
                user_ns,
            })
            .unwrap_or(false)
        };
        let mount_ns = try_plan(true, false);
        let user_ns = switch_uid && try_plan(mount_ns, true);
        let support = Support {
            mount_ns,
            switch_uid,
            user_ns,
        };
        if !mount_ns {
            tracing::warn!(
                "mount namespaces are not available: sandbox processes run with HOME set to \
                 the sandbox's host directory and see the host's /home and /tmp"
            );
        }
        if !switch_uid {
            tracing::warn!(
                "the agent does not run as root: sandbox processes run as the agent's own user"
            );
        } else if !user_ns {
            tracing::warn!(
                "user namespaces are not available: sandbox processes run under an \
                 unprivileged host uid, which they also see (not uid 1000)"
            );
        }
        support
    })
}

/// Starts `true` with a throw-away root and the given layers (probed
/// before any cgroup exists, so without one).
fn probe(support: Support) -> std::io::Result<bool> {
    use std::os::unix::process::CommandExt as _;
    let dir = std::env::temp_dir().join(format!(
        "rayito-ns-probe-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let lease = support.switch_uid.then(UidLease::allocate).transpose()?;
        let ids = lease.as_ref().map(UidLease::ids);
        prepare_root(&dir, ids, support.user_ns)?;
        let mounts = if support.mount_ns {
            Some(SandboxMounts::create(&dir, ids.is_some(), None)?)
        } else {
            None
        };
        let userns = match ids {
            Some(ids) if support.user_ns => Some(SandboxUserNs::create(ids)?),
            _ => None,
        };
        let cwd = if support.mount_ns {
            std::path::PathBuf::from("/home/user")
        } else {
            dir.join("home/user")
        };
        let setup = ChildSetup::new(
            &cwd,
            mounts.as_ref(),
            userns.as_ref(),
            ids,
            Vec::new(),
            None,
        )?;
        let mut cmd = std::process::Command::new("true");
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: the closure only makes async-signal-safe syscalls on memory
        // prepared before fork (see ChildSetup::apply).
        unsafe {
            cmd.pre_exec(move || setup.apply());
        }
        let status = cmd.status();
        if let Err(err) = &status {
            tracing::debug!(error = %err, ?support, "isolation probe failed");
        }
        Ok(status.map(|s| s.success()).unwrap_or(false))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Creates `home/user`, `tmp` and (with a uid switch) `etc/passwd`,
/// `etc/group` below a sandbox root, owned and protected as the sandbox's
/// processes need and no more: with a uid switch the root and `home` are
/// root's 0711 (the sandbox's uid traverses them, nobody lists them),
/// `home/user` and `tmp` the sandbox's 0700; without one, all are 0700.
/// Then checks that the sandbox's uid can reach its home through the
/// host's directories above the root (the file calls run as that uid).
///
/// # Errors
/// A directory cannot be created or given its owner and mode, or a
/// directory above the root keeps the sandbox's uid out (the error names it).
pub(crate) fn prepare_root(
    root: &Path,
    ids: Option<HostIds>,
    user_ns: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    };
    std::fs::create_dir_all(root.join("home/user"))?;
    std::fs::create_dir_all(root.join("tmp"))?;
    let Some(ids) = ids else {
        for dir in ["", "home", "home/user", "tmp"] {
            mode(&root.join(dir), 0o700)?;
        }
        return Ok(());
    };
    mode(root, 0o711)?;
    mode(&root.join("home"), 0o711)?;
    for dir in ["home/user", "tmp"] {
        ids.chown(&root.join(dir))?;
        mode(&root.join(dir), 0o700)?;
    }
    std::fs::create_dir_all(root.join("etc"))?;
    mode(&root.join("etc"), 0o711)?;
    let (passwd, group) = user::account_files(ids, user_ns);
    std::fs::write(root.join("etc/passwd"), passwd)?;
    std::fs::write(root.join("etc/group"), group)?;
    for file in ["etc/passwd", "etc/group"] {
        mode(&root.join(file), 0o644)?;
    }
    check_traversable(&root.join("home/user"), ids)
}

/// Checks that `ids` (a sandbox's uid, without supplementary groups) can
/// search every directory of `path`, `path` included; else names the first
/// one that keeps that uid out, so that the error blames the host's layout,
/// not a caller's path.
///
/// # Errors
/// `PermissionDenied` naming the first directory the uid cannot search.
pub(crate) fn check_traversable(path: &Path, ids: HostIds) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut prefix = std::path::PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        let Ok(md) = std::fs::metadata(&prefix) else {
            continue;
        };
        if !md.is_dir() {
            continue;
        }
        // `<dir>/.` is looked up only by a process that may search `<dir>`.
        let searched = {
            let _guard = user::FsIdsGuard::set(ids);
            std::fs::symlink_metadata(prefix.join("."))
        };
        match searched {
            Err(err) if err.raw_os_error() == Some(libc::EACCES) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "sandbox processes and file calls run as an unprivileged uid, which \
                         cannot traverse {} (mode {:04o}) on the way to {}; let every user \
                         traverse it (chmod o+x) or choose a root below directories every \
                         user may traverse, such as /tmp",
                        prefix.display(),
                        md.permissions().mode() & 0o7777,
                        path.display()
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Makes `dir`, a directory that will hold sandbox roots (the emulator's
/// root), traversable by sandbox uids without letting them list it (adds
/// the execute bits: `mktemp -d` makes 0700), and checks that the host's
/// directories above it let them through too.
///
/// # Errors
/// The mode cannot be changed, or a directory above keeps sandbox uids
/// out (the error names it).
pub fn open_for_sandboxes(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if !support().switch_uid {
        return Ok(());
    }
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o011 != 0o011 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))?;
    }
    // No sandbox is given this uid (it is below the range), and no sandbox
    // uid owns anything above a root: it stands for all of them.
    let any_sandbox = HostIds {
        uid: user::HOST_ID_BASE - 1,
        gid: user::HOST_ID_BASE - 1,
    };
    check_traversable(dir, any_sandbox)
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// Everything a child does between fork and exec, prepared before the fork
/// (nothing may allocate in the child).
#[derive(Debug)]
pub struct ChildSetup {
    cpu_seconds: Option<u64>,
    /// `cgroup.procs` of each of the sandbox's cgroups (the v2 one, and v1
    /// ones that carry its limits where the host has them), opened by the
    /// agent.
    cgroup_procs: Vec<OwnedFd>,
    /// The directory of the cgroup v2 whose `cgroup.procs` is the first of
    /// `cgroup_procs`, when the launcher may clone the child straight into
    /// it (see [`clone_into`]): the child then skips that write.
    cgroup_dir: Option<OwnedFd>,
    mounts: Option<MountPlan>,
    /// The sandbox's network namespace (egress enforcement), entered
    /// after the mounts, before the uid switch (it needs the agent's root).
    netns: Option<OwnedFd>,
    user: Option<UserPlan>,
    /// The working directory, entered last, as the sandbox's user: a guest
    /// path inside the mount namespace, else the host path.
    cwd: CString,
    /// The file-creation mask ([`CHILD_UMASK`] unless set otherwise).
    umask: u32,
}

/// A sandbox's mount namespace, held by a descriptor for as long as the
/// sandbox lives (no process has to stay in it).
#[derive(Debug)]
pub struct SandboxMounts {
    ns: OwnedFd,
    /// The sandbox's IPC namespace (System V IPC and POSIX message queues
    /// of its own, not the host's or another sandbox's), where built.
    ipc: Option<OwnedFd>,
    /// Whether the sandbox's own tmpfs covers `/mnt` yet (made with the
    /// first mount below it, see [`ns_mount`]); its lock serializes the
    /// mounts made after the start.
    mnt_covered: std::sync::Mutex<bool>,
}

impl SandboxMounts {
    /// Builds the namespace of the sandbox rooted at `root` (prepared by
    /// [`prepare_root`]); `accounts` binds its generated account files;
    /// with `layer`, the namespace's root is the host's with the image
    /// layer over it (see [`layer_root`]).
    ///
    /// # Errors
    /// The host refuses a mount namespace or one of the mounts.
    pub(crate) fn create(
        root: &Path,
        accounts: bool,
        layer: Option<&layer_root::LayerRoot>,
    ) -> std::io::Result<Self> {
        // Absolute: the layer's targets are below it, reached after chdir.
        let root = std::path::absolute(root)?;
        let targets = MountTargets::new(&root, layer.is_some())?;
        let root = cstring(root.as_os_str().as_bytes())?;
        let ns = launch::in_shared_child(|| {
            // SAFETY: CLONE_NEWNS gives this child (which shares no fs
            // struct) its own mount table; its descriptor table is the
            // agent's, so the namespace's descriptor outlives the child.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }?;
            build_mounts(&root, accounts, layer, &targets)?;
            this_threads_namespace(c"/proc/thread-self/ns/mnt")
        })?;
        let ipc = launch::in_shared_child(|| {
            // SAFETY: CLONE_NEWIPC only changes this child's IPC namespace;
            // the namespace's descriptor outlives it in the shared table.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWIPC) }?;
            this_threads_namespace(c"/proc/thread-self/ns/ipc")
        })?;
        Ok(Self {
            ns,
            ipc: Some(ipc),
            mnt_covered: std::sync::Mutex::new(false),
        })
    }

    /// Holds `ns`, a mount namespace built elsewhere (a local build's),
    /// for children to enter as a sandbox's.
    pub fn from_namespace(ns: OwnedFd) -> Self {
        Self {
            ns,
            ipc: None,
            mnt_covered: std::sync::Mutex::new(false),
        }
    }
}

/// A descriptor of one of this thread's namespaces (`path` under
/// `/proc/thread-self/ns/`), which children enter with `setns`.
fn this_threads_namespace(path: &std::ffi::CStr) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Where a sandbox's own mounts go: the guest paths themselves, or below
/// the staging root of a sandbox on an image layer (the root the
/// namespace pivots into once they are made).
#[derive(Debug)]
struct MountTargets {
    home: CString,
    home_user: CString,
    tmp: CString,
    /// `/dev/shm`, `/var/tmp` and `/run/lock`: a fresh tmpfs each (issue
    /// 41 section 4).
    shared_tmp: [CString; 3],
    passwd: CString,
    group: CString,
}

impl MountTargets {
    fn new(root: &Path, staged: bool) -> std::io::Result<Self> {
        let path = |guest: &str| {
            if staged {
                cstring(root.join(guest).as_os_str().as_bytes())
            } else {
                cstring(format!("/{guest}").as_bytes())
            }
        };
        Ok(Self {
            home: path("home")?,
            home_user: path("home/user")?,
            tmp: path("tmp")?,
            shared_tmp: [path("dev/shm")?, path("var/tmp")?, path("run/lock")?],
            passwd: path("etc/passwd")?,
            group: path("etc/group")?,
        })
    }
}

/// A sandbox's user namespace, in which uid and gid 1000 are its host ids,
/// held by a descriptor for as long as the sandbox lives.
#[derive(Debug)]
pub struct SandboxUserNs {
    ns: OwnedFd,
}

impl SandboxUserNs {
    /// Builds the namespace that maps [`GUEST_UID`] / [`GUEST_GID`] to `ids`.
    ///
    /// # Errors
    /// The host refuses a user namespace or the maps.
    pub(crate) fn create(ids: HostIds) -> std::io::Result<Self> {
        let ns = launch::new_user_namespace(
            format!("{GUEST_UID} {} 1\n", ids.uid).as_bytes(),
            format!("{GUEST_GID} {} 1\n", ids.gid).as_bytes(),
        )?;
        Ok(Self { ns })
    }
}

/// Mounts of a sandbox, in a fresh mount namespace. Sources are resolved
/// relative to the sandbox root, made the working directory first: a
/// working directory keeps resolving after the tmpfs over `/home` or the
/// bind over `/tmp` hides the root's host path (a root under `/tmp`, as the
/// default is), and after the staging tmpfs of an image layer's root covers
/// the sandbox root itself.
fn build_mounts(
    root: &CStr,
    accounts: bool,
    layer: Option<&layer_root::LayerRoot>,
    targets: &MountTargets,
) -> std::io::Result<()> {
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    rustix::process::chdir(root)?;
    if let Some(layer) = layer {
        layer_root::mount_staging(root)?;
        layer.apply()?;
    }
    rustix::mount::mount(
        c"tmpfs",
        targets.home.as_c_str(),
        c"tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        c"mode=755",
    )?;
    rustix::fs::mkdir(targets.home_user.as_c_str(), Mode::from_raw_mode(0o755))?;
    // Relative sources: below the root, the working directory.
    rustix::mount::mount_bind_recursive(c"home/user", targets.home_user.as_c_str())?;
    rustix::mount::mount_bind_recursive(c"tmp", targets.tmp.as_c_str())?;
    // The host's world-writable directories would be a channel between
    // sandboxes and to host processes (a socket in /dev/shm): each sandbox
    // gets empty ones of its own (its memory limit bounds what it writes).
    // A host without one of them gives the sandbox none.
    for target in &targets.shared_tmp {
        match rustix::mount::mount(
            c"tmpfs",
            target.as_c_str(),
            c"tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            c"mode=1777",
        ) {
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
            other => other?,
        }
    }
    if accounts {
        rustix::mount::mount_bind(c"etc/passwd", targets.passwd.as_c_str())?;
        rustix::mount::mount_bind(c"etc/group", targets.group.as_c_str())?;
    }
    if layer.is_some() {
        layer_root::enter_staging(root)?;
    }
    Ok(())
}

/// A child enters its sandbox's mount namespace.
#[derive(Debug)]
struct MountPlan {
    /// The sandbox's namespace (a copy of the held descriptor, CLOEXEC).
    ns: OwnedFd,
    /// The sandbox's IPC namespace (a copy of the held descriptor).
    ipc: Option<OwnedFd>,
}

#[derive(Debug)]
struct UserPlan {
    ids: HostIds,
    /// The sandbox's user namespace (a copy of the held descriptor,
    /// CLOEXEC), when one is used.
    ns: Option<OwnedFd>,
}

impl ChildSetup {
    /// The setup of a child of a sandbox, starting in `cwd` (a guest path
    /// with `mounts`, else a host path), inside the sandbox's `mounts` and
    /// `userns` where it has them, as the sandbox's `ids` where the agent
    /// switches uids, joining every cgroup of `cgroup_procs`.
    pub fn new(
        cwd: &Path,
        mounts: Option<&SandboxMounts>,
        userns: Option<&SandboxUserNs>,
        ids: Option<HostIds>,
        cgroup_procs: Vec<OwnedFd>,
        cpu_seconds: Option<u64>,
    ) -> std::io::Result<Self> {
        let mounts = match mounts {
            Some(mounts) => Some(MountPlan {
                ns: mounts.ns.try_clone()?,
                ipc: match &mounts.ipc {
                    Some(ipc) => Some(ipc.try_clone()?),
                    None => None,
                },
            }),
            None => None,
        };
        let user = match ids {
            Some(ids) => Some(UserPlan {
                ids,
                ns: userns.map(|u| u.ns.try_clone()).transpose()?,
            }),
            None => None,
        };
        Ok(Self {
            cpu_seconds,
            cgroup_procs,
            cgroup_dir: None,
            mounts,
            netns: None,
            user,
            cwd: cstring(cwd.as_os_str().as_bytes())?,
            umask: CHILD_UMASK,
        })
    }

    /// The same setup, entering the network namespace `ns` too.
    ///
    /// # Errors
    /// The descriptor cannot be duplicated.
    pub(crate) fn with_netns(mut self, ns: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Self> {
        self.netns = Some(ns.try_clone_to_owned()?);
        Ok(self)
    }

    /// The same setup, the child cloned straight into `dir`, the directory
    /// of the cgroup v2 whose `cgroup.procs` was given first to
    /// [`ChildSetup::new`] (where the kernel allows it; else the child
    /// joins it by that file as before).
    pub(crate) fn born_in_cgroup(mut self, dir: OwnedFd) -> Self {
        self.cgroup_dir = Some(dir);
        self
    }

    /// The cgroup v2 the child may be cloned into (see
    /// [`ChildSetup::born_in_cgroup`]).
    pub(crate) fn cgroup_dir(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.cgroup_dir.as_ref().map(std::os::fd::AsFd::as_fd)
    }

    /// The same setup with another file-creation mask (a local build's
    /// steps make an image every user reads: Docker's 022).
    pub fn with_umask(mut self, umask: u32) -> Self {
        self.umask = umask;
        self
    }

    /// Runs in the child before exec: limits, cgroups, mounts, the uid
    /// switch (the mounts need root), and only then the working directory:
    /// a guest path is only ever entered as the sandbox's user, so a guest
    /// symlink (to `/proc/<pid>/root/...` of another sandbox, say) leads
    /// nowhere that user could not go. Only async-signal-safe syscalls on
    /// memory owned by `self` or static literals.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        self.apply_in(false)
    }

    /// [`ChildSetup::apply`] in a child that `born` in the cgroup of
    /// [`ChildSetup::born_in_cgroup`]: it does not join that one again.
    pub(crate) fn apply_in(&self, born: bool) -> std::io::Result<()> {
        set_limit(Resource::Core, 0)?;
        set_limit(Resource::Nofile, 1024)?;
        if let Some(secs) = self.cpu_seconds {
            // SIGXCPU at the limit (a program may catch it to save its
            // work), SIGKILL 5 s of CPU later.
            rustix::process::setrlimit(
                Resource::Cpu,
                Rlimit {
                    current: Some(secs),
                    maximum: Some(secs.saturating_add(CPU_KILL_GRACE_SECS)),
                },
            )?;
        }
        let skip = usize::from(born && self.cgroup_dir.is_some());
        for procs in self.cgroup_procs.iter().skip(skip) {
            // "0" moves the writing process (this child) into the cgroup.
            rustix::io::write(procs, b"0")?;
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        if let Some(ns) = &self.netns {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
        }
        if let Some(user) = &self.user {
            user.apply()?;
        }
        rustix::process::umask(Mode::from_raw_mode(self.umask));
        rustix::process::chdir(self.cwd.as_c_str())?;
        Ok(())
    }
}

impl MountPlan {
    fn apply(&self) -> std::io::Result<()> {
        // Also moves the working directory to the namespace's root: nothing
        // of the agent's own working directory stays reachable.
        rustix::thread::move_into_link_name_space(
            self.ns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Mount),
        )?;
        if let Some(ipc) = &self.ipc {
            rustix::thread::move_into_link_name_space(
                ipc.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::InterProcessCommunication),
            )?;
        }
        Ok(())
    }
}

impl UserPlan {
    fn apply(&self) -> std::io::Result<()> {
        // Before entering the namespace, where setgroups is denied.
        rustix::thread::set_thread_groups(&[])?;
        let (uid, gid) = match &self.ns {
            Some(ns) => {
                // Joined as root of the agent's namespace (which owns it):
                // full capabilities inside until the uid change below.
                rustix::thread::move_into_link_name_space(
                    ns.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::User),
                )?;
                (
                    rustix::process::Uid::from_raw(GUEST_UID),
                    rustix::process::Gid::from_raw(GUEST_GID),
                )
            }
            None => (self.ids.uid(), self.ids.gid()),
        };
        rustix::thread::set_thread_res_gid(gid, gid, gid)?;
        // Every uid non-zero: the capabilities are gone.
        rustix::thread::set_thread_res_uid(uid, uid, uid)?;
        // A set-user-ID program must not give the sandbox its privileges back.
        rustix::thread::set_no_new_privs(true)?;
        // Set after the uid change, which clears it: if the agent dies, so
        // does its direct child (the cgroup takes care of the rest).
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        Ok(())
    }
}

/// Sets one resource limit (soft and hard) in the current process.
/// CPU seconds between RLIMIT_CPU's SIGXCPU and its SIGKILL.
const CPU_KILL_GRACE_SECS: u64 = 5;

fn set_limit(resource: Resource, value: u64) -> std::io::Result<()> {
    rustix::process::setrlimit(
        resource,
        Rlimit {
            current: Some(value),
            maximum: Some(value),
        },
    )?;
    Ok(())
}
