//! Publishing a base image (`rayito image publish`): [`Images`], the view
//! a [`Client`] gives with [`Client::images`].
//!
//! A publish uploads the base artifact if absent
//! (`rayito/images/rayd-<12 hex>.zip`), reuses an identical version of the
//! image or submits a new one with the fixed configuration of a base image
//! (the managed Amazon Linux 2023 base, the agent's hooks on port 9000,
//! the log group `/rayito/<name>`), then waits for the version to settle
//! with the same gate, build guard and reuse rule as a template build.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::options::{BuildEvent, BuildOptions, DEFAULT_BUILD_TIMEOUT, DEFAULT_MEMORY_MIB};
use super::pipeline::{log_group, reusable};
use super::prune::{PruneOptions, PruneReport};
use super::{TemplateSummary, gate, slots};
use crate::Client;
use crate::aws::microvms::images::{BUILD_QUOTA, HookTimes, ImageConfig};
use crate::error::SandboxError;
use crate::size::{BASELINE_MEMORY_MIB, Size};
use crate::template::base_image::{Arch, check_base_artifact};
use crate::template::variant::{Variant, check_artifact_variant, check_official_name};
use crate::template::{Artifact, TemplateServices, check_template_name};

/// The managed base image every base image is built over.
pub const MANAGED_BASE_IMAGE: &str = "al2023-1";
/// The port the agent serves its lifecycle hooks on.
pub const HOOKS_PORT: i32 = 9000;
/// The build hooks' timeout (`ready`, `validate`), seconds.
const BUILD_HOOK_SECONDS: i32 = 600;
/// The runtime hooks' timeout (`run`, `resume`, `suspend`), seconds.
const RUNTIME_HOOK_SECONDS: i32 = 30;
/// The `terminate` hook's timeout, seconds.
const TERMINATE_HOOK_SECONDS: i32 = 10;
/// The most environment variables an image takes.
const MAX_ENV: usize = 100;
/// The environment variable a sized image carries: the baseline's memory
/// (MiB), so the guest can tell its size from the baseline's.
pub const BASELINE_MEMORY_ENV: &str = "RAYITO_BASELINE_MEMORY_MIB";
/// The tag of an image a CloudFormation stack manages (`image publish`
/// never writes to one).
pub const MANAGED_BY_TAG: (&str, &str) = ("rayito:managed-by", "rayito-cdk");

/// How a base image is published.
#[derive(Clone)]
#[non_exhaustive]
pub struct PublishOptions {
    /// The artifact bucket (else `RAYITO_BUCKET`, else the local backend's).
    pub bucket: Option<String>,
    /// The managed base image's major version; `None` for the newest
    /// (ListManagedMicrovmImageVersions).
    pub base_image_version: Option<u32>,
    /// The image's memory in MiB: 512, 1024, 2048 (default), 4096 or 8192.
    pub memory_mib: u32,
    /// How long to wait for the build (default 1800 s).
    pub timeout: Duration,
    /// Build even when an identical version exists.
    pub force: bool,
    /// The image's environment variables (at most 100).
    pub env: BTreeMap<String, String>,
    /// The role the build runs as; default
    /// `arn:<partition>:iam::<account>:role/rayito-m0-build-<region>`.
    pub build_role_arn: Option<String>,
    /// The image's CPU architecture (default `ARM_64`).
    pub arch: Arch,
    /// How often the build's state is read (default 10 s on AWS, 200 ms
    /// on the local backend).
    pub poll_interval: Option<Duration>,
    /// The sizes published besides the baseline, each as the image
    /// `<name>-<size>` from the same artifact, with its memory and
    /// `RAYITO_BASELINE_MEMORY_MIB=2048`: sizes of the catalog, not the
    /// baseline, no duplicates, and only with `memory_mib` 2048.
    pub sizes: Vec<Size>,
    /// Which base image the artifact is; its markers are checked before
    /// any call (default [`Variant::Full`]). The caps variants
    /// ([`Variant::Caps`], [`Variant::CapsEfs`]) are published with the
    /// operating system capabilities `ALL` (the image's
    /// `additionalOsCapabilities`), which the agent needs to mount S3
    /// prefixes and EFS volumes.
    pub variant: Variant,
    /// Called with each step of the publish.
    pub on_event: Option<super::ProgressFn>,
}

