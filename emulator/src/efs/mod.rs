//! The emulator's EFS: the subset of the EFS API (restJson1, 2015-02-01,
//! signing name `elasticfilesystem`) that rayito calls, on the control
//! plane's port under `/2015-02-01/`, and the directories that stand in
//! for the file systems (docs/local.md, "EFS").
//!
//! - File systems: CreateFileSystem (its CreationToken makes one file
//!   system: a second call answers FileSystemAlreadyExists naming it),
//!   DescribeFileSystems (by id, by token, or all, MaxItems/Marker
//!   paging), DeleteFileSystem (FileSystemInUse while a mount target or an
//!   access point is left). Each is available at once, and has one
//!   available mount target at 127.0.0.1 (ids derived from the file
//!   system's: DescribeMountTargets, DeleteMountTarget).
//! - Access points: CreateAccessPoint (its ClientToken makes one:
//!   AccessPointAlreadyExists naming it), DescribeAccessPoints (by access
//!   point, by file system, or all; MaxResults/NextToken), DeleteAccessPoint
//!   (the files stay).
//! - Tags: TagResource, ListTagsForResource, UntagResource.
//!
//! Each file system is a directory `<root>/efs/<fs-id>`; an access point's
//! root directory is made inside it when an agent first resolves it
//! ([`LocalVolumes`]), with CreationInfo's owner and mode, as EFS makes it
//! when a client first connects. The registry is kept in
//! `<root>/efs/state.json`: volumes are data, so they live as long as the
//! object store does: with the root (an emulator's own temporary root goes
//! with it; a root the caller gave, as the CLI's daemon does, keeps them for
//! the next emulator on it).

mod dirs;
mod error;
mod ops;
pub(crate) mod routes;
mod state;
mod validate;
mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rayito_agent::local_volumes::{LocalVolume, LocalVolumeError, LocalVolumes};

use crate::guard::Signed;
use error::EfsError;
use state::{AccessPoint, Store};
use wire::Place;

/// The directory of the EFS state below the emulator's root.
pub(crate) const DIR: &str = "efs";

/// The emulator's EFS: its state, the calls it served, and the lookups
/// its agents make ([`LocalVolumes`]). Cheap to clone.
#[derive(Clone)]
pub struct LocalEfs {
    inner: Arc<Inner>,
}

struct Inner {
    /// `<root>/efs`.
    dir: PathBuf,
    place: Place,
    store: Store,
    /// Calls by action name, rejected ones included.
    calls: Mutex<HashMap<String, u64>>,
    /// Injected ThrottlingExceptions left, by action name.
    throttles: Mutex<HashMap<String, u32>>,
    /// An injected stale listing, while it lasts.
    stale: Mutex<Option<StaleListings>>,
}

/// DescribeAccessPoints answers left to serve from an old copy of the
/// access points: EFS's listing is eventually consistent (a new access
/// point may take seconds to show, a deleted one to go), the emulator's
/// state is always current, so a test that needs the lag injects it.
struct StaleListings {
    left: u32,
    access_points: Vec<AccessPoint>,
}

