//! The `secret_gateway` section of Configure: built from the gateways with
//! each header's value read through the secret cache just before the call
//! (the values live only in that request, which is never logged), and the
//! routes' statuses read back from ConfigureStatus (ports travel only
//! there).

use std::collections::BTreeMap;

use futures_util::future::try_join_all;

use super::spec::SecretGateway;
use super::view::GatewayStatus;
use crate::error::SandboxError;
use crate::pb;
use crate::secrets::SecretCache;

/// The request carrying only the `secret_gateway` section for `gateways`,
/// every header read through `cache` (concurrently; one failure fails the
/// whole, and nothing is sent).
///
/// # Errors
/// The cache's (`SecretNotFound`, `Secret`, `InvalidArgument`, ...).
pub(crate) async fn request(
    gateways: &[(String, SecretGateway)],
    cache: &SecretCache,
) -> Result<pb::ConfigureRequest, SandboxError> {
    let routes = try_join_all(
        gateways
            .iter()
            .map(|(name, gateway)| route(name, gateway, cache)),
    )
    .await?;
    Ok(pb::ConfigureRequest {
        secret_gateway: Some(pb::SecretGatewayConfig { routes }),
        ..Default::default()
    })
}

async fn route(
    name: &str,
    gateway: &SecretGateway,
    cache: &SecretCache,
) -> Result<pb::SecretGatewayRoute, SandboxError> {
    let values = try_join_all(gateway.headers().iter().map(|(header, secret)| async move {
        let value = cache.get(secret).await?;
        Ok::<_, SandboxError>((header.clone(), value.expose().to_owned()))
    }))
    .await?;
    Ok(pb::SecretGatewayRoute {
        name: name.to_owned(),
        upstream: gateway.upstream().to_owned(),
        headers: values.into_iter().collect(),
        allow: gateway
            .rules()
            .into_iter()
            .map(|(method, path)| pb::SecretGatewayAllowRule {
                method: method.to_owned(),
                path: path.to_owned(),
            })
            .collect(),
        // As given, 0 included (the agent's default).
        rate_per_minute: gateway.rate(),
    })
}

/// Reads every header's secret once through `cache` (values kept there):
/// a missing or unreadable secret fails before anything is launched.
///
/// # Errors
/// As [`request`].
pub(crate) async fn preflight(
    gateways: &[(String, SecretGateway)],
    cache: &SecretCache,
) -> Result<(), SandboxError> {
    request(gateways, cache).await.map(drop)
}

/// Drops every header's secret from `cache`, so that the next read asks
/// Secrets Manager again (a rotated secret is sent at once).
pub(crate) fn forget(gateways: &[(String, SecretGateway)], cache: &SecretCache) {
    for (_, gateway) in gateways {
        for (_, secret) in gateway.headers() {
            // Checked names only reach here; a refusal has nothing to drop.
            let _ = cache.invalidate(secret.name());
        }
    }
}

/// The routes of a ConfigureStatus answer, by name (none: empty).
pub(crate) fn statuses(status: &pb::ConfigureStatusResponse) -> BTreeMap<String, GatewayStatus> {
    status
        .secret_gateway
        .as_ref()
        .map(|s| {
            s.routes
                .iter()
                .map(|r| (r.name.clone(), GatewayStatus::from_route(r)))
                .collect()
        })
        .unwrap_or_default()
}
