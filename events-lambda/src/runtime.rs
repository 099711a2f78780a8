//! The Lambda runtime loop (feature `runtime`): the Runtime API's
//! next-invocation, response and error calls over plain HTTP to
//! `AWS_LAMBDA_RUNTIME_API`, a few lines of our own instead of a runtime
//! crate and its dependencies. Each invocation's body goes to the handler;
//! its JSON answer or its failure goes back.

use std::future::Future;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::Failure;

const API: &str = "2018-06-01/runtime";

/// Serves invocations until the environment stops: `handler` gets each
/// invocation's body and answers JSON, or a failure Lambda records (and,
/// for an asynchronous invocation, retries).
///
/// # Errors
/// When `AWS_LAMBDA_RUNTIME_API` is unset or the Runtime API fails.
pub async fn serve<F, Fut>(handler: F) -> Result<(), Failure>
where
    F: Fn(Bytes) -> Fut,
    Fut: Future<Output = Result<serde_json::Value, Failure>>,
{
    let host = std::env::var("AWS_LAMBDA_RUNTIME_API")
        .map_err(|_| Failure::other("runtime", "AWS_LAMBDA_RUNTIME_API unset"))?;
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let call = |method: Method, path: String, body: Vec<u8>| {
        let client = client.clone();
        let uri = format!("http://{host}/{API}/{path}");
        async move {
            let request = Request::builder()
                .method(method)
                .uri(uri)
                .body(Full::new(Bytes::from(body)))
                .map_err(|_| Failure::other("runtime", "bad request"))?;
            let response = client
                .request(request)
                .await
                .map_err(|_| Failure::other("runtime", "unreachable"))?;
            let id = response
                .headers()
                .get("lambda-runtime-aws-request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|_| Failure::other("runtime", "body"))?
                .to_bytes();
            Ok::<_, Failure>((id, body))
        }
    };
    loop {
        let (id, event) = call(Method::GET, "invocation/next".into(), Vec::new()).await?;
        let id = id.ok_or_else(|| Failure::other("runtime", "no request id"))?;
        match handler(event).await {
            Ok(answer) => {
                let body = serde_json::to_vec(&answer).unwrap_or_default();
                call(Method::POST, format!("invocation/{id}/response"), body).await?;
            }
            Err(failure) => {
                let body = serde_json::json!({
                    "errorType": failure.operation,
                    "errorMessage": failure.to_string(),
                });
                call(
                    Method::POST,
                    format!("invocation/{id}/error"),
                    body.to_string().into_bytes(),
                )
                .await?;
            }
        }
    }
}
