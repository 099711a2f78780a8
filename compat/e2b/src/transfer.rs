//! `upload_url` / `download_url`: presigned S3 URLs the agent imports from
//! and exports to (`rayito::transfer`, the SDK's `s3` feature), where E2B
//! signs a URL of its own file API.

use crate::sandbox::Sandbox;
#[cfg(not(feature = "s3"))]
use crate::unimplemented::Missing;
use rayito::SandboxError;

#[cfg(feature = "s3")]
impl Sandbox {
    /// `upload_url(path)`: a presigned multipart POST, as E2B's, whose file
    /// the agent writes to `path`. E2B gives a bare URL; the ticket also
    /// holds the form fields to send before the file (field `file`). The bucket is the handle's
    /// staging (`SandboxOpts::staging`), else `RAYITO_TRANSFER_BUCKET`.
    ///
    /// # Errors
    /// `InvalidArgument` (`staging`) when neither names a bucket; otherwise
    /// what `rayito::Files::upload_url` returns.
    pub async fn upload_url(
        &self,
        path: &str,
    ) -> Result<rayito::transfer::UploadTicket, SandboxError> {
        let staging = staging(self)?;
        self.inner
            .files()
            .upload_url(
                path,
                rayito::transfer::UploadUrlOptions::new(staging).form(true),
            )
            .await
    }

    /// `download_url(path)`: a presigned GET of a copy of the file at
    /// `path`, staged through the same bucket as [`Sandbox::upload_url`].
    ///
    /// # Errors
    /// As [`Sandbox::upload_url`], with `rayito::Files::download_url`.
    pub async fn download_url(
        &self,
        path: &str,
    ) -> Result<rayito::transfer::DownloadLink, SandboxError> {
        let staging = staging(self)?;
        self.inner
            .files()
            .download_url(path, rayito::transfer::DownloadUrlOptions::new(staging))
            .await
    }
}

/// The staging bucket: the handle's, else the environment's.
#[cfg(feature = "s3")]
fn staging(sandbox: &Sandbox) -> Result<rayito::transfer::S3Staging, SandboxError> {
    if let Some(staging) = sandbox.inner.staging() {
        return Ok(staging.clone());
    }
    rayito::transfer::S3Staging::from_env()?.ok_or_else(|| {
        SandboxError::invalid_argument(
            "staging",
            "upload_url and download_url stage files in S3; set RAYITO_TRANSFER_BUCKET",
        )
    })
}

#[cfg(not(feature = "s3"))]
impl Sandbox {
    /// `upload_url(path)`: needs this crate's `s3` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "upload_url" }` in a build without
    /// the `s3` feature, with no call made.
    pub async fn upload_url(&self, _path: &str) -> Result<std::convert::Infallible, SandboxError> {
        Err(Missing::UploadUrl.error())
    }

    /// `download_url(path)`: needs this crate's `s3` feature.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "download_url" }` in a build
    /// without the `s3` feature, with no call made.
    pub async fn download_url(
        &self,
        _path: &str,
    ) -> Result<std::convert::Infallible, SandboxError> {
        Err(Missing::DownloadUrl.error())
    }
}
