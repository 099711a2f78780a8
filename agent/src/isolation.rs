//! Filesystem isolation of children, where the machine allows it: each child
//! gets its own mount namespace in which a tmpfs covers `/home`, the
//! sandbox's `<root>/home/user` is bound at `/home/user` and `<root>/tmp` at
//! `/tmp`. Commands, kernels and the file RPCs then see the same paths.
//!
//! Done with libc between fork and exec (no helper binary), so the child
//! keeps its pid: signals and exit statuses are exactly the command's. No
//! pid namespace is used: the command would become its namespace's init,
//! which ignores SIGTERM without a handler and would change the contract's
//! `signaled`/`timeout` outcomes. Processes are found for killing by process
//! group and by a per-sandbox environment marker instead.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::OnceLock;

/// The prepared arguments of the mount syscalls (allocated before fork:
/// nothing may allocate between fork and exec).
#[derive(Debug)]
pub(crate) struct MountPlan {
    home_src: CString,
    tmp_src: CString,
    cwd: CString,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

impl MountPlan {
    /// The plan for a sandbox rooted at `root`, starting in guest dir `cwd`.
    pub(crate) fn new(root: &Path, cwd: &str) -> std::io::Result<Self> {
        Ok(Self {
            home_src: cstring(root.join("home/user").as_os_str().as_bytes())?,
            tmp_src: cstring(root.join("tmp").as_os_str().as_bytes())?,
            cwd: cstring(cwd.as_bytes())?,
        })
    }

    /// Runs in the child between fork and exec: new mount namespace, private
    /// propagation, the binds, then the guest working directory.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        check(
            // SAFETY: unshare(2) takes no pointers; it only affects this
            // (single-threaded, just forked) child.
            unsafe { libc::unshare(libc::CLONE_NEWNS) },
        )?;
        // SAFETY (for every mount/mkdir/chdir below): each pointer comes from a
        // CString owned by `self` or from a static NUL-terminated literal, and
        // all of them outlive the call; these syscalls are async-signal-safe.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })?;
        check(unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                c"/home".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=755".as_ptr().cast(),
            )
        })?;
        check(unsafe { libc::mkdir(c"/home/user".as_ptr(), 0o755) })?;
        check(unsafe {
            libc::mount(
                self.home_src.as_ptr(),
                c"/home/user".as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        })?;
        check(unsafe {
            libc::mount(
                self.tmp_src.as_ptr(),
                c"/tmp".as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        })?;
        check(unsafe { libc::chdir(self.cwd.as_ptr()) })?;
        Ok(())
    }
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether children can get the mount namespace here (probed once per
/// process by starting `true` with a throw-away root). Logs one warning
/// when they cannot.
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let ok = probe().unwrap_or(false);
        if !ok {
            tracing::warn!(
                "mount namespaces are not available: sandbox processes run with HOME set to \
                 the sandbox's host directory and see the host's /home and /tmp"
            );
        }
        ok
    })
}

fn probe() -> std::io::Result<bool> {
    use std::os::unix::process::CommandExt as _;
    let dir = std::env::temp_dir().join(format!("rayito-ns-probe-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("home/user"))?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    let plan = MountPlan::new(&dir, "/home/user")?;
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure only makes async-signal-safe syscalls on memory
    // prepared before fork (see MountPlan::apply).
    unsafe {
        cmd.pre_exec(move || plan.apply());
    }
    let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ok)
}
