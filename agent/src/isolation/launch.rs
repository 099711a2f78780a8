//! Starting a sandbox process without copying the agent's address space.
//!
//! `std::process::Command` with a `pre_exec` hook has to `fork`, and `fork`
//! copies the page tables of the whole agent: in the local backend that is
//! the whole program hosting the emulator, and the copy costs milliseconds
//! per child (4 ms for a 100 MiB process on the project machine, more than
//! the isolation setup and the exec together). A spawn without a hook uses
//! `posix_spawn`, which clones with `CLONE_VM | CLONE_VFORK` and copies
//! nothing. This module does what `posix_spawn` does, with the sandbox's
//! setup ([`ChildSetup::apply`]) in the child:
//!
//! - the child runs on a stack of its own in the agent's memory, while the
//!   calling thread is suspended until the child has called `execve` or
//!   exited (`CLONE_VFORK`); other threads of the agent keep running and
//!   never touch what the child reads (it is owned by the suspended frame);
//! - everything the child touches was prepared before the clone (no
//!   allocation, no lock, only raw syscalls), every signal is blocked around
//!   the clone, and the child sets each caught signal back to its default
//!   before unblocking, so no handler of the agent ever runs in the child;
//! - a failure before `execve` is left in memory both share (an errno) and
//!   the child exits with 127; the caller then reaps it and gets the error;
//! - a uid change in the child marks the shared memory not dumpable (the
//!   kernel does that on every change of the effective uid), and it stays
//!   so: the agent never sets it back, because another launch's child may
//!   at that moment be between its uid change and its `execve`, running as
//!   the sandbox's uid in the agent's memory, and a dumpable memory would
//!   let a process of that uid open it (`/proc/<pid>/mem`). An agent that
//!   switches uids runs as root, which a non-dumpable mark costs nothing;
//!   the child itself needs no `/proc/self` file (its namespaces were built
//!   once per sandbox);
//! - the child is reaped through a pidfd (`CLONE_PIDFD`), so its exit status
//!   and its pid are exactly the command's, as with `fork`.

use std::ffi::{CString, c_int, c_void};
use std::os::fd::{AsFd as _, AsRawFd as _, IntoRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;

use rustix::pipe::PipeFlags;
use rustix::process::{WaitId, WaitIdOptions, WaitIdStatus};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::ChildSetup;

/// The child's own stack while it prepares and calls `execve` (the setup
/// uses a few KiB; the pages are only touched as used).
const CHILD_STACK: usize = 256 * 1024;

/// Where one of the child's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdio {
    /// `/dev/null`.
    Null,
    /// A pipe whose other end the agent keeps.
    Piped,
}

/// Everything a child needs, prepared (and validated) before the clone.
#[derive(Debug)]
pub struct LaunchPlan {
    /// Where `execve` is tried, in order: the program itself when it names a
    /// path, else each PATH directory joined with it (as `execvp` would).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    own_group: bool,
    /// The child leads a new session whose controlling terminal is its
    /// stdin (a pty's shell): `setsid` and `TIOCSCTTY` after the setup.
    terminal: bool,
    setup: ChildSetup,
}

fn invalid_input() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::InvalidInput)
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| invalid_input())
}

