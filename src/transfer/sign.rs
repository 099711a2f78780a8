//! Signing the URLs of a transfer with the caller's credentials, through
//! the S3 presigner of the AWS edge ([`crate::aws::s3::presign`]). On the
//! local backend the URLs name the emulator's S3 endpoint (path style) and
//! carry the emulator's key.

use std::collections::BTreeMap;
use std::time::Duration;

use super::staging::S3Staging;
use crate::aws::s3::objects::Objects;
pub(crate) use crate::aws::s3::presign::Request;
use crate::aws::s3::presign::{PresignError, Presigner};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;

/// The S3 side of one sandbox's transfers.
#[derive(Clone)]
pub(crate) struct Signer {
    presigner: Presigner,
    pub(crate) bucket: String,
    pub(crate) region: String,
}

fn not_configured(feature: &str) -> SandboxError {
    SandboxError::unimplemented(
        feature,
        "S3-staged transfers need an AWS configuration (or the local backend)",
        Some("docs/transfers.md"),
    )
}

/// A presign failure: the SDK's text is never kept (it may hold the key).
fn presign_failed(feature: &str) -> SandboxError {
    SandboxError::internal(feature, "a URL could not be presigned")
}

/// The error of a presign failure for `feature`.
fn presign_error(feature: &str, err: PresignError) -> SandboxError {
    match err {
        PresignError::NoCredentials => not_configured(feature),
        PresignError::CredentialsFailed => {
            SandboxError::internal(feature, "the AWS credentials could not be loaded")
        }
        PresignError::Failed => presign_failed(feature),
    }
}

impl Signer {
    /// The signer of `sandbox`'s transfers into `staging`.
    pub(crate) fn new(
        sandbox: &Sandbox,
        staging: &S3Staging,
        feature: &str,
    ) -> Result<Self, SandboxError> {
        let backend = sandbox.client().backend();
        let config = backend
            .sdk_config
            .clone()
            .ok_or_else(|| not_configured(feature))?;
        let region = staging
            .region
            .clone()
            .or_else(|| backend.region.clone())
            .ok_or_else(|| not_configured(feature))?;
        // An endpoint override (the local backend's S3, or the options')
        // is path style; the agent accepts it only where it was told to.
        let endpoint = backend.s3_endpoint_url.clone();
        Ok(Self {
            presigner: Presigner::new(config, region.clone(), endpoint, staging.bucket.clone()),
            bucket: staging.bucket.clone(),
            region,
        })
    }

    /// The S3 client (the SDK's own uploads and downloads).
    pub(crate) fn client(&self) -> &Objects {
        self.presigner.objects()
    }

    /// The object the agent is told about.
    pub(crate) fn object(&self, key: &str) -> pb::S3Object {
        pb::S3Object {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            region: self.region.clone(),
        }
    }

    /// The presigned `request` of `key`, valid for `lifetime`.
    pub(crate) async fn sign(
        &self,
        key: &str,
        request: Request<'_>,
        lifetime: Duration,
        feature: &str,
    ) -> Result<pb::PresignedRequest, SandboxError> {
        self.presigner
            .presign(key, request, lifetime)
            .await
            .map(|presigned| pb::PresignedRequest {
                url: presigned.url,
                headers: presigned.headers.into_iter().collect(),
            })
            .map_err(|e| presign_error(feature, e))
    }

    /// The POST form for `key` ([`Presigner::post`]).
    pub(crate) async fn post(
        &self,
        key: &str,
        lifetime: Duration,
        max_bytes: u64,
        feature: &str,
    ) -> Result<(String, BTreeMap<String, String>), SandboxError> {
        self.presigner
            .post(key, lifetime, max_bytes)
            .await
            .map_err(|e| presign_error(feature, e))
    }
}
