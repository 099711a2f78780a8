//! One JSON call to the local emulator's own APIs (feature `events`: the
//! local events API), signed with SigV4 by `aws-sigv4` with the emulator's
//! access key, as every control-plane call is (the emulator's guard refuses
//! anything else), sent over hyper-util's plain-http client. The answer's
//! status and body are returned as they are: the caller reads them.

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

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
    http: HttpClient<HttpConnector, Full<Bytes>>,
    /// `http://127.0.0.1:<port>` (no final `/`).
    endpoint: String,
    region: String,
    access_key_id: String,
    secret_access_key: crate::secret::Secret,
}

impl std::fmt::Debug for SignedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedHttp")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
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

impl SignedHttp {
    /// Calls to `endpoint` (plain http), signed with the key pair in `region`.
    pub(crate) fn new(
        endpoint: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: crate::secret::Secret,
    ) -> Self {
        Self {
            http: HttpClient::builder(TokioExecutor::new()).build_http(),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region: region.to_owned(),
            access_key_id: access_key_id.to_owned(),
            secret_access_key,
        }
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
        let request = self.signed(method, path_and_query, body.unwrap_or_default())?;
        let sent = tokio::time::timeout(CALL_TIMEOUT, async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|_| NoAnswer::Transport)?;
            let status = response.status().as_u16();
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|_| NoAnswer::Transport)?
                .to_bytes();
            Ok::<_, NoAnswer>((status, body))
        })
        .quiet()
        .await;
        sent.map_err(|_| NoAnswer::Timeout)?
    }

    fn signed(
        &self,
        method: &'static str,
        path_and_query: &str,
        body: Vec<u8>,
    ) -> Result<http::Request<Full<Bytes>>, NoAnswer> {
        let uri = format!("{}{path_and_query}", self.endpoint);
        let parsed = uri.parse::<http::Uri>().map_err(|_| NoAnswer::Build)?;
        let host = parsed
            .authority()
            .map(|a| a.as_str().to_owned())
            .ok_or(NoAnswer::Build)?;
        let credentials = aws_sdk_dynamodb::config::Credentials::new(
            &self.access_key_id,
            self.secret_access_key.expose(),
            None,
            None,
            "rayito-local",
        );
        let identity = Identity::from(credentials);
        let content_type = "application/json";
        let headers = [("content-type", content_type), ("host", host.as_str())];
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| NoAnswer::Build)?
            .into();
        let signable = SignableRequest::new(
            method,
            &uri,
            headers.iter().copied(),
            SignableBody::Bytes(&body),
        )
        .map_err(|_| NoAnswer::Build)?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| NoAnswer::Build)?
            .into_parts();
        let mut request = http::Request::builder()
            .method(method)
            .uri(parsed)
            .header("content-type", content_type)
            .header("host", host)
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| NoAnswer::Build)?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}
