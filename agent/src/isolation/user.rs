//! The account sandbox code runs under when the agent runs as root.
//!
//! Each sandbox gets its own host uid and gid (the same number), leased
//! from [`HOST_ID_BASE`]`..`[`HOST_ID_BASE`]` + 2^24` (see [`super::uids`]):
//! above every range distributions and systemd allocate (regular users stop
//! near 60,000, systemd-nspawn's container ranges at 0x6FFFFFFF) and below
//! 2^31, so no host account and no other live sandbox shares it. Such a uid owns nothing on
//! the host but the sandbox's own home and tmp, cannot signal another
//! sandbox's processes, and cannot write a root-owned file.
//!
//! Where a user namespace is allowed, that host uid is mapped to the
//! contract's uid 1000 inside, and a generated `/etc/passwd` names it `user`
//! with home `/home/user`; elsewhere the sandbox sees the host uid, still
//! named `user` in its `/etc/passwd` when it has a mount namespace.

use std::path::Path;

/// The first host uid (and gid) sandboxes may get.
pub(crate) const HOST_ID_BASE: u32 = 0x7800_0000;
/// How many host ids sandboxes are given from.
pub(crate) const HOST_ID_SPAN: u32 = 1 << 24;

/// The uid of the sandbox's user, as sandbox code sees it (the contract's).
pub(crate) const GUEST_UID: u32 = 1000;
/// Its gid.
pub(crate) const GUEST_GID: u32 = 1000;

/// A sandbox's unprivileged host uid and gid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostIds {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

impl HostIds {
    pub(crate) fn uid(self) -> rustix::process::Uid {
        rustix::process::Uid::from_raw(self.uid)
    }

    pub(crate) fn gid(self) -> rustix::process::Gid {
        rustix::process::Gid::from_raw(self.gid)
    }

    /// Gives `path` (not following a final symlink) to this uid and gid.
    pub(crate) fn chown(self, path: &Path) -> std::io::Result<()> {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
    }
}

/// While alive, this thread's effective (and so file-system) uid and gid
/// are a sandbox's and it has no supplementary group: path lookups,
/// permission checks and the owner of what is created are the sandbox
/// user's, and the thread has no effective capability (the kernel clears
/// them when the effective uid leaves 0, and gives them back from the
/// permitted set when it returns; the real and saved uids stay the
/// agent's, so nothing of the sandbox may signal or trace the thread).
///
/// Changing only the file-system uid is not enough: the thread would keep
/// root's supplementary groups, CAP_SYS_PTRACE, and, with an effective uid
/// of 0, every capability in each sandbox's user namespace (which root
/// owns), with which a lookup follows `/proc/<pid>/root` and
/// `/proc/<pid>/cwd` of another sandbox's processes.
///
/// The thread keeps CAP_SETUID and CAP_SETGID effective meanwhile (they
/// grant no file access): glibc applies a process-wide `setgroups`,
/// `setuid`, `setgid` (and their kin) of the embedding program to every
/// thread by signalling each to make the syscall itself, and aborts the
/// whole process (SIGABRT, nothing printed) when it succeeds in one thread
/// and fails in another. A thread of this guard without those capabilities
/// was such a thread: the `agent_hardening` tests aborted about one run in
/// ten, when a test's `setgroups` met another test's file call. With them,
/// the call succeeds here as everywhere; the rest of the file call then
/// runs with the ids the program just gave itself, which [`Drop`] keeps.
///
/// Restores the previous ids and groups on drop, unless the process
/// changed them meanwhile. Must not be held across
/// an `.await` (the task could move to another thread): take it only
/// inside synchronous code, as [`crate::sandbox::SandboxEnv::as_user`] does.
#[derive(Debug)]
pub(crate) struct FsIdsGuard {
    /// The ids set, to tell whether the process changed them meanwhile.
    ids: HostIds,
    previous_euid: libc::uid_t,
    previous_egid: libc::gid_t,
    /// The thread's supplementary groups before, `None` when they could
    /// not be read (then they were not changed either).
    previous_groups: Option<Vec<rustix::process::Gid>>,
}

