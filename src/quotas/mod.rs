//! Quotas (feature `quotas`): the applied Lambda MicroVMs quotas of a
//! region (Service Quotas' `ListServiceQuotas`, code `lambda`, every page),
//! the memory allocated against the region's memory quota (RUNNING,
//! SUSPENDING and SUSPENDED sandboxes from `ListMicrovms`, each at its
//! image version's memory, read once per version per process) and the
//! warnings near the limits, each with the console page of the increase.
//!
//! Only reads, none billed. On the local backend the emulator answers
//! `ListServiceQuotas` (the region's defaults, or the values a test set
//! with [`LocalFaults::applied_quota`](crate::LocalFaults::applied_quota))
//! and lists its own MicroVMs. docs/quotas.md is the guide.

mod catalog;
pub(crate) mod inventory;
mod report;

use serde::Serialize;

pub use catalog::{CRITICAL_FRACTION, WARNING_FRACTION};
pub use report::{
    MemoryUsage, QuotaEntry, QuotaKind, QuotaLevel, QuotaReport, QuotaWarning, QuotaWarningCode,
};

use crate::error::SandboxError;

/// The quotas of one client's region: get one from
/// [`Client::quotas`](crate::Client::quotas). Making it calls nothing.
#[derive(Clone)]
pub struct Quotas {
    client: crate::Client,
}

crate::secret::redacted_debug!(non_exhaustive Quotas);

impl crate::Client {
    /// The quotas and the memory in use of this client's region (feature
    /// `quotas`).
    pub fn quotas(&self) -> Quotas {
        Quotas {
            client: self.clone(),
        }
    }
}

impl Quotas {
    /// The applied quotas, the memory allocated against the memory quota,
    /// and the warnings. Free: `ListServiceQuotas`, `ListMicrovms` and at
    /// most one `GetMicrovmImageVersion` per image version and process.
    ///
    /// # Errors
    /// `Authentication` when a read is denied (the caller needs
    /// `servicequotas:ListServiceQuotas`, `lambda:ListMicrovms` and
    /// `lambda:GetMicrovmImageVersion`); `RateLimit` when throttled;
    /// `Unimplemented` (`quotas`) for a client without an AWS
    /// configuration (an injected control plane).
    pub async fn report(&self) -> Result<QuotaReport, SandboxError> {
        boxed!(Result<QuotaReport, SandboxError>, {
            let backend = self.client.backend();
            let (Some(config), Some(region)) = (&backend.sdk_config, &backend.region) else {
                return Err(SandboxError::unimplemented(
                    "quotas",
                    "the quota report reads Service Quotas and the MicroVMs API; this client has no AWS configuration",
                    Some("docs/quotas.md"),
                ));
            };
            // The backend's trust, as its other calls: the TLS local
            // backend's CA, or `AwsOptions::root_certificate`.
            let api = crate::aws::servicequotas::ServiceQuotasApi::new(
                config,
                region,
                &backend.root_certificates,
            )?;
            let applied = api.applied(catalog::SERVICE_CODE).await?;
            let counted = inventory::counted(&self.client).await?;
            let memory: Vec<Option<u32>> = counted.iter().map(|s| s.memory_mib).collect();
            Ok(report::build(region, &applied, &memory))
        })
    }
}

/// The level of a fraction of a quota.
fn level_of(fraction: f64) -> QuotaLevel {
    if fraction >= CRITICAL_FRACTION {
        QuotaLevel::Critical
    } else if fraction >= WARNING_FRACTION {
        QuotaLevel::Warning
    } else {
        QuotaLevel::Ok
    }
}

/// A value's serde spelling, for messages and tables.
fn spelled<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl std::fmt::Display for QuotaLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&spelled(self))
    }
}

impl std::fmt::Display for QuotaKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&spelled(self))
    }
}

impl std::fmt::Display for QuotaWarningCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&spelled(self))
    }
}
