//! `Pool::take_with_gateways`: a pool's warm sandboxes never carry
//! gateways (the pool's builder refuses them), so a take applies them to
//! the sandbox it gives, after checking them before any slot is claimed.

use super::spec::SecretGateway;
use crate::error::SandboxError;
use crate::{Pool, Sandbox};

/// Taking a sandbox with gateways.
impl Pool {
    /// [`Pool::take`], then the secret gateways `gateways` applied to the
    /// sandbox taken (as [`crate::SandboxBuilder::gateway`] does on
    /// `create`). The gateways are checked before a slot is claimed, and
    /// every header's secret is read then too, so a bad gateway or a
    /// missing secret never uses up a parked sandbox. A failure to apply
    /// them terminates the sandbox taken (a pool's sandboxes are never kept
    /// on failure). Names given twice: the last wins.
    ///
    /// Only with the `secrets` cargo feature.
    ///
    /// # Errors
    /// `InvalidArgument` (`gateways`, `upstream`, `headers`, `allow`,
    /// `rate_per_minute`) before any call; the secret reads' errors; as
    /// [`Pool::take`]; as the gateways of `create` (`Unimplemented`,
    /// `Sandbox` `secret_gateway: <class>`).
    pub async fn take_with_gateways<N: Into<String>>(
        &self,
        gateways: impl IntoIterator<Item = (N, SecretGateway)>,
    ) -> Result<Sandbox, SandboxError> {
        let mut list = Vec::new();
        for (name, gateway) in gateways {
            crate::sandbox::named::put(&mut list, name.into(), gateway);
        }
        boxed!(Result<Sandbox, SandboxError>, {
            let builder = self.builder();
            super::steps::check_for_take(builder, &list)?;
            if !list.is_empty() {
                let client = builder.base_client().await?;
                let cache = match crate::secrets::inject::builder_cache(builder) {
                    Some(cache) => cache,
                    None => crate::secrets::inject::default_cache(&client)?,
                };
                super::section::preflight(&list, &cache).await?;
            }
            let sandbox = self.take().await?;
            if list.is_empty() {
                return Ok(sandbox);
            }
            super::steps::apply_on_take(sandbox, list).await
        })
    }
}
