//! The emulator's MicroVM images: a registry of images and their versions
//! `1, 2, ...` (config, build state, status, layer), the image API's routes,
//! the build each Create/Update starts, and the images seeded at start.
//!
//! States follow the model: a version is PENDING when submitted,
//! IN_PROGRESS while its build runs, then SUCCESSFUL or FAILED; its image
//! goes CREATING/UPDATING, then CREATED/UPDATED or CREATE_FAILED/
//! UPDATE_FAILED. A version runs (RunMicrovm) when it is SUCCESSFUL and
//! ACTIVE, whatever later builds of its image did.

pub(crate) mod build;
pub(crate) mod config;
pub(crate) mod routes;
mod seed;
mod unzip;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::api_error::ApiError;
use super::ids;

pub(crate) use seed::seed;

/// How many versions may be PENDING or IN_PROGRESS at once, account-wide.
pub(crate) const MAX_CONCURRENT_BUILDS: usize = 10;
/// The quota code of concurrent image builds.
pub(crate) const BUILD_QUOTA_CODE: &str = "L-MICROVM-IMAGE-BUILDS";
/// The managed base image every version builds over.
pub(crate) const MANAGED_IMAGE: &str = "al2023-1";

/// An image's state (`MicrovmImageState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum ImageState {
    Creating,
    Created,
    CreateFailed,
    Updating,
    Updated,
    UpdateFailed,
}

impl ImageState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ImageState::Creating => "CREATING",
            ImageState::Created => "CREATED",
            ImageState::CreateFailed => "CREATE_FAILED",
            ImageState::Updating => "UPDATING",
            ImageState::Updated => "UPDATED",
            ImageState::UpdateFailed => "UPDATE_FAILED",
        }
    }
}

/// A version's state (`MicrovmImageVersionState`); also its build's
/// `buildState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum VersionState {
    Pending,
    InProgress,
    Successful,
    Failed,
}

impl VersionState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            VersionState::Pending => "PENDING",
            VersionState::InProgress => "IN_PROGRESS",
            VersionState::Successful => "SUCCESSFUL",
            VersionState::Failed => "FAILED",
        }
    }

    fn in_flight(self) -> bool {
        matches!(self, VersionState::Pending | VersionState::InProgress)
    }
}

/// One version of an image.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Version {
    pub(crate) number: u32,
    /// The Create/Update members AWS echoes (`config::ValidImage::config`).
    pub(crate) config: Map<String, Value>,
    pub(crate) state: VersionState,
    pub(crate) active: bool,
    pub(crate) state_reason: Option<String>,
    pub(crate) created_at: f64,
    pub(crate) updated_at: f64,
    pub(crate) build_id: String,
    /// The built image layer; `None` for a version that runs on the host
    /// as it is (the seeded ones) or is not built.
    pub(crate) layer: Option<PathBuf>,
}

impl Version {
    fn new(number: u32, config: Map<String, Value>, now: f64) -> Self {
        Self {
            number,
            config,
            state: VersionState::Pending,
            active: true,
            state_reason: None,
            created_at: now,
            updated_at: now,
            build_id: ids::uuid_v4(),
            layer: None,
        }
    }

    /// The `codeArtifact.uri` of its config.
    pub(crate) fn artifact_uri(&self) -> Option<&str> {
        self.config.get("codeArtifact")?.get("uri")?.as_str()
    }

    fn status_str(&self) -> &'static str {
        if self.active { "ACTIVE" } else { "INACTIVE" }
    }

    /// GetMicrovmImageVersion's answer (`env`: with `environmentVariables`,
    /// which list items never carry).
    fn view(&self, arn: &str, env: bool) -> Value {
        let mut out = self.config.clone();
        if !env {
            out.remove("environmentVariables");
        }
        out.insert("imageArn".into(), json!(arn));
        out.insert("imageVersion".into(), json!(self.number.to_string()));
        out.insert("state".into(), json!(self.state.as_str()));
        out.insert("status".into(), json!(self.status_str()));
        out.insert("createdAt".into(), json!(self.created_at));
        out.insert("updatedAt".into(), json!(self.updated_at));
        if let Some(r) = &self.state_reason {
            out.insert("stateReason".into(), json!(r));
        }
        Value::Object(out)
    }

    /// The version's one build (`MicrovmImageBuildSummary`).
    fn build_view(&self, arn: &str) -> Value {
        let mut out = json!({
            "imageArn": arn,
            "imageVersion": self.number.to_string(),
            "buildId": self.build_id,
            "buildState": self.state.as_str(),
            "architecture": "ARM_64",
            "chipset": "GRAVITON",
            "chipsetGeneration": "local",
            "createdAt": self.created_at,
        });
        if let (Some(r), Some(obj)) = (&self.state_reason, out.as_object_mut()) {
            obj.insert("stateReason".into(), json!(r));
        }
        out
    }
}

