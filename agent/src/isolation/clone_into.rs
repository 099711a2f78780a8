//! Starting a launch child already inside its cgroup v2
//! (`clone3` with `CLONE_INTO_CGROUP`, Linux 5.7+), instead of moving it
//! there by writing its `cgroup.procs` between clone and exec.
//!
//! Why: a write to `cgroup.procs` takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing, a per-cpu rwsem whose writer
//! waits for an RCU grace period unless another writer ran moments before
//! (about 0.1 ms to several ms on the project machine, one per command,
//! measured in `docs/performance.md`); a child born in the cgroup only takes
//! its read side, as every fork does. Where `clone3` is refused (a seccomp
//! profile that answers ENOSYS or EPERM, as container runtimes do, or a
//! kernel without the field) the caller falls back to the classic clone and
//! the move, and this is remembered for the process.
//!
//! `clone3` has no libc wrapper that takes a function: the child returns from
//! the syscall on the new stack with nothing to return to, so a few lines of
//! assembly call the child's function there (as glibc's own `clone` does).
//! Only x86_64 has that trampoline; elsewhere [`clone_into_cgroup`] reports
//! the call unavailable and the classic path runs.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `clone3` was refused as a whole (not for one cgroup).
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// `struct clone_args` of `linux/sched.h` up to `cgroup`
/// (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[repr(C)]
#[derive(Default)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (`linux/sched.h`; not in the libc crate for every
/// target).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Clones a child sharing the caller's memory (`CLONE_VM | CLONE_VFORK |
/// CLONE_PIDFD`, exit signal SIGCHLD) into the cgroup v2 directory
/// `cgroup`, running `entry(arg)` on `stack`; its pid, with its pidfd
/// stored in `pidfd`. `None` when the call is not available here (the
/// caller uses the classic clone, and so do later calls); `Some(Err)` when
/// it failed for this call.
///
/// # Safety
/// As `libc::clone` with `CLONE_VM | CLONE_VFORK`: `entry` must never
/// return (it execs or `_exit`s), may only make async-signal-safe calls on
/// memory prepared before, and every signal must be blocked in the calling
/// thread; `stack` must stay alive until this returns (which, with
/// `CLONE_VFORK`, is after the child exec'd or exited).
pub(super) unsafe fn clone_into_cgroup(
    entry: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    stack: &mut [u8],
    pidfd: &mut c_int,
    cgroup: BorrowedFd<'_>,
) -> Option<std::io::Result<libc::pid_t>> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    // The ABI wants a 16-byte aligned stack pointer; the kernel starts the
    // child at `stack + stack_size`.
    let base = (stack.as_mut_ptr() as usize + 15) & !15;
    let end = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP,
        pidfd: (&raw mut *pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: (end - base) as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the caller's contract (see above); `args` lives in this frame,
    // suspended until the child exec'd or exited.
    let ret = unsafe { raw_clone3(&args, entry, arg) };
    if ret >= 0 {
        return Some(Ok(ret as libc::pid_t));
    }
    let errno = -(ret as c_int);
    match errno {
        // No clone3 (seccomp, old kernel), or no `cgroup` field (E2BIG).
        libc::ENOSYS | libc::EPERM | libc::E2BIG => {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            None
        }
        _ => Some(Err(std::io::Error::from_raw_os_error(errno))),
    }
}

/// The `clone3` syscall; in the child, calls `entry(arg)` on the new stack
/// (it never returns). The raw result: a pid, or a negated errno.
///
/// # Safety
/// See [`clone_into_cgroup`].
#[cfg(target_arch = "x86_64")]
unsafe fn raw_clone3(
    args: &CloneArgs,
    entry: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> isize {
    let ret: isize;
    // SAFETY: the syscall reads `args` only. In the parent it returns the
    // pid (or -errno) in rax, clobbering rcx and r11 as every syscall; in
    // the child (rax 0) every other register is the parent's, the stack
    // pointer is the top of the child's stack (16-byte aligned, so `call`
    // leaves it as the ABI wants at the function's entry), and the child
    // never comes back from `entry` (`ud2` would trap if it did). `entry`
    // and `arg` cannot be in rcx or r11 (plain outputs, never shared with
    // inputs), so they survive the syscall.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, {arg}",
            "call {entry}",
            "ud2",
            "2:",
            entry = in(reg) entry,
            arg = in(reg) arg,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") std::ptr::from_ref(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    ret
}

/// No trampoline for this architecture: reported as ENOSYS, so the classic
/// clone runs.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn raw_clone3(
    _args: &CloneArgs,
    _entry: extern "C" fn(*mut c_void) -> c_int,
    _arg: *mut c_void,
) -> isize {
    -(libc::ENOSYS as isize)
}

