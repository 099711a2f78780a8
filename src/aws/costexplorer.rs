//! Cost Explorer (feature `cost`): `GetCostAndUsage` of the AWS Lambda
//! service grouped by usage type, every page, through our awsJson1.1
//! caller ([`super::json_rpc`]). Cost Explorer lives in us-east-1 and
//! bills $0.01 per request (page).

use serde_json::{Value, json};

use super::json_rpc::{JsonClient, JsonRequest, Service};
use crate::error::SandboxError;
use crate::error::map::aws::from_aws;

/// The service's names.
const SERVICE: Service = Service {
    signing_name: "ce",
    target_prefix: "AWSInsightsIndexService",
    host: "ce",
};
/// Cost Explorer's one region.
pub(crate) const REGION: &str = "us-east-1";
/// The `SERVICE` dimension's value of Lambda (MicroVMs included).
const LAMBDA_SERVICE: &str = "AWS Lambda";
/// Pages read at most (each billed): DAILY over a long window pages.
const MAX_PAGES: usize = 20;

/// One usage-type group of one period.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CostGroup {
    pub usage_type: String,
    pub cost_usd: f64,
    pub quantity: f64,
    pub unit: String,
}

/// One `ResultsByTime` member; `estimated` is AWS's flag (the period can
/// still change).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CostPeriod {
    pub estimated: bool,
    pub groups: Vec<CostGroup>,
}

/// The periods of one query and the requests (pages) it cost.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CostAnswer {
    pub periods: Vec<CostPeriod>,
    pub requests: u32,
}

/// The calls, one method per operation (the shape `crate::aws::iam`'s
/// scan finds).
#[derive(Clone, Debug)]
struct Calls(JsonClient);

impl Calls {
    /// GetCostAndUsage (`ce:GetCostAndUsage`).
    fn get_cost_and_usage(&self) -> JsonRequest<'_> {
        self.0.request("GetCostAndUsage")
    }
}

/// Cost Explorer.
#[derive(Clone, Debug)]
pub(crate) struct CostExplorerApi {
    client: Calls,
}

impl CostExplorerApi {
    /// The client from `config` (its endpoint override, its credentials),
    /// always in us-east-1, trusting `roots` (PEM) beside the system's
    /// roots: the backend's own trust, as Service Quotas' client.
    ///
    /// # Errors
    /// The HTTPS client could not be built.
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        roots: &[String],
    ) -> Result<Self, SandboxError> {
        Ok(Self {
            client: Calls(JsonClient::new(config, &SERVICE, REGION)?.trusting(roots)?),
        })
    }

    /// Lambda's cost and usage from `start` (included) to `end` (excluded),
    /// both `YYYY-MM-DD`, by usage type; `granularity` `DAILY` or
    /// `MONTHLY`; `region` filters by AWS region.
    ///
    /// # Errors
    /// Any failure of a page, mapped.
    pub(crate) async fn lambda_cost(
        &self,
        start: &str,
        end: &str,
        granularity: &str,
        region: Option<&str>,
    ) -> Result<CostAnswer, SandboxError> {
        let service = json!({"Dimensions": {"Key": "SERVICE", "Values": [LAMBDA_SERVICE]}});
        let filter = match region {
            None => service,
            Some(region) => json!({"And": [
                service,
                {"Dimensions": {"Key": "REGION", "Values": [region]}},
            ]}),
        };
        let mut answer = CostAnswer {
            periods: Vec::new(),
            requests: 0,
        };
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut input = json!({
                "TimePeriod": {"Start": start, "End": end},
                "Granularity": granularity,
                "Metrics": ["UnblendedCost", "UsageQuantity"],
                "Filter": filter,
                "GroupBy": [{"Type": "DIMENSION", "Key": "USAGE_TYPE"}],
            });
            if let Some(token) = &next {
                input["NextPageToken"] = json!(token);
            }
            let page = self
                .client
                .get_cost_and_usage()
                .input(input)
                .send()
                .await
                .map_err(from_aws)?;
            answer.requests += 1;
            answer.periods.extend(
                page.get("ResultsByTime")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(period_of),
            );
            next = page
                .get("NextPageToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if next.is_none() {
                break;
            }
        }
        Ok(answer)
    }
}

fn period_of(result: &Value) -> CostPeriod {
    let groups = result
        .get("Groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|group| {
            let usage_type = group.get("Keys")?.as_array()?.first()?.as_str()?.to_owned();
            let metric = |name: &str| group.get("Metrics").and_then(|m| m.get(name));
            let amount = |name: &str| {
                metric(name)
                    .and_then(|m| m.get("Amount"))
                    .and_then(Value::as_str)
                    .and_then(|a| a.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            Some(CostGroup {
                usage_type,
                cost_usd: amount("UnblendedCost"),
                quantity: amount("UsageQuantity"),
                unit: metric("UsageQuantity")
                    .and_then(|m| m.get("Unit"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
        })
        .collect();
    CostPeriod {
        estimated: result
            .get("Estimated")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded `ResultsByTime` member (the shape of AWS's answer, values
    /// made up).
    #[test]
    fn a_period_reads_each_group_amounts() {
        let result = json!({
            "TimePeriod": {"Start": "2026-12-01", "End": "2026-12-07"},
            "Total": {},
            "Groups": [
                {"Keys": ["USE1-Lambda-MicroVM-Memory-GB-Second-ARM"],
                 "Metrics": {"UnblendedCost": {"Amount": "1.25", "Unit": "USD"},
                             "UsageQuantity": {"Amount": "340000", "Unit": "GB-Seconds"}}},
                {"Keys": [], "Metrics": {}}
            ],
            "Estimated": true
        });
        let period = period_of(&result);
        assert!(period.estimated);
        assert_eq!(
            period.groups,
            [CostGroup {
                usage_type: "USE1-Lambda-MicroVM-Memory-GB-Second-ARM".to_owned(),
                cost_usd: 1.25,
                quantity: 340_000.0,
                unit: "GB-Seconds".to_owned(),
            }]
        );
    }
}
