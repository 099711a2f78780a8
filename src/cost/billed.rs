//! Cost Explorer's answer folded into the bill of MicroVMs: one line per
//! MicroVM usage type, summed over the periods; Lambda's other usage
//! types (functions) are left out.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use crate::aws::costexplorer::CostAnswer;

/// One usage type of the bill.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BilledLine {
    /// Cost Explorer's usage type (`USE1-Lambda-MicroVM-vCPU-Second-ARM`).
    pub usage_type: String,
    /// What it bills: `memory`, `vcpu`, `snapshot-read`, `snapshot-write`,
    /// `snapshot-storage` or `other`.
    pub component: String,
    /// The usage, in `unit`.
    pub quantity: f64,
    /// Cost Explorer's unit of the usage.
    pub unit: String,
    /// The unblended cost, USD.
    pub cost_usd: f64,
}

/// Cost Explorer's bill of Lambda MicroVMs in a window. Always billed:
/// never an estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BilledCost {
    /// First day, included.
    pub start: String,
    /// Last day, excluded.
    pub end: String,
    /// The AWS region filtered on (`None`: the whole account).
    pub region: Option<String>,
    /// One line per usage type, sorted by it.
    pub lines: Vec<BilledLine>,
    /// The lines' sum, USD.
    pub total_usd: f64,
    /// Some period is still estimated by AWS (Cost Explorer lags about a
    /// day): the figures can still change.
    pub partial: bool,
    /// The paid requests the answer cost ($0.01 each).
    pub requests: u32,
    /// When it was read from Cost Explorer (RFC 3339; a cached answer
    /// keeps its time).
    pub fetched_at: String,
}

/// The component a usage type bills, or `None` for a usage type that is
/// not of MicroVMs: `^(?:[A-Z0-9]+-)?Lambda-MicroVM-<suffix>$`.
pub(crate) fn component(usage_type: &str) -> Option<&'static str> {
    const MARK: &str = "Lambda-MicroVM-";
    let at = usage_type.find(MARK)?;
    let prefix = &usage_type[..at];
    let prefix_ok = prefix.is_empty()
        || prefix.strip_suffix('-').is_some_and(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        });
    if !prefix_ok {
        return None;
    }
    Some(match &usage_type[at + MARK.len()..] {
        "" => return None,
        "Memory-GB-Second-ARM" => "memory",
        "vCPU-Second-ARM" => "vcpu",
        "Snapshot-Read-GB" => "snapshot-read",
        "Snapshot-Write-GB" => "snapshot-write",
        "Snapshot-Storage-GB-Hour" => "snapshot-storage",
        _ => "other",
    })
}

/// The bill of `answer`'s periods.
pub(crate) fn fold(
    answer: &CostAnswer,
    start: String,
    end: String,
    region: Option<String>,
) -> BilledCost {
    let mut lines: BTreeMap<&str, BilledLine> = BTreeMap::new();
    for group in answer.periods.iter().flat_map(|p| &p.groups) {
        let Some(component) = component(&group.usage_type) else {
            continue;
        };
        let line = lines
            .entry(&group.usage_type)
            .or_insert_with(|| BilledLine {
                usage_type: group.usage_type.clone(),
                component: component.to_owned(),
                quantity: 0.0,
                unit: group.unit.clone(),
                cost_usd: 0.0,
            });
        line.quantity += group.quantity;
        line.cost_usd += group.cost_usd;
    }
    let lines: Vec<BilledLine> = lines.into_values().collect();
    BilledCost {
        start,
        end,
        region,
        total_usd: lines.iter().map(|l| l.cost_usd).sum(),
        lines,
        partial: answer.periods.iter().any(|p| p.estimated),
        requests: answer.requests,
        fetched_at: crate::aws::time::rfc3339(SystemTime::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::costexplorer::{CostGroup, CostPeriod};

    #[test]
    fn usage_types_name_their_component() {
        assert_eq!(component("Lambda-MicroVM-vCPU-Second-ARM"), Some("vcpu"));
        assert_eq!(
            component("EUW1-Lambda-MicroVM-Memory-GB-Second-ARM"),
            Some("memory")
        );
        assert_eq!(
            component("USE1-Lambda-MicroVM-Snapshot-Storage-GB-Hour"),
            Some("snapshot-storage")
        );
        assert_eq!(
            component("USE1-Lambda-MicroVM-Something-New"),
            Some("other")
        );
        assert_eq!(component("USE1-Lambda-GB-Second"), None);
        assert_eq!(component("use1-Lambda-MicroVM-vCPU-Second-ARM"), None);
        assert_eq!(component("-Lambda-MicroVM-vCPU-Second-ARM"), None);
    }

    #[test]
    fn periods_sum_by_usage_type_and_functions_are_left_out() {
        let group = |usage_type: &str, cost_usd, quantity| CostGroup {
            usage_type: usage_type.to_owned(),
            cost_usd,
            quantity,
            unit: "Seconds".to_owned(),
        };
        let answer = CostAnswer {
            periods: vec![
                CostPeriod {
                    estimated: false,
                    groups: vec![
                        group("USE1-Lambda-MicroVM-vCPU-Second-ARM", 1.0, 10.0),
                        group("USE1-Lambda-GB-Second", 7.0, 1.0),
                    ],
                },
                CostPeriod {
                    estimated: true,
                    groups: vec![group("USE1-Lambda-MicroVM-vCPU-Second-ARM", 0.5, 5.0)],
                },
            ],
            requests: 2,
        };
        let bill = fold(&answer, "2026-11-01".into(), "2026-12-01".into(), None);
        assert_eq!(bill.lines.len(), 1);
        assert_eq!(bill.lines[0].quantity, 15.0);
        assert_eq!(bill.total_usd, 1.5);
        assert!(bill.partial);
        assert_eq!(bill.requests, 2);
    }
}