impl LaunchPlan {
    /// A plan to run `program` with `args` and exactly `envs` (the PATH
    /// among them finds a bare program name), in its own process group when
    /// `own_group`; `setup` enters the working directory.
    ///
    /// # Errors
    /// `InvalidInput` when a string holds a NUL byte.
    pub fn new<'a>(
        program: &str,
        args: &[String],
        envs: impl IntoIterator<Item = (&'a str, &'a str)>,
        own_group: bool,
        setup: ChildSetup,
    ) -> std::io::Result<Self> {
        let mut envp = Vec::new();
        let mut path = None;
        for (key, value) in envs {
            if key.is_empty() || key.contains('=') {
                return Err(invalid_input());
            }
            if key == "PATH" {
                path = Some(value);
            }
            envp.push(cstring(format!("{key}={value}").as_bytes())?);
        }
        let candidates = if program.contains('/') {
            vec![cstring(program.as_bytes())?]
        } else {
            path.unwrap_or("")
                .split(':')
                .map(|dir| match dir {
                    "" => cstring(program.as_bytes()),
                    dir => cstring(format!("{}/{program}", dir.trim_end_matches('/')).as_bytes()),
                })
                .collect::<std::io::Result<_>>()?
        };
        let mut argv = vec![cstring(program.as_bytes())?];
        for arg in args {
            argv.push(cstring(arg.as_bytes())?);
        }
        Ok(Self {
            candidates,
            argv,
            envp,
            own_group,
            terminal: false,
            setup,
        })
    }

    /// The same plan for a terminal's shell: the child leads a session of
    /// its own (so also its own process group: no `setpgid`, which would
    /// make `setsid` fail) whose controlling terminal is its stdin, so job
    /// control, `^C` and SIGWINCH work. Start it with [`launch_on_terminal`].
    pub fn on_terminal(mut self) -> Self {
        self.own_group = false;
        self.terminal = true;
        self
    }
}

/// A child started by [`launch`]; reaped by [`LaunchedChild::wait`].
#[derive(Debug)]
pub struct LaunchedChild {
    pid: u32,
    /// Taken only by `Drop` (to reap a child that outlives its handle).
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    /// SIGKILL the child when the handle is dropped before it was reaped.
    kill_on_drop: bool,
    /// The write end of the child's stdin, when piped.
    pub stdin: Option<pipe::Sender>,
    /// The read end of the child's stdout, when piped.
    pub stdout: Option<pipe::Receiver>,
    /// The read end of the child's stderr, when piped.
    pub stderr: Option<pipe::Receiver>,
}

