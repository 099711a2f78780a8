//! What the machine lets the agent do to contain a sandbox's processes, and
//! the setup every child gets between fork and exec.
//!
//! Three independent layers, each probed once per process and used where the
//! host allows it (one warning each where it does not):
//! - a cgroup v2 per sandbox ([`cgroup`]): every process of the sandbox, and
//!   every descendant whatever it does (`setsid`, `env -i`, a double fork),
//!   stays in it, and `cgroup.kill` ends them all at once;
//! - a mount namespace per child: a tmpfs covers `/home`, the sandbox's
//!   `<root>/home/user` is bound at `/home/user`, `<root>/tmp` at `/tmp`, and
//!   (when the uid is switched) a generated `/etc/passwd` and `/etc/group`
//!   name the sandbox's user `user`;
//! - when the agent runs as root, an unprivileged host uid per sandbox
//!   ([`user`]), seen inside as uid 1000 through a user namespace.
//!
//! No pid namespace is used: the command would become its namespace's init,
//! which ignores SIGTERM without a handler and would change the contract's
//! `signaled`/`timeout` outcomes; the cgroup already holds every descendant.
//!
//! All of it is done with plain syscalls in the forked child (no helper
//! binary), so the child keeps its pid: signals and exit statuses are
//! exactly the command's.

pub(crate) mod cgroup;
pub(crate) mod exit_cleanup;
pub(crate) mod user;

use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::process::{Resource, Rlimit};

use self::user::{GUEST_GID, GUEST_UID, HostIds};

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
        let ids = support.switch_uid.then(HostIds::pick);
        prepare_root(&dir, ids, support.user_ns)?;
        let setup = ChildSetup::new(&dir, "/home/user", support, ids, None, None)?;
        let mut cmd = std::process::Command::new("true");
        cmd.current_dir("/")
            .stdin(std::process::Stdio::null())
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
/// `etc/group` below a sandbox root, owned as the sandbox's processes need.
pub(crate) fn prepare_root(
    root: &Path,
    ids: Option<HostIds>,
    user_ns: bool,
) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join("home/user"))?;
    std::fs::create_dir_all(root.join("tmp"))?;
    if let Some(ids) = ids {
        use std::os::unix::fs::PermissionsExt as _;
        // Without a mount namespace HOME is reached through the root: let
        // the sandbox's uid traverse it (but not list it).
        let root_mode = std::fs::metadata(root)?.permissions().mode() & 0o7777;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(root_mode | 0o711))?;
        for dir in ["home", "home/user", "tmp"] {
            ids.chown(&root.join(dir))?;
        }
        std::fs::create_dir_all(root.join("etc"))?;
        let (passwd, group) = user::account_files(ids, user_ns);
        std::fs::write(root.join("etc/passwd"), passwd)?;
        std::fs::write(root.join("etc/group"), group)?;
    }
    Ok(())
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// Everything a child does between fork and exec, prepared before the fork
/// (nothing may allocate in the child).
#[derive(Debug)]
pub(crate) struct ChildSetup {
    cpu_seconds: Option<u64>,
    /// `cgroup.procs` of the sandbox's cgroup, opened by the agent.
    cgroup_procs: Option<OwnedFd>,
    mounts: Option<MountPlan>,
    user: Option<UserPlan>,
}

/// The mounts of a child. Sources are resolved relative to the sandbox
/// root, made the working directory first: a working directory keeps
/// resolving after the tmpfs over `/home` or the bind over `/tmp` hides the
/// root's host path (a root under `/tmp`, as the default is).
#[derive(Debug)]
struct MountPlan {
    root: CString,
    /// Bind generated account files over the host's (uid switch only).
    accounts: bool,
    cwd: CString,
}

#[derive(Debug)]
struct UserPlan {
    ids: HostIds,
    /// `"1000 <host uid> 1"` and the gid line, when a user namespace is used.
    maps: Option<(CString, CString)>,
}

