//! The report's types and how the applied quotas and the counted
//! sandboxes' memory make one: pure, no I/O.

use serde::Serialize;

use super::catalog::{CATALOG, MEMORY_CODE, console_url};
use crate::aws::servicequotas::AppliedQuota;

/// MiB in a GB, as the memory quota counts them (GiB, named GB by AWS).
const MIB_PER_GB: f64 = 1024.0;

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum QuotaKind {
    /// Calls per second of one operation.
    Rate,
    /// The burst of one operation's calls.
    Burst,
    /// How many of a thing (images, versions, builds in flight).
    Count,
    /// GB of memory allocated in the region.
    MemoryGb,
}

/// How close the allocated memory is to its quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QuotaLevel {
    /// Below [`WARNING_FRACTION`](super::WARNING_FRACTION) of the quota.
    Ok,
    /// At or above [`WARNING_FRACTION`](super::WARNING_FRACTION).
    Warning,
    /// At or above [`CRITICAL_FRACTION`](super::CRITICAL_FRACTION).
    Critical,
}

/// What a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QuotaWarningCode {
    /// Allocated memory at the `warning` level.
    MemoryHigh,
    /// Allocated memory at the `critical` level.
    MemoryCritical,
    /// Service Quotas does not list the quota (its default is assumed).
    NotListed,
    /// The applied value is below the region's default (new accounts start
    /// with reduced quotas).
    BelowDefault,
}

/// One quota of the catalog with its applied value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QuotaEntry {
    /// Service Quotas' code (`L-CD1C0CC4`).
    pub code: String,
    /// What it limits, in words.
    pub name: String,
    /// Its kind.
    pub kind: QuotaKind,
    /// The operation a rate or a burst limits (`RunMicrovm`).
    pub operation: Option<String>,
    /// The region's default.
    pub default: f64,
    /// The applied value; `None` when Service Quotas does not list it.
    pub value: Option<f64>,
    /// Whether an increase can be requested.
    pub adjustable: bool,
    /// The console page where an increase is requested.
    pub increase_url: String,
}

impl QuotaEntry {
    /// The applied value, or the region's default when none is listed.
    pub fn effective(&self) -> f64 {
        self.value.unwrap_or(self.default)
    }
}

/// The memory allocated against the region's memory quota.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct MemoryUsage {
    /// GB allocated by the counted sandboxes (RUNNING, SUSPENDING and
    /// SUSPENDED) whose memory is known.
    pub allocated_gb: f64,
    /// The memory quota: the applied value, or the region's default when
    /// Service Quotas does not list it (a `not_listed` warning says so).
    pub quota_gb: f64,
    /// `allocated_gb / quota_gb` (0 for a quota of 0 with nothing allocated).
    pub fraction: f64,
    /// The level of `fraction`.
    pub level: QuotaLevel,
    /// The sandboxes counted.
    pub sandboxes: usize,
    /// Counted sandboxes whose image memory could not be read: the real
    /// use can be higher.
    pub unresolved: usize,
}

/// A warning, with the console page where the increase is requested.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QuotaWarning {
    /// What it is about.
    pub code: QuotaWarningCode,
    /// The quota's code.
    pub quota_code: String,
    /// The warning in words (pinned English, docs/quotas.md).
    pub message: String,
    /// Service Quotas' console page of the quota.
    pub console_url: String,
}

/// The applied quotas of a region, its memory in use and the warnings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QuotaReport {
    /// The region.
    pub region: String,
    /// Every quota of the catalog, in its order.
    pub entries: Vec<QuotaEntry>,
    /// The memory in use against the memory quota.
    pub memory: MemoryUsage,
    /// The warnings, in the entries' order.
    pub warnings: Vec<QuotaWarning>,
}

impl QuotaReport {
    /// The applied rate (calls per second) of `operation`
    /// (`TerminateMicrovm`...), or its default when Service Quotas does
    /// not list it; `None` for an operation the catalog does not have.
    pub fn applied_rate(&self, operation: &str) -> Option<f64> {
        self.entries
            .iter()
            .find(|e| e.kind == QuotaKind::Rate && e.operation.as_deref() == Some(operation))
            .map(QuotaEntry::effective)
    }
}

/// The report of `region` from the applied quotas and the memory (MiB) of
/// each counted sandbox (`None`: not resolved).
pub(crate) fn build(
    region: &str,
    applied: &[AppliedQuota],
    memory_mib: &[Option<u32>],
) -> QuotaReport {
    let entries: Vec<QuotaEntry> = CATALOG
        .iter()
        .map(|known| {
            let listed = applied.iter().find(|a| a.code == known.code);
            QuotaEntry {
                code: known.code.to_owned(),
                name: known.name.to_owned(),
                kind: known.kind,
                operation: known.operation.map(str::to_owned),
                default: known.default_in(region),
                value: listed.map(|a| a.value),
                adjustable: listed.is_some_and(|a| a.adjustable),
                increase_url: console_url(region, known.code),
            }
        })
        .collect();
    let quota_gb = entries
        .iter()
        .find(|e| e.code == MEMORY_CODE)
        .map_or(0.0, QuotaEntry::effective);
    let memory = memory_usage(memory_mib, quota_gb);
    let warnings = warnings(&entries, &memory);
    QuotaReport {
        region: region.to_owned(),
        entries,
        memory,
        warnings,
    }
}