impl Default for PublishOptions {
    fn default() -> Self {
        Self {
            bucket: None,
            base_image_version: None,
            memory_mib: DEFAULT_MEMORY_MIB,
            timeout: DEFAULT_BUILD_TIMEOUT,
            force: false,
            env: BTreeMap::new(),
            build_role_arn: None,
            arch: Arch::default(),
            poll_interval: None,
            sizes: Vec::new(),
            variant: Variant::default(),
            on_event: None,
        }
    }
}

// The environment's values are never shown: only its keys' count.
crate::secret::redacted_debug! {
    PublishOptions |o| bucket = o.bucket.is_some(), base_image_version, memory_mib, timeout, force,
    env = o.env.len(), build_role_arn = o.build_role_arn.is_some(), arch, poll_interval, sizes,
    variant, on_event = o.on_event.is_some()
}

impl PublishOptions {
    crate::setters::setters! {
        /// Calls the callback with each step of the publish.
        on_event: shared callback(&BuildEvent);
    }

    /// The build options the shared gate and checks read.
    fn as_build(&self) -> BuildOptions {
        BuildOptions {
            memory_mib: self.memory_mib,
            force: self.force,
            timeout: self.timeout,
            bucket: self.bucket.clone(),
            poll_interval: self.poll_interval,
            on_event: self.on_event.clone(),
            ..BuildOptions::default()
        }
    }

    fn check(&self) -> Result<(), SandboxError> {
        self.as_build().check()?;
        if self.env.len() > MAX_ENV {
            return Err(SandboxError::invalid_argument(
                "env",
                "an image takes at most 100 environment variables; pass fewer",
            ));
        }
        for (key, value) in &self.env {
            if key.is_empty() || key.chars().count() > 256 || key.chars().any(char::is_whitespace) {
                return Err(SandboxError::invalid_argument(
                    "env",
                    "an environment variable's name is 1 to 256 characters without whitespace; rename it",
                ));
            }
            if value.chars().count() > 4096 {
                return Err(SandboxError::invalid_argument(
                    "env",
                    "an environment variable's value is at most 4096 characters; shorten it",
                ));
            }
        }
        if !self.sizes.is_empty() && self.memory_mib != BASELINE_MEMORY_MIB {
            return Err(SandboxError::invalid_argument(
                "sizes",
                "sizes are published beside the 2048 MiB baseline; leave memory_mib at 2048",
            ));
        }
        for (i, size) in self.sizes.iter().enumerate() {
            if size.is_baseline() {
                return Err(SandboxError::invalid_argument(
                    "sizes",
                    "2gb is the baseline, the image itself; list only the other sizes",
                ));
            }
            if self.sizes[..i].contains(size) {
                return Err(SandboxError::invalid_argument(
                    "sizes",
                    "a size is listed twice; list each size once",
                ));
            }
        }
        if let Some(role) = &self.build_role_arn
            && !(role.starts_with("arn:") && role.contains(":iam::") && role.contains(":role/"))
        {
            return Err(SandboxError::invalid_argument(
                "build_role_arn",
                "is not an IAM role ARN (arn:aws:iam::<account>:role/<name>); pass the build role's ARN",
            ));
        }
        Ok(())
    }
}

/// What a publish gives. Its `Debug` hides the artifact's URI (it names
/// the bucket and the key).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishInfo {
    /// The image's ARN (`RAYITO_TEMPLATE`).
    pub image_arn: String,
    /// The launchable version.
    pub image_version: String,
    /// The managed base image's version it is built over (`latest`
    /// resolved).
    pub base_image_version: String,
    /// The artifact's URI, `s3://<bucket>/rayito/images/rayd-<12 hex>.zip`.
    pub artifact: String,
    /// The artifact was uploaded by this publish (false: it was there).
    pub artifact_uploaded: bool,
    /// An identical version existed and was used: nothing was built.
    pub reused: bool,
    /// How long the publish took, from the call to launchable.
    pub duration: Duration,
    /// Each size of [`PublishOptions::sizes`], in their order.
    pub sizes: Vec<SizePublish>,
}

impl PublishInfo {
    /// Whether the baseline and every size are launchable.
    pub fn all_launchable(&self) -> bool {
        self.sizes.iter().all(SizePublish::launchable)
    }
}

