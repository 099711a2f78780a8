//! The control plane: a port (trait) with plain-data inputs and outputs,
//! and what sits on top of any implementation of it (pacing, the retry
//! policy).
//!
//! It knows no AWS crate: the adapter over `aws-sdk-lambdamicrovms` is in
//! the AWS edge ([`crate::aws::microvms`]). Everything above sees
//! [`ControlPlane`], [`RunRequest`] and [`Microvm`]; implementations return
//! failures already mapped through `crate::error::map::aws`.

pub(crate) mod layer;
pub(crate) mod pacing;
pub(crate) mod retry;

use std::fmt;
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;

use crate::error::SandboxError;
use crate::secret::Secret;
use crate::state::SandboxState;

/// The platform idle policy sent with RunMicrovm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdlePolicyParams {
    pub max_idle_seconds: i32,
    pub suspended_seconds: i32,
    pub auto_resume: bool,
}

/// Everything RunMicrovm needs, as plain data.
#[derive(Clone)]
pub(crate) struct RunRequest {
    pub image_arn: String,
    /// The image version to start (`None`: the newest launchable one).
    pub image_version: Option<String>,
    pub max_duration_seconds: i32,
    /// Compact JSON; carries only the access token's digest, but is still never
    /// logged (AWS treats it as sensitive).
    pub run_hook_payload: String,
    /// The idempotency token, the same on every retry of one create.
    pub client_token: String,
    pub idle_policy: Option<IdlePolicyParams>,
    pub execution_role_arn: Option<String>,
    /// RunMicrovm `logging`, always sent.
    pub logging: RunLogging,
    /// `ingressNetworkConnectors` / `egressNetworkConnectors` (ARNs), each
    /// sent only when not empty.
    pub ingress: Vec<String>,
    pub egress: Vec<String>,
}

/// RunMicrovm's `logging`: sent explicitly on every call (the service does
/// not inherit the image's log group).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum RunLogging {
    /// `{"disabled": {}}`.
    #[default]
    Disabled,
    /// `{"cloudWatch": {"logGroup": ...}}` (the service names the stream).
    CloudWatch { log_group: String },
}

crate::secret::redacted_debug! {
    RunRequest |o| image_arn, image_version, max_duration_seconds, run_hook_payload = "<redacted>",
    client_token, idle_policy, execution_role_arn, logging, ingress, egress
}

/// A MicroVM as RunMicrovm / GetMicrovm describe it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Microvm {
    pub id: String,
    pub state: SandboxState,
    /// Bare host (`<uuid>.lambda-microvm.<region>.on.aws`) or, locally,
    /// `127.0.0.1:<port>`.
    pub endpoint: String,
    pub image_arn: String,
    pub image_version: String,
    pub max_duration_seconds: i32,
    pub started_at: Option<SystemTime>,
    pub terminated_at: Option<SystemTime>,
    pub state_reason: Option<String>,
    /// The platform idle policy's `autoResumeEnabled` (false without one):
    /// whether traffic to a suspended MicroVM wakes it.
    pub auto_resume: bool,
    /// The network connectors' ARNs the control plane reports.
    pub ingress: Vec<String>,
    pub egress: Vec<String>,
}

/// One ListMicrovms item (the API gives only these fields).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MicrovmItem {
    pub id: String,
    pub state: SandboxState,
    pub image_arn: String,
    pub image_version: String,
    pub started_at: Option<SystemTime>,
}

/// One ListMicrovms request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ListRequest {
    /// `imageIdentifier`: an image ARN.
    pub image: Option<String>,
    pub image_version: Option<String>,
    /// `maxResults` (1 to 50).
    pub max_results: i32,
    pub next_token: Option<String>,
}

/// One ListMicrovms page.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ListPage {
    pub items: Vec<MicrovmItem>,
    pub next_token: Option<String>,
}

/// Ports a proxy token may open (never 9000, the hooks port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthTokenRequest {
    pub microvm_id: String,
    pub expiration: Duration,
    pub ports: Vec<u16>,
}

