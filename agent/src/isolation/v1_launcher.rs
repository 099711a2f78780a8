//! One thread per sandbox that lives in the sandbox's cgroup v1 hierarchies
//! (a hybrid host's `pids` and `memory`, where its limits are), from which
//! every child of that sandbox is cloned: a child inherits the cloning
//! thread's v1 cgroups, so it is born in them and writes no `cgroup.procs`
//! (see `docs/performance.md`, "Session 24").
//!
//! In cgroup v1 membership is per thread: the thread writes its own tid
//! (`"0"`) to each v1 cgroup's `tasks` (a move of the writing thread alone,
//! for which the kernel does not take its global threadgroup lock), and
//! never joins the sandbox's cgroup v2 (whose `cgroup.kill` would reach
//! it). What that costs and how it stays safe:
//!
//! - it counts one task in the sandbox's `pids.current`: once it is in,
//!   the sandbox's v1 `pids.max` is set one higher, so the sandbox's own
//!   processes still get exactly their limit;
//! - memory: the pages it touches belong to the agent's address space,
//!   which the kernel charges to the memory cgroup of that space's owner
//!   (the agent's first thread), not to the sandbox; the kernel objects a
//!   clone makes (the child's task and the like) are charged to the
//!   sandbox, which is where the child's belong;
//! - the sandbox's out-of-memory killer never picks it, nor the agent: it
//!   considers the leaders of the processes in the memory cgroup only
//!   (`CSS_TASK_ITER_PROCS`), and this thread is not one; a child between
//!   its clone and its `execve` still shares the agent's memory, but the
//!   killer skips a task in the middle of a vfork (`in_vfork`);
//! - it ends with the sandbox: its cgroups are removed after it moved back
//!   to the agent's own v1 cgroups and exited;
//! - if it cannot move itself in (or is gone), each child joins the v1
//!   cgroups itself as before: a launch never fails for it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;

use rustix::fs::{Mode, OFlags};

/// A job the thread runs (a clone), borrowed from a caller that waits.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The launcher thread of one sandbox, in its v1 cgroups.
#[derive(Debug)]
pub(crate) struct V1Launcher {
    /// Jobs to the thread; `None` once it was told to end.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Opens `tasks` of `dir` for writing.
fn open_tasks(dir: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        dir.join("tasks"),
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

impl V1Launcher {
    /// Starts the thread and moves it into `cgroups` (the sandbox's v1
    /// directories; each one's grandparent is the agent's own cgroup of
    /// that hierarchy, where the thread goes back before it ends). `None`
    /// (logged at debug) when it cannot be started or moved.
    pub(crate) fn start(cgroups: &[PathBuf]) -> Option<Self> {
        let open = || -> std::io::Result<(Vec<OwnedFd>, Vec<OwnedFd>)> {
            let mut into = Vec::new();
            let mut home = Vec::new();
            for dir in cgroups {
                into.push(open_tasks(dir)?);
                let own = dir
                    .parent()
                    .and_then(Path::parent)
                    .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
                home.push(open_tasks(own)?);
            }
            Ok((into, home))
        };
        let (into, home) = match open() {
            Ok(files) => files,
            Err(err) => {
                tracing::debug!(error = %err, "no v1 launcher thread: cannot open tasks");
                return None;
            }
        };
        let (ready_tx, ready_rx) = mpsc::sync_channel::<bool>(1);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("rayito-launch".to_owned())
            // It runs clones only; the children have stacks of their own.
            .stack_size(256 * 1024)
            .spawn(move || run(&into, &home, &ready_tx, &jobs_rx))
            .map_err(|err| tracing::debug!(error = %err, "no v1 launcher thread"))
            .ok()?;
        if ready_rx.recv() != Ok(true) {
            let _ = thread.join();
            return None;
        }
        Some(Self {
            jobs: Mutex::new(Some(jobs_tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `f` on the thread and returns what it returned, or `None` when
    /// the thread has ended (the caller then does the work itself).
    pub(crate) fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Option<R> {
        let sender = self.jobs.lock().ok()?.clone()?;
        let mut result = None;
        let slot = &mut result;
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(0);
        let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
            *slot = Some(f());
            // Only now may the caller go on (also dropped, so released,
            // if the job is dropped without running or unwinds).
            drop(done_tx);
        });
        // SAFETY: the job borrows from this frame, which does not return
        // before `done_rx` reports the job's sender dropped: after the job
        // ran, or when it was dropped unrun (the thread gone) or unwound;
        // in every case nothing of the job runs any more.
        let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
        if sender.send(job).is_ok() {
            let _ = done_rx.recv();
        }
        result
    }

    /// Ends the thread (after any job in flight) and waits until it has
    /// left the sandbox's cgroups, so that they can be removed.
    pub(crate) fn stop(&self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

impl Drop for V1Launcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: moves into `into` (reports whether it could), runs jobs
/// until told to end, then moves back `home` before it exits.
fn run(
    into: &[OwnedFd],
    home: &[OwnedFd],
    ready: &mpsc::SyncSender<bool>,
    jobs: &mpsc::Receiver<Job>,
) {
    let go_home = || {
        for tasks in home {
            if let Err(err) = rustix::io::write(tasks, b"0") {
                tracing::debug!(error = %err, "the v1 launcher thread cannot move back");
            }
        }
    };
    for tasks in into {
        if let Err(err) = rustix::io::write(tasks, b"0") {
            tracing::debug!(error = %err, "the v1 launcher thread cannot join the sandbox");
            go_home();
            let _ = ready.send(false);
            return;
        }
    }
    let _ = ready.send(true);
    while let Ok(job) = jobs.recv() {
        job();
    }
    go_home();
}

#[cfg(test)]
mod tests {
    use super::V1Launcher;

    /// A stand-in for the v1 layout (`<own>/<process parent>/<sandbox>`,
    /// each with a `tasks` file), plain files, so without root.
    fn layout(with_tasks: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        let root = tempfile::tempdir().expect("tempdir");
        let sandbox = root.path().join("own/rayito-1-00/sandbox-00");
        std::fs::create_dir_all(&sandbox).expect("dirs");
        if with_tasks {
            std::fs::write(root.path().join("own/tasks"), "").expect("own tasks");
            std::fs::write(sandbox.join("tasks"), "").expect("sandbox tasks");
        }
        (root, sandbox)
    }

    #[test]
    fn jobs_run_on_the_thread_until_it_is_stopped() {
        let (_root, sandbox) = layout(true);
        let launcher = V1Launcher::start(&[sandbox]).expect("started");
        let caller = std::thread::current().id();
        let mut borrowed = 1;
        let ran_on = launcher.run(|| {
            borrowed += 1;
            std::thread::current().name().map(str::to_owned)
        });
        assert_eq!(ran_on, Some(Some("rayito-launch".to_owned())));
        assert_eq!(borrowed, 2, "the job's borrow was released after it ran");
        assert_eq!(launcher.run(|| std::thread::current().id() != caller), Some(true));
        launcher.stop();
        assert_eq!(
            launcher.run(|| 1),
            None,
            "once stopped, the caller does the work itself"
        );
    }

    #[test]
    fn no_thread_where_it_cannot_join_the_cgroups() {
        let (_root, sandbox) = layout(false);
        assert!(V1Launcher::start(&[sandbox]).is_none());
    }
}
