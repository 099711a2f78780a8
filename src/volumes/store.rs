//! [`VolumeStore`]: create, get, list and destroy the volumes (access
//! points) of an EFS file system that already exists, with the caller's
//! credentials (docs/volumes.md, "VolumeStore"). Building one calls
//! nothing; the EFS client is made on first use.

use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;

use super::spec::{EfsVolume, id_ok, name_ok};
use super::store_errors::{ALREADY_EXISTS, NOT_FOUND_CODES, from_efs};
use crate::aws::efs::{Access, AccessPoint, Efs, NewAccessPoint};
use crate::error::SandboxError;
use crate::error::messages as m;

/// The tag that marks an access point as a rayito volume; its value is
/// the volume's name.
pub const VOLUME_TAG_KEY: &str = "rayito:volume";
/// Where every volume's root directory lives on the file system:
/// `/rayito-volumes/<name>`.
pub const ROOT_DIRECTORY_PREFIX: &str = "/rayito-volumes";
/// The POSIX user and group every volume's files belong to (the sandbox's
/// `user`).
pub const VOLUME_UID: i64 = 1000;
/// See [`VOLUME_UID`].
pub const VOLUME_GID: i64 = 1000;
/// The mode of a new volume's root directory.
pub const ROOT_DIRECTORY_PERMISSIONS: &str = "0750";
/// How long `create` waits for an access point EFS says exists to show in
/// its listing: DescribeAccessPoints is eventually consistent (the
/// reference measured up to 11 s for a new access point to appear).
pub const LIST_VISIBILITY_BUDGET: Duration = Duration::from_secs(30);
/// The pause between two listings of that wait.
pub const LIST_VISIBILITY_POLL: Duration = Duration::from_secs(1);
/// The most pages of DescribeAccessPoints read (EFS allows 10,000 access
/// points a file system, 100 a page by default... this bounds a broken
/// paginator, never a real listing).
const MAX_PAGES: usize = 1_000;

/// What the store knows of one volume.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VolumeInfo {
    /// The volume's name (its `rayito:volume` tag).
    pub name: String,
    /// The file system's id.
    pub file_system_id: String,
    /// The access point's id.
    pub access_point_id: String,
    /// The access point's ARN, when EFS gave it (what `EfsVolumes::deploy`'s
    /// `access_point_arns` take).
    pub access_point_arn: Option<String>,
    /// Its root directory on the file system (`/rayito-volumes/<name>`).
    pub root_directory: Option<String>,
    /// `available`, `creating`, `deleting`, ... as EFS says.
    pub state: Option<String>,
    /// The region the store reached EFS in.
    pub region: Option<String>,
}

impl VolumeInfo {
    /// The volume to mount (`SandboxBuilder::volume(path, info.volume())`),
    /// writable, its mount target looked up at `create`.
    pub fn volume(&self) -> EfsVolume {
        let volume = EfsVolume::new(&self.file_system_id, &self.access_point_id).name(&self.name);
        match &self.region {
            Some(region) => volume.region(region),
            None => volume,
        }
    }

    fn from_access_point(point: AccessPoint, region: &str) -> Option<Self> {
        Some(Self {
            name: point.tag?,
            file_system_id: point.file_system_id,
            access_point_id: point.id,
            access_point_arn: point.arn,
            root_directory: point.path,
            state: point.state,
            region: (!region.is_empty()).then(|| region.to_owned()),
        })
    }
}

/// The volumes (access points tagged `rayito:volume`) of one EFS file
/// system. Cheap to clone; clones share the client.
///
/// ```no_run
/// # async fn demo() -> Result<(), rayito::SandboxError> {
/// use rayito::volumes::VolumeStore;
/// let store = VolumeStore::new("fs-0123456789abcdef0")?.region("us-east-1");
/// let info = store.create("agent-data").await?;
/// let sandbox = rayito::Sandbox::builder()
///     .volume("/mnt/data", info.volume())
///     .create()
///     .await?;
/// # drop(sandbox);
/// store.destroy("agent-data").await?; // the files stay on the file system
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct VolumeStore {
    file_system_id: String,
    access: Access,
    client: std::sync::Arc<OnceCell<(Efs, String)>>,
    poll: Duration,
    budget: Duration,
}