/// The control-plane operations the SDK uses.
///
/// Implementations return `SandboxError`s already mapped (docs/errors.md,
/// "AWS control plane, by error code, never by HTTP status"); the retry layer ([`retry::Retrying`]) sits on top of any implementation.
pub(crate) trait ControlPlane: Send + Sync + fmt::Debug {
    /// RunMicrovm.
    fn run_microvm(&self, request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>>;
    /// GetMicrovm.
    fn get_microvm(&self, id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>>;
    /// TerminateMicrovm (idempotent on AWS).
    fn terminate_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>>;
    /// CreateMicrovmAuthToken: the proxy token (JWE) for the given ports.
    fn create_auth_token(
        &self,
        request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>>;
    /// SuspendMicrovm. Fakes that do not model it answer `Unimplemented`.
    fn suspend_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        let _ = id;
        Box::pin(async { Err(not_modelled("SuspendMicrovm")) })
    }
    /// ResumeMicrovm. Fakes that do not model it answer `Unimplemented`.
    fn resume_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        let _ = id;
        Box::pin(async { Err(not_modelled("ResumeMicrovm")) })
    }
    /// ListMicrovms, one page. Fakes that do not model it answer `Unimplemented`.
    fn list_microvms(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage, SandboxError>> {
        let _ = request;
        Box::pin(async { Err(not_modelled("ListMicrovms")) })
    }
    /// GetMicrovmImage. Fakes that do not model it answer `Unimplemented`.
    fn get_image(&self, image: String) -> BoxFuture<'_, Result<ImageSummary, SandboxError>> {
        let _ = image;
        Box::pin(async { Err(not_modelled("GetMicrovmImage")) })
    }
    /// ListMicrovmImages, one page (feature `fleet`). Fakes that do not
    /// model it answer `Unimplemented`.
    #[cfg(feature = "fleet")]
    fn list_images(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<Page<ImageItem>, SandboxError>> {
        let _ = next_token;
        Box::pin(async { Err(not_modelled("ListMicrovmImages")) })
    }
    /// ListMicrovmImageVersions of the image ARN `image`, one page
    /// (feature `fleet`). Fakes that do not model it answer `Unimplemented`.
    #[cfg(feature = "fleet")]
    fn list_image_versions(
        &self,
        image: String,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<Page<ImageVersionItem>, SandboxError>> {
        let _ = (image, next_token);
        Box::pin(async { Err(not_modelled("ListMicrovmImageVersions")) })
    }
}

/// One page of a listing (feature `fleet`).
#[cfg(feature = "fleet")]
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub next_token: Option<String>,
}

/// One ListMicrovmImages item (feature `fleet`).
#[cfg(feature = "fleet")]
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageItem {
    pub arn: String,
    pub name: String,
    pub state: String,
    pub latest_active_version: Option<String>,
    pub latest_failed_version: Option<String>,
    pub created_at: Option<SystemTime>,
}

/// One ListMicrovmImageVersions item (feature `fleet`): no environment,
/// no artifact location (a fleet view shows neither).
#[cfg(feature = "fleet")]
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageVersionItem {
    pub version: String,
    pub state: String,
    pub status: String,
    pub base_image_version: Option<String>,
    pub memory_mib: Option<u32>,
    pub created_at: Option<SystemTime>,
}

/// What GetMicrovmImage says about an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageSummary {
    pub arn: String,
    pub name: String,
    /// The image's state as the service spells it (`ACTIVE`, ...).
    pub state: String,
    pub latest_active_version: Option<String>,
}

/// What a control plane that does not model an operation answers.
fn not_modelled(operation: &'static str) -> SandboxError {
    SandboxError::unimplemented(operation, "this control plane does not offer it", None)
}

/// A shared control plane is one too (the retry layer wraps injected ones).
impl ControlPlane for std::sync::Arc<dyn ControlPlane> {
    fn run_microvm(&self, request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        (**self).run_microvm(request)
    }
    fn get_microvm(&self, id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        (**self).get_microvm(id)
    }
    fn terminate_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        (**self).terminate_microvm(id)
    }
    fn create_auth_token(
        &self,
        request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>> {
        (**self).create_auth_token(request)
    }
    fn suspend_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        (**self).suspend_microvm(id)
    }
    fn resume_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        (**self).resume_microvm(id)
    }
    fn list_microvms(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage, SandboxError>> {
        (**self).list_microvms(request)
    }
    fn get_image(&self, image: String) -> BoxFuture<'_, Result<ImageSummary, SandboxError>> {
        (**self).get_image(image)
    }
    #[cfg(feature = "fleet")]
    fn list_images(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<Page<ImageItem>, SandboxError>> {
        (**self).list_images(next_token)
    }
    #[cfg(feature = "fleet")]
    fn list_image_versions(
        &self,
        image: String,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<Page<ImageVersionItem>, SandboxError>> {
        (**self).list_image_versions(image, next_token)
    }
}