/// One image and its versions.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Image {
    pub(crate) name: String,
    pub(crate) arn: String,
    pub(crate) state: ImageState,
    pub(crate) created_at: f64,
    pub(crate) updated_at: f64,
    pub(crate) versions: BTreeMap<u32, Version>,
    next_version: u32,
    /// Its tags (CreateMicrovmImage's), echoed by GetMicrovmImage.
    pub(crate) tags: BTreeMap<String, String>,
}

impl Image {
    fn latest(&self, pick: impl Fn(&Version) -> bool) -> Option<u32> {
        self.versions
            .values()
            .rev()
            .find(|v| pick(v))
            .map(|v| v.number)
    }

    fn in_flight(&self) -> bool {
        self.versions.values().any(|v| v.state.in_flight())
    }

    /// Whether RunMicrovm runs `v`: SUCCESSFUL and ACTIVE. The image's own
    /// state does not matter here: an update in flight, or one that
    /// failed, leaves the versions built before it running (the build
    /// gate's stricter rule, image CREATED/UPDATED too, is the SDK's, for
    /// the version it just built).
    fn launchable(&self, v: &Version) -> bool {
        v.state == VersionState::Successful && v.active
    }

    /// GetMicrovmImage's answer (also a `MicrovmImageSummary`).
    fn view(&self) -> Value {
        let mut out = json!({
            "imageArn": self.arn,
            "name": self.name,
            "state": self.state.as_str(),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        });
        let latest_active = self.latest(|v| v.state == VersionState::Successful && v.active);
        let latest_failed = self.latest(|v| v.state == VersionState::Failed);
        if let Some(obj) = out.as_object_mut() {
            if let Some(n) = latest_active {
                obj.insert("latestActiveImageVersion".into(), json!(n.to_string()));
            }
            if let Some(n) = latest_failed {
                obj.insert("latestFailedImageVersion".into(), json!(n.to_string()));
            }
        }
        out
    }

    /// Create/UpdateMicrovmImage's answer: the image and the new version's
    /// config.
    fn submit_view(&self, version: &Version) -> Value {
        let mut out = version.config.clone();
        if let Value::Object(image) = self.view() {
            out.extend(image);
        }
        out.insert("imageVersion".into(), json!(version.number.to_string()));
        Value::Object(out)
    }
}

/// Where a RunMicrovm lands: a version and its layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchTarget {
    pub(crate) version: u32,
    pub(crate) layer: Option<PathBuf>,
}

/// How a finished build left its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded { layer: Option<PathBuf> },
    Failed { reason: String },
}

/// Every image, by name.
#[derive(Debug, Default)]
pub(crate) struct ImageRegistry {
    images: Mutex<BTreeMap<String, Image>>,
    /// Where the registry is kept across emulators on the same root
    /// ([`ImageRegistry::keep_at`]); unset, it lives in memory only.
    store: std::sync::OnceLock<PathBuf>,
}

/// The registry, locked for a change: written to its store (if any) when
/// the change is done.
struct Changing<'a> {
    images: std::sync::MutexGuard<'a, BTreeMap<String, Image>>,
    store: Option<&'a PathBuf>,
}

impl std::ops::Deref for Changing<'_> {
    type Target = BTreeMap<String, Image>;
    fn deref(&self) -> &Self::Target {
        &self.images
    }
}

impl std::ops::DerefMut for Changing<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.images
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.store
            && let Err(err) = save(path, &self.images)
        {
            tracing::warn!(path = %path.display(), %err, "could not keep the image registry");
        }
    }
}

/// Writes `images` to `path` whole (a temporary file renamed over it: a
/// crash leaves the old registry or the new one, never half of one).
fn save(path: &Path, images: &BTreeMap<String, Image>) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(images).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, path)
}

/// The reason of a version whose build the emulator's end interrupted.
pub(crate) const INTERRUPTED_REASON: &str =
    "the emulator stopped during the build; build the version again";