impl std::fmt::Debug for LocalEfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEfs")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LocalEfs {
    /// The EFS under `<root>/efs` (made if missing: traversable, not
    /// listable, by other users), with what an earlier emulator on the same
    /// root kept there.
    ///
    /// # Errors
    /// The directory cannot be made, or the kept state cannot be read.
    pub(crate) fn open(root: &Path, region: &str, account: &str) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = root.join(DIR);
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
        // Canonical: the agent opens a volume's directory refusing every
        // symbolic link on the way (a sandbox could plant one inside a
        // volume), so the part of the path that is the emulator's own
        // must hold none either.
        let dir = std::fs::canonicalize(&dir)?;
        let store = Store::open(dir.join("state.json"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                place: Place {
                    region: region.to_owned(),
                    account: account.to_owned(),
                },
                store,
                calls: Mutex::new(HashMap::new()),
                throttles: Mutex::new(HashMap::new()),
                stale: Mutex::new(None),
            }),
        })
    }

    /// The directory holding every file system's (`<root>/efs`): file
    /// system `fs-…` is `<dir>/fs-…`.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// How many calls of `action` (an EFS operation name, e.g.
    /// `DescribeMountTargets`) reached the emulator, refused ones included.
    pub fn calls(&self, action: &str) -> u64 {
        lock(&self.inner.calls).get(action).copied().unwrap_or(0)
    }

    /// How many EFS calls of any operation reached the emulator: activity,
    /// for a daemon that stops when idle.
    pub fn total_calls(&self) -> u64 {
        lock(&self.inner.calls).values().sum()
    }

    /// Fault injection: the next `times` calls of `action` answer 429
    /// ThrottlingException, as EFS does when called too fast.
    pub fn throttle(&self, action: &str, times: u32) {
        *lock(&self.inner.throttles)
            .entry(action.to_owned())
            .or_default() += times;
    }

    /// Fault injection: the next `times` listings of DescribeAccessPoints
    /// (by file system, or all) answer from the access points as they are
    /// now (a stale read, as EFS's eventually consistent listing gives): an
    /// access point created after this call is missing from them, one
    /// deleted after it still shows. The file system a listing names, and
    /// a lookup by `AccessPointId`, are checked against the current state.
    /// A new call replaces an earlier one; `times` 0 ends it.
    pub fn stale_listings(&self, times: u32) {
        let stale = (times > 0).then(|| StaleListings {
            left: times,
            access_points: self.store().read(|s| s.access_points.clone()),
        });
        *lock(&self.inner.stale) = stale;
    }

    /// The old copy a DescribeAccessPoints answers from, when a stale
    /// listing is injected (one of its answers used up).
    fn stale_access_points(&self) -> Option<Vec<AccessPoint>> {
        let mut stale = lock(&self.inner.stale);
        let current = stale.as_mut()?;
        current.left -= 1;
        let access_points = if current.left == 0 {
            stale.take()?.access_points
        } else {
            current.access_points.clone()
        };
        Some(access_points)
    }

    /// Forgets every injected fault: throttles and stale listings
    /// (`Faults::clear`).
    pub(crate) fn clear_faults(&self) {
        lock(&self.inner.throttles).clear();
        *lock(&self.inner.stale) = None;
    }

    /// The lookups an agent makes to mount a volume: what each MicroVM's
    /// agent is given (`AgentConfig::local_volumes`).
    pub fn volumes(&self) -> Arc<dyn LocalVolumes> {
        Arc::new(self.clone())
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Counts the call, refuses it if its signature was, applies an
    /// injected throttle.
    pub(crate) fn gate(&self, signed: &Signed, action: &str) -> Result<(), EfsError> {
        *lock(&self.inner.calls)
            .entry(action.to_owned())
            .or_default() += 1;
        signed.check()?;
        let mut throttles = lock(&self.inner.throttles);
        if let Some(left) = throttles.get_mut(action)
            && *left > 0
        {
            *left -= 1;
            return Err(EfsError::throttling());
        }
        Ok(())
    }
}

impl LocalVolumes for LocalEfs {
    fn resolve(
        &self,
        file_system_id: &str,
        access_point_id: &str,
    ) -> Result<LocalVolume, LocalVolumeError> {
        let ap = self.store().read(|s| {
            s.file_system(file_system_id)
                .map_err(|_| LocalVolumeError::FileSystemNotFound)?;
            s.access_point(access_point_id)
                .ok()
                .filter(|ap| ap.file_system_id == file_system_id)
                .cloned()
                .ok_or(LocalVolumeError::AccessPointNotFound)
        })?;
        let root = &ap.root_directory;
        let (dir, owner_uid, owner_gid) = dirs::access_point_dir(
            &self.inner.dir.join(file_system_id),
            &root.path,
            root.creation_info.as_ref(),
        )
        .map_err(|why| match why {
            dirs::Unreachable::FileSystem => LocalVolumeError::FileSystemNotFound,
            dirs::Unreachable::RootDirectory => LocalVolumeError::AccessPointNotFound,
        })?;
        // Without a POSIX user, EFS applies the client's own identity; the
        // emulator has none to give, so the directory's owner stands in.
        let (uid, gid) = match &ap.posix_user {
            Some(u) => (
                u32::try_from(u.uid).unwrap_or(owner_uid),
                u32::try_from(u.gid).unwrap_or(owner_gid),
            ),
            None => (owner_uid, owner_gid),
        };
        Ok(LocalVolume { dir, uid, gid })
    }
}
