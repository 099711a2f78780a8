//! IAM, two reads (feature `permissions`): `GetRole` (the IAM ARN of an
//! assumed role, its path included) and `SimulatePrincipalPolicy` (every
//! page, bounded), as Query calls of our own: a form POST signed by
//! [`crate::aws::signed_post`] and an XML answer read by
//! [`crate::aws::xml`]. `aws-sdk-iam` is the whole IAM API for two reads:
//! its build time is not worth them.
//!
//! IAM is global: one endpoint per partition, signed for that partition's
//! home region. An error answer keeps its code only (IAM's text names the
//! principal and the resource: never kept).

use crate::aws::signed_post::{SignedPost, form_urlencoded, transient};
use crate::aws::xml::{Element, parse};
use crate::error::map::aws::AwsFailure;

/// IAM's API version (the Query protocol's `Version`).
const API_VERSION: &str = "2010-05-08";
/// The form's content type.
const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";
/// Codes worth another attempt.
const RETRYABLE_CODES: [&str; 3] = ["Throttling", "ThrottlingException", "ServiceFailure"];
/// Results asked per page (IAM's maximum is 1000).
const PAGE_SIZE: u32 = 100;
/// Pages read at most per simulation: an answer that stays truncated
/// forever must not keep the loop going (the SDK's actions fit in two).
pub(crate) const MAX_PAGES: usize = 20;

/// IAM's endpoint and signing region of a partition (`aws` for an
/// unknown one).
pub(crate) fn partition_endpoint(partition: &str) -> (&'static str, &'static str) {
    match partition {
        "aws-cn" => ("https://iam.cn-north-1.amazonaws.com.cn/", "cn-north-1"),
        "aws-us-gov" => ("https://iam.us-gov.amazonaws.com/", "us-gov-west-1"),
        _ => ("https://iam.amazonaws.com/", "us-east-1"),
    }
}

/// One evaluation of the simulator, as it answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Evaluation {
    pub action: String,
    pub resource: String,
    /// `allowed`, `explicitDeny` or `implicitDeny`.
    pub decision: String,
    /// `OrganizationsDecisionDetail.AllowedByOrganizations`, when present.
    pub allowed_by_organizations: Option<bool>,
}

/// The calls, one method per operation (the shape `crate::aws::iam`'s
/// scan finds).
#[derive(Clone, Debug)]
struct Calls {
    post: SignedPost,
}

impl Calls {
    /// GetRole (`iam:GetRole`).
    fn get_role(&self) -> Request<'_> {
        self.request("GetRole")
    }

    /// SimulatePrincipalPolicy (`iam:SimulatePrincipalPolicy`).
    fn simulate_principal_policy(&self) -> Request<'_> {
        self.request("SimulatePrincipalPolicy")
    }

    fn request(&self, action: &'static str) -> Request<'_> {
        Request {
            calls: self,
            action,
            params: Vec::new(),
        }
    }
}

/// One call being built.
struct Request<'a> {
    calls: &'a Calls,
    action: &'static str,
    params: Vec<(String, String)>,
}

impl Request<'_> {
    fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((key.into(), value.into()));
        self
    }

    /// Sends the call (retried when throttled or lost); the answer's root.
    async fn send(self) -> Result<Element, AwsFailure> {
        let mut form = form_urlencoded(&[("Action", self.action), ("Version", API_VERSION)]);
        for (key, value) in &self.params {
            form.push('&');
            form.push_str(&form_urlencoded(&[(key, value)]));
        }
        let (calls, action) = (self.calls, self.action);
        SignedPost::with_retries(|| attempt(calls, action, &form), retryable).await
    }
}

async fn attempt(calls: &Calls, action: &'static str, form: &str) -> Result<Element, AwsFailure> {
    let answer = calls
        .post
        .post(action, &[("content-type", CONTENT_TYPE)], form)
        .await?;
    let document = std::str::from_utf8(&answer.body).ok().and_then(parse);
    if (200..300).contains(&answer.status)
        && let Some(document) = document
    {
        return Ok(document);
    }
    let mut failure = AwsFailure::new(action);
    failure.http_status = Some(answer.status);
    failure.request_id = answer.request_id.or_else(|| {
        document
            .as_ref()
            .and_then(|d| d.text_of("RequestId"))
            .map(str::to_owned)
    });
    failure.code = document
        .as_ref()
        .and_then(|d| d.find("Error"))
        .and_then(|e| e.text_of("Code"))
        .map(|c| crate::error::map::aws::sanitize_aws_code(c).to_owned());
    Err(failure)
}

fn retryable(failure: &AwsFailure) -> bool {
    transient(failure)
        || failure
            .code
            .as_deref()
            .is_some_and(|c| RETRYABLE_CODES.contains(&c))
}

/// IAM of one partition.
#[derive(Clone, Debug)]
pub(crate) struct IamSimulator {
    client: Calls,
}

