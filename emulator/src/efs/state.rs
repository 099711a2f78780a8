//! What the emulator's EFS knows: its file systems and access points, in
//! creation order (the order every Describe lists them in), and the
//! rules that change them (idempotency tokens, the delete rules). Kept in
//! memory and, after every change, written whole to `state.json` beside
//! the file systems' directories (a temporary file renamed over it), so an
//! emulator started later on the same root finds them (see
//! [`super::LocalEfs`] for when that root outlives the emulator).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::error::EfsError;

/// How many access points one file system takes (EFS's quota).
pub(crate) const MAX_ACCESS_POINTS: usize = 10_000;

/// A tag, as the wire and the state file carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Tag {
    pub(crate) key: String,
    pub(crate) value: String,
}

/// An access point's POSIX identity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct PosixUser {
    pub(crate) uid: u64,
    pub(crate) gid: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) secondary_gids: Vec<u64>,
}

/// The owner and mode of an access point's root directory, when EFS
/// makes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CreationInfo {
    pub(crate) owner_uid: u64,
    pub(crate) owner_gid: u64,
    pub(crate) permissions: String,
}

impl CreationInfo {
    /// The mode bits (validated: three or four octal digits).
    pub(crate) fn mode(&self) -> u32 {
        u32::from_str_radix(&self.permissions, 8).unwrap_or(0o700)
    }
}

fn slash() -> String {
    "/".to_owned()
}

/// An access point's root directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct RootDirectory {
    #[serde(default = "slash")]
    pub(crate) path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) creation_info: Option<CreationInfo>,
}

impl Default for RootDirectory {
    fn default() -> Self {
        Self {
            path: slash(),
            creation_info: None,
        }
    }
}

/// One file system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileSystem {
    pub(crate) id: String,
    pub(crate) creation_token: String,
    /// Epoch seconds.
    pub(crate) created: f64,
    pub(crate) performance_mode: String,
    pub(crate) throughput_mode: String,
    pub(crate) provisioned_mibps: Option<f64>,
    pub(crate) encrypted: bool,
    pub(crate) kms_key_id: Option<String>,
    pub(crate) availability_zone_name: Option<String>,
    pub(crate) tags: Vec<Tag>,
    /// Whether its one mount target exists (until DeleteMountTarget).
    pub(crate) mount_target: bool,
}

/// One access point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct AccessPoint {
    pub(crate) id: String,
    pub(crate) file_system_id: String,
    pub(crate) client_token: String,
    pub(crate) posix_user: Option<PosixUser>,
    pub(crate) root_directory: RootDirectory,
    pub(crate) tags: Vec<Tag>,
}

/// Everything, in creation order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    pub(crate) file_systems: Vec<FileSystem>,
    pub(crate) access_points: Vec<AccessPoint>,
}

/// The value of the `Name` tag, which EFS reports as the resource's name.
pub(crate) fn name_of(tags: &[Tag]) -> Option<&str> {
    tags.iter()
        .find(|t| t.key == "Name")
        .map(|t| t.value.as_str())
}

impl State {
    pub(crate) fn file_system(&self, id: &str) -> Result<&FileSystem, EfsError> {
        self.file_systems
            .iter()
            .find(|f| f.id == id)
            .ok_or_else(|| EfsError::file_system_not_found(id))
    }

    pub(crate) fn access_point(&self, id: &str) -> Result<&AccessPoint, EfsError> {
        self.access_points
            .iter()
            .find(|a| a.id == id)
            .ok_or_else(|| EfsError::access_point_not_found(id))
    }

    /// Adds `fs` unless its creation token already made one
    /// (FileSystemAlreadyExists naming that one, as EFS answers a retry).
    pub(crate) fn create_file_system(&mut self, fs: FileSystem) -> Result<(), EfsError> {
        if let Some(same) = self
            .file_systems
            .iter()
            .find(|f| f.creation_token == fs.creation_token)
        {
            return Err(EfsError::file_system_already_exists(&same.id));
        }
        self.file_systems.push(fs);
        Ok(())
    }

    /// Removes a file system that has neither a mount target nor an access
    /// point left (FileSystemInUse otherwise).
    pub(crate) fn delete_file_system(&mut self, id: &str) -> Result<(), EfsError> {
        let fs = self.file_system(id)?;
        if fs.mount_target {
            return Err(EfsError::file_system_in_use(id, "a mount target"));
        }
        if self.access_points.iter().any(|a| a.file_system_id == id) {
            return Err(EfsError::file_system_in_use(id, "access points"));
        }
        self.file_systems.retain(|f| f.id != id);
        Ok(())
    }

    /// Adds `ap` to its file system unless its client token already made
    /// one (AccessPointAlreadyExists naming that one) or the file system is
    /// full.
    pub(crate) fn create_access_point(&mut self, ap: AccessPoint) -> Result<(), EfsError> {
        self.file_system(&ap.file_system_id)?;
        if let Some(same) = self
            .access_points
            .iter()
            .find(|a| a.client_token == ap.client_token)
        {
            return Err(EfsError::access_point_already_exists(&same.id));
        }
        let count = self
            .access_points
            .iter()
            .filter(|a| a.file_system_id == ap.file_system_id)
            .count();
        if count >= MAX_ACCESS_POINTS {
            return Err(EfsError::access_point_limit(
                &ap.file_system_id,
                MAX_ACCESS_POINTS,
            ));
        }
        self.access_points.push(ap);
        Ok(())
    }