impl VolumeStore {
    /// The store of file system `file_system_id` (`fs-` and 8 to 40 hex
    /// digits), in the environment's region with its credentials. Calls
    /// nothing.
    ///
    /// # Errors
    /// `InvalidArgument` (`file_system_id`) for a malformed id.
    pub fn new(file_system_id: impl Into<String>) -> Result<Self, SandboxError> {
        let file_system_id = file_system_id.into();
        if !id_ok(&file_system_id, "fs-") {
            return Err(SandboxError::invalid_argument(
                "file_system_id",
                m::VOLUME_STORE_FILE_SYSTEM_ID.render(&[]),
            ));
        }
        Ok(Self {
            file_system_id,
            access: Access::default(),
            client: std::sync::Arc::default(),
            poll: LIST_VISIBILITY_POLL,
            budget: LIST_VISIBILITY_BUDGET,
        })
    }

    pub(crate) fn with_access(file_system_id: &str, access: Access) -> Result<Self, SandboxError> {
        let mut store = Self::new(file_system_id)?;
        store.access = access;
        Ok(store)
    }

    /// The region (for example `us-east-1`) instead of the environment's.
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.access.region = Some(region.into());
        self
    }

    /// A loaded AWS configuration (credentials, region, endpoint) to build
    /// the EFS client from.
    #[must_use]
    pub fn sdk_config(mut self, config: aws_types::SdkConfig) -> Self {
        self.access.sdk_config = Some(config);
        self
    }

    /// Another endpoint for EFS (for example a moto server, or the local
    /// backend's emulator).
    #[must_use]
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.access.endpoint_url = Some(url.into());
        self
    }

    /// The wait for an existing access point to show in the listing (tests).
    #[doc(hidden)]
    #[must_use]
    pub fn listing_wait(mut self, poll: Duration, budget: Duration) -> Self {
        self.poll = poll;
        self.budget = budget;
        self
    }

    /// The file system's id.
    pub fn file_system_id(&self) -> &str {
        &self.file_system_id
    }

    async fn client(&self) -> Result<&(Efs, String), SandboxError> {
        self.client
            .get_or_try_init(|| async {
                let (config, region) = self.access.load().await?;
                let efs = Efs::new(&config, (!region.is_empty()).then_some(region.as_str()));
                Ok((efs, region))
            })
            .await
    }

    /// Creates the volume `name`: an access point of the file system with
    /// POSIX user and group 1000, root directory `/rayito-volumes/<name>`
    /// (made 1000:1000, mode 0750, on first mount) and the tag
    /// `rayito:volume=<name>`. Idempotent: the client token is a hash of
    /// the file system and the name, so a second call (or a concurrent one)
    /// finds the same access point (through the listing, which may take a
    /// few seconds to show it: read again every second for up to 30 s).
    ///
    /// # Errors
    /// `InvalidArgument` (`name`) for a name outside 1 to 100 of `A-Z a-z
    /// 0-9 -`; `VolumeNotFound` when the file system does not exist;
    /// `Volume` when EFS refuses (docs/volumes.md, "Failures");
    /// `RateLimit` when throttled.
    pub async fn create(&self, name: &str) -> Result<VolumeInfo, SandboxError> {
        check_name(name)?;
        let (efs, region) = self.client().await?;
        let path = format!("{ROOT_DIRECTORY_PREFIX}/{name}");
        let token = client_token(&self.file_system_id, name);
        let new = NewAccessPoint {
            file_system_id: &self.file_system_id,
            client_token: &token,
            uid: VOLUME_UID,
            gid: VOLUME_GID,
            path: &path,
            permissions: ROOT_DIRECTORY_PERMISSIONS,
            tag_key: VOLUME_TAG_KEY,
            tag_value: name,
        };
        match efs.create_access_point(&new).await {
            Ok(point) => {
                VolumeInfo::from_access_point(point, region).ok_or_else(|| not_found(name))
            }
            Err(failure) if failure.code.as_deref() == Some(ALREADY_EXISTS) => {
                self.get_once_listed(name).await
            }
            Err(failure) => Err(from_efs(failure)),
        }
    }

    /// The volume `name`.
    ///
    /// # Errors
    /// `VolumeNotFound` when there is none of that name (or the file system
    /// does not exist); as [`list`](Self::list) otherwise.
    pub async fn get(&self, name: &str) -> Result<VolumeInfo, SandboxError> {
        check_name(name)?;
        self.list()
            .await?
            .into_iter()
            .find(|v| v.name == name)
            .ok_or_else(|| not_found(name))
    }

    /// Every volume of the file system (all pages of DescribeAccessPoints,
    /// only the access points tagged `rayito:volume`). Eventually
    /// consistent, as EFS's listing is: a new volume may take seconds to
    /// show, a destroyed one to go.
    ///
    /// # Errors
    /// `VolumeNotFound` when the file system does not exist; `Volume` or
    /// `RateLimit` as EFS answers.
    pub async fn list(&self) -> Result<Vec<VolumeInfo>, SandboxError> {
        let (efs, region) = self.client().await?;
        let mut volumes = Vec::new();
        let mut token = None;
        for _ in 0..MAX_PAGES {
            let (points, next) = efs
                .access_points_page(&self.file_system_id, VOLUME_TAG_KEY, token.take())
                .await
                .map_err(from_efs)?;
            volumes.extend(
                points
                    .into_iter()
                    .filter_map(|p| VolumeInfo::from_access_point(p, region)),
            );
            match next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        Ok(volumes)
    }

    /// Destroys the volume `name` (its access point); the files under its
    /// root directory stay on the file system. `false` when there was no
    /// volume of that name.
    ///
    /// # Errors
    /// As [`list`](Self::list); `Volume` when DeleteAccessPoint is refused.
    pub async fn destroy(&self, name: &str) -> Result<bool, SandboxError> {
        let volume = match self.get(name).await {
            Ok(volume) => volume,
            Err(e) if e.kind() == crate::error::ErrorKind::VolumeNotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let (efs, _) = self.client().await?;
        match efs.delete_access_point(&volume.access_point_id).await {
            Ok(()) => Ok(true),
            // The listing still showed an access point already deleted.
            Err(f)
                if f.code
                    .as_deref()
                    .is_some_and(|c| NOT_FOUND_CODES.contains(&c)) =>
            {
                Ok(false)
            }
            Err(f) => Err(from_efs(f)),
        }
    }

    async fn get_once_listed(&self, name: &str) -> Result<VolumeInfo, SandboxError> {
        let deadline = tokio::time::Instant::now() + self.budget;
        loop {
            match self.get(name).await {
                Err(e)
                    if e.kind() == crate::error::ErrorKind::VolumeNotFound
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(self.poll).await;
                }
                other => return other,
            }
        }
    }
}