crate::secret::redacted_debug! {
    PublishInfo |o| image_arn, image_version, base_image_version, artifact = "<hidden>",
    artifact_uploaded, reused, duration, sizes
}

/// Where one size of an image stands ([`Images::sizes`]). Its `Debug`
/// hides the artifact's URI.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SizeStatus {
    /// The size.
    pub size: Size,
    /// Its image's name (`<name>-<size>`; the baseline's is `<name>`).
    pub image_name: String,
    /// Its image's ARN (whether or not it exists).
    pub image_arn: String,
    /// Whether the image exists.
    pub published: bool,
    /// The image's state (`CREATED`, `UPDATING`, ...).
    pub state: Option<String>,
    /// Its newest launchable version.
    pub latest_version: Option<String>,
    /// The code artifact's URI of its newest version.
    pub artifact: Option<String>,
    /// Whether its newest version was built from the artifact of the
    /// baseline's newest version (`None` for the baseline, or a size not
    /// published).
    pub same_artifact: Option<bool>,
}

crate::secret::redacted_debug! {
    SizeStatus |o| size, image_name, image_arn, published, state, latest_version,
    artifact = o.artifact.as_ref().map(|_| "<hidden>"), same_artifact
}

/// One size of a publish: its image and how its build ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SizePublish {
    /// The size.
    pub size: Size,
    /// Its image's name, `<name>-<size>`.
    pub image_name: String,
    /// Its image's ARN.
    pub image_arn: String,
    /// The launchable version, when it built (or was reused).
    pub image_version: Option<String>,
    /// An identical version existed and was used.
    pub reused: bool,
    /// Why it is not launchable: the build's error.
    pub error: Option<SandboxError>,
}

impl SizePublish {
    /// Whether this size's image is launchable.
    pub fn launchable(&self) -> bool {
        self.error.is_none() && self.image_version.is_some()
    }
}

/// One version of an image. Its `Debug` hides the artifact's URI (it names
/// the bucket and the key).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct ImageVersionSummary {
    /// The version.
    pub version: String,
    /// `PENDING`, `IN_PROGRESS`, `SUCCESSFUL`, `FAILED`, ...
    pub state: String,
    /// `ACTIVE` or `INACTIVE`.
    pub status: String,
    /// When it was created.
    pub created_at: SystemTime,
    /// Its memory in MiB.
    pub memory_mib: Option<u32>,
    /// Its code artifact's URI.
    pub artifact: Option<String>,
}

crate::secret::redacted_debug! {
    ImageVersionSummary |o| version, state, status, created_at, memory_mib,
    artifact = o.artifact.as_ref().map(|_| "<hidden>")
}

/// The MicroVM images of one [`Client`]: publishing base images and
/// listing images and versions. A cheap handle.
#[derive(Clone, Debug)]
pub struct Images {
    client: Client,
}

impl Client {
    /// The MicroVM images of this client's backend (feature `templates`).
    pub fn images(&self) -> Images {
        Images {
            client: self.clone(),
        }
    }
}

