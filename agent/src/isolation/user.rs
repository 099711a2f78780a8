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
pub(crate) struct HostIds {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
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

/// While alive, this thread's file-system uid and gid are a sandbox's and it
/// has no supplementary group: path lookups, permission checks and the
/// owner of what is created are the sandbox user's, and CAP_DAC_OVERRIDE and
/// friends are off (the kernel drops them for a non-zero fsuid). Without
/// dropping the groups, the thread would keep root's (or the agent's user's)
/// supplementary groups and read what they may read. Restores the previous
/// ids and groups on drop. Must not be held across an `.await` (the task
/// could move to another thread): take it only inside synchronous code, as
/// [`crate::sandbox::SandboxEnv::as_user`] does.
#[derive(Debug)]
pub(crate) struct FsIdsGuard {
    previous_uid: libc::uid_t,
    previous_gid: libc::gid_t,
    /// The thread's supplementary groups before, `None` when they could
    /// not be read (then they were not changed either).
    previous_groups: Option<Vec<rustix::process::Gid>>,
}

impl FsIdsGuard {
    pub(crate) fn set(ids: HostIds) -> Self {
        // set_thread_groups is the raw syscall: it changes this thread only
        // (libc's setgroups would change every thread of the process).
        let previous_groups = rustix::process::getgroups()
            .ok()
            .filter(|_| rustix::thread::set_thread_groups(&[]).is_ok());
        // rustix has no setfsuid/setfsgid.
        // SAFETY: setfsgid(2)/setfsuid(2) take integers and change only the
        // calling thread's file-system ids; they return the previous ones.
        let (previous_gid, previous_uid) = unsafe {
            (
                libc::setfsgid(ids.gid) as u32,
                libc::setfsuid(ids.uid) as u32,
            )
        };
        Self {
            previous_uid,
            previous_gid,
            previous_groups,
        }
    }
}

impl Drop for FsIdsGuard {
    fn drop(&mut self) {
        // SAFETY: as in `set`; uid first, so that the gid change is allowed.
        unsafe {
            libc::setfsuid(self.previous_uid);
            libc::setfsgid(self.previous_gid);
        }
        if let Some(groups) = &self.previous_groups {
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
