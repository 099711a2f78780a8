//! Lambda MicroVMs (`aws-sdk-lambdamicrovms`): the AWS adapter of the
//! control-plane port ([`crate::control::ControlPlane`]), and, with
//! feature `templates`, the image operations ([`images`]).
//!
//! The client's own retries are off (`RetryConfig::disabled()`): one layer,
//! [`crate::control::retry`], decides every retry (docs/errors.md,
//! "Retries"), so attempts never multiply.

// Also the quota report's and the cost estimate's memory of an image
// version (GetMicrovmImageVersion), which use none of the rest.
#[cfg(any(feature = "templates", feature = "quotas"))]
#[cfg_attr(not(feature = "templates"), allow(dead_code))]
pub(crate) mod images;

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use aws_sdk_lambdamicrovms as lmv;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use lmv::types::{CloudWatchLogging, IdlePolicy, Logging, LoggingDisabled, PortSpecification};

use super::config::{self, AwsSettings};
use super::failure::map_sdk_error;
use crate::control::{
    AuthTokenRequest, ControlPlane, ImageSummary, ListPage, ListRequest, Microvm, MicrovmItem,
    RunLogging, RunRequest,
};
use crate::error::SandboxError;
use crate::quiet::Quiet as _;
use crate::secret::Secret;
use crate::state::SandboxState;

/// Runs anything of the AWS SDK with tracing silenced ([`crate::quiet`]);
/// the SDK's own events ([`control_event`]) say what happened instead.
fn silenced<F: std::future::Future>(future: F) -> tracing::instrument::WithDispatch<F> {
    future.quiet()
}

/// The SDK's own, redacted event for one control-plane call: the operation,
/// the MicroVM and the outcome's kind, never a token or a credential.
fn control_event<T>(operation: &'static str, microvm: &str, outcome: &Result<T, SandboxError>) {
    match outcome {
        Ok(_) => tracing::debug!(
            target: "rayito::control",
            operation,
            microvm_id = microvm,
            "control-plane call succeeded"
        ),
        Err(err) => tracing::debug!(
            target: "rayito::control",
            operation,
            microvm_id = microvm,
            kind = err.kind().as_str(),
            "control-plane call failed"
        ),
    }
}

/// The control plane on AWS (or any endpoint speaking its API, like the
/// local emulator).
#[derive(Clone)]
pub(crate) struct AwsControlPlane {
    client: Arc<lmv::Client>,
    /// The region the client signs for (given, or from the chain).
    region: String,
    /// The loaded configuration, for the clients of the other services a
    /// feature needs (S3, CloudWatch Logs, STS: built from it on demand).
    sdk_config: aws_types::SdkConfig,
}

impl fmt::Debug for AwsControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AwsControlPlane")
    }
}

impl AwsControlPlane {
    /// Loads the AWS configuration ([`config::load`]: credentials and a
    /// region must exist, so that a machine with no AWS setup gets one
    /// clear error before any call) and makes the client over it.
    ///
    /// # Errors
    /// As [`config::load`].
    pub(crate) async fn connect(settings: &AwsSettings) -> Result<Self, SandboxError> {
        let (config, region) = config::load(settings).await?;
        Ok(Self {
            client: Arc::new(lmv::Client::new(&config)),
            region,
            sdk_config: config,
        })
    }

    /// The loaded AWS configuration (credentials, region, endpoint
    /// override, timeouts; retries off).
    pub(crate) fn sdk_config(&self) -> &aws_types::SdkConfig {
        &self.sdk_config
    }

    /// The region the client signs for.
    pub(crate) fn region(&self) -> &str {
        &self.region
    }

    /// A client for the embedded emulator ([`config::hermetic`]).
    pub(crate) fn hermetic(
        endpoint_url: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: &Secret,
    ) -> Self {
        let sdk_config = config::hermetic(endpoint_url, region, access_key_id, secret_access_key);
        Self {
            client: Arc::new(lmv::Client::new(&sdk_config)),
            region: region.to_owned(),
            sdk_config,
        }
    }
}

/// The `Microvm` of a RunMicrovm or GetMicrovm answer: two SDK output
/// types with the same accessors.
macro_rules! microvm_of {
    ($out:expr) => {{
        let out = $out;
        Microvm {
            id: out.microvm_id().to_owned(),
            state: SandboxState::from(out.state().as_str()),
            endpoint: out.endpoint().to_owned(),
            image_arn: out.image_arn().to_owned(),
            image_version: out.image_version().to_owned(),
            max_duration_seconds: out.maximum_duration_in_seconds(),
            started_at: SystemTime::try_from(*out.started_at()).ok(),
            terminated_at: out
                .terminated_at()
                .and_then(|t| SystemTime::try_from(*t).ok()),
            state_reason: out.state_reason().map(str::to_owned),
            auto_resume: out.idle_policy().is_some_and(|p| p.auto_resume_enabled()),
            ingress: out.ingress_network_connectors().to_vec(),
            egress: out.egress_network_connectors().to_vec(),
        }
    }};
}