fn memory_usage(memory_mib: &[Option<u32>], quota_gb: f64) -> MemoryUsage {
    let allocated_gb = memory_mib
        .iter()
        .flatten()
        .map(|m| f64::from(*m))
        .sum::<f64>()
        / MIB_PER_GB;
    let fraction = if quota_gb > 0.0 {
        allocated_gb / quota_gb
    } else if allocated_gb > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    MemoryUsage {
        allocated_gb,
        quota_gb,
        fraction,
        level: super::level_of(fraction),
        sandboxes: memory_mib.len(),
        unresolved: memory_mib.iter().filter(|m| m.is_none()).count(),
    }
}

/// A number as people write it: `5`, `0.5`, `1024`.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn warnings(entries: &[QuotaEntry], memory: &MemoryUsage) -> Vec<QuotaWarning> {
    let mut warnings = Vec::new();
    for entry in entries {
        let warn = |code, message| QuotaWarning {
            code,
            quota_code: entry.code.clone(),
            message,
            console_url: entry.increase_url.clone(),
        };
        if entry.kind == QuotaKind::MemoryGb && memory.level != QuotaLevel::Ok {
            let code = if memory.level == QuotaLevel::Critical {
                QuotaWarningCode::MemoryCritical
            } else {
                QuotaWarningCode::MemoryHigh
            };
            warnings.push(warn(
                code,
                format!(
                    "memory allocated at {:.0}% of the quota ({} of {} GB): request an increase before launching more sandboxes",
                    memory.fraction * 100.0,
                    number(memory.allocated_gb),
                    number(memory.quota_gb)
                ),
            ));
        }
        match entry.value {
            None => warnings.push(warn(
                QuotaWarningCode::NotListed,
                format!(
                    "{}: Service Quotas does not list it; the region's default ({}) is assumed",
                    entry.name,
                    number(entry.default)
                ),
            )),
            Some(value) if value < entry.default => warnings.push(warn(
                QuotaWarningCode::BelowDefault,
                format!(
                    "{}: {}, below the default ({}); new accounts start with reduced quotas",
                    entry.name,
                    number(value),
                    number(entry.default)
                ),
            )),
            Some(_) => {}
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_defaults(region: &str) -> Vec<AppliedQuota> {
        CATALOG
            .iter()
            .map(|k| AppliedQuota {
                code: k.code.to_owned(),
                value: k.default_in(region),
                adjustable: true,
            })
            .collect()
    }

    fn set(applied: &mut [AppliedQuota], code: &str, value: f64) {
        applied.iter_mut().find(|a| a.code == code).unwrap().value = value;
    }

    #[test]
    fn every_default_listed_and_nothing_running_warns_of_nothing() {
        let report = build("us-east-1", &all_defaults("us-east-1"), &[]);
        assert_eq!(report.entries.len(), 18);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert_eq!(report.memory.quota_gb, 1024.0);
        assert_eq!(report.memory.level, QuotaLevel::Ok);
        assert_eq!(report.applied_rate("TerminateMicrovm"), Some(10.0));
        assert_eq!(report.applied_rate("Nope"), None);
    }

    #[test]
    fn the_levels_cross_at_eighty_and_ninety_five_percent() {
        let mut applied = all_defaults("eu-west-1");
        set(&mut applied, MEMORY_CODE, 10.0);
        let level = |mib: &[Option<u32>]| build("eu-west-1", &applied, mib).memory.level;
        // 7.9 GB, 8 GB, 9.5 GB of 10.
        assert_eq!(level(&[Some(8089)]), QuotaLevel::Ok);
        assert_eq!(level(&[Some(4096), Some(4096)]), QuotaLevel::Warning);
        assert_eq!(level(&[Some(9728), None]), QuotaLevel::Critical);
        let report = build("eu-west-1", &applied, &[Some(9728), None]);
        assert_eq!(report.memory.unresolved, 1);
        assert_eq!(report.memory.sandboxes, 2);
        let memory: Vec<_> = report
            .warnings
            .iter()
            .filter(|w| w.quota_code == MEMORY_CODE)
            .collect();
        assert_eq!(memory.len(), 2, "critical and below the default (10 < 400)");
        assert_eq!(memory[0].code, QuotaWarningCode::MemoryCritical);
        assert_eq!(
            memory[0].message,
            "memory allocated at 95% of the quota (9.5 of 10 GB): request an increase before launching more sandboxes"
        );
        assert_eq!(memory[1].code, QuotaWarningCode::BelowDefault);
        assert_eq!(
            memory[1].message,
            "ARM_64 memory (GB): 10, below the default (400); new accounts start with reduced quotas"
        );
        assert_eq!(
            memory[1].console_url,
            "https://eu-west-1.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/L-CD1C0CC4"
        );
    }

    #[test]
    fn an_unlisted_quota_warns_and_its_default_is_assumed() {
        let applied: Vec<_> = all_defaults("us-west-2")
            .into_iter()
            .filter(|a| a.code != MEMORY_CODE)
            .collect();
        let report = build("us-west-2", &applied, &[Some(2048)]);
        assert_eq!(report.memory.quota_gb, 1024.0);
        assert_eq!(report.warnings.len(), 1);
        assert_eq!(report.warnings[0].code, QuotaWarningCode::NotListed);
        assert_eq!(
            report.warnings[0].message,
            "ARM_64 memory (GB): Service Quotas does not list it; the region's default (1024) is assumed"
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["warnings"][0]["code"], "not_listed");
        assert_eq!(json["entries"][14]["kind"], "memory-gb");
        assert_eq!(json["memory"]["level"], "ok");
        assert_eq!(json["entries"][14]["value"], serde_json::Value::Null);
    }
}
