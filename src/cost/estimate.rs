//! The estimate: each RUNNING sandbox's time since it started at the
//! baseline compute price of its memory. Never a bill: no snapshots, no
//! use above the baseline, and a suspended sandbox's active time is not
//! known.

use std::time::SystemTime;

use serde::Serialize;

use crate::quotas::inventory::Counted;
use crate::state::SandboxState;

/// USD per vCPU-second of a MicroVM (ARM), us-east-1.
pub const COMPUTE_PRICE_USD_PER_VCPU_SECOND: f64 = 0.000_027_694_4;
/// USD per GB-second of a MicroVM's memory (ARM), us-east-1.
pub const COMPUTE_PRICE_USD_PER_GB_SECOND: f64 = 0.000_003_666_7;
/// MiB of memory per baseline vCPU.
const BASELINE_MIB_PER_VCPU: f64 = 2048.0;
/// Where the prices come from (pinned, docs/quotas.md).
pub const PRICE_SOURCE: &str = "the reference SDK 0.17.1's price table (_limits.py): Lambda MicroVMs' us-east-1 ARM compute prices, $0.0000276944 per vCPU-second and $0.0000036667 per GB-second (a 2 GB sandbox costs about $0.1261 per hour); one vCPU per 2048 MiB";
/// What the estimate is (pinned).
pub const ESTIMATE_BASIS: &str = "estimated: the time since each RUNNING sandbox started at the baseline compute price of its memory; no snapshots, no use above the baseline, not a bill";

/// One sandbox's estimate. Only a RUNNING one with known memory has an
/// amount.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SandboxCostEstimate {
    /// The sandbox.
    pub sandbox_id: String,
    /// Its state (`RUNNING`, `SUSPENDED`...).
    pub state: String,
    /// Its image version's memory, when known.
    pub memory_mib: Option<u32>,
    /// Seconds since it started (RUNNING only).
    pub active_seconds: Option<f64>,
    /// The estimate, USD.
    pub cost_usd: Option<f64>,
}

/// The estimate of every counted sandbox and its total.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CostEstimate {
    /// One per counted sandbox (RUNNING, SUSPENDING, SUSPENDED).
    pub items: Vec<SandboxCostEstimate>,
    /// The amounts' sum, USD.
    pub total_usd: f64,
    /// The region of the prices.
    pub pricing_region: &'static str,
    /// What the estimate is.
    pub basis: &'static str,
    /// Where its prices come from.
    pub source: &'static str,
}

/// USD of a sandbox of `memory_mib` active `seconds`.
pub(crate) fn compute_usd(memory_mib: u32, seconds: f64) -> f64 {
    let mib = f64::from(memory_mib);
    seconds
        * (mib / BASELINE_MIB_PER_VCPU * COMPUTE_PRICE_USD_PER_VCPU_SECOND
            + mib / 1024.0 * COMPUTE_PRICE_USD_PER_GB_SECOND)
}

pub(crate) fn build(counted: &[Counted], now: SystemTime) -> CostEstimate {
    let items: Vec<SandboxCostEstimate> = counted
        .iter()
        .map(|s| {
            let active_seconds = match (&s.state, s.started_at) {
                (SandboxState::Running, Some(at)) => {
                    Some(now.duration_since(at).unwrap_or_default().as_secs_f64())
                }
                _ => None,
            };
            SandboxCostEstimate {
                sandbox_id: s.id.clone(),
                state: s.state.as_str().to_owned(),
                memory_mib: s.memory_mib,
                active_seconds,
                cost_usd: active_seconds
                    .zip(s.memory_mib)
                    .map(|(seconds, mib)| compute_usd(mib, seconds)),
            }
        })
        .collect();
    CostEstimate {
        total_usd: items.iter().filter_map(|i| i.cost_usd).sum(),
        items,
        pricing_region: "us-east-1",
        basis: ESTIMATE_BASIS,
        source: PRICE_SOURCE,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn two_gb_for_an_hour_is_the_documented_figure() {
        let hour = compute_usd(2048, 3600.0);
        assert!((hour - 0.1261).abs() < 0.0001, "{hour}");
    }

    #[test]
    fn only_running_sandboxes_with_memory_are_priced() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let sandbox = |id: &str, state, memory_mib| Counted {
            id: id.to_owned(),
            state,
            started_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(6_400)),
            memory_mib,
        };
        let estimate = build(
            &[
                sandbox("a", SandboxState::Running, Some(2048)),
                sandbox("b", SandboxState::Suspended, Some(2048)),
                sandbox("c", SandboxState::Running, None),
            ],
            now,
        );
        assert_eq!(estimate.items[0].active_seconds, Some(3600.0));
        assert_eq!(estimate.items[1].cost_usd, None);
        assert_eq!(estimate.items[2].cost_usd, None);
        assert_eq!(estimate.total_usd, compute_usd(2048, 3600.0));
    }
}