impl ControlPlane for AwsControlPlane {
    fn run_microvm(&self, request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        async move {
            // Always explicit: RunMicrovm does not inherit the image's log group.
            let logging = match request.logging {
                RunLogging::Disabled => Logging::Disabled(LoggingDisabled::builder().build()),
                RunLogging::CloudWatch { log_group } => {
                    Logging::CloudWatch(CloudWatchLogging::builder().log_group(log_group).build())
                }
            };
            let mut call = self
                .client
                .run_microvm()
                .image_identifier(request.image_arn)
                .maximum_duration_in_seconds(request.max_duration_seconds)
                .run_hook_payload(request.run_hook_payload)
                .client_token(request.client_token)
                .logging(logging);
            if let Some(policy) = request.idle_policy {
                let policy = IdlePolicy::builder()
                    .max_idle_duration_seconds(policy.max_idle_seconds)
                    .suspended_duration_seconds(policy.suspended_seconds)
                    .auto_resume_enabled(policy.auto_resume)
                    .build()
                    .map_err(|_| {
                        SandboxError::internal("create", "the idle policy could not be built")
                    })?;
                call = call.idle_policy(policy);
            }
            if let Some(version) = request.image_version {
                call = call.image_version(version);
            }
            if let Some(role) = request.execution_role_arn {
                call = call.execution_role_arn(role);
            }
            // Only when given: an omitted list keeps the image's defaults.
            if !request.ingress.is_empty() {
                call = call.set_ingress_network_connectors(Some(request.ingress));
            }
            if !request.egress.is_empty() {
                call = call.set_egress_network_connectors(Some(request.egress));
            }
            let out = silenced(call.send())
                .await
                .map_err(|e| map_sdk_error("RunMicrovm", &e));
            control_event(
                "RunMicrovm",
                out.as_ref().map_or("", |o| o.microvm_id()),
                &out,
            );
            let out = out?;
            Ok(microvm_of!(out))
        }
        .boxed()
    }

    fn get_microvm(&self, id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        async move {
            let out = silenced(self.client.get_microvm().microvm_identifier(&id).send())
                .await
                .map_err(|e| map_sdk_error("GetMicrovm", &e));
            control_event("GetMicrovm", &id, &out);
            let out = out?;
            Ok(microvm_of!(out))
        }
        .boxed()
    }

    fn terminate_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            let out = silenced(
                self.client
                    .terminate_microvm()
                    .microvm_identifier(&id)
                    .send(),
            )
            .await
            .map(|_| ())
            .map_err(|e| map_sdk_error("TerminateMicrovm", &e));
            control_event("TerminateMicrovm", &id, &out);
            out
        }
        .boxed()
    }

    fn create_auth_token(
        &self,
        request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>> {
        async move {
            let minutes = i32::try_from(request.expiration.as_secs() / 60).unwrap_or(60);
            let id = request.microvm_id;
            let mut call = self
                .client
                .create_microvm_auth_token()
                .microvm_identifier(&id)
                .expiration_in_minutes(minutes.max(1));
            for port in request.ports {
                call = call.allowed_ports(PortSpecification::Port(i32::from(port)));
            }
            // The output holds the proxy token: only a silenced SDK may see it.
            let out = silenced(call.send())
                .await
                .map_err(|e| map_sdk_error("CreateMicrovmAuthToken", &e))
                .and_then(|out| {
                    pick_proxy_token(out.auth_token()).ok_or_else(|| {
                        SandboxError::protocol_violation(
                            "create",
                            "CreateMicrovmAuthToken answered without a proxy token",
                        )
                    })
                });
            control_event("CreateMicrovmAuthToken", &id, &out);
            out
        }
        .boxed()
    }

    fn suspend_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            self.client
                .suspend_microvm()
                .microvm_identifier(id)
                .send()
                .await
                .map_err(|e| map_sdk_error("SuspendMicrovm", &e))?;
            Ok(())
        }
        .boxed()
    }

    fn resume_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        async move {
            self.client
                .resume_microvm()
                .microvm_identifier(id)
                .send()
                .await
                .map_err(|e| map_sdk_error("ResumeMicrovm", &e))?;
            Ok(())
        }
        .boxed()
    }

    fn list_microvms(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage, SandboxError>> {
        async move {
            let out = self
                .client
                .list_microvms()
                .max_results(request.max_results)
                .set_next_token(request.next_token)
                .set_image_identifier(request.image)
                .set_image_version(request.image_version)
                .send()
                .await
                .map_err(|e| map_sdk_error("ListMicrovms", &e))?;
            let items = out
                .items()
                .iter()
                .map(|item| MicrovmItem {
                    id: item.microvm_id().to_owned(),
                    state: SandboxState::from(item.state().as_str()),
                    image_arn: item.image_arn().to_owned(),
                    image_version: item.image_version().to_owned(),
                    started_at: SystemTime::try_from(*item.started_at()).ok(),
                })
                .collect();
            Ok(ListPage {
                items,
                next_token: out.next_token().map(str::to_owned),
            })
        }
        .boxed()
    }

    fn get_image(&self, image: String) -> BoxFuture<'_, Result<ImageSummary, SandboxError>> {
        async move {
            let out = self
                .client
                .get_microvm_image()
                .image_identifier(image)
                .send()
                .await
                .map_err(|e| map_sdk_error("GetMicrovmImage", &e))?;
            Ok(ImageSummary {
                arn: out.image_arn().to_owned(),
                name: out.name().to_owned(),
                state: out.state().as_str().to_owned(),
                latest_active_version: out.latest_active_image_version().map(str::to_owned),
            })
        }
        .boxed()
    }

    #[cfg(feature = "fleet")]
    fn list_images(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<crate::control::Page<crate::control::ImageItem>, SandboxError>> {
        async move {
            let out = self
                .client
                .list_microvm_images()
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| map_sdk_error("ListMicrovmImages", &e))?;
            let items = out
                .items()
                .iter()
                .map(|i| crate::control::ImageItem {
                    arn: i.image_arn().to_owned(),
                    name: i.name().to_owned(),
                    state: i.state().as_str().to_owned(),
                    latest_active_version: i.latest_active_image_version().map(str::to_owned),
                    latest_failed_version: i.latest_failed_image_version().map(str::to_owned),
                    created_at: SystemTime::try_from(*i.created_at()).ok(),
                })
                .collect();
            Ok(crate::control::Page {
                items,
                next_token: out.next_token().map(str::to_owned),
            })
        }
        .boxed()
    }

    #[cfg(feature = "fleet")]
    fn list_image_versions(
        &self,
        image: String,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<crate::control::Page<crate::control::ImageVersionItem>, SandboxError>>
    {
        async move {
            let out = self
                .client
                .list_microvm_image_versions()
                .image_identifier(image)
                .max_results(50)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| map_sdk_error("ListMicrovmImageVersions", &e))?;
            let items = out
                .items()
                .iter()
                .map(|v| crate::control::ImageVersionItem {
                    version: v.image_version().to_owned(),
                    state: v.state().as_str().to_owned(),
                    status: v.status().as_str().to_owned(),
                    base_image_version: v.base_image_version().map(str::to_owned),
                    memory_mib: v
                        .resources()
                        .first()
                        .and_then(|r| u32::try_from(r.minimum_memory_in_mib).ok()),
                    created_at: SystemTime::try_from(*v.created_at()).ok(),
                })
                .collect();
            Ok(crate::control::Page {
                items,
                next_token: out.next_token().map(str::to_owned),
            })
        }
        .boxed()
    }
}

