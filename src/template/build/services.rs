//! The clients a template build uses, made once per [`Client`] from its
//! AWS configuration: the image API, S3 for artifacts, CloudWatch Logs for
//! build logs, and the caller's account (STS on AWS; the local backend
//! knows its own).

use std::sync::Arc;

use crate::Client;
use crate::aws::cloudwatch_logs::build::BuildLogs;
use crate::aws::microvms::images::ImageApi;
use crate::aws::s3::artifacts::{ArtifactStore, check_bucket};
use crate::aws::sts::Identity;
use crate::error::SandboxError;

use super::options::{BUCKET_ENV, BuildOptions};

/// The template clients of one [`Client`].
#[derive(Debug)]
pub(crate) struct TemplateServices {
    pub(crate) images: ImageApi,
    pub(crate) logs: BuildLogs,
    sdk_config: aws_types::SdkConfig,
    /// The account and partition, known at once on the local backend.
    local: Option<LocalFacts>,
    /// The client's (shared, so STS is asked once per client).
    identity: std::sync::Arc<Identity>,
    region: String,
    /// S3's endpoint override (path style).
    s3_endpoint: Option<String>,
    artifacts: tokio::sync::OnceCell<ArtifactStore>,
}

#[derive(Clone)]
struct LocalFacts {
    account: String,
    bucket: String,
}

// The bucket's name is never shown (names of buckets and keys stay out
// of Debug, logs and errors).
crate::secret::redacted_debug! {
    LocalFacts |o| account, bucket = "<hidden>"
}

impl Client {
    /// The template clients of this client, made on first use and kept
    /// in its feature state.
    ///
    /// # Errors
    /// See [`TemplateServices::new`].
    pub(crate) async fn template_services(&self) -> Result<Arc<TemplateServices>, SandboxError> {
        self.feature_state(|| TemplateServices::new(self))
    }
}

impl TemplateServices {
    /// The clients of `client`'s backend.
    ///
    /// # Errors
    /// `Unimplemented` for a client with no AWS configuration (an
    /// injected control plane in tests).
    pub(crate) fn new(client: &Client) -> Result<Self, SandboxError> {
        let backend = client.backend();
        let Some(sdk_config) = backend.sdk_config.clone() else {
            return Err(SandboxError::unimplemented(
                "templates",
                "this client has no AWS configuration to build templates with",
                Some("docs/templates.md"),
            ));
        };
        let local = backend.local.as_ref().map(|l| LocalFacts {
            account: l.account_id().to_owned(),
            bucket: l.artifact_bucket(),
        });
        Ok(Self {
            images: ImageApi::new(&sdk_config),
            logs: BuildLogs::new(&sdk_config),
            identity: client.identity(&sdk_config),
            region: backend.region.clone().unwrap_or_default(),
            s3_endpoint: backend.s3_endpoint_url.clone(),
            local,
            sdk_config,
            artifacts: tokio::sync::OnceCell::new(),
        })
    }

    /// The AWS configuration the clients are made from.
    #[cfg(feature = "setup")]
    pub(crate) fn sdk_config(&self) -> &aws_types::SdkConfig {
        &self.sdk_config
    }

    /// The region images are built in.
    pub(crate) fn region(&self) -> &str {
        &self.region
    }

    /// Whether this is the local backend's.
    pub(crate) fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// The caller's account id and partition.
    ///
    /// # Errors
    /// STS failed.
    pub(crate) async fn account(&self) -> Result<(String, String), SandboxError> {
        match &self.local {
            Some(local) => Ok((local.account.clone(), "aws".to_owned())),
            None => self.identity.account().await.cloned(),
        }
    }

    /// The ARN of the image called `name` in the caller's account (an
    /// ARN passes through).
    ///
    /// # Errors
    /// STS failed.
    pub(crate) async fn image_arn(&self, name: &str) -> Result<String, SandboxError> {
        if name.starts_with("arn:") {
            return Ok(name.to_owned());
        }
        let (account, partition) = self.account().await?;
        Ok(crate::sandbox::image_name::image_arn_in(
            &partition,
            &self.region,
            &account,
            name,
        ))
    }

    /// The artifact bucket: the option, else `RAYITO_BUCKET`, else the
    /// local backend's own.
    ///
    /// # Errors
    /// `InvalidArgument` (`bucket`) when none is known or the name is not
    /// a bucket's.
    pub(crate) fn bucket(&self, options: &BuildOptions) -> Result<String, SandboxError> {
        let from_env = std::env::var(BUCKET_ENV).ok().filter(|v| !v.is_empty());
        let bucket = options
            .bucket
            .clone()
            .or(from_env)
            .or_else(|| self.local.as_ref().map(|l| l.bucket.clone()));
        match bucket {
            Some(bucket) => {
                check_bucket(&bucket)?;
                Ok(bucket)
            }
            None => Err(SandboxError::invalid_argument(
                "bucket",
                "no artifact bucket is known; pass BuildOptions::bucket or set RAYITO_BUCKET",
            )),
        }
    }

    /// The S3 artifact store, with the caller's account as the expected
    /// bucket owner.
    ///
    /// # Errors
    /// STS failed; the local backend has no S3 endpoint.
    pub(crate) async fn artifacts(&self) -> Result<&ArtifactStore, SandboxError> {
        self.artifacts
            .get_or_try_init(|| async {
                let (account, _) = self.account().await?;
                let endpoint = self.s3_endpoint.clone();
                if self.local.is_some() && endpoint.is_none() {
                    return Err(SandboxError::unimplemented(
                        "templates",
                        "this local backend serves no S3 endpoint",
                        Some("docs/templates.md"),
                    ));
                }
                Ok(ArtifactStore::new(
                    &self.sdk_config,
                    endpoint.as_deref(),
                    account,
                ))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_bucket() {
        let facts = LocalFacts {
            account: "000000000000".into(),
            bucket: "secret-artifacts-bucket".into(),
        };
        let shown = format!("{facts:?}");
        assert_eq!(
            shown,
            r#"LocalFacts { account: "000000000000", bucket: "<hidden>" }"#
        );
    }
}
