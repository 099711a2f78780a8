//! How the store and the cache reach Secrets Manager: a region or a whole
//! `SdkConfig`, and an endpoint override (a moto server in the tests). The
//! client is made on first use; nothing here calls AWS before that.

pub(crate) use crate::aws::secretsmanager::Connected;
use crate::error::SandboxError;

/// Where Secrets Manager is: every field optional (the environment's chain
/// fills the rest).
#[derive(Clone, Default)]
pub(crate) struct Access {
    pub region: Option<String>,
    pub sdk_config: Option<aws_types::SdkConfig>,
    pub endpoint_url: Option<String>,
}

crate::secret::redacted_debug! {
    Access |o| region, sdk_config = o.sdk_config.is_some(), endpoint_url = o.endpoint_url.is_some()
}

/// The setters both option types share: `new`, where Secrets Manager is
/// (`region`, `sdk_config`, `endpoint_url`, all into `self.access`) and the
/// name `prefix` (documented by the caller).
macro_rules! access_setters {
    ($(#[$prefix_doc:meta])*) => {
        /// The defaults.
        pub fn new() -> Self {
            Self::default()
        }

        /// The region (for example `us-east-1`), instead of the environment's.
        #[must_use]
        pub fn region(mut self, region: impl Into<String>) -> Self {
            self.access.region = Some(region.into());
            self
        }

        /// A loaded AWS configuration (credentials, region, endpoint,
        /// timeouts) to build the Secrets Manager client from.
        #[must_use]
        pub fn sdk_config(mut self, config: aws_types::SdkConfig) -> Self {
            self.access.sdk_config = Some(config);
            self
        }

        /// Another endpoint for Secrets Manager (for example a moto server).
        #[must_use]
        pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
            self.access.endpoint_url = Some(url.into());
            self
        }

        $(#[$prefix_doc])*
        #[must_use]
        pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
            self.prefix = prefix.into();
            self
        }
    };
}
pub(crate) use access_setters;

/// A handle's `new`, which checks the options and calls nothing, and (for
/// the crate's mock tests) `with_client` over an already built client; both
/// build through the type's own `unchecked(options, client_cell)`. The
/// caller passes the options' type and `new`'s doc comment.
macro_rules! checked_new {
    ($options:ty; $(#[$doc:meta])*) => {
        $(#[$doc])*
        pub fn new(options: $options) -> Result<Self, $crate::error::SandboxError> {
            options.check()?;
            Ok(Self::unchecked(options, ::tokio::sync::OnceCell::new()))
        }

        /// The same over an already built client (the crate's mock tests).
        #[cfg(test)]
        pub(crate) fn with_client(
            options: $options,
            client: $crate::aws::secretsmanager::SecretsManager,
        ) -> Result<Self, $crate::error::SandboxError> {
            options.check()?;
            let connected = $crate::secrets::client::Connected::anonymous(client);
            Ok(Self::unchecked(
                options,
                ::tokio::sync::OnceCell::new_with(Some(connected)),
            ))
        }
    };
}
pub(crate) use checked_new;

impl Access {
    /// Checks what needs no I/O: the region's and the endpoint's shapes.
    ///
    /// # Errors
    /// `InvalidArgument` (`region`, `endpoint_url`).
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        if let Some(region) = &self.region {
            crate::checks::region(region)?;
        }
        if let Some(url) = &self.endpoint_url {
            crate::checks::endpoint_url(url)?;
        }
        Ok(())
    }

    /// Makes the client: from the given `SdkConfig` (region and endpoint
    /// overrides applied), else from the environment's chain (which checks
    /// that a region and credentials exist).
    ///
    /// # Errors
    /// `InvalidArgument` for a bad region or endpoint; `Authentication`
    /// when the chain finds no region or no credentials.
    pub(crate) async fn client(&self) -> Result<Connected, SandboxError> {
        self.check()?;
        crate::aws::secretsmanager::connect(
            self.region.as_deref(),
            self.sdk_config.as_ref(),
            self.endpoint_url.as_deref(),
        )
        .await
    }
}
