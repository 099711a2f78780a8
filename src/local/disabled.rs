//! The local backend in a build without the `local` feature: every way to
//! choose it (`RAYITO_BACKEND=local`) ends in `Unimplemented` naming the
//! feature, before any I/O. `SandboxBuilder::local()` does not exist here.

use crate::error::SandboxError;

/// The image the local backend would use; unused without the backend.
pub(crate) const DEFAULT_IMAGE: &str = "rayito-base";

/// No value of this type exists: the local backend is not in this build.
#[derive(Debug, Clone)]
pub(crate) enum LocalBackend {}

impl LocalBackend {
    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn endpoint_url(&self) -> &str {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn region(&self) -> &str {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn ca_pem(&self) -> Option<&str> {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn image_arn(&self, _name: &str) -> String {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    #[allow(dead_code)] // the template build's, on the local backend
    pub(crate) fn account_id(&self) -> &str {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    #[allow(dead_code)] // the template build's, on the local backend
    pub(crate) fn s3_endpoint_url(&self) -> Option<&str> {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    #[allow(dead_code)] // the template build's, on the local backend
    pub(crate) fn artifact_bucket(&self) -> String {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn access_key_id(&self) -> &str {
        match *self {}
    }

    /// Unreachable: there is no `LocalBackend` to call it on.
    pub(crate) fn secret_access_key(&self) -> &crate::secret::Secret {
        match *self {}
    }
}

/// The reason `backend()` gives, pinned by a test.
pub(crate) const NOT_BUILT: &str = "this build of rayito has no local backend; enable the `local` cargo feature of rayito (on by default) or use RAYITO_BACKEND=aws";

/// # Errors
/// Always `Unimplemented { feature: "local_backend" }`.
pub(crate) async fn backend(_tls: bool) -> Result<LocalBackend, SandboxError> {
    Err(SandboxError::unimplemented(
        "local_backend",
        NOT_BUILT,
        Some("docs/local.md"),
    ))
}

#[cfg(test)]
mod tests {
    use crate::error::SandboxError;

    #[tokio::test]
    async fn choosing_the_local_backend_names_the_missing_feature() {
        let err = super::backend(false)
            .await
            .expect_err("no local backend in this build");
        assert!(matches!(
            &err,
            SandboxError::Unimplemented { feature, .. } if &**feature == "local_backend"
        ));
        assert_eq!(
            err.to_string(),
            "feature local_backend is not available: this build of rayito has no local backend; \
             enable the `local` cargo feature of rayito (on by default) or use RAYITO_BACKEND=aws; \
             see docs/local.md"
        );
    }
}