impl IamSimulator {
    /// IAM at `endpoint` (a test's server, a VPC endpoint) or else the
    /// partition's own, signed with `config`'s credentials; `roots` are
    /// trusted beside the system's.
    ///
    /// # Errors
    /// The HTTPS client could not be made, or the endpoint is not a URI.
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        partition: &str,
        endpoint: Option<&str>,
        roots: &[String],
    ) -> Result<Self, crate::error::SandboxError> {
        let (own, region) = partition_endpoint(partition);
        let endpoint = match endpoint {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => own.to_owned(),
        };
        Ok(Self {
            client: Calls {
                post: SignedPost::new(config, &endpoint, region, "iam")?.trusting(roots)?,
            },
        })
    }

    /// The ARN of the role called `name` (its path included).
    ///
    /// # Errors
    /// IAM answered an error (its code) or no answer arrived; an answer
    /// without the ARN is a `MalformedAnswer` failure.
    pub(crate) async fn role_arn(&self, name: &str) -> Result<String, AwsFailure> {
        let answer = self
            .client
            .get_role()
            .param("RoleName", name)
            .send()
            .await?;
        answer
            .find("Role")
            .and_then(|r| r.text_of("Arn"))
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| malformed("GetRole"))
    }

    /// Simulates `actions` on `resources` (none: `*`) for the principal
    /// `source`, every page up to [`MAX_PAGES`]; whether the last page was
    /// read (`false`: the answer was still truncated).
    ///
    /// # Errors
    /// IAM answered an error (its code) or no answer arrived.
    pub(crate) async fn simulate(
        &self,
        source: &str,
        actions: &[&str],
        resources: &[String],
    ) -> Result<(Vec<Evaluation>, bool), AwsFailure> {
        let mut evaluations = Vec::new();
        let mut marker: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut request = self
                .client
                .simulate_principal_policy()
                .param("PolicySourceArn", source)
                .param("MaxItems", PAGE_SIZE.to_string());
            for (i, action) in actions.iter().enumerate() {
                request = request.param(format!("ActionNames.member.{}", i + 1), *action);
            }
            for (i, resource) in resources.iter().enumerate() {
                request = request.param(format!("ResourceArns.member.{}", i + 1), resource);
            }
            if let Some(marker) = &marker {
                request = request.param("Marker", marker);
            }
            let answer = request.send().await?;
            let result = answer
                .find("SimulatePrincipalPolicyResult")
                .ok_or_else(|| malformed("SimulatePrincipalPolicy"))?;
            evaluations.extend(result.members("EvaluationResults").map(evaluation));
            let truncated = result.text_of("IsTruncated") == Some("true");
            marker = result
                .text_of("Marker")
                .filter(|m| !m.is_empty())
                .map(str::to_owned);
            if !truncated || marker.is_none() {
                return Ok((evaluations, true));
            }
        }
        Ok((evaluations, false))
    }
}

fn evaluation(member: &Element) -> Evaluation {
    let text = |name: &str| member.text_of(name).unwrap_or_default().to_owned();
    Evaluation {
        action: text("EvalActionName"),
        resource: member
            .text_of("EvalResourceName")
            .filter(|r| !r.is_empty())
            .unwrap_or("*")
            .to_owned(),
        decision: text("EvalDecision"),
        allowed_by_organizations: member
            .child("OrganizationsDecisionDetail")
            .and_then(|d| d.text_of("AllowedByOrganizations"))
            .map(|v| v == "true"),
    }
}

/// A 2xx answer without what the call answers.
fn malformed(operation: &'static str) -> AwsFailure {
    let mut failure = AwsFailure::new(operation);
    failure.code = Some("MalformedAnswer".to_owned());
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_reads_its_decision_and_the_organizations_detail() {
        let doc = parse(
            "<R><EvaluationResults><member><EvalActionName>lambda:RunMicrovm</EvalActionName>\
             <EvalResourceName>*</EvalResourceName><EvalDecision>implicitDeny</EvalDecision>\
             <OrganizationsDecisionDetail><AllowedByOrganizations>false</AllowedByOrganizations>\
             </OrganizationsDecisionDetail></member><member><EvalActionName>s3:GetObject\
             </EvalActionName><EvalDecision>allowed</EvalDecision></member></EvaluationResults></R>",
        )
        .unwrap();
        let got: Vec<_> = doc.members("EvaluationResults").map(evaluation).collect();
        assert_eq!(
            got,
            [
                Evaluation {
                    action: "lambda:RunMicrovm".into(),
                    resource: "*".into(),
                    decision: "implicitDeny".into(),
                    allowed_by_organizations: Some(false),
                },
                Evaluation {
                    action: "s3:GetObject".into(),
                    resource: "*".into(),
                    decision: "allowed".into(),
                    allowed_by_organizations: None,
                }
            ]
        );
    }

    #[test]
    fn each_partition_has_its_endpoint() {
        assert_eq!(partition_endpoint("aws").1, "us-east-1");
        assert_eq!(partition_endpoint("aws-cn").1, "cn-north-1");
        assert_eq!(partition_endpoint("aws-us-gov").1, "us-gov-west-1");
    }
}