/// CreateAccessPoint's client token: the first 64 hex digits of
/// SHA-256(`<file system>:<name>`), so the same name on two file systems
/// never shares a token and two calls for one name ask for one access
/// point.
pub(crate) fn client_token(file_system_id: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{file_system_id}:{name}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn check_name(name: &str) -> Result<(), SandboxError> {
    if name_ok(name) {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "name",
            m::VOLUME_STORE_NAME.render(&[]),
        ))
    }
}

fn not_found(name: &str) -> SandboxError {
    SandboxError::volume_not_found(m::VOLUME_STORE_NOT_FOUND.render(&[("name", name)]))
}

#[cfg(test)]
mod tests {
    use super::{VolumeStore, client_token};

    #[test]
    fn the_client_token_is_the_references() {
        // sha256("fs-12345678:data") in hex: the reference's token for the
        // same pair, so both SDKs ask EFS for one access point.
        let token = client_token("fs-12345678", "data");
        assert_eq!(
            token,
            "38a44e473ee38568986bb9aa90466dbe475deab0bd685e6ab6a06faac3731153"
        );
        assert_ne!(token, client_token("fs-87654321", "data"));
    }

    #[test]
    fn malformed_ids_and_names_are_refused_before_any_call() {
        let err = VolumeStore::new("fs-xyz").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid file_system_id: the file system id is not 'fs-' and 8 to 40 lower-case hex digits; pass the id of an EFS file system (the efs-volumes stack's FileSystemId output)"
        );
    }
}
