//! Building templates into MicroVM images: [`Templates`], the view a
//! [`Client`] gives with [`Client::templates`].
//!
//! A build packs the template's artifact over its base image's, uploads it
//! to S3 if absent (content-addressed key), and either reuses an identical
//! version of the image or submits a new one, then waits for the version
//! to settle (docs/templates.md, "Building").

mod gate;
mod options;
mod pipeline;
mod prune;
mod publish;
mod services;
mod slots;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use options::{
    BUCKET_ENV, BuildEvent, BuildOptions, DEFAULT_BUILD_TIMEOUT, DEFAULT_MEMORY_MIB,
    MEMORY_SIZES_MIB, ProgressFn,
};
pub use prune::{
    DEFAULT_PRUNE_KEEP, DEFAULT_PRUNE_WAIT, KeepReason, PRUNE_CONFLICT_BACKOFF,
    PRUNE_POLL_INTERVAL, PruneOptions, PruneReport, RefusedReason,
};
pub use publish::{
    BASELINE_MEMORY_ENV, HOOKS_PORT, ImageVersionSummary, Images, MANAGED_BASE_IMAGE,
    MANAGED_BY_TAG, PublishInfo, PublishOptions, SizePublish, SizeStatus,
};
pub(crate) use services::TemplateServices;

use crate::Client;
use crate::error::SandboxError;
use crate::template::{Template, check_template_name};

/// What a finished build gives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuildInfo {
    /// The image's ARN: what sandboxes are created from.
    pub template_id: String,
    /// `<version>/<name>`.
    pub build_id: String,
    /// The template's name.
    pub alias: String,
    /// The launchable version.
    pub version: String,
    /// An identical version existed and was used: nothing was built.
    pub reused: bool,
    /// The artifact was uploaded by this build (false: it was there).
    pub artifact_uploaded: bool,
    /// How long the build took, from the call to launchable.
    pub duration: Duration,
}

/// A build submitted by [`Templates::build_in_background`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuildHandle {
    /// The image's ARN.
    pub template_id: String,
    /// The version being built (or reused).
    pub version: String,
    /// The template's name.
    pub name: String,
}

impl BuildHandle {
    /// A handle to a build known by its image ARN, version and name (kept
    /// from an earlier [`Templates::build_in_background`], in another
    /// process say).
    pub fn new(
        template_id: impl Into<String>,
        version: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            template_id: template_id.into(),
            version: version.into(),
            name: name.into(),
        }
    }
}

/// Where a build stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildStatus {
    /// Still building.
    InProgress,
    /// Launchable.
    Succeeded,
    /// Failed; [`Templates::wait`] gives the error with the failed step.
    Failed,
}

/// A template (image) of the account.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TemplateSummary {
    /// Its ARN.
    pub template_id: String,
    /// Its name.
    pub name: String,
    /// The image's state (`CREATED`, `UPDATING`, ...).
    pub state: String,
    /// The newest launchable version, if any.
    pub latest_version: Option<String>,
}

/// The template builds of one [`Client`]: a cheap handle.
#[derive(Clone, Debug)]
pub struct Templates {
    client: Client,
}

impl Client {
    /// The template builds of this client's backend (feature
    /// `templates`).
    pub fn templates(&self) -> Templates {
        Templates {
            client: self.clone(),
        }
    }
}

impl Templates {
    async fn services(&self) -> Result<Arc<TemplateServices>, SandboxError> {
        self.client.template_services().await
    }

    /// Builds `template` as the image `name` and waits until it is
    /// launchable (or reuses an identical version at once).
    ///
    /// # Errors
    /// `Template` for the name; `InvalidArgument` for an option or the
    /// template; `Build` when the build failed (the failed step, its
    /// command, exit code and log tail; `build_quota`, `build_timeout`,
    /// `ready_*`, `base_image_*`, `context_path_*`, `aws_error`);
    /// `NotFound` when the base image has no usable version; control
    /// plane, S3 and STS failures.
    pub async fn build(
        &self,
        template: &Template,
        name: &str,
        options: BuildOptions,
    ) -> Result<BuildInfo, SandboxError> {
        boxed!(Result<BuildInfo, SandboxError>, {
            let started = Instant::now();
            pipeline::check(template, name, &options)?;
            let services = self.services().await?;
            let (submission, slot) = pipeline::submit(&services, template, name, &options).await?;
            if !submission.reused {
                let gate = gate::wait(&services, &submission.arn, &submission.version, &options).await?;
                drop(slot);
                if !gate.launchable() {
                    return Err(gate::failure(&services, name, &gate, &options).await);
                }
            }
            Ok(BuildInfo {
                build_id: format!("{}/{}", submission.version, submission.name),
                template_id: submission.arn,
                alias: submission.name,
                version: submission.version,
                reused: submission.reused,
                artifact_uploaded: submission.artifact_uploaded,
                duration: started.elapsed(),
            })
        })
    }

