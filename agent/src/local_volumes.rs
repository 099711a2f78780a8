//! The local backend's stand-in for EFS: where a (file system, access
//! point) pair's files live on this host, as the emulator keeps them. The
//! agent's EFS volumes section bind-mounts that directory into the sandbox
//! (with the access point's uid and gid as the files' owner); on a MicroVM
//! (`AgentConfig::local_volumes` unset) it runs `mount -t efs` instead.

use std::path::PathBuf;

/// The directory of one access point and the owner its files are created
/// with (the access point's POSIX user).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalVolume {
    /// The access point's root directory on the host (exists).
    pub dir: PathBuf,
    /// The access point's POSIX uid (every file operation runs as it).
    pub uid: u32,
    /// The access point's POSIX gid.
    pub gid: u32,
}

/// Why a pair does not resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalVolumeError {
    /// No such file system.
    FileSystemNotFound,
    /// No such access point, or it belongs to another file system.
    AccessPointNotFound,
}

impl LocalVolumeError {
    /// The section's error class (`not_found` for both).
    pub fn class(self) -> &'static str {
        "not_found"
    }
}

/// The emulator's EFS state, as the agent asks it.
pub trait LocalVolumes: Send + Sync + std::fmt::Debug {
    /// The directory and owner of `access_point_id` of `file_system_id`.
    ///
    /// # Errors
    /// [`LocalVolumeError`] when either is unknown.
    fn resolve(
        &self,
        file_system_id: &str,
        access_point_id: &str,
    ) -> Result<LocalVolume, LocalVolumeError>;
}
