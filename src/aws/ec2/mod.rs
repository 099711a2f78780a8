//! Amazon EC2, read-only (feature `efs`): the four reads of
//! `EfsVolumes::check` (DescribeVpcs, DescribeVpcAttribute, DescribeSubnets
//! filtered by `subnet-id`, DescribeRouteTables filtered by `vpc-id`), as
//! plain facts.
//!
//! Why not `aws-sdk-ec2`: it is one crate of the whole EC2 API (hundreds
//! of operations); compiling it alone took longer than the minute a clean
//! CI build can spare (docs/performance.md, "aws-sdk-ec2"), for four
//! read-only calls. These are the EC2 Query protocol itself: a signed
//! form POST ([`query`], signed by `aws-sigv4`, the AWS SDK's own signer)
//! and an XML answer ([`crate::aws::xml`], read with `xmlparser`, the AWS SDK's own XML
//! tokenizer). Both crates were already in the tree.

mod query;

use crate::aws::xml::Element;
use query::QueryClient;

use crate::error::map::aws::AwsFailure;

/// DescribeVpcs with an id that does not exist fails with this code.
const VPC_NOT_FOUND: &str = "InvalidVpcID.NotFound";
/// IPv4's default route.
const DEFAULT_ROUTE_CIDR: &str = "0.0.0.0/0";
/// The prefix of an internet gateway's id in a route's `gatewayId`.
const INTERNET_GATEWAY_PREFIX: &str = "igw-";
/// The most pages of route tables read (100 tables a page by default).
const MAX_ROUTE_TABLE_PAGES: usize = 50;

/// A VPC: its state and the two DNS attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VpcFacts {
    pub state: String,
    pub dns_support: bool,
    pub dns_hostnames: bool,
}

/// A subnet as DescribeSubnets shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SubnetFacts {
    pub subnet_id: String,
    pub vpc_id: String,
    pub availability_zone: String,
    pub available_ips: u64,
    pub state: String,
}

/// Where a default route goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DefaultRoute {
    /// A NAT gateway.
    Nat,
    /// An internet gateway.
    InternetGateway,
    /// Anything else (a transit gateway, a peering, an appliance).
    Other,
}

/// A route table of the VPC: its explicitly associated subnets, whether it
/// is the main one, and where its default route goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RouteTableFacts {
    pub subnet_ids: Vec<String>,
    pub main: bool,
    pub default_route: Option<DefaultRoute>,
}

/// The EC2 reader of one region.
#[derive(Clone, Debug)]
pub(crate) struct Ec2 {
    client: QueryClient,
}