impl ChildSetup {
    /// The setup of a child of the sandbox rooted at `root`, starting in
    /// guest dir `cwd`.
    pub(crate) fn new(
        root: &Path,
        cwd: &str,
        support: Support,
        ids: Option<HostIds>,
        cgroup_procs: Option<OwnedFd>,
        cpu_seconds: Option<u64>,
    ) -> std::io::Result<Self> {
        let mounts = if support.mount_ns {
            Some(MountPlan {
                root: cstring(root.as_os_str().as_bytes())?,
                accounts: ids.is_some(),
                cwd: cstring(cwd.as_bytes())?,
            })
        } else {
            None
        };
        let user = match ids {
            Some(ids) => Some(UserPlan {
                ids,
                maps: if support.user_ns {
                    Some((
                        cstring(format!("{GUEST_UID} {} 1\n", ids.uid).as_bytes())?,
                        cstring(format!("{GUEST_GID} {} 1\n", ids.gid).as_bytes())?,
                    ))
                } else {
                    None
                },
            }),
            None => None,
        };
        Ok(Self {
            cpu_seconds,
            cgroup_procs,
            mounts,
            user,
        })
    }

    /// Runs in the forked child: limits, cgroup, mounts, then the uid
    /// switch (last: the mounts need root). Only async-signal-safe syscalls
    /// on memory owned by `self` or static literals.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        set_limit(Resource::Core, 0)?;
        set_limit(Resource::Nofile, 1024)?;
        if let Some(secs) = self.cpu_seconds {
            set_limit(Resource::Cpu, secs)?;
        }
        if let Some(procs) = &self.cgroup_procs {
            // "0" moves the writing process (this child) into the cgroup.
            rustix::io::write(procs, b"0")?;
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        if let Some(user) = &self.user {
            user.apply()?;
        }
        Ok(())
    }
}

impl MountPlan {
    fn apply(&self) -> std::io::Result<()> {
        // SAFETY: CLONE_NEWNS only gives this (single-threaded, just forked)
        // child its own mount table; no file descriptor table is unshared.
        unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }?;
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        rustix::process::chdir(self.root.as_c_str())?;
        rustix::mount::mount(
            c"tmpfs",
            c"/home",
            c"tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            c"mode=755",
        )?;
        rustix::fs::mkdir(c"/home/user", Mode::from_raw_mode(0o755))?;
        // Relative sources: below the root, the working directory.
        rustix::mount::mount_bind_recursive(c"home/user", c"/home/user")?;
        rustix::mount::mount_bind_recursive(c"tmp", c"/tmp")?;
        if self.accounts {
            rustix::mount::mount_bind(c"etc/passwd", c"/etc/passwd")?;
            rustix::mount::mount_bind(c"etc/group", c"/etc/group")?;
        }
        rustix::process::chdir(self.cwd.as_c_str())?;
        Ok(())
    }
}

impl UserPlan {
    fn apply(&self) -> std::io::Result<()> {
        let (uid, gid) = (self.ids.uid(), self.ids.gid());
        rustix::thread::set_thread_groups(&[])?;
        rustix::thread::set_thread_res_gid(gid, gid, gid)?;
        rustix::thread::set_thread_res_uid(uid, uid, uid)?;
        // A set-user-ID program must not give the sandbox its privileges back.
        rustix::thread::set_no_new_privs(true)?;
        // Set after the uid change, which clears it: if the agent dies, so
        // does its direct child (the cgroup takes care of the rest).
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if let Some((uid_map, gid_map)) = &self.maps {
            // The uid change made /proc/self root-owned; the maps are written
            // by the process itself, which must own its /proc entries.
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)?;
            // SAFETY: CLONE_NEWUSER only changes this single-threaded child's
            // user namespace; no file descriptor table is unshared.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWUSER) }?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/gid_map", gid_map.as_bytes())?;
            write_file(c"/proc/self/uid_map", uid_map.as_bytes())?;
        }
        Ok(())
    }
}

/// open + write + close, async-signal-safe.
fn write_file(path: &CStr, bytes: &[u8]) -> std::io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, bytes)?;
    Ok(())
}

/// Sets one resource limit (soft and hard) in the current process.
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
