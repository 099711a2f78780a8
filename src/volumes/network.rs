//! The read-only network check of `EfsVolumes` (docs/volumes.md, "The
//! network check"): which existing VPC and subnets the efs-volumes stack
//! can go into, and what to warn about first. The facts come from four EC2
//! reads (`crate::aws::ec2`); this module only judges them. Nothing here
//! creates or changes anything.

use std::collections::BTreeMap;

use crate::aws::ec2::{DefaultRoute, RouteTableFacts, SubnetFacts, VpcFacts};
use crate::error::SandboxError;
use crate::error::messages as m;

/// The fewest and most subnets: one mount target per subnet, in slots
/// `MountTarget1..3`; EFS allows one per availability zone.
pub const MAX_SUBNETS: usize = 3;
/// Free addresses each subnet needs: one for the mount target, at least
/// one for a network interface of the connector.
pub const REQUIRED_FREE_IPS: u64 = 2;
/// EC2's state of a usable VPC or subnet.
const AVAILABLE: &str = "available";

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FindingLevel {
    /// Informative.
    Ok,
    /// Worth knowing; `deploy` goes on.
    Warn,
    /// `deploy` refuses and creates nothing.
    Fail,
}

impl FindingLevel {
    /// `OK`, `WARN` or `FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        }
    }
}

/// One result of the check. `code` is one of `vpc-missing`,
/// `vpc-unavailable`, `vpc-dns-support`, `vpc-dns-hostnames`,
/// `subnet-missing`, `subnet-other-vpc`, `subnet-unavailable`,
/// `subnet-same-az`, `subnet-free-ips`, `single-az`, `internet-egress`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkFinding {
    /// How serious it is.
    pub level: FindingLevel,
    /// Its stable code.
    pub code: &'static str,
    /// What was found (names the subnet it is about; never AWS's text).
    pub message: String,
}

impl NetworkFinding {
    fn new(level: FindingLevel, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            level,
            code,
            message: message.into(),
        }
    }
}

/// What `EfsVolumes::check` returns, having created nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EfsNetworkReport {
    /// The VPC checked.
    pub vpc_id: String,
    /// The subnets checked, in the order given.
    pub subnet_ids: Vec<String>,
    /// The availability zones the mount targets would be in (each once,
    /// in the subnets' order).
    pub availability_zones: Vec<String>,
    /// Every finding, in the order checked.
    pub findings: Vec<NetworkFinding>,
    /// What `deploy` would create and what it costs (docs/volumes.md, "Cost").
    pub cost: &'static str,
}

/// What the stack creates and costs (us-east-1 prices, as the reference
/// lists them).
pub const COST: &str = "an encrypted EFS file system (elastic throughput), one mount target per subnet, two security groups, a network connector with its operator role and the RayitoEfsVolumeClient policy; $0 while empty, then about $0.30 per GB-month (Standard) and $0.016 per GB-month after 30 days (Infrequent Access), $0.03 per GB read and $0.06 per GB written; no listed charge for mount targets, access points or the connector's network interfaces";

impl EfsNetworkReport {
    /// Whether no finding is `FAIL` (`deploy` refuses otherwise).
    pub fn ok(&self) -> bool {
        self.failures().is_empty()
    }

    /// The most serious level found (`Ok` when there is no finding).
    pub fn status(&self) -> FindingLevel {
        self.findings
            .iter()
            .map(|f| f.level)
            .max()
            .unwrap_or(FindingLevel::Ok)
    }

    /// The `FAIL` findings.
    pub fn failures(&self) -> Vec<&NetworkFinding> {
        self.findings
            .iter()
            .filter(|f| f.level == FindingLevel::Fail)
            .collect()
    }
}

