//! The function's two outbound calls besides DynamoDB: the pool's JWKS
//! (a plain bounded GET, no credentials) and Cognito's
//! `ListUserPoolClients` (awsJson1.1, signed with the function's
//! credentials by the workspace's `rayito-aws-post`, as the SDK's own
//! signed calls). Not `aws-sdk-cognitoidentityprovider`: one read call
//! does not pay for a generated client of a hundred operations (minutes of
//! a clean build).

use std::collections::BTreeSet;
use std::time::Duration;

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
    /// The function's configuration: its credentials sign Cognito's call.
    config: aws_types::SdkConfig,
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
            config: config.clone(),
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
        let cognito = rayito_aws_post::SignedPost::new(
            &self.config,
            endpoint,
            region,
            "cognito-idp",
            CALL_TIMEOUT,
            CLIENTS_MAX_BYTES,
        )
        .map_err(|_| Unreachable("url"))?;
        let headers = [
            ("content-type", "application/x-amz-json-1.1"),
            (
                "x-amz-target",
                "AWSCognitoIdentityProviderService.ListUserPoolClients",
            ),
        ];
        let mut ids = BTreeSet::new();
        let mut next: Option<String> = None;
        for _ in 0..CLIENTS_MAX_PAGES {
            let mut input = json!({ "UserPoolId": user_pool_id, "MaxResults": 60 });
            if let Some(token) = &next {
                input["NextToken"] = Value::String(token.clone());
            }
            let answer = cognito
                .post(&headers, &input.to_string())
                .await
                .map_err(|error| match error {
                    rayito_aws_post::PostError::Credentials => Unreachable("credentials"),
                    rayito_aws_post::PostError::Signing => Unreachable("sign"),
                    rayito_aws_post::PostError::Timeout => Unreachable("timeout"),
                    _ => Unreachable("connect"),
                })?;
            if !(200..300).contains(&answer.status) {
                return Err(Unreachable("status"));
            }
            let page: Value =
                serde_json::from_slice(&answer.body).map_err(|_| Unreachable("json"))?;
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
}
