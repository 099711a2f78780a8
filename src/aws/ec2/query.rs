//! One EC2 Query call: a form-encoded POST signed and sent by
//! [`crate::aws::signed_post`] (SigV4 by `aws-sigv4`, hyper-util's client
//! with rustls and the system's roots), its XML answer parsed, an error answer turned into [`AwsFailure`] facts
//! (its code only: EC2's text is never kept).

use crate::aws::signed_post::{SignedPost, form_urlencoded, transient};
use crate::aws::xml::{Element, parse};
use crate::error::map::aws::AwsFailure;

/// The EC2 API version every call names (the Query protocol's `Version`).
const API_VERSION: &str = "2016-11-15";
/// Codes worth another attempt: EC2's throttling and its transient faults.
const RETRYABLE_CODES: [&str; 4] = [
    "RequestLimitExceeded",
    "Throttling",
    "InternalError",
    "ServiceUnavailable",
];
/// The form's content type.
const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// The signed POST of one region's EC2 endpoint.
#[derive(Clone, Debug)]
pub(crate) struct QueryClient {
    post: SignedPost,
}

impl QueryClient {
    /// The client of `region` at `endpoint` (EC2's own when `None`).
    ///
    /// # Errors
    /// The system's root certificates could not be read, or the endpoint is
    /// not a URI (mapped as a call that never started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        region: &str,
        endpoint: Option<&str>,
    ) -> Result<Self, crate::error::SandboxError> {
        let endpoint = match endpoint {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://ec2.{region}.amazonaws.com/"),
        };
        Ok(Self {
            post: SignedPost::new(config, &endpoint, region, "ec2")?,
        })
    }

    /// DescribeVpcs (`ec2:DescribeVpcs`).
    pub(crate) fn describe_vpcs(&self) -> Request<'_> {
        self.request("DescribeVpcs")
    }

    /// DescribeVpcAttribute (`ec2:DescribeVpcAttribute`).
    pub(crate) fn describe_vpc_attribute(&self) -> Request<'_> {
        self.request("DescribeVpcAttribute")
    }

    /// DescribeSubnets (`ec2:DescribeSubnets`).
    pub(crate) fn describe_subnets(&self) -> Request<'_> {
        self.request("DescribeSubnets")
    }

    /// DescribeRouteTables (`ec2:DescribeRouteTables`).
    pub(crate) fn describe_route_tables(&self) -> Request<'_> {
        self.request("DescribeRouteTables")
    }

    fn request(&self, action: &'static str) -> Request<'_> {
        Request {
            client: self,
            action,
            params: Vec::new(),
        }
    }

    /// Calls `action` with `params` (besides `Action` and `Version`); the
    /// answer's root element.
    ///
    /// # Errors
    /// EC2 answered an error (its code) or no answer arrived (the facts).
    async fn call(
        &self,
        action: &'static str,
        params: &[(String, String)],
    ) -> Result<Element, AwsFailure> {
        let mut form = form_urlencoded(&[("Action", action), ("Version", API_VERSION)]);
        for (key, value) in params {
            form.push('&');
            form.push_str(&form_urlencoded(&[(key, value)]));
        }
        SignedPost::with_retries(|| self.attempt(action, &form), retryable).await
    }

    async fn attempt(&self, action: &'static str, form: &str) -> Result<Element, AwsFailure> {
        let answer = self
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
        failure.request_id = answer.request_id;
        failure.code = document
            .as_ref()
            .and_then(|d| d.find("Error"))
            .and_then(|e| e.text_of("Code"))
            .map(|c| crate::error::map::aws::sanitize_aws_code(c).to_owned());
        Err(failure)
    }
}

/// One call being built: its action and parameters (the shape of the AWS
/// SDK's fluent builders, so that `crate::aws::iam`'s scan finds each
/// operation by name).
pub(crate) struct Request<'a> {
    client: &'a QueryClient,
    action: &'static str,
    params: Vec<(String, String)>,
}

impl Request<'_> {
    /// Adds the parameter `key=value`.
    pub(crate) fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((key.into(), value.into()));
        self
    }

    /// Sends the call; the answer's root element.
    ///
    /// # Errors
    /// EC2 answered an error (its code) or no answer arrived (the facts).
    pub(crate) async fn send(self) -> Result<Element, AwsFailure> {
        self.client.call(self.action, &self.params).await
    }
}

fn retryable(failure: &AwsFailure) -> bool {
    transient(failure)
        || failure
            .code
            .as_deref()
            .is_some_and(|c| RETRYABLE_CODES.contains(&c))
}
