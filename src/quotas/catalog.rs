//! The Lambda MicroVMs quotas the report lists: code, name, kind,
//! operation and default (the reference SDK 0.17.1's catalog, from the
//! service's quota page), and the thresholds of the memory levels.

use super::QuotaKind;

/// Service Quotas' code of Lambda (MicroVMs included).
pub(crate) const SERVICE_CODE: &str = "lambda";
/// The regions whose accounts start with more memory and builds.
pub(crate) const LARGE_REGIONS: [&str; 4] =
    ["us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"];
/// The memory quota's code.
pub(crate) const MEMORY_CODE: &str = "L-CD1C0CC4";
/// Allocated memory at or above this fraction of the quota: `warning`.
pub const WARNING_FRACTION: f64 = 0.8;
/// Allocated memory at or above this fraction of the quota: `critical`.
pub const CRITICAL_FRACTION: f64 = 0.95;

/// One quota of the catalog.
pub(crate) struct Known {
    pub code: &'static str,
    pub name: &'static str,
    pub kind: QuotaKind,
    pub operation: Option<&'static str>,
    /// The default everywhere but [`LARGE_REGIONS`].
    pub default: f64,
    /// The default in [`LARGE_REGIONS`], when it differs.
    pub large_region_default: Option<f64>,
}

const fn tps(
    code: &'static str,
    operation: &'static str,
    kind: QuotaKind,
    name: &'static str,
    default: f64,
) -> Known {
    Known {
        code,
        name,
        kind,
        operation: Some(operation),
        default,
        large_region_default: None,
    }
}

const fn count(
    code: &'static str,
    name: &'static str,
    default: f64,
    large: Option<f64>,
    kind: QuotaKind,
) -> Known {
    Known {
        code,
        name,
        kind,
        operation: None,
        default,
        large_region_default: large,
    }
}

/// The catalog, in the report's order: the operations' rates and bursts,
/// then the counts and the memory.
pub(crate) const CATALOG: &[Known] = &[
    tps(
        "L-535CA9B6",
        "RunMicrovm",
        QuotaKind::Rate,
        "RunMicrovm rate",
        5.0,
    ),
    tps(
        "L-91B95582",
        "RunMicrovm",
        QuotaKind::Burst,
        "RunMicrovm burst",
        5.0,
    ),
    tps(
        "L-118C44B3",
        "ResumeMicrovm",
        QuotaKind::Rate,
        "ResumeMicrovm rate",
        5.0,
    ),
    tps(
        "L-25EEC0A4",
        "ResumeMicrovm",
        QuotaKind::Burst,
        "ResumeMicrovm burst",
        5.0,
    ),
    tps(
        "L-90045317",
        "SuspendMicrovm",
        QuotaKind::Rate,
        "SuspendMicrovm rate",
        2.0,
    ),
    tps(
        "L-139F9A48",
        "SuspendMicrovm",
        QuotaKind::Burst,
        "SuspendMicrovm burst",
        2.0,
    ),
    tps(
        "L-74787B8A",
        "TerminateMicrovm",
        QuotaKind::Rate,
        "TerminateMicrovm rate",
        10.0,
    ),
    tps(
        "L-2CCA0501",
        "TerminateMicrovm",
        QuotaKind::Burst,
        "TerminateMicrovm burst",
        10.0,
    ),
    tps(
        "L-CE98C9E3",
        "GetMicrovm",
        QuotaKind::Rate,
        "GetMicrovm rate",
        100.0,
    ),
    tps(
        "L-C9C2110E",
        "GetMicrovm",
        QuotaKind::Burst,
        "GetMicrovm burst",
        100.0,
    ),
    tps(
        "L-7712260B",
        "CreateMicrovmAuthToken",
        QuotaKind::Rate,
        "CreateMicrovmAuthToken rate",
        50.0,
    ),
    tps(
        "L-D65D9F16",
        "CreateMicrovmAuthToken",
        QuotaKind::Burst,
        "CreateMicrovmAuthToken burst",
        50.0,
    ),
    tps(
        "L-B78D2ECC",
        "CreateMicrovmShellAuthToken",
        QuotaKind::Rate,
        "CreateMicrovmShellAuthToken rate",
        5.0,
    ),
    tps(
        "L-9A5E43A5",
        "CreateMicrovmShellAuthToken",
        QuotaKind::Burst,
        "CreateMicrovmShellAuthToken burst",
        5.0,
    ),
    count(
        MEMORY_CODE,
        "ARM_64 memory (GB)",
        400.0,
        Some(1024.0),
        QuotaKind::MemoryGb,
    ),
    count(
        "L-72E0D058",
        "concurrent image builds",
        5.0,
        Some(10.0),
        QuotaKind::Count,
    ),
    count("L-942E56BE", "images", 100.0, None, QuotaKind::Count),
    count(
        "L-F8BECE9C",
        "versions per image",
        50.0,
        None,
        QuotaKind::Count,
    ),
];

impl Known {
    /// The default of this quota in `region`.
    pub(crate) fn default_in(&self, region: &str) -> f64 {
        match self.large_region_default {
            Some(large) if LARGE_REGIONS.contains(&region) => large,
            _ => self.default,
        }
    }
}

/// Service Quotas' console page of `code` in `region`, where an increase
/// is requested (the `aws` partition's console).
pub(crate) fn console_url(region: &str, code: &str) -> String {
    format!(
        "https://{region}.console.aws.amazon.com/servicequotas/home/services/{SERVICE_CODE}/quotas/{code}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_builds_are_larger_in_the_four_large_regions() {
        let memory = CATALOG.iter().find(|k| k.code == MEMORY_CODE).unwrap();
        assert_eq!(memory.default_in("us-east-1"), 1024.0);
        assert_eq!(memory.default_in("ap-northeast-1"), 1024.0);
        assert_eq!(memory.default_in("eu-west-1"), 400.0);
        let builds = CATALOG.iter().find(|k| k.code == "L-72E0D058").unwrap();
        assert_eq!(builds.default_in("us-west-2"), 10.0);
        assert_eq!(builds.default_in("eu-central-1"), 5.0);
        assert_eq!(CATALOG.len(), 18);
        assert_eq!(
            console_url("eu-west-1", MEMORY_CODE),
            "https://eu-west-1.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/L-CD1C0CC4"
        );
    }
}