impl Ec2 {
    /// The reader over `config`, signing for `region`; `endpoint` overrides
    /// EC2's (a moto server in the tests).
    ///
    /// # Errors
    /// The HTTPS client could not be made (no root certificates).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        region: &str,
        endpoint: Option<&str>,
    ) -> Result<Self, crate::error::SandboxError> {
        Ok(Self {
            client: QueryClient::new(config, region, endpoint)?,
        })
    }

    /// The VPC `vpc_id`, `None` when it does not exist.
    ///
    /// # Errors
    /// A call failed (its facts).
    pub(crate) async fn vpc(&self, vpc_id: &str) -> Result<Option<VpcFacts>, AwsFailure> {
        let answer = match self
            .client
            .describe_vpcs()
            .param("VpcId.1", vpc_id)
            .send()
            .await
        {
            Ok(answer) => answer,
            Err(failure) if failure.code.as_deref() == Some(VPC_NOT_FOUND) => return Ok(None),
            Err(failure) => return Err(failure),
        };
        let Some(vpc) = answer.items("vpcSet").next() else {
            return Ok(None);
        };
        let state = vpc.text_of("state").unwrap_or_default().to_owned();
        Ok(Some(VpcFacts {
            state,
            dns_support: self.attribute(vpc_id, "enableDnsSupport").await?,
            dns_hostnames: self.attribute(vpc_id, "enableDnsHostnames").await?,
        }))
    }

    async fn attribute(&self, vpc_id: &str, name: &'static str) -> Result<bool, AwsFailure> {
        let answer = self
            .client
            .describe_vpc_attribute()
            .param("VpcId", vpc_id)
            .param("Attribute", name)
            .send()
            .await?;
        Ok(answer
            .child(name)
            .and_then(|a| a.text_of("value"))
            .is_some_and(|v| v == "true"))
    }

    /// The subnets among `subnet_ids` that exist (a filter, not `SubnetId.N`:
    /// with an id that does not exist the latter fails whole, the filter
    /// lists the others and the missing one becomes a finding).
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn subnets(
        &self,
        subnet_ids: &[String],
    ) -> Result<Vec<SubnetFacts>, AwsFailure> {
        let mut request = self
            .client
            .describe_subnets()
            .param("Filter.1.Name", "subnet-id");
        for (i, id) in subnet_ids.iter().enumerate() {
            request = request.param(format!("Filter.1.Value.{}", i + 1), id.clone());
        }
        let answer = request.send().await?;
        Ok(answer.items("subnetSet").map(subnet).collect())
    }

    /// Every route table of `vpc_id` (all pages).
    ///
    /// # Errors
    /// A call failed (its facts).
    pub(crate) async fn route_tables(
        &self,
        vpc_id: &str,
    ) -> Result<Vec<RouteTableFacts>, AwsFailure> {
        let mut tables = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_ROUTE_TABLE_PAGES {
            let mut request = self
                .client
                .describe_route_tables()
                .param("Filter.1.Name", "vpc-id")
                .param("Filter.1.Value.1", vpc_id);
            if let Some(token) = token.take() {
                request = request.param("NextToken", token);
            }
            let answer = request.send().await?;
            tables.extend(answer.items("routeTableSet").map(route_table));
            match answer.text_of("nextToken") {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(tables)
    }
}

fn subnet(item: &Element) -> SubnetFacts {
    let text = |name| item.text_of(name).unwrap_or_default().to_owned();
    SubnetFacts {
        subnet_id: text("subnetId"),
        vpc_id: text("vpcId"),
        availability_zone: text("availabilityZone"),
        available_ips: item
            .text_of("availableIpAddressCount")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        state: text("state"),
    }
}

fn route_table(item: &Element) -> RouteTableFacts {
    let associations: Vec<&Element> = item.items("associationSet").collect();
    RouteTableFacts {
        subnet_ids: associations
            .iter()
            .filter_map(|a| a.text_of("subnetId"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        main: associations
            .iter()
            .any(|a| a.text_of("main") == Some("true")),
        default_route: item
            .items("routeSet")
            .find(|r| r.text_of("destinationCidrBlock") == Some(DEFAULT_ROUTE_CIDR))
            .map(|r| {
                if r.text_of("natGatewayId").is_some_and(|n| !n.is_empty()) {
                    DefaultRoute::Nat
                } else if r
                    .text_of("gatewayId")
                    .is_some_and(|g| g.starts_with(INTERNET_GATEWAY_PREFIX))
                {
                    DefaultRoute::InternetGateway
                } else {
                    DefaultRoute::Other
                }
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::{DefaultRoute, route_table, subnet};
    use crate::aws::xml::parse;

    #[test]
    fn a_route_table_answer_reads_as_facts() {
        let doc = parse(
            "<DescribeRouteTablesResponse><routeTableSet><item><routeSet>\
             <item><destinationCidrBlock>10.0.0.0/16</destinationCidrBlock><gatewayId>local</gatewayId></item>\
             <item><destinationCidrBlock>0.0.0.0/0</destinationCidrBlock><natGatewayId>nat-1</natGatewayId></item>\
             </routeSet><associationSet><item><main>false</main><subnetId>subnet-1</subnetId></item></associationSet>\
             </item></routeTableSet></DescribeRouteTablesResponse>",
        )
        .unwrap();
        let table = route_table(doc.items("routeTableSet").next().unwrap());
        assert_eq!(table.subnet_ids, ["subnet-1"]);
        assert!(!table.main);
        assert_eq!(table.default_route, Some(DefaultRoute::Nat));
    }

    #[test]
    fn a_subnet_answer_reads_as_facts() {
        let doc = parse(
            "<r><subnetSet><item><subnetId>subnet-1</subnetId><vpcId>vpc-1</vpcId>\
             <availabilityZone>us-east-1a</availabilityZone><availableIpAddressCount>251</availableIpAddressCount>\
             <state>available</state></item></subnetSet></r>",
        )
        .unwrap();
        let facts = subnet(doc.items("subnetSet").next().unwrap());
        assert_eq!(facts.available_ips, 251);
        assert_eq!(facts.availability_zone, "us-east-1a");
    }
}