    /// Removes an access point (its directory and files stay).
    pub(crate) fn delete_access_point(&mut self, id: &str) -> Result<(), EfsError> {
        self.access_point(id)?;
        self.access_points.retain(|a| a.id != id);
        Ok(())
    }

    /// The tags of a file system or an access point.
    pub(crate) fn tags(&self, id: &str) -> Result<&[Tag], EfsError> {
        if id.starts_with("fsap-") {
            self.access_point(id).map(|a| a.tags.as_slice())
        } else {
            self.file_system(id).map(|f| f.tags.as_slice())
        }
    }

    /// The tags of a file system or an access point, for changing them.
    pub(crate) fn tags_mut(&mut self, id: &str) -> Result<&mut Vec<Tag>, EfsError> {
        if id.starts_with("fsap-") {
            self.access_points
                .iter_mut()
                .find(|a| a.id == id)
                .map(|a| &mut a.tags)
                .ok_or_else(|| EfsError::access_point_not_found(id))
        } else {
            self.file_systems
                .iter_mut()
                .find(|f| f.id == id)
                .map(|f| &mut f.tags)
                .ok_or_else(|| EfsError::file_system_not_found(id))
        }
    }
}

/// Adds `new` to `tags`, a key already there taking the new value.
pub(crate) fn merge_tags(tags: &mut Vec<Tag>, new: Vec<Tag>) {
    for tag in new {
        match tags.iter_mut().find(|t| t.key == tag.key) {
            Some(t) => t.value = tag.value,
            None => tags.push(tag),
        }
    }
}

/// The state, and the file it is kept in.
#[derive(Debug)]
pub(crate) struct Store {
    state: Mutex<State>,
    file: PathBuf,
}

impl Store {
    /// The state kept in `file`, read now (empty when it does not exist).
    ///
    /// # Errors
    /// A file that cannot be read or parsed: never discarded quietly (it
    /// names volumes that hold data).
    pub(crate) fn open(file: PathBuf) -> std::io::Result<Self> {
        let state = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the EFS state {} is damaged: {err}", file.display()),
                )
            })?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(err) => return Err(err),
        };
        Ok(Self {
            state: Mutex::new(state),
            file,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the state.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.lock())
    }

    /// Changes the state through `f`, keeping the change only when `f`
    /// succeeds and the new state is written (InternalServerError when it
    /// cannot be: then nothing changed).
    pub(crate) fn change<R>(
        &self,
        f: impl FnOnce(&mut State) -> Result<R, EfsError>,
    ) -> Result<R, EfsError> {
        let mut guard = self.lock();
        let mut next = guard.clone();
        let out = f(&mut next)?;
        if next != *guard {
            save(&self.file, &next).map_err(|err| {
                tracing::warn!(path = %self.file.display(), %err, "could not keep the EFS state");
                EfsError::internal("The change could not be stored.")
            })?;
            *guard = next;
        }
        Ok(out)
    }
}

/// Writes `state` to `path` whole (a crash leaves the old or the new).
fn save(path: &Path, state: &State) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(state).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(id: &str, token: &str) -> FileSystem {
        FileSystem {
            id: id.into(),
            creation_token: token.into(),
            created: 0.0,
            performance_mode: "generalPurpose".into(),
            throughput_mode: "bursting".into(),
            provisioned_mibps: None,
            encrypted: false,
            kms_key_id: None,
            availability_zone_name: None,
            tags: vec![],
            mount_target: true,
        }
    }

    fn ap(id: &str, fs: &str, token: &str) -> AccessPoint {
        AccessPoint {
            id: id.into(),
            file_system_id: fs.into(),
            client_token: token.into(),
            posix_user: None,
            root_directory: RootDirectory::default(),
            tags: vec![],
        }
    }

    #[test]
    fn tokens_name_what_they_made_and_deletes_wait_for_dependents() {
        let mut s = State::default();
        s.create_file_system(fs("fs-00000001", "t")).unwrap();
        let again = s.create_file_system(fs("fs-00000002", "t")).unwrap_err();
        assert_eq!(again, EfsError::file_system_already_exists("fs-00000001"));
        s.create_access_point(ap("fsap-00000001", "fs-00000001", "c"))
            .unwrap();
        assert_eq!(
            s.create_access_point(ap("fsap-00000002", "fs-00000001", "c"))
                .unwrap_err(),
            EfsError::access_point_already_exists("fsap-00000001")
        );
        assert_eq!(
            s.create_access_point(ap("fsap-00000003", "fs-0000000f", "d"))
                .unwrap_err()
                .code(),
            "FileSystemNotFound"
        );
        assert_eq!(
            s.delete_file_system("fs-00000001").unwrap_err().code(),
            "FileSystemInUse"
        );
        s.file_systems[0].mount_target = false;
        assert_eq!(
            s.delete_file_system("fs-00000001").unwrap_err().code(),
            "FileSystemInUse"
        );
        s.delete_access_point("fsap-00000001").unwrap();
        s.delete_file_system("fs-00000001").unwrap();
        assert_eq!(
            s.delete_file_system("fs-00000001").unwrap_err().code(),
            "FileSystemNotFound"
        );
    }

    #[test]
    fn a_change_is_kept_on_disk_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state.json");
        let store = Store::open(file.clone()).unwrap();
        store
            .change(|s| s.create_file_system(fs("fs-00000001", "t")))
            .unwrap();
        let again = Store::open(file.clone()).unwrap();
        assert_eq!(again.read(|s| s.file_systems.len()), 1);
        std::fs::write(&file, b"{").unwrap();
        assert_eq!(
            Store::open(file).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
    }
}
