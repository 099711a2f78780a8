//! A build up to its submission: the base image's version and artifact,
//! the template's artifact packed and uploaded if absent, the desired
//! configuration, and reuse of an identical version or a new one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;

use crate::aws::microvms::images::{ImageConfig, VersionInfo};
use crate::aws::s3::artifacts::parse_s3_uri;
use crate::error::SandboxError;
use crate::template::{Template, check_template_name};

use super::options::{BuildEvent, BuildOptions};
use super::services::TemplateServices;

/// The largest base artifact a build reads (the zip itself).
const MAX_BASE_ARTIFACT_BYTES: usize = 512 * 1024 * 1024;
/// What a template build says its version is, in the image's description.
const DESCRIPTION: &str = "rayito template build";

/// Where a build stands after submission (or reuse).
#[derive(Debug, Clone)]
pub(crate) struct Submission {
    pub arn: String,
    pub name: String,
    pub version: String,
    pub reused: bool,
    pub artifact_uploaded: bool,
}

/// The log group of an image's builds and sandboxes.
pub(crate) fn log_group(name: &str) -> String {
    format!("/rayito/{name}")
}

/// Checks everything a build is given, before any call.
///
/// # Errors
/// `Template` for the name; `InvalidArgument` for an option or the
/// template's first refused call.
pub(crate) fn check(
    template: &Template,
    name: &str,
    options: &BuildOptions,
) -> Result<(), SandboxError> {
    check_template_name(name)?;
    if name.starts_with("arn:") {
        return Err(SandboxError::template_name(
            "a build names its template; an image ARN cannot be built",
        ));
    }
    options.check()?;
    template.check()
}

/// The base image's version to build on.
async fn base_version(
    services: &TemplateServices,
    base_arn: &str,
    wanted: Option<u32>,
) -> Result<VersionInfo, SandboxError> {
    let version = match wanted {
        Some(v) => v.to_string(),
        None => services
            .images
            .list_versions(base_arn)
            .await?
            .into_iter()
            .find(VersionInfo::is_usable)
            .map(|v| v.version)
            .ok_or_else(SandboxError::base_image_no_version)?,
    };
    services.images.get_version(base_arn, &version).await
}

/// Packs, uploads and submits (or reuses) one build. `hold_slot` is where
/// the build slot goes: the caller keeps it as long as it should count.
pub(crate) async fn submit(
    services: &TemplateServices,
    template: &Template,
    name: &str,
    options: &BuildOptions,
) -> Result<(Submission, Option<tokio::sync::OwnedSemaphorePermit>), SandboxError> {
    check(template, name, options)?;
    let bucket = services.bucket(options)?;
    let context_dir = match &options.context_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };

    // The base image: its version, configuration and artifact.
    let base_arn = services.image_arn(template.base_image()).await?;
    let base = base_version(
        services,
        &base_arn,
        options.base_image_version.or(template.base_version()),
    )
    .await?;
    let base_uri = base.config.artifact_uri().unwrap_or_default().to_owned();
    let (base_bucket, base_key) =
        parse_s3_uri(&base_uri).ok_or_else(SandboxError::base_image_not_s3)?;
    let artifacts = services.artifacts().await?;
    let base_zip = artifacts
        .get(base_bucket, base_key, MAX_BASE_ARTIFACT_BYTES)
        .await?
        .ok_or_else(SandboxError::base_image_missing_artifact)?;

    // The template's artifact: packed off the runtime's workers.
    let packing = template.clone();
    let artifact = tokio::task::spawn_blocking(move || packing.pack(&base_zip, &context_dir))
        .await
        .map_err(|_| SandboxError::internal("template build", "packing the artifact stopped"))??;
    let key = artifact.key();
    options.emit(BuildEvent::Packed {
        bytes: artifact.bytes().len() as u64,
        digest: artifact.sha256_hex().chars().take(12).collect(),
    });
    let uploaded = if artifacts.exists(&bucket, &key).await? {
        false
    } else {
        artifacts
            .put(&bucket, &key, Bytes::from(artifact.into_bytes()))
            .await?;
        true
    };
    options.emit(BuildEvent::Uploaded(uploaded));

    // What the version must be: the base's configuration with our
    // artifact, memory and log group.
    let desired = base
        .config
        .clone()
        .with_artifact_uri(format!("s3://{bucket}/{key}"))
        .with_memory_mib(options.memory_mib, "template build")?
        .with_log_group(log_group(name));

    let arn = services.image_arn(name).await?;
    let existing = services.images.get_image(&arn).await?;
    if existing.is_some()
        && !options.force
        && !template.skips_cache()
        && let Some(version) = reusable(services, &arn, &desired).await?
    {
        options.emit(BuildEvent::Reused {
            version: version.clone(),
        });
        return Ok((
            Submission {
                arn,
                name: name.to_owned(),
                version,
                reused: true,
                artifact_uploaded: uploaded,
            },
            None,
        ));
    }
    let slot = super::slots::take()?;
    let id = if existing.is_some() {
        arn.as_str()
    } else {
        name
    };
    let submitted = services
        .images
        .submit(existing.is_some(), id, &desired, DESCRIPTION)
        .await?;
    options.emit(BuildEvent::Submitted {
        version: submitted.version.clone(),
    });
    Ok((
        Submission {
            arn: submitted.arn,
            name: name.to_owned(),
            version: submitted.version,
            reused: false,
            artifact_uploaded: uploaded,
        },
        Some(slot),
    ))
}

/// The newest usable version built from `desired`, if any.
pub(crate) async fn reusable(
    services: &TemplateServices,
    arn: &str,
    desired: &ImageConfig,
) -> Result<Option<String>, SandboxError> {
    let wants_env = desired
        .environment_variables
        .as_ref()
        .is_some_and(|e| !e.is_empty());
    for candidate in services.images.list_versions(arn).await? {
        if !candidate.is_usable() || !desired.matches_except_env(&candidate.config) {
            continue;
        }
        let same_env = if wants_env {
            // List items never carry the environment: read the version.
            let full = services.images.get_version(arn, &candidate.version).await?;
            desired.same_env(&full.config)
        } else {
            // Absent in the list means nothing to compare against: a
            // desired empty environment matches.
            desired.same_env(&ImageConfig::default().with_env(Some(BTreeMap::new())))
        };
        if same_env {
            return Ok(Some(candidate.version));
        }
    }
    Ok(None)
}
