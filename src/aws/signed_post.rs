//! One signed POST to an AWS endpoint, for the calls we make without a
//! generated client (EC2's Query reads of feature `efs`, IAM's of feature
//! `permissions`, the awsJson reads of Service Quotas and Cost Explorer):
//! the workspace's `rayito-aws-post` (SigV4 by `aws-sigv4`, the AWS SDK's
//! own signer, over hyper-util's client; the stacks' Lambda functions use
//! the same crate) with the SDK's deadline, answer bound, retries and
//! failure mapping. The answer's status, request id, error type and body
//! come back as they are: each protocol reads its own.

use std::time::Duration;

use rayito_aws_post::PostError;

use crate::error::map::aws::{AwsFailure, NoResponse};
use crate::quiet::Quiet as _;

pub(crate) use rayito_aws_post::Answer;

/// The deadline of one attempt (connect, send, read the answer).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read (a page of route tables, quotas or cost groups
/// is a few kilobytes).
const MAX_ANSWER_BYTES: usize = 8 << 20;
/// Attempts of one call: a throttled or failed-in-transit call is tried
/// again after 0.5 s, then 1 s (every call made this way only reads).
const ATTEMPTS: u32 = 3;

/// The shared signed POST (crate `rayito-aws-post`) with the SDK's
/// deadline, bound and failure mapping.
#[derive(Clone, Debug)]
pub(crate) struct SignedPost {
    inner: rayito_aws_post::SignedPost,
}

impl SignedPost {
    /// Posts to `endpoint` (ends with `/`), signed as `signing_name` in
    /// `region` with `config`'s credentials.
    ///
    /// # Errors
    /// The system's root certificates could not be read, or the endpoint is
    /// not a URI (mapped as a call of `signing_name` that never started).
    pub(crate) fn new(
        config: &aws_types::SdkConfig,
        endpoint: &str,
        region: &str,
        signing_name: &'static str,
    ) -> Result<Self, crate::error::SandboxError> {
        let inner = rayito_aws_post::SignedPost::new(
            config,
            endpoint,
            region,
            signing_name,
            ATTEMPT_TIMEOUT,
            MAX_ANSWER_BYTES,
        )
        .map_err(|_| not_started(signing_name))?;
        Ok(Self { inner })
    }

    /// The same POST trusting `roots` (PEM certificates) beside the
    /// system's: the backend's own trust (the TLS local backend's CA,
    /// `AwsOptions::root_certificate`), as every other call of it. No
    /// roots: unchanged.
    ///
    /// # Errors
    /// A PEM holds no certificate, or the TLS configuration could not be
    /// made (mapped as a call of this service that never started).
    #[cfg(any(feature = "quotas", feature = "permissions"))]
    pub(crate) fn trusting(self, roots: &[String]) -> Result<Self, crate::error::SandboxError> {
        let signing_name = self.inner.signing_name();
        let inner = self
            .inner
            .trusting(roots)
            .map_err(|_| not_started(signing_name))?;
        Ok(Self { inner })
    }

    /// Runs `attempt` up to three times while `retryable` says its failure
    /// is worth another (0.5 s, then 1 s apart).
    ///
    /// # Errors
    /// The last attempt's failure.
    pub(crate) async fn with_retries<T, F, Fut>(
        attempt: F,
        retryable: impl Fn(&AwsFailure) -> bool,
    ) -> Result<T, AwsFailure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, AwsFailure>>,
    {
        let mut delay = Duration::from_millis(500);
        let mut tries = 1;
        loop {
            match attempt().await {
                Err(failure) if tries < ATTEMPTS && retryable(&failure) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// One POST of `body` with `headers` (the content type among them) for
    /// `operation`; the answer whatever its status.
    ///
    /// # Errors
    /// No answer arrived (the facts), or the request could not be signed.
    pub(crate) async fn post(
        &self,
        operation: &'static str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Answer, AwsFailure> {
        self.inner
            .post(headers, body)
            .quiet()
            .await
            .map_err(|error| match error {
                PostError::Credentials => {
                    let mut failure = no_response(operation, NoResponse::Other);
                    failure.code = Some("CredentialsNotLoaded".to_owned());
                    failure
                }
                PostError::Timeout => no_response(operation, NoResponse::Timeout),
                PostError::Connect => no_response(operation, NoResponse::Connect),
                PostError::Endpoint
                | PostError::Roots
                | PostError::Signing
                | PostError::Transport => no_response(operation, NoResponse::Other),
            })
    }
}

/// A call of `signing_name` that never started, mapped.
fn not_started(signing_name: &'static str) -> crate::error::SandboxError {
    crate::error::map::aws::from_aws(no_response(signing_name, NoResponse::Other))
}

/// A failure of `operation` that got no answer.
pub(crate) fn no_response(operation: &'static str, kind: NoResponse) -> AwsFailure {
    let mut failure = AwsFailure::new(operation);
    failure.no_response = Some(kind);
    failure
}

/// No answer in time or no connection (not a request that could not be
/// built), or a 5xx: worth another attempt, whatever the protocol.
pub(crate) fn transient(failure: &AwsFailure) -> bool {
    failure.no_response.is_some_and(|n| n != NoResponse::Other)
        || failure.http_status.is_some_and(|s| s >= 500)
}

/// `k=v&k=v`, each part percent-encoded as the Query protocols (EC2's,
/// IAM's) want (RFC 3986 unreserved characters kept).
#[cfg(any(feature = "efs", feature = "permissions"))]
pub(crate) use rayito_aws_post::form_urlencoded;