/// setresuid/setresgid on this thread alone, changing only the effective
/// id (-1 leaves the real and saved ones). libc's wrappers would change
/// every thread of the process, as POSIX asks; rustix has no call that
/// changes one id alone.
fn set_thread_effective_ids(uid: Option<libc::uid_t>, gid: Option<libc::gid_t>) {
    const KEEP: libc::c_long = -1;
    // SAFETY: the raw setresgid/setresuid syscalls take integers only and
    // change the calling thread's credentials; a failure leaves them as
    // they were (checked by the caller through geteuid where it matters).
    unsafe {
        if let Some(gid) = gid {
            libc::syscall(libc::SYS_setresgid, KEEP, libc::c_long::from(gid), KEEP);
        }
        if let Some(uid) = uid {
            libc::syscall(libc::SYS_setresuid, KEEP, libc::c_long::from(uid), KEEP);
        }
    }
}

impl FsIdsGuard {
    pub(crate) fn set(ids: HostIds) -> Self {
        let previous_euid = rustix::process::geteuid().as_raw();
        let previous_egid = rustix::process::getegid().as_raw();
        // The raw syscall: this thread only (libc's setgroups would change
        // every thread of the process). Before the uid change, which takes
        // CAP_SETGID away.
        let previous_groups = rustix::process::getgroups()
            .ok()
            .filter(|_| rustix::thread::set_thread_groups(&[]).is_ok());
        set_thread_effective_ids(Some(ids.uid), Some(ids.gid));
        keep_id_capabilities();
        Self {
            ids,
            previous_euid,
            previous_egid,
            previous_groups,
        }
    }
}

/// Raises CAP_SETUID and CAP_SETGID in this thread's effective set again
/// (the kernel cleared it when the effective uid left 0; the permitted set
/// keeps them while the real uid is 0): see [`FsIdsGuard`] for why.
fn keep_id_capabilities() {
    use rustix::thread::CapabilitySet;
    if let Ok(mut sets) = rustix::thread::capabilities(None) {
        sets.effective = sets.permitted & (CapabilitySet::SETUID | CapabilitySet::SETGID);
        let _ = rustix::thread::set_capabilities(None, sets);
    }
}

impl Drop for FsIdsGuard {
    fn drop(&mut self) {
        // Ids other than the guard's were set by the program for every
        // thread (see the type's comment): this thread keeps them too.
        let euid = rustix::process::geteuid().as_raw();
        let egid = rustix::process::getegid().as_raw();
        let groups_changed = rustix::process::getgroups().map_or(true, |g| !g.is_empty());
        // The uid first: back to 0, the thread has its capabilities again,
        // which the gid and the groups need.
        if euid == self.ids.uid {
            set_thread_effective_ids(Some(self.previous_euid), None);
        }
        if egid == self.ids.gid {
            set_thread_effective_ids(None, Some(self.previous_egid));
        }
        if let Some(groups) = self.previous_groups.as_ref().filter(|_| !groups_changed) {
            let _ = rustix::thread::set_thread_groups(groups);
        }
    }
}

/// The sandbox's `/etc/passwd` and `/etc/group`: `root`, `user` (uid 1000
/// inside a user namespace, else the host uid) and `nobody` (what unmapped
/// host ids look like from inside).
pub(crate) fn account_files(ids: HostIds, user_ns: bool) -> (String, String) {
    let (uid, gid) = if user_ns {
        (GUEST_UID, GUEST_GID)
    } else {
        (ids.uid, ids.gid)
    };
    let passwd = format!(
        "root:x:0:0:root:/root:/bin/bash\n\
         user:x:{uid}:{gid}:user:/home/user:/bin/bash\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nuser:x:{gid}:\nnogroup:x:65534:\n");
    (passwd, group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_files_name_the_user() {
        let ids = HostIds {
            uid: HOST_ID_BASE + 7,
            gid: HOST_ID_BASE + 7,
        };
        let (passwd, group) = account_files(ids, true);
        assert!(passwd.contains("\nuser:x:1000:1000:user:/home/user:/bin/bash\n"));
        assert!(group.contains("\nuser:x:1000:\n"));
        let (passwd, _) = account_files(ids, false);
        assert!(passwd.contains(&format!("\nuser:x:{0}:{0}:", HOST_ID_BASE + 7)));
    }
}
