//! The control plane's wire format seen by a plain HTTP client: the SigV4
//! gate, error headers and bodies, request ids, unknown routes, and the
//! admin fault endpoint.

mod emulator_support;

use bytes::Bytes;
use emulator_support::*;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rayito_agent::emulator::{MicrovmState, Operation};
use serde_json::{Value, json};

const SIGNED: &str = "AWS4-HMAC-SHA256 Credential=test/20261130/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// One request; returns status, headers and JSON body (Null when empty).
async fn call(
    url: &str,
    method: Method,
    auth: Option<&str>,
    body: Option<Value>,
) -> (u16, http::HeaderMap, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = Request::builder().method(method).uri(url);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let resp = client
        .request(req.body(Full::new(Bytes::from(bytes))).unwrap())
        .await
        .expect("answer");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).expect("JSON body")
    };
    (status, headers, json)
}

#[tokio::test]
async fn unsigned_and_malformed_signatures_are_refused() {
    let h = Harness::start().await;
    let url = format!("{}/2025-09-09/microvms", h.emulator.endpoint_url());
    let (status, headers, body) = call(&url, Method::GET, None, None).await;
    assert_eq!(status, 403);
    assert_eq!(
        headers["x-amzn-errortype"],
        "MissingAuthenticationTokenException"
    );
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-amzn-requestid"].len(), 36);
    assert_eq!(
        body,
        json!({"__type": "MissingAuthenticationTokenException", "message": "Missing Authentication Token"})
    );

    let (status, headers, body) = call(&url, Method::GET, Some("Bearer abc"), None).await;
    assert_eq!(status, 403);
    assert_eq!(headers["x-amzn-errortype"], "IncompleteSignatureException");
    assert_eq!(
        body["message"],
        "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters of an AWS4-HMAC-SHA256 signature."
    );

    let (status, headers, body) = call(&url, Method::GET, Some(SIGNED), None).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-amzn-requestid"].len(), 36);
    assert_eq!(body, json!({"items": []}));
    assert_eq!(h.emulator.calls(Operation::ListMicrovms), 3);
}

#[tokio::test]
async fn error_bodies_and_unknown_routes() {
    let h = Harness::start().await;
    let base = h.emulator.endpoint_url();
    let (status, headers, body) = call(
        &format!("{base}/2025-09-09/microvms"),
        Method::POST,
        Some(SIGNED),
        Some(json!({"imageIdentifier": "x"})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(headers["x-amzn-errortype"], "ValidationException");
    assert_eq!(
        body,
        json!({"__type": "ValidationException", "message": "Invalid ARN format"})
    );

    let (status, _, body) = call(
        &format!("{base}/2025-09-09/microvms"),
        Method::POST,
        Some(SIGNED),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["message"],
        "1 validation error detected: Value at 'imageIdentifier' failed to satisfy constraint: Member must not be null"
    );

    let (status, _, body) = call(
        &format!("{base}/2025-09-09/microvms/microvm-x"),
        Method::GET,
        Some(SIGNED),
        None,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"__type": "ResourceNotFoundException", "message": "MicroVM not found: microvm-x", "resourceType": "Microvm", "resourceId": "microvm-x"})
    );

    let (status, headers, body) = call(
        &format!("{base}/2025-09-09/nothing"),
        Method::GET,
        Some(SIGNED),
        None,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(headers["x-amzn-errortype"], "UnknownOperationException");
    assert_eq!(body["message"], "Unknown operation");

    let (status, _, body) = call(
        &format!("{base}/2025-09-09/microvms"),
        Method::POST,
        Some(SIGNED),
        Some(json!({"imageIdentifier": 5})),
    )
    .await;
    assert_eq!(
        (status, body["message"].as_str()),
        (400, Some("Malformed request body."))
    );
}

#[tokio::test]
async fn admin_endpoint_injects_faults() {
    let h = Harness::start().await;
    let faults = format!("{}/_emulator/faults", h.emulator.endpoint_url());
    let post = |v: Value| call(&faults, Method::POST, None, Some(v));

    assert_eq!(
        post(json!({"fault": "insufficientCapacity", "count": 1}))
            .await
            .2,
        json!({"applied": true})
    );
    let e = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).1, "InsufficientCapacityException");

    assert_eq!(
        post(json!({"fault": "quotaExceeded", "count": 1})).await.0,
        200
    );
    let e = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .send()
        .await
        .unwrap_err();
    assert_eq!(err_parts(&e).0, 402);

    assert_eq!(post(json!({"fault": "throttle", "operation": "ListMicrovms", "count": 1, "retryAfterSeconds": 3})).await.0, 200);
    let e = h.client.list_microvms().send().await.unwrap_err();
    assert_eq!(err_parts(&e).1, "ThrottlingException");
    assert_eq!(err_header(&e, "retry-after").as_deref(), Some("3"));

    let (status, _, body) =
        post(json!({"fault": "throttle", "operation": "Nope", "count": 1})).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (400, Some("Unknown operation."))
    );
    let (status, _, body) = post(json!({"fault": "proxyStatus", "count": 1, "status": 200})).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (400, Some("status must be in 400..=599."))
    );
    let (status, _, body) = post(json!({"fault": "meteor"})).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (400, Some("Not a fault this emulator knows."))
    );
    for fault in ["killAgent", "cutConnections", "expireDeadline"] {
        let (status, _, body) = post(json!({"fault": fault, "microvmId": "microvm-nope"})).await;
        assert_eq!(
            (status, body["message"].as_str()),
            (404, Some("No live MicroVM with this id.")),
            "{fault}"
        );
    }
    let (status, _, _) =
        post(json!({"fault": "diskReserve", "microvmId": "microvm-nope", "bytes": 1})).await;
    assert_eq!(status, 404);

    // A live MicroVM: killAgent terminates it with the crash reason.
    let (id, _) = h.run_ready().await;
    assert_eq!(
        post(json!({"fault": "killAgent", "microvmId": id})).await.0,
        200
    );
    let end = wait_state(
        &h.client,
        &id,
        aws_sdk_lambdamicrovms::types::MicrovmState::Terminated,
    )
    .await;
    assert_eq!(
        end.state_reason(),
        Some("Container Stopped with Exit Code: 137")
    );
    assert_eq!(h.emulator.state(&id), Some(MicrovmState::Terminated));

    assert_eq!(
        post(json!({"fault": "throttle", "operation": "ListMicrovms", "count": 5}))
            .await
            .0,
        200
    );
    assert_eq!(post(json!({"fault": "clear"})).await.0, 200);
    h.client.list_microvms().send().await.expect("cleared");
}

#[tokio::test]
async fn admin_endpoint_accepts_proxy_stalls() {
    let h = Harness::start().await;
    let faults = format!("{}/_emulator/faults", h.emulator.endpoint_url());
    let post = |v: Value| call(&faults, Method::POST, None, Some(v));
    for fault in [
        json!({"fault": "stallProxy", "count": 1}),
        json!({"fault": "stallProxy", "count": 2, "path": "/rayito.v1.HealthService/Health"}),
        json!({"fault": "stallProxy", "count": 1, "afterFrames": 3}),
    ] {
        let (status, _, body) = post(fault.clone()).await;
        assert_eq!((status, body), (200, json!({"applied": true})), "{fault}");
    }
    let (status, _, body) = post(json!({"fault": "stallProxy", "afterFrames": 3})).await;
    assert_eq!(
        (status, body["message"].as_str()),
        (400, Some("Not a fault this emulator knows.")),
        "count is required"
    );
}