    /// Submits the build and returns at once with its handle (the build
    /// slot is held only through the submission).
    ///
    /// # Errors
    /// As [`Templates::build`], for everything up to the submission.
    pub async fn build_in_background(
        &self,
        template: &Template,
        name: &str,
        options: BuildOptions,
    ) -> Result<BuildHandle, SandboxError> {
        boxed!(Result<BuildHandle, SandboxError>, {
            pipeline::check(template, name, &options)?;
            let services = self.services().await?;
            let (submission, _slot) = pipeline::submit(&services, template, name, &options).await?;
            Ok(BuildHandle {
                template_id: submission.arn,
                version: submission.version,
                name: submission.name,
            })
        })
    }

    /// One read of a build's state.
    ///
    /// # Errors
    /// `NotFound` when the image or version is gone; control-plane
    /// failures.
    pub async fn status(&self, build: &BuildHandle) -> Result<BuildStatus, SandboxError> {
        boxed!(Result<BuildStatus, SandboxError>, {
            let services = self.services().await?;
            let gate = gate::read(&services, &build.template_id, &build.version).await?;
            Ok(if gate.launchable() {
                BuildStatus::Succeeded
            } else if gate.settled() {
                BuildStatus::Failed
            } else {
                BuildStatus::InProgress
            })
        })
    }

    /// Waits for a background build as [`Templates::build`] does (its
    /// `timeout`, `poll_interval` and `on_event` are used).
    ///
    /// # Errors
    /// As [`Templates::build`] after the submission.
    pub async fn wait(
        &self,
        build: &BuildHandle,
        options: BuildOptions,
    ) -> Result<BuildInfo, SandboxError> {
        boxed!(Result<BuildInfo, SandboxError>, {
            options.check()?;
            let started = Instant::now();
            let services = self.services().await?;
            let gate = gate::wait(&services, &build.template_id, &build.version, &options).await?;
            if !gate.launchable() {
                return Err(gate::failure(&services, &build.name, &gate, &options).await);
            }
            Ok(BuildInfo {
                template_id: build.template_id.clone(),
                build_id: format!("{}/{}", build.version, build.name),
                alias: build.name.clone(),
                version: build.version.clone(),
                reused: false,
                artifact_uploaded: false,
                duration: started.elapsed(),
            })
        })
    }

    /// The last `limit` lines (at most 10,000) of the newest build log of
    /// template `name`; none when it has no log yet.
    ///
    /// # Errors
    /// `Template` for the name; `InvalidArgument` (`limit`) for 0; log
    /// read failures.
    pub async fn logs(&self, name: &str, limit: usize) -> Result<Vec<String>, SandboxError> {
        boxed!(Result<Vec<String>, SandboxError>, {
            check_template_name(name)?;
            if limit == 0 {
                return Err(SandboxError::invalid_argument(
                    "limit",
                    "must be at least 1; pass how many lines to read",
                ));
            }
            let services = self.services().await?;
            let limit = i32::try_from(limit.min(10_000)).unwrap_or(10_000);
            services
                .logs
                .latest(&pipeline::log_group(name), 1, limit)
                .await
        })
    }

    /// Whether template `name` exists (an image of that name).
    ///
    /// # Errors
    /// `Template` for the name; control-plane failures.
    pub async fn exists(&self, name: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            check_template_name(name)?;
            let services = self.services().await?;
            let arn = services.image_arn(name).await?;
            Ok(services.images.get_image(&arn).await?.is_some())
        })
    }

    /// The account's templates (its images), those whose name contains
    /// `filter` when given.
    ///
    /// # Errors
    /// Control-plane failures.
    pub async fn list(&self, filter: Option<&str>) -> Result<Vec<TemplateSummary>, SandboxError> {
        boxed!(Result<Vec<TemplateSummary>, SandboxError>, {
            let services = self.services().await?;
            Ok(services
                .images
                .list_images(filter)
                .await?
                .into_iter()
                .map(|i| TemplateSummary {
                    template_id: i.arn,
                    name: i.name,
                    state: i.state,
                    latest_version: i.latest_active_version,
                })
                .collect())
        })
    }

    /// The status of template `name`'s newest version (or `version`).
    ///
    /// # Errors
    /// `NotFound` when the template or version does not exist.
    pub async fn version_status(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<(String, BuildStatus), SandboxError> {
        boxed!(Result<(String, BuildStatus), SandboxError>, {
            check_template_name(name)?;
            let services = self.services().await?;
            let arn = services.image_arn(name).await?;
            let version = match version {
                Some(v) => v.to_owned(),
                None => services
                    .images
                    .list_versions(&arn)
                    .await?
                    .into_iter()
                    .next()
                    .map(|v| v.version)
                    .ok_or_else(SandboxError::template_not_found)?,
            };
            let handle = BuildHandle {
                template_id: arn,
                version: version.clone(),
                name: name.to_owned(),
            };
            Ok((version, self.status(&handle).await?))
        })
    }
}
