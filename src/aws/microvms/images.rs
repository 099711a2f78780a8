//! The image side of the MicroVMs API (feature `templates`): what a
//! template build reads and submits, as plain data over the AWS types.
//!
//! Every AWS failure is mapped here; Create/Update failures become
//! [`SandboxError::Build`] (`build_quota` for the account's concurrent-build
//! quota, `aws_error` otherwise), as a build's caller expects one kind.

use crate::quiet::Quiet as _;
use std::collections::BTreeMap;

use aws_sdk_lambdamicrovms as lmv;
use lmv::types::{
    Architecture, Capability, CloudWatchLogging, CodeArtifact, CpuConfiguration, HookState, Hooks,
    Logging, MicrovmHooks, MicrovmImageHooks, Resources,
};

use crate::aws::failure::{OperationError, SdkFailure, extract, map_sdk_error};
use crate::error::SandboxError;

/// The account-wide concurrent-build quota of MicroVM images.
pub(crate) const BUILD_QUOTA: u32 = 10;

/// The most versions read when looking for one to reuse (the newest first).
const MAX_VERSIONS_READ: usize = 500;
/// The most pages one listing reads.
const MAX_PAGES: usize = 20;

/// A version's configuration: what Create/Update send and versions echo.
/// Its `Debug` names the environment's keys, never its values.
///
/// The members of AWS types are kept here; a build sets them with plain
/// data ([`ImageConfig::with_artifact_uri`], [`ImageConfig::with_memory_mib`],
/// ...) and copies the rest from a version it read.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct ImageConfig {
    pub base_image_arn: String,
    pub base_image_version: Option<String>,
    pub build_role_arn: String,
    code_artifact: Option<CodeArtifact>,
    logging: Option<Logging>,
    egress_network_connectors: Option<Vec<String>>,
    cpu_configurations: Option<Vec<CpuConfiguration>>,
    resources: Option<Vec<Resources>>,
    additional_os_capabilities: Option<Vec<Capability>>,
    hooks: Option<Hooks>,
    /// `None` in list items, which never carry it.
    pub environment_variables: Option<BTreeMap<String, String>>,
}

/// The lifecycle hooks of a base image: all enabled, on `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HookTimes {
    pub port: i32,
    /// Ready and validate.
    pub build_seconds: i32,
    /// Run, resume and suspend.
    pub runtime_seconds: i32,
    /// Terminate.
    pub terminate_seconds: i32,
}

crate::secret::redacted_debug! {
    non_exhaustive ImageConfig |o| base_image_arn, base_image_version, build_role_arn,
    code_artifact = o.code_artifact.is_some(), resources,
    environment_variables = o.environment_variables.as_ref().map(|e| e.keys().collect::<Vec<_>>())
}

/// Copies the configuration fields every image/version shape shares.
macro_rules! config_of {
    ($out:expr) => {{
        let out = $out;
        ImageConfig {
            base_image_arn: out.base_image_arn.clone(),
            base_image_version: out.base_image_version.clone(),
            build_role_arn: out.build_role_arn.clone(),
            code_artifact: out.code_artifact.clone(),
            logging: out.logging.clone(),
            egress_network_connectors: out.egress_network_connectors.clone(),
            cpu_configurations: out.cpu_configurations.clone(),
            resources: out.resources.clone(),
            additional_os_capabilities: out.additional_os_capabilities.clone(),
            hooks: out.hooks.clone(),
            environment_variables: out
                .environment_variables
                .as_ref()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        }
    }};
}

impl ImageConfig {
    /// A configuration over the base image `base_image_arn` (version
    /// `base_image_version`), built by `build_role_arn`; nothing else set.
    pub(crate) fn new(
        base_image_arn: String,
        base_image_version: Option<String>,
        build_role_arn: String,
    ) -> Self {
        Self {
            base_image_arn,
            base_image_version,
            build_role_arn,
            ..Self::default()
        }
    }