/// The key AWS uses for the proxy token.
const PROXY_TOKEN_KEY: &str = "X-aws-proxy-auth";

/// That key, else a case-insensitive match, else the single value
/// (docs/architecture.md).
fn pick_proxy_token(map: &std::collections::HashMap<String, String>) -> Option<Secret> {
    if let Some(value) = map.get(PROXY_TOKEN_KEY) {
        return Some(Secret::new(value.clone()));
    }
    if let Some((_, value)) = map
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(PROXY_TOKEN_KEY))
    {
        return Some(Secret::new(value.clone()));
    }
    if map.len() == 1 {
        return map.values().next().map(|v| Secret::new(v.clone()));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::pick_proxy_token;
    use crate::aws::config::AwsSettings;
    use crate::secret::Secret;

    fn settings(secret: &str) -> AwsSettings {
        AwsSettings {
            region: Some("us-east-1".into()),
            endpoint_url: Some("http://127.0.0.1:9".into()),
            static_credentials: Some(("AKIDSHARED".into(), Secret::new(secret.to_owned()))),
            ..AwsSettings::default()
        }
    }

    #[test]
    fn the_settings_key_tells_every_setting_apart_and_shows_no_secret() {
        let one = settings("one").key();
        assert_eq!(one, settings("one").key());
        assert_ne!(one, settings("two").key());
        let mut slower = settings("one");
        slower.read_timeout = Some(std::time::Duration::from_secs(7));
        assert_ne!(one, slower.key());
        let shown = format!("{one:?}");
        assert!(
            !shown.contains("one\"") && !shown.contains("AKIDSHARED"),
            "{shown}"
        );
    }

    #[test]
    fn proxy_token_key_rules() {
        let exact = HashMap::from([
            ("X-aws-proxy-auth".to_owned(), "a".to_owned()),
            ("other".to_owned(), "b".to_owned()),
        ]);
        assert_eq!(pick_proxy_token(&exact).unwrap().expose(), "a");
        let folded = HashMap::from([
            ("x-AWS-proxy-auth".to_owned(), "c".to_owned()),
            ("other".to_owned(), "d".to_owned()),
        ]);
        assert_eq!(pick_proxy_token(&folded).unwrap().expose(), "c");
        let single = HashMap::from([("whatever".to_owned(), "e".to_owned())]);
        assert_eq!(pick_proxy_token(&single).unwrap().expose(), "e");
        let none = HashMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]);
        assert!(pick_proxy_token(&none).is_none());
    }
}
