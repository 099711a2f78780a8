//! One SigV4-signed POST to an AWS endpoint, for the quota-alerts
//! function's three calls without a generated client: Service Quotas'
//! `ListServiceQuotas` (awsJson1.1), SNS's `Publish` and CloudWatch's
//! `PutMetricData` (awsQuery, a form body). The workspace's
//! `rayito-aws-post` signs and sends them (as it does the SDK's own
//! signed calls): two generated clients would add minutes to a clean
//! build for two calls.
//!
//! The answer is bounded ([`MAX_ANSWER_BYTES`]) and each attempt ends by
//! [`ATTEMPT_TIMEOUT`]; a failure keeps the operation and the service's
//! error code only, never the request or the answer's text.

use std::time::Duration;

use bytes::Bytes;
use rayito_aws_post::PostError;

use crate::Failure;

/// The deadline of one attempt (connect, send, read the answer).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest answer read (a page of quotas is a few kilobytes).
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// A signed POST to one service of one region (the workspace's
/// `rayito-aws-post`, which the SDK's own signed calls use too).
#[derive(Clone, Debug)]
pub struct SignedPost {
    inner: rayito_aws_post::SignedPost,
}

/// An answer: its status and body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// `x-amzn-errortype` (awsJson's error code, without what follows a
    /// `:`), when sent.
    pub error_type: Option<String>,
    /// The body, at most [`MAX_ANSWER_BYTES`].
    pub body: Bytes,
}

impl SignedPost {
    /// Posts to `config`'s endpoint override (a test's server) or else
    /// `https://<host>.<region>.amazonaws.com/`, signed as `signing_name`.
    ///
    /// # Errors
    /// The platform's root certificates could not be read, or the endpoint
    /// is not a URI.
    pub fn new(
        config: &aws_types::SdkConfig,
        host: &str,
        region: &str,
        signing_name: &'static str,
    ) -> Result<Self, Failure> {
        let endpoint = match config.endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_owned() + "/",
            None => format!("https://{host}.{region}.amazonaws.com/"),
        };
        let inner = rayito_aws_post::SignedPost::new(
            config,
            &endpoint,
            region,
            signing_name,
            ATTEMPT_TIMEOUT,
            MAX_ANSWER_BYTES,
        )
        .map_err(|error| match error {
            PostError::Endpoint => Failure::other("config", "endpoint"),
            _ => Failure::other("config", "tls roots"),
        })?;
        Ok(Self { inner })
    }

    /// One POST of `body` with `headers` (the content type among them).
    ///
    /// # Errors
    /// No credentials, no answer in time, or an answer past the bound.
    pub async fn post(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, Failure> {
        let answer = self.inner.post(headers, body).await.map_err(|error| {
            let code = match error {
                PostError::Credentials => "CredentialsNotLoaded",
                PostError::Signing | PostError::Endpoint | PostError::Roots => "signing",
                PostError::Timeout => "timeout",
                PostError::Connect | PostError::Transport => "transport",
            };
            Failure::other(operation, code)
        })?;
        Ok(Answer {
            status: answer.status,
            error_type: answer
                .error_type
                .map(|v| v.split(':').next().unwrap_or_default().to_owned()),
            body: answer.body,
        })
    }
}

/// An awsQuery error answer's `<Code>`, else the status.
pub fn query_error_code(answer: &Answer) -> String {
    let text = String::from_utf8_lossy(&answer.body);
    text.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code)
        .filter(|c| {
            !c.is_empty()
                && c.len() <= 64
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
        })
        .map_or_else(|| format!("http {}", answer.status), str::to_owned)
}

/// `application/x-www-form-urlencoded` of `pairs` (RFC 3986 unreserved
/// characters kept, every other byte escaped).
pub use rayito_aws_post::form_urlencoded as form;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_escapes_everything_but_the_unreserved() {
        assert_eq!(
            form(&[("Action", "Publish"), ("Subject", "a b/ñ&=")]),
            "Action=Publish&Subject=a%20b%2F%C3%B1%26%3D"
        );
    }

    #[test]
    fn a_query_error_keeps_its_code_only() {
        let answer = Answer {
            status: 400,
            error_type: None,
            body: Bytes::from_static(
                b"<ErrorResponse><Error><Code>NotFound</Code><Message>Topic arn:aws:sns:x does not exist</Message></Error></ErrorResponse>",
            ),
        };
        assert_eq!(query_error_code(&answer), "NotFound");
        let answer = Answer {
            status: 503,
            error_type: None,
            body: Bytes::from_static(b"<Code>has space</Code>"),
        };
        assert_eq!(query_error_code(&answer), "http 503");
    }
}