fn version_not_found(arn: &str, version: &str) -> ApiError {
    ApiError::not_found(
        "MicrovmImageVersion",
        &format!("{arn}:{version}"),
        format!("MicroVM image version not found: {arn}:{version}"),
    )
}

/// A version given in a URI or a RunMicrovm: `N` or `N.0`.
pub(crate) fn parse_version(s: &str) -> Option<u32> {
    config::parse_major(s.strip_suffix(".0").unwrap_or(s))
}

impl ImageRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Image>> {
        self.images.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registry locked for a change, kept when the change is done.
    fn change(&self) -> Changing<'_> {
        Changing {
            images: self.lock(),
            store: self.store.get(),
        }
    }

    /// Keeps the registry in `path` from now on, after reading what an
    /// earlier emulator kept there (a build it left in flight failed, with
    /// [`INTERRUPTED_REASON`]: nothing builds it any more).
    ///
    /// # Errors
    /// A registry that cannot be read or parsed (never discarded quietly).
    pub(crate) fn keep_at(&self, path: PathBuf) -> std::io::Result<()> {
        let kept: BTreeMap<String, Image> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the image registry {} is damaged: {err}", path.display()),
                )
            })?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(err) => return Err(err),
        };
        let mut images = self.lock();
        for (name, mut image) in kept {
            let creating = image.state == ImageState::Creating;
            let mut interrupted = false;
            for v in image.versions.values_mut().filter(|v| v.state.in_flight()) {
                v.state = VersionState::Failed;
                v.state_reason = Some(INTERRUPTED_REASON.to_owned());
                interrupted = true;
            }
            if interrupted {
                image.state = if creating {
                    ImageState::CreateFailed
                } else {
                    ImageState::UpdateFailed
                };
            }
            images.insert(name, image);
        }
        drop(images);
        let _ = self.store.set(path);
        Ok(())
    }

    fn in_flight_builds(images: &BTreeMap<String, Image>) -> usize {
        images
            .values()
            .flat_map(|i| i.versions.values())
            .filter(|v| v.state.in_flight())
            .count()
    }

    fn check_quota(images: &BTreeMap<String, Image>) -> Result<(), ApiError> {
        if Self::in_flight_builds(images) >= MAX_CONCURRENT_BUILDS {
            return Err(ApiError::quota_exceeded(
                BUILD_QUOTA_CODE,
                "Concurrent MicroVM image builds quota exceeded.",
            ));
        }
        Ok(())
    }

    /// Adds an image whose version 1 is built already (the seeds).
    pub(crate) fn insert_built(&self, name: &str, arn: &str, config: Map<String, Value>) {
        let now = ids::epoch_seconds_now();
        let mut version = Version::new(1, config, now);
        version.state = VersionState::Successful;
        let image = Image {
            name: name.to_string(),
            arn: arn.to_string(),
            state: ImageState::Created,
            created_at: now,
            updated_at: now,
            versions: BTreeMap::from([(1, version)]),
            next_version: 2,
            tags: BTreeMap::new(),
        };
        self.change().insert(name.to_string(), image);
    }

    /// CreateMicrovmImage: a new image, version 1 PENDING. Returns the
    /// answer and the version number.
    ///
    /// # Errors
    /// ConflictException for a name in use; ServiceQuotaExceededException
    /// when [`MAX_CONCURRENT_BUILDS`] are in flight.
    pub(crate) fn create(
        &self,
        name: &str,
        arn: &str,
        config: Map<String, Value>,
        tags: BTreeMap<String, String>,
    ) -> Result<(Value, u32), ApiError> {
        let mut images = self.change();
        if images.contains_key(name) {
            return Err(ApiError::image_conflict(
                arn,
                format!("MicroVM image already exists: {arn}"),
            ));
        }
        Self::check_quota(&images)?;
        let now = ids::epoch_seconds_now();
        let version = Version::new(1, config, now);
        let image = Image {
            name: name.to_string(),
            arn: arn.to_string(),
            state: ImageState::Creating,
            created_at: now,
            updated_at: now,
            versions: BTreeMap::from([(1, version)]),
            next_version: 2,
            tags,
        };
        let answer = image.submit_view(&image.versions[&1]);
        images.insert(name.to_string(), image);
        Ok((answer, 1))
    }

    /// UpdateMicrovmImage: the next version, PENDING.
    ///
    /// # Errors
    /// ResourceNotFoundException for an unknown image; ConflictException
    /// while one of its versions builds; ServiceQuotaExceededException.
    pub(crate) fn update(
        &self,
        name: &str,
        arn: &str,
        config: Map<String, Value>,
    ) -> Result<(Value, u32), ApiError> {
        let mut images = self.change();
        let in_flight = match images.get(name) {
            None => return Err(ApiError::image_not_found(arn)),
            Some(image) => image.in_flight(),
        };
        if in_flight {
            return Err(ApiError::image_conflict(
                arn,
                format!(
                    "MicroVM image {name} has a version build in progress; update it when the build ends."
                ),
            ));
        }
        Self::check_quota(&images)?;
        let image = images
            .get_mut(name)
            .ok_or_else(|| ApiError::image_not_found(arn))?;
        let number = image.next_version;
        image.next_version = number.saturating_add(1);
        let now = ids::epoch_seconds_now();
        image.state = ImageState::Updating;
        image.updated_at = now;
        image
            .versions
            .insert(number, Version::new(number, config, now));
        let answer = image.submit_view(&image.versions[&number]);
        Ok((answer, number))
    }

    /// Runs `f` on the image, or answers ResourceNotFoundException.
    pub(crate) fn read<R>(
        &self,
        name: &str,
        arn: &str,
        f: impl FnOnce(&Image) -> Result<R, ApiError>,
    ) -> Result<R, ApiError> {
        let images = self.lock();
        let image = images
            .get(name)
            .ok_or_else(|| ApiError::image_not_found(arn))?;
        f(image)
    }

    /// GetMicrovmImage: the summary and the image's tags.
    pub(crate) fn image_view(&self, name: &str, arn: &str) -> Result<Value, ApiError> {
        self.read(name, arn, |i| {
            let mut view = i.view();
            if let Some(obj) = view.as_object_mut()
                && !i.tags.is_empty()
            {
                obj.insert("tags".into(), json!(i.tags));
            }
            Ok(view)
        })
    }

    fn version<'a>(image: &'a Image, version: &str) -> Result<&'a Version, ApiError> {
        parse_version(version)
            .and_then(|n| image.versions.get(&n))
            .ok_or_else(|| version_not_found(&image.arn, version))
    }

    /// GetMicrovmImageVersion.
    pub(crate) fn version_view(
        &self,
        name: &str,
        arn: &str,
        version: &str,
    ) -> Result<Value, ApiError> {
        self.read(name, arn, |i| {
            Ok(Self::version(i, version)?.view(&i.arn, true))
        })
    }

    /// ListMicrovmImageVersions: every version, oldest first, without
    /// `environmentVariables`.
    pub(crate) fn version_items(&self, name: &str, arn: &str) -> Result<Vec<Value>, ApiError> {
        self.read(name, arn, |i| {
            Ok(i.versions.values().map(|v| v.view(&i.arn, false)).collect())
        })
    }

    /// ListMicrovmImages: the images whose name contains `filter`.
    pub(crate) fn image_items(&self, filter: Option<&str>) -> Vec<Value> {
        self.lock()
            .values()
            .filter(|i| filter.is_none_or(|f| i.name.contains(f)))
            .map(Image::view)
            .collect()
    }

    /// The build of a version (`build_id`: `None` lists it; `Some` must
    /// match it).
    pub(crate) fn build_view(
        &self,
        name: &str,
        arn: &str,
        version: &str,
        build_id: Option<&str>,
    ) -> Result<Value, ApiError> {
        self.read(name, arn, |i| {
            let v = Self::version(i, version)?;
            match build_id {
                Some(id) if id != v.build_id => Err(ApiError::not_found(
                    "MicrovmImageBuild",
                    id,
                    format!("MicroVM image build not found: {id}"),
                )),
                _ => Ok(v.build_view(&i.arn)),
            }
        })
    }

    /// UpdateMicrovmImageVersion: sets `status`.
    pub(crate) fn set_status(
        &self,
        name: &str,
        arn: &str,
        version: &str,
        active: bool,
    ) -> Result<Value, ApiError> {
        let mut images = self.change();
        let image = images
            .get_mut(name)
            .ok_or_else(|| ApiError::image_not_found(arn))?;
        let number = Self::version(image, version)?.number;
        let image_arn = image.arn.clone();
        let v = image
            .versions
            .get_mut(&number)
            .ok_or_else(|| version_not_found(arn, version))?;
        v.active = active;
        v.updated_at = ids::epoch_seconds_now();
        Ok(v.view(&image_arn, true))
    }

    /// DeleteMicrovmImageVersion: forgets an INACTIVE, settled version
    /// no MicroVM runs on (`live` says whether one does). Returns its
    /// number.
    ///
    /// # Errors
    /// ConflictException while it builds or MicroVMs run on it;
    /// ValidationException while ACTIVE.
    pub(crate) fn delete_version(
        &self,
        name: &str,
        arn: &str,
        version: &str,
        live: impl Fn(u32) -> bool,
    ) -> Result<u32, ApiError> {
        let mut images = self.change();
        let image = images
            .get_mut(name)
            .ok_or_else(|| ApiError::image_not_found(arn))?;
        let v = Self::version(image, version)?;
        if live(v.number) {
            return Err(ApiError::image_conflict(
                arn,
                format!(
                    "MicroVM image version {} has running MicroVMs; delete it when they have terminated.",
                    v.number
                ),
            ));
        }
        if v.state.in_flight() {
            return Err(ApiError::image_conflict(
                arn,
                format!(
                    "MicroVM image version {} is being built; delete it when the build ends.",
                    v.number
                ),
            ));
        }
        if v.active {
            return Err(ApiError::validation(format!(
                "MicroVM image version {} is ACTIVE; set its status to INACTIVE before deleting it.",
                v.number
            )));
        }
        let number = v.number;
        image.versions.remove(&number);
        Ok(number)
    }

    /// DeleteMicrovmImage: forgets the image and every version.
    ///
    /// # Errors
    /// ConflictException while one of its versions builds.
    pub(crate) fn delete_image(&self, name: &str, arn: &str) -> Result<(), ApiError> {
        let mut images = self.change();
        let image = images
            .get(name)
            .ok_or_else(|| ApiError::image_not_found(arn))?;
        if image.in_flight() {
            return Err(ApiError::image_conflict(
                arn,
                format!(
                    "MicroVM image {name} has a version build in progress; delete it when the build ends."
                ),
            ));
        }
        images.remove(name);
        Ok(())
    }

    /// The version a RunMicrovm runs: `version` (which must be launchable)
    /// or the newest launchable one.
    ///
    /// # Errors
    /// ResourceNotFoundException for an unknown image or version;
    /// ValidationException when the version, or no version, is launchable.
    pub(crate) fn launch_target(
        &self,
        name: &str,
        arn: &str,
        version: Option<&str>,
    ) -> Result<LaunchTarget, ApiError> {
        self.read(name, arn, |image| {
            let v = match version {
                Some(wanted) => {
                    let v = Self::version(image, wanted)?;
                    if !image.launchable(v) {
                        return Err(ApiError::validation(format!(
                            "MicroVM image version {} is not launchable (image {}, version {}, status {}).",
                            v.number,
                            image.state.as_str(),
                            v.state.as_str(),
                            v.status_str()
                        )));
                    }
                    v
                }
                None => image
                    .versions
                    .values()
                    .rev()
                    .find(|v| image.launchable(v))
                    .ok_or_else(|| {
                        ApiError::validation(format!(
                            "MicroVM image {name} has no launchable version (image {}).",
                            image.state.as_str()
                        ))
                    })?,
            };
            Ok(LaunchTarget {
                version: v.number,
                layer: v.layer.clone(),
            })
        })
    }

    /// A version's config and build id, for its build.
    pub(crate) fn for_build(&self, name: &str, number: u32) -> Option<Version> {
        self.lock().get(name)?.versions.get(&number).cloned()
    }

    /// PENDING -> IN_PROGRESS.
    pub(crate) fn start_build(&self, name: &str, number: u32) {
        if let Some(v) = self
            .change()
            .get_mut(name)
            .and_then(|i| i.versions.get_mut(&number))
            && v.state == VersionState::Pending
        {
            v.state = VersionState::InProgress;
            v.updated_at = ids::epoch_seconds_now();
        }
    }

    /// Ends a build: the version SUCCESSFUL or FAILED, its image CREATED/
    /// UPDATED or CREATE_FAILED/UPDATE_FAILED.
    pub(crate) fn finish_build(&self, name: &str, number: u32, outcome: Outcome) {
        let mut images = self.change();
        let Some(image) = images.get_mut(name) else {
            return;
        };
        let now = ids::epoch_seconds_now();
        let creating = image.state == ImageState::Creating;
        let Some(v) = image.versions.get_mut(&number) else {
            return;
        };
        v.updated_at = now;
        image.state = match outcome {
            Outcome::Succeeded { layer } => {
                v.state = VersionState::Successful;
                v.layer = layer;
                if creating {
                    ImageState::Created
                } else {
                    ImageState::Updated
                }
            }
            Outcome::Failed { reason } => {
                v.state = VersionState::Failed;
                v.state_reason = Some(reason);
                if creating {
                    ImageState::CreateFailed
                } else {
                    ImageState::UpdateFailed
                }
            }
        };
        image.updated_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:lambda:us-east-1:000000000000:microvm-image:img";

    fn config() -> Map<String, Value> {
        json!({"codeArtifact": {"uri": "s3://b/k.zip"}, "environmentVariables": {"A": "1"}})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn a_kept_registry_is_found_by_the_next_and_its_interrupted_builds_failed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.json");
        let first = ImageRegistry::default();
        first.keep_at(path.clone()).unwrap();
        first.create("img", ARN, config(), BTreeMap::new()).unwrap();
        first.start_build("img", 1);
        first.finish_build("img", 1, Outcome::Succeeded { layer: None });
        first.update("img", ARN, config()).unwrap();
        first.start_build("img", 2);
        // The emulator ends with version 2 building.
        drop(first);

        let next = ImageRegistry::default();
        next.keep_at(path.clone()).unwrap();
        assert_eq!(next.launch_target("img", ARN, None).unwrap().version, 1);
        let v2 = next.version_view("img", ARN, "2").unwrap();
        assert_eq!(v2["state"], "FAILED");
        assert_eq!(v2["stateReason"], INTERRUPTED_REASON);
        assert_eq!(
            next.image_view("img", ARN).unwrap()["state"],
            "UPDATE_FAILED"
        );
        // A change is kept at once.
        next.delete_image("img", ARN).unwrap();
        let last = ImageRegistry::default();
        last.keep_at(path.clone()).unwrap();
        assert!(last.image_items(None).is_empty());
        // A damaged registry is an error, never an empty one.
        std::fs::write(&path, "{").unwrap();
        let err = ImageRegistry::default().keep_at(path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }

    #[test]
    fn versions_move_through_their_states_and_gate_launches() {
        let r = ImageRegistry::default();
        let (answer, n) = r.create("img", ARN, config(), BTreeMap::new()).unwrap();
        assert_eq!((answer["state"].as_str(), n), (Some("CREATING"), 1));
        assert_eq!(
            r.launch_target("img", ARN, None).unwrap_err().name,
            "ValidationException"
        );
        r.start_build("img", 1);
        let layer = Some(PathBuf::from("/x/images/img/1/layer"));
        r.finish_build(
            "img",
            1,
            Outcome::Succeeded {
                layer: layer.clone(),
            },
        );
        assert_eq!(r.image_view("img", ARN).unwrap()["state"], "CREATED");
        assert_eq!(
            r.launch_target("img", ARN, Some("1.0")).unwrap(),
            LaunchTarget { version: 1, layer }
        );
        let (_, n) = r.update("img", ARN, config()).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            r.update("img", ARN, config()).unwrap_err().name,
            "ConflictException"
        );
        r.finish_build(
            "img",
            2,
            Outcome::Failed {
                reason: "no".into(),
            },
        );
        let image = r.image_view("img", ARN).unwrap();
        assert_eq!(image["state"], "UPDATE_FAILED");
        assert_eq!(image["latestActiveImageVersion"], "1");
        assert_eq!(image["latestFailedImageVersion"], "2");
        assert!(r.version_view("img", ARN, "2.0").unwrap()["environmentVariables"].is_object());
        assert!(
            r.version_items("img", ARN)
                .unwrap()
                .iter()
                .all(|v| v.get("environmentVariables").is_none())
        );
    }

    #[test]
    fn the_eleventh_build_in_flight_exceeds_the_quota() {
        let r = ImageRegistry::default();
        for i in 0..MAX_CONCURRENT_BUILDS {
            r.create(&format!("i{i}"), ARN, config(), BTreeMap::new())
                .unwrap();
        }
        let e = r
            .create("over", ARN, config(), BTreeMap::new())
            .unwrap_err();
        assert_eq!(e.name, "ServiceQuotaExceededException");
        r.finish_build("i0", 1, Outcome::Succeeded { layer: None });
        assert!(r.create("over", ARN, config(), BTreeMap::new()).is_ok());
    }
}