    /// The code artifact at `uri` (`s3://bucket/key`).
    #[must_use]
    pub(crate) fn with_artifact_uri(mut self, uri: String) -> Self {
        self.code_artifact = Some(CodeArtifact::Uri(uri));
        self
    }

    /// `mib` of memory.
    ///
    /// # Errors
    /// `Internal` when the member does not build.
    pub(crate) fn with_memory_mib(
        mut self,
        mib: u32,
        what: &'static str,
    ) -> Result<Self, SandboxError> {
        self.resources = Some(vec![
            Resources::builder()
                .minimum_memory_in_mib(mib as i32)
                .build()
                .map_err(|_| SandboxError::internal(what, "resources"))?,
        ]);
        Ok(self)
    }

    /// The memory in MiB, when set.
    pub(crate) fn memory_mib(&self) -> Option<u32> {
        self.resources
            .as_deref()
            .and_then(|r| r.first())
            .and_then(|r| u32::try_from(r.minimum_memory_in_mib).ok())
    }

    /// Build logs to the CloudWatch Logs group `group`.
    #[must_use]
    pub(crate) fn with_log_group(mut self, group: String) -> Self {
        self.logging = Some(Logging::CloudWatch(
            CloudWatchLogging::builder().log_group(group).build(),
        ));
        self
    }

    /// The CPU architecture (`ARM_64`, `X86_64`).
    ///
    /// # Errors
    /// `Internal` when the member does not build.
    pub(crate) fn with_architecture(
        mut self,
        arch: &str,
        what: &'static str,
    ) -> Result<Self, SandboxError> {
        self.cpu_configurations = Some(vec![
            CpuConfiguration::builder()
                .architecture(Architecture::from(arch))
                .build()
                .map_err(|_| SandboxError::internal(what, "cpu configuration"))?,
        ]);
        Ok(self)
    }

    /// The operating system capabilities (`additionalOsCapabilities`):
    /// `ALL` for a caps image, none (not sent) otherwise.
    #[must_use]
    pub(crate) fn with_os_capabilities(mut self, capabilities: Option<&str>) -> Self {
        self.additional_os_capabilities = capabilities.map(|c| vec![Capability::from(c)]);
        self
    }

    /// The lifecycle hooks, all enabled.
    #[must_use]
    pub(crate) fn with_hooks(mut self, times: HookTimes) -> Self {
        self.hooks = Some(
            Hooks::builder()
                .port(times.port)
                .microvm_image_hooks(
                    MicrovmImageHooks::builder()
                        .ready(HookState::Enabled)
                        .ready_timeout_in_seconds(times.build_seconds)
                        .validate(HookState::Enabled)
                        .validate_timeout_in_seconds(times.build_seconds)
                        .build(),
                )
                .microvm_hooks(
                    MicrovmHooks::builder()
                        .run(HookState::Enabled)
                        .run_timeout_in_seconds(times.runtime_seconds)
                        .resume(HookState::Enabled)
                        .resume_timeout_in_seconds(times.runtime_seconds)
                        .suspend(HookState::Enabled)
                        .suspend_timeout_in_seconds(times.runtime_seconds)
                        .terminate(HookState::Enabled)
                        .terminate_timeout_in_seconds(times.terminate_seconds)
                        .build(),
                )
                .build(),
        );
        self
    }

    /// The environment (`None`: not sent).
    #[must_use]
    pub(crate) fn with_env(mut self, env: Option<BTreeMap<String, String>>) -> Self {
        self.environment_variables = env;
        self
    }

    /// The code artifact's URI.
    pub(crate) fn artifact_uri(&self) -> Option<&str> {
        self.code_artifact
            .as_ref()
            .and_then(|a| a.as_uri().ok())
            .map(String::as_str)
    }