/// Whether launches are born in their cgroup: `false` once `clone3` was
/// refused.
#[cfg(test)]
pub(crate) fn available() -> bool {
    !UNAVAILABLE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};

    use rustix::fs::{Mode, OFlags};
    use tokio::io::AsyncReadExt as _;

    use crate::isolation::launch::{self, LaunchPlan, Stdio};
    use crate::isolation::{ChildSetup, cgroup};
    use crate::skip_support;

    /// A cgroup v2 of the test's own below this process's, removed on drop.
    struct TestCgroup(PathBuf);

    impl TestCgroup {
        fn create() -> Option<Self> {
            let own = cgroup::own_cgroup_dir().ok()?;
            let dir = own.join(format!(
                "clone-into-test-{}-{:08x}",
                std::process::id(),
                rand::random::<u32>()
            ));
            std::fs::create_dir(&dir).ok()?;
            Some(Self(dir))
        }

        fn open(&self, file: &str, flags: OFlags) -> OwnedFd {
            rustix::fs::open(self.0.join(file), flags | OFlags::CLOEXEC, Mode::empty())
                .expect("open in the test cgroup")
        }
    }

    impl Drop for TestCgroup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// The cgroup v2 path `cat /proc/self/cgroup` reports for a child
    /// launched with `setup`.
    async fn child_cgroup(setup: ChildSetup) -> String {
        let plan = LaunchPlan::new(
            "cat",
            &["/proc/self/cgroup".to_owned()],
            [("PATH", "/usr/bin:/bin")],
            false,
            setup,
        )
        .expect("plan");
        let mut child =
            launch::launch(&plan, Stdio::Null, Stdio::Piped, Stdio::Null).expect("launch");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .await
            .expect("read");
        assert!(child.wait().await.expect("wait").success(), "{out}");
        out.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a cgroup v2 line")
            .to_owned()
    }

    /// A child given only the cgroup's directory (no `cgroup.procs` to
    /// write) is in that cgroup when it runs: it was cloned into it.
    #[tokio::test]
    async fn a_child_is_born_in_its_cgroup_without_joining_it() {
        let Some(test) = TestCgroup::create() else {
            skip_support::skip("no writable cgroup v2 here");
            return;
        };
        let setup = ChildSetup::new(Path::new("/"), None, None, None, Vec::new(), None)
            .expect("setup")
            .born_in_cgroup(test.open("", OFlags::RDONLY | OFlags::DIRECTORY));
        let path = child_cgroup(setup).await;
        if !super::available() {
            skip_support::skip("clone3 with CLONE_INTO_CGROUP is refused here");
            return;
        }
        let name = test.0.file_name().unwrap().to_str().unwrap();
        assert!(
            path.ends_with(&format!("/{name}")),
            "the child runs in {path}, not in {name}"
        );
    }

    /// When the kernel refuses to clone into the given directory (here: not
    /// a cgroup), the launch still happens, the child joining its cgroup
    /// by `cgroup.procs`, and later launches still try `clone3`.
    #[tokio::test]
    async fn a_refused_clone_into_a_cgroup_falls_back_to_joining_it() {
        let Some(test) = TestCgroup::create() else {
            skip_support::skip("no writable cgroup v2 here");
            return;
        };
        let not_a_cgroup = rustix::fs::open(
            std::env::temp_dir(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("open the temp dir");
        let available_before = super::available();
        let setup = ChildSetup::new(
            Path::new("/"),
            None,
            None,
            None,
            vec![test.open("cgroup.procs", OFlags::WRONLY)],
            None,
        )
        .expect("setup")
        .born_in_cgroup(not_a_cgroup);
        let path = child_cgroup(setup).await;
        let name = test.0.file_name().unwrap().to_str().unwrap();
        assert!(
            path.ends_with(&format!("/{name}")),
            "the child runs in {path}, not in {name}"
        );
        assert_eq!(
            super::available(),
            available_before,
            "one refused cgroup does not turn clone3 off"
        );
    }
}
