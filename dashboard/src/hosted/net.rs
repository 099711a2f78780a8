//! The function's two outbound calls besides DynamoDB: the pool's JWKS
//! (a plain bounded GET, no credentials) and Cognito's
//! `ListUserPoolClients` (awsJson1.1, SigV4 by `aws-sigv4` with the
//! function's credentials). Our own few lines rather than
//! `aws-sdk-cognitoidentityprovider`: one read call does not pay for a
//! generated client of a hundred operations (minutes of a clean build).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials as _;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::sdk_config::SharedCredentialsProvider;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// The deadline of one call (connect, send, read).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS read (Cognito's holds two keys: under 2 KiB).
pub(crate) const JWKS_MAX_BYTES: usize = 64 * 1024;
/// The largest page of `ListUserPoolClients` read.
const CLIENTS_MAX_BYTES: usize = 1 << 20;
/// At most this many pages of clients are read (60 a page).
const CLIENTS_MAX_PAGES: usize = 20;

type Https = HttpClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why a call gave no usable answer (only ever logged as its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreachable(pub(crate) &'static str);

/// The HTTPS client (rustls with the system's roots; plain http for a
/// local endpoint such as a test's moto server).
#[derive(Clone)]
pub(crate) struct Net {
    http: Https,
    credentials: Option<SharedCredentialsProvider>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Net(..)")
    }
}

impl Net {
    pub(crate) fn new(config: &aws_types::SdkConfig) -> Result<Self, Unreachable> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|_| Unreachable("roots"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            http: HttpClient::builder(TokioExecutor::new()).build(https),
            credentials: config.credentials_provider(),
        })
    }

    /// GET `url`, at most `max` bytes of a 200's body.
    pub(crate) async fn get(&self, url: &str, max: usize) -> Result<Bytes, Unreachable> {
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|_| Unreachable("url"))?;
        self.send(request, max).await
    }

    async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        max: usize,
    ) -> Result<Bytes, Unreachable> {
        let call = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|_| Unreachable("connect"))?;
            if !response.status().is_success() {
                return Err(Unreachable("status"));
            }
            http_body_util::Limited::new(response.into_body(), max)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .map_err(|_| Unreachable("body"))
        };
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| Unreachable("timeout"))?
    }

    /// The ids of the pool's app clients named `client_name`
    /// (`ListUserPoolClients`, every page).
    pub(crate) async fn client_ids(
        &self,
        endpoint: &str,
        region: &str,
        user_pool_id: &str,
        client_name: &str,
    ) -> Result<BTreeSet<String>, Unreachable> {
        let mut ids = BTreeSet::new();
        let mut next: Option<String> = None;
        for _ in 0..CLIENTS_MAX_PAGES {
            let mut input = json!({ "UserPoolId": user_pool_id, "MaxResults": 60 });
            if let Some(token) = &next {
                input["NextToken"] = Value::String(token.clone());
            }
            let request = self
                .signed_json(
                    endpoint,
                    region,
                    "cognito-idp",
                    "AWSCognitoIdentityProviderService.ListUserPoolClients",
                    &input.to_string(),
                )
                .await?;
            let page: Value = serde_json::from_slice(&self.send(request, CLIENTS_MAX_BYTES).await?)
                .map_err(|_| Unreachable("json"))?;
            let clients = page.get("UserPoolClients").and_then(Value::as_array);
            for client in clients.into_iter().flatten() {
                let named = client.get("ClientName").and_then(Value::as_str) == Some(client_name);
                if let (true, Some(id)) = (named, client.get("ClientId").and_then(Value::as_str)) {
                    ids.insert(id.to_owned());
                }
            }
            next = page
                .get("NextToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if next.is_none() {
                return Ok(ids);
            }
        }
        Err(Unreachable("pages"))
    }

    /// An awsJson1.1 POST of `body` to `endpoint`, signed for `service`.
    async fn signed_json(
        &self,
        endpoint: &str,
        region: &str,
        service: &'static str,
        target: &str,
        body: &str,
    ) -> Result<http::Request<Full<Bytes>>, Unreachable> {
        let provider = self
            .credentials
            .as_ref()
            .ok_or(Unreachable("credentials"))?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|_| Unreachable("credentials"))?;
        let identity = Identity::from(credentials);
        let uri: http::Uri = endpoint.parse().map_err(|_| Unreachable("url"))?;
        let host = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let headers = [
            ("host", host.as_str()),
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target),
        ];
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| Unreachable("sign"))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            endpoint,
            headers.iter().copied(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|_| Unreachable("sign"))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|_| Unreachable("sign"))?
            .into_parts();
        let mut request = http::Request::post(uri);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let mut request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|_| Unreachable("sign"))?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }
}