/// `rayd <UTC time>`, the description of a published version.
fn description(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = crate::aws::time::civil(days);
    format!(
        "rayd {year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The hooks of every base image: all enabled, on [`HOOKS_PORT`].
fn hooks() -> HookTimes {
    HookTimes {
        port: HOOKS_PORT,
        build_seconds: BUILD_HOOK_SECONDS,
        runtime_seconds: RUNTIME_HOOK_SECONDS,
        terminate_seconds: TERMINATE_HOOK_SECONDS,
    }
}

/// One image a publish writes: the baseline, or a size.
struct Target {
    size: Size,
    name: String,
    memory_mib: u32,
    env: BTreeMap<String, String>,
}

/// The baseline first, then each size: `<name>-<size>`, its memory, and
/// the options' environment plus [`BASELINE_MEMORY_ENV`].
fn targets(name: &str, options: &PublishOptions) -> Result<Vec<Target>, SandboxError> {
    let mut targets = vec![Target {
        size: Size::Baseline,
        name: name.to_owned(),
        memory_mib: options.memory_mib,
        env: options.env.clone(),
    }];
    for size in &options.sizes {
        let sized = size.image_name(name)?;
        check_template_name(&sized)?;
        let mut env = options.env.clone();
        env.insert(
            BASELINE_MEMORY_ENV.to_owned(),
            BASELINE_MEMORY_MIB.to_string(),
        );
        if env.len() > MAX_ENV {
            return Err(SandboxError::invalid_argument(
                "env",
                "an image takes at most 100 environment variables, one of them RAYITO_BASELINE_MEMORY_MIB for a size; pass fewer",
            ));
        }
        targets.push(Target {
            size: *size,
            name: sized,
            memory_mib: size.memory_mib(),
            env,
        });
    }
    Ok(targets)
}

/// How one image's submission went.
enum Submitted {
    /// An identical version is used.
    Reused(String),
    /// A new version builds; the slot counts it until it settles.
    Building {
        arn: String,
        version: String,
        slot: tokio::sync::OwnedSemaphorePermit,
    },
}

/// How one image of a publish ended: its ARN, and its version and
/// whether it was reused, or the error.
struct Outcome {
    arn: String,
    result: Result<(String, bool), SandboxError>,
}

/// Reuses an identical version of `target`'s image or submits a new one.
async fn submit_one(
    services: &TemplateServices,
    target: &Target,
    arn: &str,
    exists: bool,
    desired: &ImageConfig,
    options: &PublishOptions,
    build: &BuildOptions,
) -> Result<Submitted, SandboxError> {
    if exists
        && !options.force
        && let Some(version) = reusable(services, arn, desired).await?
    {
        build.emit(BuildEvent::Reused {
            version: version.clone(),
        });
        return Ok(Submitted::Reused(version));
    }
    let slot = slots::take()?;
    let id = if exists { arn } else { target.name.as_str() };
    let submitted = services
        .images
        .submit(exists, id, desired, &description(SystemTime::now()))
        .await?;
    build.emit(BuildEvent::Submitted {
        version: submitted.version.clone(),
    });
    Ok(Submitted::Building {
        arn: submitted.arn,
        version: submitted.version,
        slot,
    })
}

impl Images {
    async fn services(&self) -> Result<Arc<TemplateServices>, SandboxError> {
        self.client.template_services().await
    }

    /// Publishes `artifact` (made by
    /// [`pack_base_image`](crate::template::pack_base_image)) as the image
    /// `name` and waits until it is launchable, or reuses an identical
    /// version at once (unless [`PublishOptions::force`]). With
    /// [`PublishOptions::sizes`], each size is published as well, as the
    /// image `<name>-<size>`, in waves of at most 10 submissions (the
    /// build guard), each wave waited for before the next.
    ///
    /// Nothing is written (no upload, no version) when an image to write
    /// is tagged `rayito:managed-by=rayito-cdk`.
    ///
    /// # Errors
    /// `Template` for the name; `InvalidArgument` for an option, an
    /// artifact whose variant markers differ from
    /// [`PublishOptions::variant`], an official name of another variant
    /// (`rayito-base-caps` published as the full variant, `name`), or an
    /// image a stack manages (`name`);
    /// `Build` when the baseline's build failed (the failed step, its
    /// command, exit code and log tail; `build_quota`, `build_timeout`,
    /// `ready_*`, `aws_error`); a size's failure is in its
    /// [`SizePublish::error`]; `NotFound` when the managed base image has
    /// no version; control plane, S3 and STS failures.
    pub async fn publish(
        &self,
        artifact: &Artifact,
        name: &str,
        options: PublishOptions,
    ) -> Result<PublishInfo, SandboxError> {
        boxed!(Result<PublishInfo, SandboxError>, {
            let started = Instant::now();
            check_template_name(name)?;
            if name.starts_with("arn:") {
                return Err(SandboxError::template_name(
                    "a publish names its image; an image ARN cannot be published",
                ));
            }
            options.check()?;
            check_official_name(name, options.variant)?;
            check_base_artifact(artifact, options.arch)?;
            check_artifact_variant(artifact, options.variant)?;
            let targets = targets(name, &options)?;
            let build = options.as_build();
            let services = self.services().await?;
            let bucket = services.bucket(&build)?;
            let (account, partition) = services.account().await?;
            let region = services.region().to_owned();

            // Every image this publish writes, read first: one a stack
            // manages stops it before any write.
            let mut existing = Vec::with_capacity(targets.len());
            for target in &targets {
                let arn = services.image_arn(&target.name).await?;
                let image = services.images.get_image(&arn).await?;
                if image
                    .as_ref()
                    .is_some_and(|i| i.tags.get(MANAGED_BY_TAG.0).map(String::as_str) == Some(MANAGED_BY_TAG.1))
                {
                    return Err(SandboxError::invalid_argument(
                        "name",
                        "the image is tagged rayito:managed-by=rayito-cdk: its stack publishes it, not image publish; update the stack, or publish under another name",
                    ));
                }
                existing.push((arn, image.is_some()));
            }

            let managed_arn =
                format!("arn:{partition}:lambda:{region}:aws:microvm-image:{MANAGED_BASE_IMAGE}");
            let base_version = match options.base_image_version {
                Some(v) => v.to_string(),
                None => services.images.latest_managed_version(&managed_arn).await?,
            };

            let key = artifact.image_key();
            build.emit(BuildEvent::Packed {
                bytes: artifact.bytes().len() as u64,
                digest: artifact.sha256_hex().chars().take(12).collect(),
            });
            let artifacts = services.artifacts().await?;
            let uploaded = if artifacts.exists(&bucket, &key).await? {
                false
            } else {
                artifacts
                    .put(&bucket, &key, Bytes::copy_from_slice(artifact.bytes()))
                    .await?;
                true
            };
            build.emit(BuildEvent::Uploaded(uploaded));
            let uri = format!("s3://{bucket}/{key}");

            let internal = |what| SandboxError::internal("image publish", what);
            let base = ImageConfig::new(
                managed_arn,
                Some(base_version.clone()),
                options.build_role_arn.clone().unwrap_or_else(|| {
                    format!("arn:{partition}:iam::{account}:role/rayito-m0-build-{region}")
                }),
            )
            .with_artifact_uri(uri.clone())
            .with_architecture(options.arch.as_str(), "image publish")?
            .with_os_capabilities(options.variant.os_capabilities())
            .with_hooks(hooks());

            // Waves of at most BUILD_QUOTA submissions, each waited for.
            let mut outcomes: Vec<Outcome> = Vec::with_capacity(targets.len());
            let jobs: Vec<(&Target, &(String, bool))> = targets.iter().zip(&existing).collect();
            for wave in jobs.chunks(BUILD_QUOTA as usize) {
                let mut pending = Vec::new();
                for (target, (arn, exists)) in wave {
                    let desired = base
                        .clone()
                        .with_log_group(log_group(&target.name))
                        .with_memory_mib(target.memory_mib, "image publish")?
                        .with_env((!target.env.is_empty()).then(|| target.env.clone()));
                    let submitted =
                        submit_one(&services, target, arn, *exists, &desired, &options, &build).await;
                    match submitted {
                        Ok(Submitted::Reused(version)) => outcomes.push(Outcome {
                            arn: arn.clone(),
                            result: Ok((version, true)),
                        }),
                        Ok(Submitted::Building { arn, version, slot }) => {
                            let index = outcomes.len();
                            outcomes.push(Outcome {
                                arn: arn.clone(),
                                result: Ok((version.clone(), false)),
                            });
                            pending.push((index, target, arn, version, slot));
                        }
                        Err(err) if target.size.is_baseline() => return Err(err),
                        Err(err) => outcomes.push(Outcome {
                            arn: arn.clone(),
                            result: Err(err),
                        }),
                    }
                }
                let waits = pending.into_iter().map(|(index, target, arn, version, slot)| {
                    let services = &services;
                    let build = &build;
                    async move {
                        let result = match gate::wait(services, &arn, &version, build).await {
                            Ok(gate) if gate.launchable() => Ok(()),
                            Ok(gate) => Err(gate::failure(services, &target.name, &gate, build).await),
                            Err(err) => Err(err),
                        };
                        drop(slot);
                        (index, result)
                    }
                });
                for (index, result) in futures_util::future::join_all(waits).await {
                    if let (Err(err), Some(outcome)) = (result, outcomes.get_mut(index)) {
                        outcome.result = Err(err);
                    }
                }
            }

            let mut outcomes = outcomes.into_iter();
            let baseline = outcomes
                .next()
                .ok_or_else(|| internal("no baseline outcome"))?;
            let (version, reused) = baseline.result?;
            let sizes = targets
                .iter()
                .skip(1)
                .zip(outcomes)
                .map(|(target, outcome)| {
                    let (image_version, reused, error) = match outcome.result {
                        Ok((version, reused)) => (Some(version), reused, None),
                        Err(err) => (None, false, Some(err)),
                    };
                    SizePublish {
                        size: target.size,
                        image_name: target.name.clone(),
                        image_arn: outcome.arn,
                        image_version,
                        reused,
                        error,
                    }
                })
                .collect();
            Ok(PublishInfo {
                image_arn: baseline.arn,
                image_version: version,
                base_image_version: base_version,
                artifact: uri,
                artifact_uploaded: uploaded,
                reused,
                duration: started.elapsed(),
                sizes,
            })
        })
    }

    /// Prunes image `name`'s versions (a name or an ARN): keeps the
    /// [`PruneOptions::keep`] newest launchable versions, every version
    /// MicroVMs run on and every version still building; deletes the
    /// others oldest first, one at a time, each waited for until gone. A
    /// conflict waits out [`PruneOptions::conflict_backoff`]; an ACTIVE
    /// version the service refuses to delete is set INACTIVE and deleted
    /// again.
    ///
    /// # Errors
    /// `Template` for the name; `InvalidArgument` for an option;
    /// `NotFound` when there is no such image; control-plane failures.
    pub async fn prune(
        &self,
        name: &str,
        options: PruneOptions,
    ) -> Result<PruneReport, SandboxError> {
        boxed!(Result<PruneReport, SandboxError>, {
            if !name.starts_with("arn:") {
                check_template_name(name)?;
            }
            let services = self.services().await?;
            super::prune::prune(&self.client, &services, name, &options).await
        })
    }

    /// Where each size of image `name` stands: the baseline (`name`) and
    /// each `<name>-<size>`, smallest first.
    ///
    /// # Errors
    /// `Template` for the name; control-plane failures.
    pub async fn sizes(&self, name: &str) -> Result<Vec<SizeStatus>, SandboxError> {
        boxed!(Result<Vec<SizeStatus>, SandboxError>, {
            check_template_name(name)?;
            if name.starts_with("arn:") {
                return Err(SandboxError::template_name(
                    "sizes are found by the image's name; pass the name, not an ARN",
                ));
            }
            let services = self.services().await?;
            let mut rows = Vec::with_capacity(Size::ALL.len());
            for size in Size::ALL {
                let image_name = size.image_name(name)?;
                let arn = services.image_arn(&image_name).await?;
                let image = services.images.get_image(&arn).await?;
                let newest = match &image {
                    Some(_) => services
                        .images
                        .list_versions(&arn)
                        .await?
                        .into_iter()
                        .next(),
                    None => None,
                };
                rows.push(SizeStatus {
                    size,
                    image_name,
                    published: image.is_some(),
                    state: image.as_ref().map(|i| i.state.clone()),
                    latest_version: image.and_then(|i| i.latest_active_version),
                    artifact: newest
                        .as_ref()
                        .and_then(|v| v.config.artifact_uri().map(str::to_owned)),
                    image_arn: arn,
                    same_artifact: None,
                });
            }
            let baseline = rows
                .iter()
                .find(|r| r.size.is_baseline())
                .and_then(|r| r.artifact.clone());
            for row in rows
                .iter_mut()
                .filter(|r| !r.size.is_baseline() && r.published)
            {
                row.same_artifact = Some(baseline.is_some() && row.artifact == baseline);
            }
            Ok(rows)
        })
    }

    /// The account's images, those whose name contains `filter` when
    /// given.
    ///
    /// # Errors
    /// Control-plane failures.
    pub async fn list(&self, filter: Option<&str>) -> Result<Vec<TemplateSummary>, SandboxError> {
        self.client.templates().list(filter).await
    }

    /// The versions of image `name` (a name or an ARN), newest first.
    ///
    /// # Errors
    /// `Template` for the name; `NotFound` when there is no such image;
    /// control-plane failures.
    pub async fn versions(&self, name: &str) -> Result<Vec<ImageVersionSummary>, SandboxError> {
        boxed!(Result<Vec<ImageVersionSummary>, SandboxError>, {
            if !name.starts_with("arn:") {
                check_template_name(name)?;
            }
            let services = self.services().await?;
            let arn = services.image_arn(name).await?;
            if services.images.get_image(&arn).await?.is_none() {
                return Err(SandboxError::template_not_found());
            }
            Ok(services
                .images
                .list_versions(&arn)
                .await?
                .into_iter()
                .map(|v| ImageVersionSummary {
                    memory_mib: v.config.memory_mib(),
                    artifact: v.config.artifact_uri().map(str::to_owned),
                    created_at: UNIX_EPOCH
                        + Duration::try_from_secs_f64(v.created_at).unwrap_or_default(),
                    version: v.version,
                    state: v.state,
                    status: v.status,
                })
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_is_the_utc_time() {
        assert_eq!(description(UNIX_EPOCH), "rayd 1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_083_200 + 3_723);
        assert_eq!(description(t), "rayd 2026-12-01T01:02:03Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(description(leap), "rayd 2000-02-29T00:00:00Z");
    }

    #[test]
    fn options_are_checked_before_any_call() {
        let bad = |o: PublishOptions| o.check().unwrap_err().to_string();
        let with_env = |k: &str, v: &str| PublishOptions {
            env: BTreeMap::from([(k.to_owned(), v.to_owned())]),
            ..PublishOptions::default()
        };
        assert!(bad(with_env("A B", "1")).contains("without whitespace"));
        assert!(bad(with_env("A", &"x".repeat(4097))).contains("at most 4096"));
        assert!(
            bad(PublishOptions {
                memory_mib: 3000,
                ..PublishOptions::default()
            })
            .contains("512, 1024, 2048, 4096 or 8192")
        );
        assert!(
            bad(PublishOptions {
                build_role_arn: Some("role".into()),
                ..PublishOptions::default()
            })
            .contains("is not an IAM role ARN")
        );
        PublishOptions::default().check().unwrap();
    }

    #[test]
    fn debug_hides_the_artifact_uri() {
        let uri = "s3://secret-bucket/rayito/images/rayd-0123456789ab.zip";
        let info = PublishInfo {
            image_arn: "arn:aws:lambda:us-east-1:000000000000:microvm-image:b".into(),
            image_version: "1".into(),
            base_image_version: "1".into(),
            artifact: uri.into(),
            artifact_uploaded: true,
            reused: false,
            duration: Duration::from_secs(1),
            sizes: Vec::new(),
        };
        let version = ImageVersionSummary {
            version: "1".into(),
            state: "SUCCESSFUL".into(),
            status: "ACTIVE".into(),
            created_at: UNIX_EPOCH,
            memory_mib: Some(2048),
            artifact: Some(uri.into()),
        };
        let size = SizeStatus {
            size: Size::Gb4,
            image_name: "b-4gb".into(),
            image_arn: "arn".into(),
            published: true,
            state: None,
            latest_version: None,
            artifact: Some(uri.into()),
            same_artifact: Some(true),
        };
        for shown in [
            format!("{info:?}"),
            format!("{version:?}"),
            format!("{size:?}"),
        ] {
            assert!(!shown.contains("secret-bucket"), "{shown}");
            assert!(!shown.contains("rayd-0123"), "{shown}");
            assert!(shown.contains("<hidden>"), "{shown}");
        }
    }

    #[test]
    fn sizes_are_checked_before_any_call() {
        let with = |sizes: Vec<Size>, memory_mib: u32| PublishOptions {
            sizes,
            memory_mib,
            ..PublishOptions::default()
        };
        let bad = |o: PublishOptions| o.check().unwrap_err().to_string();
        assert_eq!(
            bad(with(vec![Size::Baseline], 2048)),
            "invalid sizes: 2gb is the baseline, the image itself; list only the other sizes"
        );
        assert_eq!(
            bad(with(vec![Size::Gb4, Size::Gb4], 2048)),
            "invalid sizes: a size is listed twice; list each size once"
        );
        assert_eq!(
            bad(with(vec![Size::Gb4], 4096)),
            "invalid sizes: sizes are published beside the 2048 MiB baseline; leave memory_mib at 2048"
        );
        with(vec![Size::Mb512, Size::Gb8], 2048).check().unwrap();
        let names: Vec<String> = targets("py", &with(vec![Size::Mb512, Size::Gb8], 2048))
            .unwrap()
            .iter()
            .map(|t| {
                format!(
                    "{} {} {:?}",
                    t.name,
                    t.memory_mib,
                    t.env.get(BASELINE_MEMORY_ENV)
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "py 2048 None",
                "py-512mb 512 Some(\"2048\")",
                "py-8gb 8192 Some(\"2048\")"
            ]
        );
    }
}
