//! The local backend's volumes: the emulator's directory of an access
//! point, bound into the sandbox as an idmapped mount, so that what the
//! sandbox creates is stored with the access point's uid and gid (as EFS
//! does for every operation through an access point), and every sandbox
//! sees the volume's files as its own (uid 1000 inside), whatever host uid
//! the agent gave it. Two sandboxes on the same access point share the
//! directory; it outlives both.

use std::os::fd::{AsFd as _, OwnedFd};

use super::attach::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use crate::isolation::launch::new_user_namespace;
use crate::isolation::user::HostIds;
use crate::local_volumes::LocalVolume;

/// A detached mount of a local volume, ready to attach.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) fd: OwnedFd,
    /// `false`: the file system refused an idmapped mount and the volume
    /// is a plain bind (files keep their on-disk owner, which the sandbox
    /// sees unmapped): reported as DEGRADED `no_idmap`.
    pub(crate) idmapped: bool,
}

/// Clones `volume.dir` into a detached mount, ids mapped from the access
/// point's on disk to the sandbox's `ids` on the host; read-only when
/// asked (the agent enforces it locally; on AWS it is IAM's job).
///
/// # Errors
/// The directory is gone or cannot be cloned, or not even the plain
/// attributes can be set.
pub(crate) fn tree(
    volume: &LocalVolume,
    ids: Option<HostIds>,
    read_only: bool,
) -> std::io::Result<Tree> {
    let fd = attach::clone_tree(&volume.dir)?;
    let attrs =
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | if read_only { MOUNT_ATTR_RDONLY } else { 0 };
    if let Some(ids) = ids {
        let userns = new_user_namespace(
            format!("{} {} 1\n", volume.uid, ids.uid).as_bytes(),
            format!("{} {} 1\n", volume.gid, ids.gid).as_bytes(),
        );
        let mapped = userns.and_then(|ns| attach::set_attrs(fd.as_fd(), attrs, Some(ns.as_fd())));
        match mapped {
            Ok(()) => return Ok(Tree { fd, idmapped: true }),
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "EFS volume: the file system refused an idmapped mount; \
                     the volume is a plain bind (DEGRADED no_idmap)"
                );
            }
        }
    }
    attach::set_attrs(fd.as_fd(), attrs, None)?;
    Ok(Tree {
        fd,
        idmapped: false,
    })
}