/// What the child reads (all prepared before the clone) and where it leaves
/// its errno when something before `execve` fails.
struct ChildArgs<'a> {
    plan: &'a LaunchPlan,
    candidates: &'a [*const libc::c_char],
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    stdio: [RawFd; 3],
    /// The child was cloned into the setup's cgroup v2 (see
    /// [`super::clone_into`]): it does not move itself there.
    born_in_cgroup: bool,
    error: c_int,
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Starts `plan` (must be called within a tokio runtime: the pipes and the
/// pidfd are registered with it).
///
/// # Errors
/// The pipes or the clone fail, or the child fails before `execve` (its
/// errno: `NotFound` or `PermissionDenied` for a program that cannot be
/// executed, the setup's error otherwise).
pub fn launch(
    plan: &LaunchPlan,
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
) -> std::io::Result<LaunchedChild> {
    let devnull = rustix::fs::open(
        c"/dev/null",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    // (child end, agent end) of each piped stream; the child ends are
    // CLOEXEC too: dup2 onto 0..2 clears it on the copies.
    let stdin_pipe = match stdin {
        Stdio::Piped => Some(rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?),
        Stdio::Null => None,
    };
    let stdout_pipe = match stdout {
        Stdio::Piped => Some(rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?),
        Stdio::Null => None,
    };
    let stderr_pipe = match stderr {
        Stdio::Piped => Some(rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?),
        Stdio::Null => None,
    };
    let child_fd = |pipe: &Option<(OwnedFd, OwnedFd)>, read_end: bool| match pipe {
        Some((r, w)) => {
            if read_end {
                r.as_raw_fd()
            } else {
                w.as_raw_fd()
            }
        }
        None => devnull.as_raw_fd(),
    };
    let stdio = [
        child_fd(&stdin_pipe, true),
        child_fd(&stdout_pipe, false),
        child_fd(&stderr_pipe, false),
    ];
    let (pid, pidfd) = clone_and_exec(plan, stdio)?;
    Ok(LaunchedChild {
        pid,
        pidfd: Some(pidfd),
        status: None,
        kill_on_drop: false,
        stdin: stdin_pipe
            .map(|(_, w)| pipe::Sender::from_owned_fd(w))
            .transpose()?,
        stdout: stdout_pipe
            .map(|(r, _)| pipe::Receiver::from_owned_fd(r))
            .transpose()?,
        stderr: stderr_pipe
            .map(|(r, _)| pipe::Receiver::from_owned_fd(r))
            .transpose()?,
    })
}

/// Starts `plan` (made with [`LaunchPlan::on_terminal`]) with `tty`, a
/// terminal's slave side, as its stdin, stdout and stderr (must be called
/// within a tokio runtime: the pidfd is registered with it). The child
/// holds the only copies the launch makes: once it and its children are
/// gone (and the caller dropped `tty`), reads of the master end.
///
/// # Errors
/// As [`launch`].
pub fn launch_on_terminal(
    plan: &LaunchPlan,
    tty: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<LaunchedChild> {
    let fd = tty.as_raw_fd();
    let (pid, pidfd) = clone_and_exec(plan, [fd, fd, fd])?;
    Ok(LaunchedChild {
        pid,
        pidfd: Some(pidfd),
        status: None,
        kill_on_drop: false,
        stdin: None,
        stdout: None,
        stderr: None,
    })
}

/// Clones the child of `plan` with `stdio` as its descriptors 0..2 and
/// waits until it called `execve` (or failed before: its errno, the child
/// reaped); the child's pid and pidfd.
fn clone_and_exec(
    plan: &LaunchPlan,
    stdio: [RawFd; 3],
) -> std::io::Result<(u32, AsyncFd<OwnedFd>)> {
    let candidates = null_terminated(&plan.candidates);
    let argv = null_terminated(&plan.argv);
    let envp = null_terminated(&plan.envp);
    let mut args = ChildArgs {
        plan,
        candidates: &candidates[..plan.candidates.len()],
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        stdio,
        born_in_cgroup: false,
        error: 0,
    };
    let mut pidfd: c_int = -1;
    let born_in = plan.setup.cgroup_dir();
    // SAFETY: all-ones and empty signal sets are plain values; the child gets
    // a stack of its own (`stack`, alive until the clone returns, which with
    // CLONE_VFORK is after the child has called execve or exited), only reads
    // `args` and what it points to (owned by this frame, which is suspended
    // meanwhile) and writes `args.error`; it makes only async-signal-safe
    // calls (see `child_main`); the same holds for the clone3 path (see
    // `clone_into_cgroup`'s contract, met here: every signal blocked, the
    // stack alive until it returns). The signal mask of this thread is
    // restored before returning.
    let (pid, clone_error) = with_child_stack(|stack| unsafe {
        // The ABI wants a 16-byte aligned stack pointer; the stack grows down.
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        // Born in the cgroup where the kernel allows it; else (and after
        // any failure of that call) the classic clone, the child moving
        // itself.
        args.born_in_cgroup = born_in.is_some();
        let born = born_in.and_then(|dir| {
            super::clone_into::clone_into_cgroup(
                child_main,
                (&raw mut args).cast::<c_void>(),
                stack,
                &mut pidfd,
                dir,
            )
        });
        let result = match born {
            Some(Ok(pid)) => (pid, std::io::Error::from_raw_os_error(0)),
            _ => {
                args.born_in_cgroup = false;
                let pid = libc::clone(
                    child_main,
                    top as *mut c_void,
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
                    (&raw mut args).cast::<c_void>(),
                    &raw mut pidfd,
                );
                (pid, std::io::Error::last_os_error())
            }
        };
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        result
    });
    // A uid change in the child left the memory not dumpable: it stays so
    // (see the module's comment).
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: CLONE_PIDFD stored a new file descriptor that nothing else owns.
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    // SAFETY: the child wrote `error` (if at all) before it exited or
    // exec'd, which happened before the clone returned here.
    let child_error = unsafe { std::ptr::read_volatile(&raw const args.error) };
    if child_error != 0 {
        // The child has already exited: reap it.
        let _ = rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED);
        return Err(std::io::Error::from_raw_os_error(child_error));
    }
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open (and the same
    // descriptor) for as long as the AsyncFd lives.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
        .map_err(std::io::Error::from)?;
    Ok((pid as u32, pidfd))
}

thread_local! {
    /// The stack of this thread's launch children, kept from one launch to
    /// the next (a fresh one was an mmap, page faults and an munmap per
    /// child, the munmap flushing the TLB of every CPU running the agent).
    static CHILD_STACKS: std::cell::Cell<Option<Box<[u8]>>> =
        const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's child stack (a new one if a launch of this
/// thread is already using it).
fn with_child_stack<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut stack = CHILD_STACKS
        .take()
        .unwrap_or_else(|| vec![0u8; CHILD_STACK].into_boxed_slice());
    let result = f(&mut stack);
    CHILD_STACKS.set(Some(stack));
    result
}

/// Runs `f` in a child that shares the agent's memory and descriptor table
/// (`CLONE_VM | CLONE_VFORK | CLONE_FILES`) with every signal blocked, and
/// returns the descriptor `f` opened there (it stays open in the shared
/// table after the child exits): how a namespace is built once and kept
/// without a process to hold it.
///
/// `f` runs in the child, so it must only make raw syscalls on memory
/// prepared before (no allocation, no lock); it may change the child's own
/// namespaces, working directory and credentials, which the agent does not
/// share.
///
/// # Errors
/// The clone fails or `f` does (its errno).
pub fn in_shared_child<F>(f: F) -> std::io::Result<OwnedFd>
where
    F: Fn() -> std::io::Result<OwnedFd>,
{
    struct Shared<'a> {
        f: &'a dyn Fn() -> std::io::Result<OwnedFd>,
        fd: RawFd,
        error: c_int,
    }
    extern "C" fn entry(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Shared` of the suspended caller; the child
        // writes its result there before it exits (read after the clone).
        unsafe {
            let shared = &mut *arg.cast::<Shared<'_>>();
            match (shared.f)() {
                Ok(fd) => std::ptr::write_volatile(&raw mut shared.fd, fd.into_raw_fd()),
                Err(err) => std::ptr::write_volatile(
                    &raw mut shared.error,
                    err.raw_os_error().unwrap_or(libc::EIO),
                ),
            }
            libc::_exit(0)
        }
    }
    let mut shared = Shared {
        f: &f,
        fd: -1,
        error: 0,
    };
    let mut stack = vec![0u8; CHILD_STACK];
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // SAFETY: as in `launch`: the child has its own stack, only calls `f`
    // (raw syscalls, by contract) and writes `shared`, all owned by this
    // suspended frame; signals stay blocked in the child until it exits, so
    // no handler of the agent runs there; it is reaped before returning.
    let (pid, clone_error) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        let pid = libc::clone(
            entry,
            top as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
            (&raw mut shared).cast::<c_void>(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        if pid > 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        (pid, clone_error)
    };
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: written by the child before it exited, which was before the
    // clone returned.
    let (fd, error) = unsafe {
        (
            std::ptr::read_volatile(&raw const shared.fd),
            std::ptr::read_volatile(&raw const shared.error),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(if error == 0 {
            libc::EIO
        } else {
            error
        }));
    }
    // SAFETY: the child opened `fd` in the table both share and handed it
    // over; nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// A new user namespace whose uid and gid maps are `uid_map` and `gid_map`
/// (`setgroups` denied in it), owned by the agent's user, held by the
/// returned descriptor.
///
/// The maps of a namespace can only be written while a process is in it,
/// and a map of another uid than one's own only by a process privileged in
/// the parent namespace: so a child (sharing the agent's memory, on its own
/// stack, every signal blocked) enters a new namespace and waits, the agent
/// writes its maps and opens its namespace, then kills it.
///
/// # Errors
/// The host refuses a user namespace or the maps.
pub(crate) fn new_user_namespace(uid_map: &[u8], gid_map: &[u8]) -> std::io::Result<OwnedFd> {
    struct Args {
        ready: RawFd,
        error: std::sync::atomic::AtomicI32,
    }
    extern "C" fn entry(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Args` of the caller, which outlives this
        // child (it waits for its end); unshare, write and pause are raw
        // syscalls; with every signal blocked, only SIGKILL ends the pause.
        unsafe {
            let args = &*arg.cast::<Args>();
            if let Err(err) = rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWUSER)
            {
                args.error
                    .store(err.raw_os_error(), std::sync::atomic::Ordering::SeqCst);
            }
            libc::write(args.ready, b"r".as_ptr().cast(), 1);
            loop {
                libc::pause();
            }
        }
    }
    let (ready_read, ready_write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let args = Args {
        ready: ready_write.as_raw_fd(),
        error: std::sync::atomic::AtomicI32::new(0),
    };
    let mut stack = vec![0u8; CHILD_STACK];
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // SAFETY: the child runs `entry` on its own stack, which lives until the
    // child has been reaped below; it only reads `args` and stores into its
    // atomic; it inherits a fully blocked signal mask, so no handler of the
    // agent runs in it.
    let (pid, clone_error) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        let pid = libc::clone(
            entry,
            top as *mut c_void,
            libc::CLONE_VM | libc::SIGCHLD,
            (&raw const args).cast_mut().cast::<c_void>(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        (pid, clone_error)
    };
    if pid < 0 {
        return Err(clone_error);
    }
    // Our copy of the write end goes, so a child that died early reads as EOF.
    drop(ready_write);
    let result = (|| {
        let mut byte = [0u8; 1];
        if rustix::io::read(&ready_read, &mut byte)? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        let error = args.error.load(std::sync::atomic::Ordering::SeqCst);
        if error != 0 {
            return Err(std::io::Error::from_raw_os_error(error));
        }
        let proc_dir = Path::new("/proc").join(pid.to_string());
        std::fs::write(proc_dir.join("setgroups"), b"deny")?;
        std::fs::write(proc_dir.join("gid_map"), gid_map)?;
        std::fs::write(proc_dir.join("uid_map"), uid_map)?;
        Ok(OwnedFd::from(std::fs::File::open(
            proc_dir.join("ns/user"),
        )?))
    })();
    // SAFETY: kill and waitpid on our own unreaped child (its pid cannot
    // have been reused).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    drop(stack);
    result
}

/// The child: signals, stdio, group, the sandbox setup (which ends in the
/// working directory), then `execve`. On failure, leaves the errno in `args.error` and exits 127.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` of the suspended `launch` frame.
    let args = unsafe { &mut *arg.cast::<ChildArgs<'_>>() };
    // SAFETY: see `prepare_and_exec`.
    let error = unsafe { prepare_and_exec(args) };
    // SAFETY: memory shared with the suspended parent, read after we exit.
    unsafe {
        std::ptr::write_volatile(
            &raw mut args.error,
            if error == 0 { libc::EIO } else { error },
        );
        libc::_exit(127)
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Returns only on failure, with the errno.
///
/// # Safety
/// Only in the child of [`launch`]: makes async-signal-safe calls on memory
/// prepared before the clone.
unsafe fn prepare_and_exec(args: &ChildArgs<'_>) -> c_int {
    // SAFETY (whole body): sigaction, sigprocmask, dup2, fcntl, setpgid,
    // setsid, ioctl and execve are async-signal-safe and take pointers to memory
    // that outlives this call.
    unsafe {
        // No handler of the agent may run here: caught signals go back to
        // their default (ignored ones stay ignored, as across exec, except
        // SIGPIPE, which the Rust runtime ignores for itself), then the
        // command starts with nothing blocked.
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let ignored = old.sa_sigaction == libc::SIG_IGN && signal != libc::SIGPIPE;
            if old.sa_sigaction != libc::SIG_DFL && !ignored {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());

        // The Rust runtime keeps 0..2 open, so the sources are above 2 and
        // no dup2 overwrites a source still to be copied.
        for (target, &source) in args.stdio.iter().enumerate() {
            let target = target as c_int;
            if source == target {
                if libc::fcntl(source, libc::F_SETFD, 0) != 0 {
                    return errno();
                }
            } else if libc::dup2(source, target) < 0 {
                return errno();
            }
        }
        if args.plan.own_group && libc::setpgid(0, 0) != 0 {
            return errno();
        }
        if let Err(err) = args.plan.setup.apply_in(args.born_in_cgroup) {
            return err.raw_os_error().unwrap_or(libc::EIO);
        }
        // A terminal's shell: a session of its own, its stdin (the pty's
        // slave) its controlling terminal; after the setup, as the
        // sandbox's user, like the rest of what the shell does.
        if args.plan.terminal && (libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0) {
            return errno();
        }
        // As execvp: a missing candidate moves on to the next; a denied one
        // is remembered; anything else stops.
        let mut error = libc::ENOENT;
        let mut denied = false;
        for &path in args.candidates {
            libc::execve(path, args.argv, args.envp);
            error = errno();
            match error {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG | libc::ELOOP => {}
                _ => return error,
            }
        }
        if denied { libc::EACCES } else { error }
    }
}

fn exit_status(status: WaitIdStatus) -> ExitStatus {
    if let Some(code) = status.exit_status() {
        ExitStatus::from_raw((code & 0xff) << 8)
    } else if let Some(signal) = status.terminating_signal() {
        ExitStatus::from_raw(signal | if status.dumped() { 0x80 } else { 0 })
    } else {
        ExitStatus::from_raw(0)
    }
}

impl LaunchedChild {
    /// The child's pid (it leads its own process group when asked).
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// SIGKILLs the child if the handle is dropped before it was reaped (as
    /// `tokio::process::Command::kill_on_drop`).
    pub fn kill_on_drop(&mut self, kill: bool) {
        self.kill_on_drop = kill;
    }

    /// Waits for the child to end and reaps it. Cancel-safe.
    ///
    /// # Errors
    /// The pidfd cannot be polled or waited on.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(pidfd) = self.pidfd.as_ref() else {
            return Err(std::io::Error::other("the child was released"));
        };
        loop {
            let mut ready = pidfd.readable().await?;
            match reap(pidfd.get_ref()) {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    return Ok(status);
                }
                Ok(None) => ready.clear_ready(),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// The exit status if the child has ended (reaping it), else `None`.
    ///
    /// # Errors
    /// The pidfd cannot be waited on.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.status.is_none()
            && let Some(pidfd) = self.pidfd.as_ref()
        {
            self.status = reap(pidfd.get_ref())?;
        }
        Ok(self.status)
    }
}

/// Reaps the child behind `pidfd` if it has ended.
fn reap(pidfd: &OwnedFd) -> std::io::Result<Option<ExitStatus>> {
    let reaped = rustix::process::waitid(
        WaitId::PidFd(pidfd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
    )?;
    Ok(reaped.map(exit_status))
}

impl Drop for LaunchedChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        if self.kill_on_drop {
            let _ =
                rustix::process::pidfd_send_signal(pidfd.get_ref(), rustix::process::Signal::KILL);
        }
        if !matches!(reap(pidfd.get_ref()), Ok(None)) {
            return;
        }
        // Still running: reap it when it ends, so that it never stays a
        // zombie (a command that outlives its handle, a killed kernel).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                while let Ok(mut ready) = pidfd.readable().await {
                    if !matches!(reap(pidfd.get_ref()), Ok(None)) {
                        return;
                    }
                    ready.clear_ready();
                }
            });
        }
    }
}
