//! `kill_tree` (`StartRequest` field 6): a command whose timeout and
//! client SIGKILL (the SDK's `kill()`) end every process it started, not
//! only its process group, and whose end is sent only once none is left.
//!
//! The tree is the command's own cgroup (see
//! `crate::isolation::cgroup::CommandCgroup`): every descendant stays in it
//! whatever it does (`setsid`, a double fork, `env -i`), as the agent's
//! pid 1 in a MicroVM and as an ordinary process on the local backend
//! alike. A subreaper (`PR_SET_CHILD_SUBREAPER`) was not used: on the local
//! backend the agent shares its process with the caller, whose other
//! children it would have to reap, and an orphan reparented to it no
//! longer says which command it came from. Where the host gives no cgroup
//! (no writable cgroup v2 with `cgroup.kill`), a `kill_tree` start is
//! refused with [`NEEDS_CGROUP`] rather than silently ending less.
//!
//! Without `kill_tree` nothing here applies: the timeout's SIGTERM reaches
//! the process group, and the end is sent when the command's first process
//! ends. What a command leaves behind when it exits by itself is never
//! touched, with or without it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rustix::process::Signal;

use super::entry::ProcessEntry;
use super::spawn::KILL_GRACE;

/// The refusal of a `kill_tree` start on a host that gives the command no
/// cgroup of its own (FAILED_PRECONDITION).
pub(crate) const NEEDS_CGROUP: &str = "kill_tree needs a cgroup v2 with cgroup.kill \
     (Linux 5.14+, root or a delegated subtree), which this host does not give the agent; \
     start the command without kill_tree";

/// How long an end waits for the tree past the timeout's grace: the
/// final SIGKILL ends every member within milliseconds, unless one is
/// stuck in the kernel; the end is then sent anyway (logged) rather than
/// never.
const GONE_AFTER_KILL: Duration = Duration::from_secs(10);

impl ProcessEntry {
    /// The client's SIGKILL (after `tree_ending` was set, and besides the
    /// SIGKILL to its process group), and the end of the timeout's grace:
    /// freezes and kills every process of a `kill_tree` command; SIGKILLs
    /// the cgroup of another, as before.
    pub(crate) fn kill_whole(&self) {
        let Some(cgroup) = &self.cgroup else {
            return;
        };
        if self.kill_tree {
            cgroup.freeze_and_kill();
        } else {
            cgroup.kill();
        }
    }

    /// The timeout's first signal to a `kill_tree` command: every process
    /// of its cgroup. `false` when the command does not end its tree (the
    /// caller signals its process group).
    pub(crate) fn signal_tree(&self, signal: Signal) -> bool {
        let (true, Some(cgroup)) = (self.kill_tree, &self.cgroup) else {
            return false;
        };
        self.tree_ending.store(true, Ordering::Release);
        cgroup.signal_all(signal);
        true
    }

    /// Once the command's first process has ended: when its tree is being
    /// ended, waits until none of its processes is left (the timeout's
    /// grace and the kill after it at most), so that its end says the
    /// whole command is gone.
    pub(crate) async fn wait_for_tree(&self) {
        if !self.tree_ending.load(Ordering::Acquire) {
            return;
        }
        let Some(cgroup) = &self.cgroup else {
            return;
        };
        if !cgroup.wait_empty(KILL_GRACE + GONE_AFTER_KILL).await {
            tracing::warn!("a kill_tree command's processes outlived its kill; sending its end");
        }
    }
}