/// `vpc-` then 8 to 17 lower-case hex digits.
fn ec2_id_ok(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|hex| {
        (8..=17).contains(&hex.len())
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Checks the inputs before any call.
///
/// # Errors
/// `InvalidArgument` (`vpc_id` or `subnet_ids`).
pub(crate) fn check_inputs(vpc_id: &str, subnet_ids: &[String]) -> Result<(), SandboxError> {
    if !ec2_id_ok(vpc_id, "vpc-") {
        return Err(SandboxError::invalid_argument(
            "vpc_id",
            m::VOLUME_NETWORK_VPC_ID.render(&[]),
        ));
    }
    let refuse = |t: m::Template, args: &[(&str, &str)]| {
        Err(SandboxError::invalid_argument("subnet_ids", t.render(args)))
    };
    if !(1..=MAX_SUBNETS).contains(&subnet_ids.len()) {
        return refuse(
            m::VOLUME_NETWORK_SUBNET_COUNT,
            &[("count", &subnet_ids.len().to_string())],
        );
    }
    for (i, id) in subnet_ids.iter().enumerate() {
        let index = (i + 1).to_string();
        if !ec2_id_ok(id, "subnet-") {
            return refuse(m::VOLUME_NETWORK_SUBNET_ID, &[("index", &index)]);
        }
        if subnet_ids[..i].contains(id) {
            return refuse(m::VOLUME_NETWORK_SUBNET_TWICE, &[("index", &index)]);
        }
    }
    Ok(())
}

/// Judges the facts of `vpc_id` and `subnet_ids` (already checked).
pub(crate) fn assess(
    vpc_id: &str,
    subnet_ids: &[String],
    vpc: Option<&VpcFacts>,
    subnets: &[SubnetFacts],
    tables: &[RouteTableFacts],
) -> EfsNetworkReport {
    use FindingLevel::{Fail, Warn};
    let mut findings = Vec::new();
    let known: BTreeMap<&str, &SubnetFacts> =
        subnets.iter().map(|s| (s.subnet_id.as_str(), s)).collect();
    let mut zones: Vec<String> = Vec::new();
    match vpc {
        None => findings.push(NetworkFinding::new(
            Fail,
            "vpc-missing",
            "the VPC does not exist in this account and region",
        )),
        Some(vpc) => {
            if vpc.state != AVAILABLE {
                findings.push(NetworkFinding::new(
                    Fail,
                    "vpc-unavailable",
                    format!("the VPC is in state {}", token(&vpc.state)),
                ));
            }
            if !vpc.dns_support {
                findings.push(NetworkFinding::new(
                    Warn,
                    "vpc-dns-support",
                    "the VPC has no enableDnsSupport: the file system's DNS name does not resolve (mounting by the mount target's IP still works)",
                ));
            }
            if !vpc.dns_hostnames {
                findings.push(NetworkFinding::new(
                    Warn,
                    "vpc-dns-hostnames",
                    "the VPC has no enableDnsHostnames: EFS needs it to mount by DNS name",
                ));
            }
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for id in subnet_ids {
                let Some(subnet) = known.get(id.as_str()) else {
                    findings.push(NetworkFinding::new(
                        Fail,
                        "subnet-missing",
                        format!("{id}: the subnet does not exist"),
                    ));
                    continue;
                };
                if subnet.vpc_id != vpc_id {
                    findings.push(NetworkFinding::new(
                        Fail,
                        "subnet-other-vpc",
                        format!("{id}: the subnet belongs to another VPC"),
                    ));
                }
                if subnet.state != AVAILABLE {
                    findings.push(NetworkFinding::new(
                        Fail,
                        "subnet-unavailable",
                        format!("{id}: the subnet is in state {}", token(&subnet.state)),
                    ));
                }
                let zone = subnet.availability_zone.as_str();
                match seen.iter().find(|(z, _)| *z == zone) {
                    Some((_, other)) => findings.push(NetworkFinding::new(
                        Fail,
                        "subnet-same-az",
                        format!(
                            "{id} and {other} are in the same availability zone ({}): EFS allows one mount target per zone",
                            token(zone)
                        ),
                    )),
                    None => {
                        seen.push((zone, id));
                        zones.push(zone.to_owned());
                    }
                }
                if subnet.available_ips < REQUIRED_FREE_IPS {
                    findings.push(NetworkFinding::new(
                        Fail,
                        "subnet-free-ips",
                        format!(
                            "{id}: {} free addresses, at least {REQUIRED_FREE_IPS} needed (the mount target and a network interface of the connector)",
                            subnet.available_ips
                        ),
                    ));
                }
            }
            if zones.len() == 1 {
                findings.push(NetworkFinding::new(
                    Warn,
                    "single-az",
                    "one availability zone: no spare mount target, and a sandbox in another zone crosses zones (billed transfer)",
                ));
            }
            findings.push(egress(subnet_ids, tables));
        }
    }
    EfsNetworkReport {
        vpc_id: vpc_id.to_owned(),
        subnet_ids: subnet_ids.to_vec(),
        availability_zones: zones,
        findings,
        cost: COST,
    }
}

/// How a sandbox with a volume reaches the internet: never through
/// `INTERNET_EGRESS` (one egress connector per MicroVM), only through the
/// subnets' own default routes.
fn egress(subnet_ids: &[String], tables: &[RouteTableFacts]) -> NetworkFinding {
    let count = |target: DefaultRoute| {
        subnet_ids
            .iter()
            .filter(|id| route_table_of(id, tables).and_then(|t| t.default_route) == Some(target))
            .count()
    };
    NetworkFinding::new(
        FindingLevel::Ok,
        "internet-egress",
        format!(
            "a MicroVM takes one egress connector, so a sandbox with a volume cannot also use INTERNET_EGRESS; this stack's connector lets out only NFS (2049) to the mount targets. Internet for that sandbox can only leave through your VPC: {} of {} subnets route by default to a NAT gateway, {} to another gateway (transit, peering, appliance), and it needs a connector whose security group allows it (none of this stack)",
            count(DefaultRoute::Nat),
            subnet_ids.len(),
            count(DefaultRoute::Other),
        ),
    )
}

/// The table explicitly associated with the subnet, else the VPC's main one
/// (EC2's rule).
fn route_table_of<'a>(
    subnet_id: &str,
    tables: &'a [RouteTableFacts],
) -> Option<&'a RouteTableFacts> {
    tables
        .iter()
        .find(|t| t.subnet_ids.iter().any(|s| s == subnet_id))
        .or_else(|| tables.iter().find(|t| t.main))
}

