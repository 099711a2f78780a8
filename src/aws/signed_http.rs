//! One JSON call to the local emulator's own APIs (feature `events`: the
//! local events API), signed with SigV4 with the emulator's access key, as
//! every control-plane call is (the emulator's guard refuses anything
//! else), by the workspace's one signed request (`rayito-aws-post`) over
//! plain http. The answer's status and body are returned as they are: the
//! caller reads them.

use std::time::Duration;

use aws_types::sdk_config::SharedCredentialsProvider;
use bytes::Bytes;
use rayito_aws_post::{PostError, SignedPost};

use crate::quiet::Quiet as _;

/// The deadline of one call (connect, send, read the answer): the
/// emulator answers on loopback at once.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read (a page of 100 events is ~40 KiB).
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// The service the emulator's guard checks control-plane calls against.
const SERVICE: &str = "lambda";

/// Where and as whom the calls go.
#[derive(Clone)]
pub(crate) struct SignedHttp {
    /// `None`: the endpoint is no `http://` URI (every call says so).
    post: Option<SignedPost>,
}

impl std::fmt::Debug for SignedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedHttp").finish_non_exhaustive()
    }
}

/// Why a call got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// The request could not be built or signed.
    Build,
    /// No connection, or it broke before the answer was read.
    Transport,
    /// No answer within the deadline.
    Timeout,
}

impl From<PostError> for NoAnswer {
    fn from(e: PostError) -> Self {
        match e {
            PostError::Endpoint
            | PostError::Roots
            | PostError::Credentials
            | PostError::Signing => Self::Build,
            PostError::Connect | PostError::Transport => Self::Transport,
            PostError::Timeout => Self::Timeout,
        }
    }
}

impl SignedHttp {
    /// Calls to `endpoint` (plain http), signed with the key pair in `region`.
    pub(crate) fn new(
        endpoint: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: crate::secret::Secret,
    ) -> Self {
        let credentials = aws_sdk_dynamodb::config::Credentials::new(
            access_key_id,
            secret_access_key.expose(),
            None,
            None,
            "rayito-local",
        );
        let config = aws_types::SdkConfig::builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build();
        let post = SignedPost::plain_http(
            &config,
            endpoint,
            region,
            SERVICE,
            CALL_TIMEOUT,
            MAX_ANSWER_BYTES,
        );
        Self { post: post.ok() }
    }

    /// `method` on `path_and_query` (starting with `/`) with an optional
    /// JSON body: the answer's status and body.
    ///
    /// # Errors
    /// [`NoAnswer`] when no answer arrived.
    pub(crate) async fn call(
        &self,
        method: &'static str,
        path_and_query: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Bytes), NoAnswer> {
        let post = self.post.as_ref().ok_or(NoAnswer::Build)?;
        let headers = [("content-type", "application/json")];
        let answer = post
            .send(method, path_and_query, &headers, &body.unwrap_or_default())
            .quiet()
            .await?;
        Ok((answer.status, answer.body))
    }
}
