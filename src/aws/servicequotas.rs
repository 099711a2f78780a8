//! Service Quotas (feature `quotas`): `ListServiceQuotas` of one service
//! code, every page, through our awsJson1.1 caller ([`super::json_rpc`]).
//! On the local backend the emulator answers it (the defaults, or the
//! values a test set).

use serde_json::{Value, json};

use super::json_rpc::{JsonClient, JsonRequest, Service};
use crate::error::SandboxError;
use crate::error::map::aws::from_aws;

/// The service's names.
const SERVICE: Service = Service {
    signing_name: "servicequotas",
    target_prefix: "ServiceQuotasV20190624",
    host: "servicequotas",
};
/// The page size asked for (Service Quotas' maximum).
const PAGE_SIZE: u32 = 100;
/// Pages read at most: a service that answers a token forever must not
/// keep the loop going (the `lambda` code lists a few dozen quotas).
const MAX_PAGES: usize = 50;

/// One applied quota, as ListServiceQuotas answers it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AppliedQuota {
    pub code: String,
    pub value: f64,
    pub adjustable: bool,
}

/// The calls, one method per operation (the shape `crate::aws::iam`'s
/// scan finds).
#[derive(Clone, Debug)]
struct Calls(JsonClient);

impl Calls {
    /// ListServiceQuotas (`servicequotas:ListServiceQuotas`).
    fn list_service_quotas(&self) -> JsonRequest<'_> {
        self.0.request("ListServiceQuotas")
    }
}

/// Service Quotas of one region.
#[derive(Clone, Debug)]
pub(crate) struct ServiceQuotasApi {
    client: Calls,
}

impl ServiceQuotasApi {
    /// The client of `region` from `config` (its endpoint override, its
    /// credentials), trusting `roots` (PEM) beside the system's roots: the
    /// backend's own trust.
    ///
    /// # Errors
    /// The HTTPS client could not be built.
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        region: &str,
        roots: &[String],
    ) -> Result<Self, SandboxError> {
        Ok(Self {
            client: Calls(JsonClient::new(config, &SERVICE, region)?.trusting(roots)?),
        })
    }

    /// Every applied quota of `service_code`, all pages.
    ///
    /// # Errors
    /// Any failure of a page, mapped (AccessDenied is `Authentication`).
    pub(crate) async fn applied(
        &self,
        service_code: &str,
    ) -> Result<Vec<AppliedQuota>, SandboxError> {
        let mut quotas = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut input = json!({ "ServiceCode": service_code, "MaxResults": PAGE_SIZE });
            if let Some(token) = &next {
                input["NextToken"] = json!(token);
            }
            let page = self
                .client
                .list_service_quotas()
                .input(input)
                .send()
                .await
                .map_err(from_aws)?;
            quotas.extend(
                page.get("Quotas")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(applied_of),
            );
            next = page
                .get("NextToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if next.is_none() {
                break;
            }
        }
        Ok(quotas)
    }
}

/// One `Quotas` member; `None` when it lacks a code or a numeric value.
fn applied_of(quota: &Value) -> Option<AppliedQuota> {
    Some(AppliedQuota {
        code: quota.get("QuotaCode")?.as_str()?.to_owned(),
        value: quota.get("Value")?.as_f64()?,
        adjustable: quota
            .get("Adjustable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_without_a_value_is_left_out() {
        let quota = json!({"QuotaCode": "L-CD1C0CC4", "Value": 1024.0, "Adjustable": true});
        assert_eq!(
            applied_of(&quota),
            Some(AppliedQuota {
                code: "L-CD1C0CC4".to_owned(),
                value: 1024.0,
                adjustable: true
            })
        );
        assert_eq!(applied_of(&json!({"QuotaCode": "L-CD1C0CC4"})), None);
    }
}