    /// Whether a version echoing `echo` was built from this configuration,
    /// the environment aside (list items never carry it): every key equal,
    /// the base version compared as a number (`1` equals the echoed `1.0`),
    /// absent lists equal to empty ones.
    pub(crate) fn matches_except_env(&self, echo: &ImageConfig) -> bool {
        fn list<T: PartialEq>(a: &Option<Vec<T>>, b: &Option<Vec<T>>) -> bool {
            a.as_deref().unwrap_or_default() == b.as_deref().unwrap_or_default()
        }
        self.base_image_arn == echo.base_image_arn
            && same_major(
                self.base_image_version.as_deref(),
                echo.base_image_version.as_deref(),
            )
            && self.build_role_arn == echo.build_role_arn
            && self.code_artifact == echo.code_artifact
            && self.logging == echo.logging
            && list(
                &self.egress_network_connectors,
                &echo.egress_network_connectors,
            )
            && list(&self.cpu_configurations, &echo.cpu_configurations)
            && list(&self.resources, &echo.resources)
            && list(
                &self.additional_os_capabilities,
                &echo.additional_os_capabilities,
            )
            && self.hooks == echo.hooks
    }

    /// Whether the environments are the same (absent equals empty).
    pub(crate) fn same_env(&self, other: &ImageConfig) -> bool {
        let empty = BTreeMap::new();
        self.environment_variables.as_ref().unwrap_or(&empty)
            == other.environment_variables.as_ref().unwrap_or(&empty)
    }
}

/// Two base versions equal as numbers (`1` and `1.0`); both absent equal.
fn same_major(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x == y,
            _ => a == b,
        },
        _ => false,
    }
}

/// The base version to send: an integral echo (`1.0`) as the integer, as
/// the API refuses anything but a single major number.
pub(crate) fn major_version(version: &str) -> String {
    match version.parse::<f64>() {
        Ok(v) if v.fract() == 0.0 && (0.0..1e9).contains(&v) => format!("{}", v as u64),
        _ => version.to_owned(),
    }
}

/// An image.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ImageInfo {
    pub arn: String,
    pub name: String,
    pub state: String,
    pub latest_active_version: Option<String>,
    pub latest_failed_version: Option<String>,
    /// Its tags (GetMicrovmImage only; listings carry none).
    pub tags: BTreeMap<String, String>,
}

/// One version of an image.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct VersionInfo {
    pub arn: String,
    pub version: String,
    pub state: String,
    pub status: String,
    /// The service's words: never put into an error message.
    pub state_reason: Option<String>,
    /// Seconds since the epoch.
    pub created_at: f64,
    pub config: ImageConfig,
}

impl VersionInfo {
    /// SUCCESSFUL and ACTIVE.
    pub(crate) fn is_usable(&self) -> bool {
        self.state == "SUCCESSFUL" && self.status == "ACTIVE"
    }
}

/// Why DeleteMicrovmImageVersion refused a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeleteRefused {
    /// ConflictException: it builds, or MicroVMs run on it.
    Conflict,
    /// ValidationException: it is ACTIVE (or another refused value).
    Validation,
}

/// What Create/Update answered: the image and the new version.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Submitted {
    pub arn: String,
    pub version: String,
}

/// The image operations, over one client.
#[derive(Clone, Debug)]
pub(crate) struct ImageApi {
    client: lmv::Client,
}

fn secs(t: &lmv::primitives::DateTime) -> f64 {
    t.as_secs_f64()
}

impl ImageApi {
    /// The operations over a client built from `config`.
    pub(crate) fn new(config: &aws_types::SdkConfig) -> Self {
        Self {
            client: lmv::Client::new(config),
        }
    }