/// An EC2 state or zone name as a finding shows it: a short token, nothing else.
fn token(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, vpc: &str, zone: &str, ips: u64) -> SubnetFacts {
        SubnetFacts {
            subnet_id: id.into(),
            vpc_id: vpc.into(),
            availability_zone: zone.into(),
            available_ips: ips,
            state: "available".into(),
        }
    }

    fn vpc() -> VpcFacts {
        VpcFacts {
            state: "available".into(),
            dns_support: true,
            dns_hostnames: true,
        }
    }

    fn codes(report: &EfsNetworkReport) -> Vec<(&'static str, FindingLevel)> {
        report.findings.iter().map(|f| (f.code, f.level)).collect()
    }

    #[test]
    fn every_input_refusal_is_pinned() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: [(&str, Vec<String>, &str); 5] = [
            (
                "vpc-1",
                ids(&["subnet-12345678"]),
                "invalid vpc_id: the VPC id is not 'vpc-' and 8 to 17 lower-case hex digits; pass an existing VPC's id",
            ),
            (
                "vpc-12345678",
                vec![],
                "invalid subnet_ids: 0 subnets given; pass 1 to 3 (one per availability zone: one mount target each)",
            ),
            (
                "vpc-12345678",
                ids(&["subnet-1", "subnet-2", "subnet-3", "subnet-4"]),
                "invalid subnet_ids: 4 subnets given; pass 1 to 3 (one per availability zone: one mount target each)",
            ),
            (
                "vpc-12345678",
                ids(&["subnet-12345678", "subnet-X"]),
                "invalid subnet_ids: subnet 2 is not 'subnet-' and 8 to 17 lower-case hex digits; pass an existing subnet's id",
            ),
            (
                "vpc-12345678",
                ids(&["subnet-12345678", "subnet-12345678"]),
                "invalid subnet_ids: subnet 2 is given twice; pass each subnet once",
            ),
        ];
        for (vpc, subnets, text) in cases {
            assert_eq!(check_inputs(vpc, &subnets).unwrap_err().to_string(), text);
        }
        assert!(
            check_inputs(
                "vpc-0123456789abcdef0",
                &["subnet-0123456789abcdef0".into()]
            )
            .is_ok()
        );
    }

    #[test]
    fn a_missing_vpc_is_the_only_finding() {
        let r = assess("vpc-12345678", &["subnet-12345678".into()], None, &[], &[]);
        assert_eq!(codes(&r), [("vpc-missing", FindingLevel::Fail)]);
        assert!(!r.ok());
        assert_eq!(r.status(), FindingLevel::Fail);
    }

    #[test]
    fn two_subnets_in_one_zone_and_a_full_one_fail() {
        let ids: Vec<String> = vec!["subnet-aaaaaaaa".into(), "subnet-bbbbbbbb".into()];
        let subnets = [
            subnet("subnet-aaaaaaaa", "vpc-12345678", "us-east-1a", 10),
            subnet("subnet-bbbbbbbb", "vpc-12345678", "us-east-1a", 1),
        ];
        let r = assess("vpc-12345678", &ids, Some(&vpc()), &subnets, &[]);
        assert_eq!(
            codes(&r),
            [
                ("subnet-same-az", FindingLevel::Fail),
                ("subnet-free-ips", FindingLevel::Fail),
                ("single-az", FindingLevel::Warn),
                ("internet-egress", FindingLevel::Ok),
            ]
        );
        assert_eq!(
            r.findings[0].message,
            "subnet-bbbbbbbb and subnet-aaaaaaaa are in the same availability zone (us-east-1a): EFS allows one mount target per zone"
        );
        assert_eq!(r.availability_zones, ["us-east-1a"]);
    }

    #[test]
    fn the_egress_finding_counts_default_routes_by_table() {
        let ids: Vec<String> = vec!["subnet-aaaaaaaa".into(), "subnet-bbbbbbbb".into()];
        let subnets = [
            subnet("subnet-aaaaaaaa", "vpc-12345678", "us-east-1a", 10),
            subnet("subnet-bbbbbbbb", "vpc-12345678", "us-east-1b", 10),
        ];
        let tables = [
            RouteTableFacts {
                subnet_ids: vec!["subnet-aaaaaaaa".into()],
                main: false,
                default_route: Some(DefaultRoute::Nat),
            },
            RouteTableFacts {
                subnet_ids: vec![],
                main: true,
                default_route: Some(DefaultRoute::Other),
            },
        ];
        let r = assess("vpc-12345678", &ids, Some(&vpc()), &subnets, &tables);
        assert!(r.ok());
        assert_eq!(r.status(), FindingLevel::Ok);
        assert!(
            r.findings[0]
                .message
                .contains("1 of 2 subnets route by default to a NAT gateway, 1 to another gateway")
        );
    }
}
