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
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_lambdamicrovms::types::{
    Architecture, CloudWatchLogging, CodeArtifact, CpuConfiguration, HookState, Hooks, Logging,
    MicrovmHooks, MicrovmImageHooks, Resources,
};
use bytes::Bytes;

use super::options::{BuildEvent, BuildOptions, DEFAULT_BUILD_TIMEOUT, DEFAULT_MEMORY_MIB};
use super::pipeline::{log_group, reusable};
use super::{TemplateSummary, gate, slots};
use crate::Client;
use crate::control::images::ImageConfig;
use crate::error::SandboxError;
use crate::template::base_image::{Arch, check_base_artifact};
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
            on_event: None,
        }
    }
}

/// The environment's values are never shown: only its keys' count.
impl fmt::Debug for PublishOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishOptions")
            .field("bucket", &self.bucket.is_some())
            .field("base_image_version", &self.base_image_version)
            .field("memory_mib", &self.memory_mib)
            .field("timeout", &self.timeout)
            .field("force", &self.force)
            .field("env", &self.env.len())
            .field("build_role_arn", &self.build_role_arn.is_some())
            .field("arch", &self.arch)
            .field("poll_interval", &self.poll_interval)
            .field("on_event", &self.on_event.is_some())
            .finish()
    }
}

impl PublishOptions {
    /// Calls `f` with each step of the publish.
    pub fn on_event(mut self, f: impl Fn(&BuildEvent) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
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

/// What a publish gives.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

/// One version of an image.
#[derive(Clone, Debug, PartialEq)]
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
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "rayd {year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The hooks of every base image: all enabled, on [`HOOKS_PORT`].
fn hooks() -> Hooks {
    Hooks::builder()
        .port(HOOKS_PORT)
        .microvm_image_hooks(
            MicrovmImageHooks::builder()
                .ready(HookState::Enabled)
                .ready_timeout_in_seconds(BUILD_HOOK_SECONDS)
                .validate(HookState::Enabled)
                .validate_timeout_in_seconds(BUILD_HOOK_SECONDS)
                .build(),
        )
        .microvm_hooks(
            MicrovmHooks::builder()
                .run(HookState::Enabled)
                .run_timeout_in_seconds(RUNTIME_HOOK_SECONDS)
                .resume(HookState::Enabled)
                .resume_timeout_in_seconds(RUNTIME_HOOK_SECONDS)
                .suspend(HookState::Enabled)
                .suspend_timeout_in_seconds(RUNTIME_HOOK_SECONDS)
                .terminate(HookState::Enabled)
                .terminate_timeout_in_seconds(TERMINATE_HOOK_SECONDS)
                .build(),
        )
        .build()
}

impl Images {
    async fn services(&self) -> Result<Arc<TemplateServices>, SandboxError> {
        self.client.template_services().await
    }

    /// Publishes `artifact` (made by
    /// [`pack_base_image`](crate::template::pack_base_image)) as the image
    /// `name` and waits until it is launchable, or reuses an identical
    /// version at once (unless [`PublishOptions::force`]).
    ///
    /// # Errors
    /// `Template` for the name; `InvalidArgument` for an option;
    /// `Build` when the build failed (the failed step, its command, exit
    /// code and log tail; `build_quota`, `build_timeout`, `ready_*`,
    /// `aws_error`); `NotFound` when the managed base image has no
    /// version; control plane, S3 and STS failures.
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
            check_base_artifact(artifact, options.arch)?;
            let build = options.as_build();
            let services = self.services().await?;
            let bucket = services.bucket(&build)?;
            let (account, partition) = services.account().await?;
            let region = services.region().to_owned();
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
            let desired = ImageConfig {
                base_image_arn: managed_arn,
                base_image_version: Some(base_version.clone()),
                build_role_arn: options.build_role_arn.clone().unwrap_or_else(|| {
                    format!("arn:{partition}:iam::{account}:role/rayito-m0-build-{region}")
                }),
                code_artifact: Some(CodeArtifact::Uri(uri.clone())),
                logging: Some(Logging::CloudWatch(
                    CloudWatchLogging::builder().log_group(log_group(name)).build(),
                )),
                egress_network_connectors: None,
                cpu_configurations: Some(vec![
                    CpuConfiguration::builder()
                        .architecture(Architecture::from(options.arch.as_str()))
                        .build()
                        .map_err(|_| internal("cpu configuration"))?,
                ]),
                resources: Some(vec![
                    Resources::builder()
                        .minimum_memory_in_mib(options.memory_mib as i32)
                        .build()
                        .map_err(|_| internal("resources"))?,
                ]),
                additional_os_capabilities: None,
                hooks: Some(hooks()),
                environment_variables: (!options.env.is_empty()).then(|| options.env.clone()),
            };

            let arn = services.image_arn(name).await?;
            let existing = services.images.get_image(&arn).await?;
            let info = |version: String, reused: bool| PublishInfo {
                image_arn: arn.clone(),
                image_version: version,
                base_image_version: base_version.clone(),
                artifact: uri.clone(),
                artifact_uploaded: uploaded,
                reused,
                duration: started.elapsed(),
            };
            if existing.is_some()
                && !options.force
                && let Some(version) = reusable(&services, &arn, &desired).await?
            {
                build.emit(BuildEvent::Reused {
                    version: version.clone(),
                });
                return Ok(info(version, true));
            }
            let slot = slots::take()?;
            let id = if existing.is_some() { arn.as_str() } else { name };
            let submitted = services
                .images
                .submit(
                    existing.is_some(),
                    id,
                    &desired,
                    &description(SystemTime::now()),
                )
                .await?;
            build.emit(BuildEvent::Submitted {
                version: submitted.version.clone(),
            });
            let gate = gate::wait(&services, &submitted.arn, &submitted.version, &build).await?;
            drop(slot);
            if !gate.launchable() {
                return Err(gate::failure(&services, name, &gate, &build).await);
            }
            Ok(PublishInfo {
                image_arn: submitted.arn,
                ..info(submitted.version, false)
            })
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
                    memory_mib: v
                        .config
                        .resources
                        .as_deref()
                        .and_then(|r| r.first())
                        .and_then(|r| u32::try_from(r.minimum_memory_in_mib).ok()),
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
}