    /// GetMicrovmImage; `None` when the image does not exist.
    ///
    /// # Errors
    /// Any other failure, mapped.
    pub(crate) async fn get_image(&self, id: &str) -> Result<Option<ImageInfo>, SandboxError> {
        match self
            .client
            .get_microvm_image()
            .image_identifier(id)
            .send()
            .quiet()
            .await
        {
            Ok(out) => Ok(Some(ImageInfo {
                arn: out.image_arn,
                name: out.name,
                state: out.state.as_str().to_owned(),
                latest_active_version: out.latest_active_image_version,
                latest_failed_version: out.latest_failed_image_version,
                tags: out.tags.unwrap_or_default().into_iter().collect(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_sdk_error("GetMicrovmImage", &e)),
        }
    }

    /// GetMicrovmImageVersion (with the environment).
    ///
    /// # Errors
    /// `NotFound` for a missing image or version; any other failure, mapped.
    pub(crate) async fn get_version(
        &self,
        id: &str,
        version: &str,
    ) -> Result<VersionInfo, SandboxError> {
        let out = self
            .client
            .get_microvm_image_version()
            .image_identifier(id)
            .image_version(version)
            .send()
            .quiet()
            .await
            .map_err(|e| map_sdk_error("GetMicrovmImageVersion", &e))?;
        Ok(VersionInfo {
            config: config_of!(&out),
            arn: out.image_arn,
            version: out.image_version,
            state: out.state.as_str().to_owned(),
            status: out.status.as_str().to_owned(),
            state_reason: out.state_reason,
            created_at: secs(&out.created_at),
        })
    }

    /// Every version (at most [`MAX_VERSIONS_READ`]), newest first; their
    /// configurations carry no environment.
    ///
    /// # Errors
    /// Any failure, mapped.
    pub(crate) async fn list_versions(&self, id: &str) -> Result<Vec<VersionInfo>, SandboxError> {
        let mut versions = Vec::new();
        let mut next: Option<String> = None;
        // Pages are bounded too: a service that answers empty pages with a
        // token forever must not keep this loop going.
        for _ in 0..MAX_PAGES {
            let out = self
                .client
                .list_microvm_image_versions()
                .image_identifier(id)
                .max_results(50)
                .set_next_token(next.take())
                .send()
                .quiet()
                .await
                .map_err(|e| map_sdk_error("ListMicrovmImageVersions", &e))?;
            for item in &out.items {
                versions.push(VersionInfo {
                    config: ImageConfig {
                        environment_variables: None,
                        ..config_of!(item)
                    },
                    arn: item.image_arn.clone(),
                    version: item.image_version.clone(),
                    state: item.state.as_str().to_owned(),
                    status: item.status.as_str().to_owned(),
                    state_reason: item.state_reason.clone(),
                    created_at: secs(&item.created_at),
                });
            }
            match out.next_token {
                Some(token) if !token.is_empty() && versions.len() < MAX_VERSIONS_READ => {
                    next = Some(token);
                }
                _ => break,
            }
        }
        versions.sort_by(|a, b| b.created_at.total_cmp(&a.created_at));
        Ok(versions)
    }

    /// Every image whose name contains `filter` (all without one).
    ///
    /// # Errors
    /// Any failure, mapped.
    pub(crate) async fn list_images(
        &self,
        filter: Option<&str>,
    ) -> Result<Vec<ImageInfo>, SandboxError> {
        let mut images = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let out = self
                .client
                .list_microvm_images()
                .set_name_filter(filter.map(str::to_owned))
                .set_next_token(next.take())
                .send()
                .quiet()
                .await
                .map_err(|e| map_sdk_error("ListMicrovmImages", &e))?;
            images.extend(out.items.into_iter().map(|i| ImageInfo {
                arn: i.image_arn,
                name: i.name,
                state: i.state.as_str().to_owned(),
                latest_active_version: i.latest_active_image_version,
                latest_failed_version: i.latest_failed_image_version,
                tags: BTreeMap::new(),
            }));
            match out.next_token {
                Some(token) if !token.is_empty() && images.len() < MAX_VERSIONS_READ => {
                    next = Some(token);
                }
                _ => break,
            }
        }
        Ok(images)
    }

    /// The newest version of the managed base image `id` (ListManagedMicrovmImageVersions,
    /// the highest major number among the items).
    ///
    /// # Errors
    /// `NotFound` for a managed image with no versions; any failure, mapped.
    pub(crate) async fn latest_managed_version(&self, id: &str) -> Result<String, SandboxError> {
        let mut newest: Option<(u64, String)> = None;
        let mut next: Option<String> = None;
        for _ in 0..MAX_VERSIONS_READ / 50 {
            let out = self
                .client
                .list_managed_microvm_image_versions()
                .image_identifier(id)
                .set_next_token(next.take())
                .send()
                .quiet()
                .await
                .map_err(|e| map_sdk_error("ListManagedMicrovmImageVersions", &e))?;
            for item in &out.items {
                let version = major_version(&item.image_version);
                if let Ok(number) = version.parse::<u64>()
                    && newest.as_ref().is_none_or(|(n, _)| number > *n)
                {
                    newest = Some((number, version));
                }
            }
            match out.next_token {
                Some(token) if !token.is_empty() => next = Some(token),
                _ => break,
            }
        }
        newest
            .map(|(_, v)| v)
            .ok_or_else(SandboxError::base_image_no_version)
    }

    /// Whether version `version` of image `id` still exists
    /// (GetMicrovmImageVersion; ResourceNotFoundException means gone).
    ///
    /// # Errors
    /// Any other failure, mapped.
    pub(crate) async fn version_exists(
        &self,
        id: &str,
        version: &str,
    ) -> Result<bool, SandboxError> {
        match self
            .client
            .get_microvm_image_version()
            .image_identifier(id)
            .image_version(version)
            .send()
            .quiet()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(map_sdk_error("GetMicrovmImageVersion", &e)),
        }
    }

    /// UpdateMicrovmImageVersion: sets the version's status (`ACTIVE`
    /// when `active`, else `INACTIVE`).
    ///
    /// # Errors
    /// Any failure, mapped.
    pub(crate) async fn set_version_status(
        &self,
        id: &str,
        version: &str,
        active: bool,
    ) -> Result<(), SandboxError> {
        let status = if active {
            lmv::types::MicrovmImageVersionStatus::Active
        } else {
            lmv::types::MicrovmImageVersionStatus::Inactive
        };
        self.client
            .update_microvm_image_version()
            .image_identifier(id)
            .image_version(version)
            .status(status)
            .send()
            .quiet()
            .await
            .map_err(|e| map_sdk_error("UpdateMicrovmImageVersion", &e))?;
        Ok(())
    }

    /// DeleteMicrovmImageVersion. A version already gone counts as
    /// deleted.
    ///
    /// # Errors
    /// [`DeleteRefused`] inside `Ok(Err(..))` for the refusals a prune
    /// handles (ConflictException, ValidationException); any other
    /// failure, mapped.
    pub(crate) async fn delete_version(
        &self,
        id: &str,
        version: &str,
    ) -> Result<Result<(), DeleteRefused>, SandboxError> {
        match self
            .client
            .delete_microvm_image_version()
            .image_identifier(id)
            .image_version(version)
            .send()
            .quiet()
            .await
        {
            Ok(_) => Ok(Ok(())),
            Err(e) => {
                let failure = extract("DeleteMicrovmImageVersion", &e);
                match failure.code.as_deref() {
                    Some("ResourceNotFoundException") => Ok(Ok(())),
                    Some("ConflictException") => Ok(Err(DeleteRefused::Conflict)),
                    Some("ValidationException") => Ok(Err(DeleteRefused::Validation)),
                    _ => Err(map_sdk_error("DeleteMicrovmImageVersion", &e)),
                }
            }
        }
    }

    /// CreateMicrovmImage (`existing` false) or UpdateMicrovmImage of
    /// `id` (true): a new version building `config`.
    ///
    /// # Errors
    /// `Build { build_quota }` when the account's builds are all running,
    /// `Build { aws_error }` for another refusal, a mapped transport error
    /// when no answer came.
    pub(crate) async fn submit(
        &self,
        existing: bool,
        id: &str,
        config: &ImageConfig,
        description: &str,
    ) -> Result<Submitted, SandboxError> {
        let env = config
            .environment_variables
            .as_ref()
            .filter(|m| !m.is_empty())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        let base_version = config.base_image_version.as_deref().map(major_version);
        // Create and Update take the same members: one list of them.
        macro_rules! with_config {
            ($call:expr) => {
                $call
                    .base_image_arn(&config.base_image_arn)
                    .set_base_image_version(base_version)
                    .build_role_arn(&config.build_role_arn)
                    .description(description)
                    .set_code_artifact(config.code_artifact.clone())
                    .set_logging(config.logging.clone())
                    .set_egress_network_connectors(config.egress_network_connectors.clone())
                    .set_cpu_configurations(config.cpu_configurations.clone())
                    .set_resources(config.resources.clone())
                    .set_additional_os_capabilities(config.additional_os_capabilities.clone())
                    .set_hooks(config.hooks.clone())
                    .set_environment_variables(env)
            };
        }
        let (arn, version) = if existing {
            let out = with_config!(self.client.update_microvm_image().image_identifier(id))
                .send()
                .quiet()
                .await
                .map_err(|e| submit_error("UpdateMicrovmImage", &e))?;
            (out.image_arn, out.image_version)
        } else {
            let out = with_config!(self.client.create_microvm_image().name(id))
                .send()
                .quiet()
                .await
                .map_err(|e| submit_error("CreateMicrovmImage", &e))?;
            (out.image_arn, out.image_version)
        };
        Ok(Submitted { arn, version })
    }
}

/// ResourceNotFoundException, by code.
fn is_not_found<E: OperationError>(err: &SdkFailure<E>) -> bool {
    extract("GetMicrovmImage", err).code.as_deref() == Some("ResourceNotFoundException")
}

/// A Create/Update failure: the quota, another refusal, or no answer.
fn submit_error<E: OperationError>(operation: &'static str, err: &SdkFailure<E>) -> SandboxError {
    let failure = extract(operation, err);
    match failure.code.as_deref() {
        Some("ServiceQuotaExceededException") => SandboxError::build_quota(BUILD_QUOTA),
        Some(code) => SandboxError::build_rejected(code),
        None => map_sdk_error(operation, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_versions_compare_as_numbers_and_resend_as_integers() {
        assert!(same_major(Some("1"), Some("1.0")));
        assert!(!same_major(Some("1"), Some("2.0")));
        assert!(!same_major(Some("1"), None));
        assert!(same_major(None, None));
        assert_eq!(major_version("1.0"), "1");
        assert_eq!(major_version("12"), "12");
        assert_eq!(major_version("1.5"), "1.5");
        assert_eq!(major_version("latest"), "latest");
    }

    #[test]
    fn debug_shows_environment_keys_never_values() {
        let config = ImageConfig {
            environment_variables: Some(BTreeMap::from([(
                "API_KEY".into(),
                "s3cr3t-value".into(),
            )])),
            ..ImageConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(shown.contains("API_KEY"), "{shown}");
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }

    #[test]
    fn reuse_ignores_only_the_environment_and_empty_lists() {
        let desired = ImageConfig {
            base_image_arn: "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1".into(),
            base_image_version: Some("1".into()),
            build_role_arn: "arn:aws:iam::000000000000:role/r".into(),
            resources: Some(vec![
                Resources::builder()
                    .minimum_memory_in_mib(2048)
                    .build()
                    .unwrap(),
            ]),
            environment_variables: Some(BTreeMap::from([("A".into(), "1".into())])),
            ..ImageConfig::default()
        };
        let echo = ImageConfig {
            base_image_version: Some("1.0".into()),
            environment_variables: None,
            egress_network_connectors: Some(Vec::new()),
            ..desired.clone()
        };
        assert!(desired.matches_except_env(&echo));
        assert!(!desired.same_env(&echo));
        let other_memory = ImageConfig {
            resources: Some(vec![
                Resources::builder()
                    .minimum_memory_in_mib(4096)
                    .build()
                    .unwrap(),
            ]),
            ..echo.clone()
        };
        assert!(!desired.matches_except_env(&other_memory));
    }
}
