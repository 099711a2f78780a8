//! The control plane's wire format seen by a plain HTTP client: the SigV4
//! gate (signatures verified with the emulator's key, refused as AWS
//! refuses them), the Host check, error headers and bodies, request ids,
//! unknown routes, and the admin fault endpoint (signed too).

use crate::emulator_support;

use bytes::Bytes;
use emulator_support::*;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rayito_emulator::{AccessKey, MicrovmState, Operation};
use serde_json::{Value, json};

/// A SigV4 header of the right shape whose signature is made up.
const FORGED: &str = "AWS4-HMAC-SHA256 Credential=test/20261130/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// How a request is authenticated.
#[derive(Clone, Copy)]
enum Auth<'a> {
    None,
    /// This `Authorization` value, nothing else.
    Raw(&'a str),
    /// Signed with this key.
    Key(&'a AccessKey),
}

/// One request; returns status, headers and JSON body (Null when empty).
async fn call(
    url: &str,
    method: Method,
    auth: Auth<'_>,
    body: Option<Value>,
) -> (u16, http::HeaderMap, Value) {
    call_with(url, method, auth, body, &[]).await
}

/// [`call`] with extra headers (which win over the signature's).
async fn call_with(
    url: &str,
    method: Method,
    auth: Auth<'_>,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> (u16, http::HeaderMap, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = Request::builder().method(method.clone()).uri(url);
    match auth {
        Auth::None => {}
        Auth::Raw(a) => req = req.header("authorization", a),
        Auth::Key(key) => {
            for (name, value) in key
                .sign(method.as_str(), url, bytes.as_bytes(), "us-east-1")
                .unwrap()
            {
                req = req.header(name, value);
            }
        }
    }
    if let Some(headers) = req.headers_mut() {
        for (name, value) in extra {
            headers.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
    }
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
    let (status, headers, body) = call(&url, Method::GET, Auth::None, None).await;
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

    let (status, headers, body) = call(&url, Method::GET, Auth::Raw("Bearer abc"), None).await;
    assert_eq!(status, 403);
    assert_eq!(headers["x-amzn-errortype"], "IncompleteSignatureException");
    assert_eq!(
        body["message"],
        "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters of an AWS4-HMAC-SHA256 signature."
    );

    let key = h.emulator.access_key();
    let (status, headers, body) = call(&url, Method::GET, Auth::Key(key), None).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["x-amzn-requestid"].len(), 36);
    assert_eq!(body, json!({"items": []}));
    assert_eq!(h.emulator.calls(Operation::ListMicrovms), 3);
}

/// Each way a signature can be wrong gets AWS's error: 403 with its code
/// and message. The emulator used to accept any well-shaped header.
#[tokio::test]
async fn forged_and_wrong_signatures_are_refused_as_aws_refuses_them() {
    let h = Harness::start().await;
    let url = format!("{}/2025-09-09/microvms", h.emulator.endpoint_url());
    let key = h.emulator.access_key().clone();
    let refused = |(status, headers, body): (u16, http::HeaderMap, Value)| {
        assert_eq!(status, 403, "{body}");
        assert_eq!(
            headers["x-amzn-errortype"],
            body["__type"].as_str().unwrap()
        );
        (
            body["__type"].as_str().unwrap().to_owned(),
            body["message"].as_str().unwrap().to_owned(),
        )
    };

    // A well-shaped header with a made-up signature and no date.
    let (code, message) = refused(call(&url, Method::GET, Auth::Raw(FORGED), None).await);
    assert_eq!(code, "IncompleteSignatureException");
    assert_eq!(
        message,
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
    );
    // A real signature with a key the emulator does not hold.
    let stranger = AccessKey::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
    assert_eq!(
        refused(call(&url, Method::GET, Auth::Key(&stranger), None).await),
        (
            "UnrecognizedClientException".to_owned(),
            "The security token included in the request is invalid.".to_owned()
        )
    );
    // The emulator's key id with another secret.
    let wrong = AccessKey::new(key.id.clone(), "not-the-secret");
    let mismatch = (
        "InvalidSignatureException".to_owned(),
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.".to_owned(),
    );
    assert_eq!(
        refused(call(&url, Method::GET, Auth::Key(&wrong), None).await),
        mismatch
    );
    // A signed request whose query was changed afterwards.
    let signed = key
        .sign("GET", &format!("{url}?maxResults=1"), b"", "us-east-1")
        .unwrap();
    let headers: Vec<(&str, &str)> = signed
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        refused(
            call_with(
                &format!("{url}?maxResults=2"),
                Method::GET,
                Auth::None,
                None,
                &headers
            )
            .await
        ),
        mismatch
    );
    // A signature of a day ago (replayed).
    let (code, message) = refused(
        call_with(
            &url,
            Method::GET,
            Auth::Key(&key),
            None,
            &[("x-amz-date", "20200101T000000Z")],
        )
        .await,
    );
    assert_eq!(code, "InvalidSignatureException");
    assert!(
        message.starts_with("Signature expired: 20200101T000000Z is now earlier than "),
        "{message}"
    );
    // A session token the key does not have.
    assert_eq!(
        refused(
            call(
                &url,
                Method::GET,
                Auth::Key(&key.clone().with_session_token("tok")),
                None
            )
            .await
        )
        .0,
        "UnrecognizedClientException"
    );
    // Nothing was listed, and every call counted.
    assert_eq!(h.emulator.calls(Operation::ListMicrovms), 6);
}

/// A request naming another host (a web page whose DNS name was rebound to
/// 127.0.0.1) is refused before anything runs, signed or not.
#[tokio::test]
async fn a_foreign_host_is_refused() {
    let h = Harness::start().await;
    let base = h.emulator.endpoint_url();
    let key = h.emulator.access_key();
    let own = h.emulator.addr().to_string();
    for path in [
        "/2025-09-09/microvms",
        "/_emulator/faults",
        "/_emulator/ca.pem",
    ] {
        let (status, headers, body) = call_with(
            &format!("{base}{path}"),
            Method::GET,
            Auth::Key(key),
            None,
            &[("host", "rebound.example:4566")],
        )
        .await;
        assert_eq!(status, 403, "{path}");
        assert_eq!(headers["x-amzn-errortype"], "AccessDeniedException");
        assert_eq!(
            body["message"],
            format!("The Host header must name this emulator ({own}).")
        );
    }
    assert_eq!(h.emulator.calls(Operation::ListMicrovms), 0);
    // `localhost` names it too.
    let (status, _, _) = call_with(
        &format!("{base}/2025-09-09/microvms"),
        Method::GET,
        Auth::None,
        None,
        &[("host", &format!("localhost:{}", h.emulator.addr().port()))],
    )
    .await;
    assert_eq!(status, 403, "unsigned, but past the Host check");
    assert_eq!(h.emulator.calls(Operation::ListMicrovms), 1);
}

#[tokio::test]
async fn error_bodies_and_unknown_routes() {
    let h = Harness::start().await;
    let base = h.emulator.endpoint_url();
    let (status, headers, body) = call(
        &format!("{base}/2025-09-09/microvms"),
        Method::POST,
        Auth::Key(h.emulator.access_key()),
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
        Auth::Key(h.emulator.access_key()),
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
        Auth::Key(h.emulator.access_key()),
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
        Auth::Key(h.emulator.access_key()),
        None,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(headers["x-amzn-errortype"], "UnknownOperationException");
    assert_eq!(body["message"], "Unknown operation");

    let (status, _, body) = call(
        &format!("{base}/2025-09-09/microvms"),
        Method::POST,
        Auth::Key(h.emulator.access_key()),
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
    let key = h.emulator.access_key();
    let post = |v: Value| call(&faults, Method::POST, Auth::Key(key), Some(v));

    // Unsigned, forged or signed with another key: refused, nothing applied.
    let stranger = AccessKey::generate();
    for auth in [Auth::None, Auth::Raw(FORGED), Auth::Key(&stranger)] {
        let (status, _, _) = call(
            &faults,
            Method::POST,
            auth,
            Some(json!({"fault": "throttle", "operation": "ListMicrovms", "count": 1})),
        )
        .await;
        assert_eq!(status, 403);
    }
    h.client
        .list_microvms()
        .send()
        .await
        .expect("no throttle was applied");

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
async fn admin_endpoint_holds_and_releases_image_builds() {
    use aws_sdk_lambdamicrovms::types::{CodeArtifact, MicrovmImageVersionState};
    let h = Harness::start().await;
    let faults = format!("{}/_emulator/faults", h.emulator.endpoint_url());
    let key = h.emulator.access_key();
    let post = |v: Value| call(&faults, Method::POST, Auth::Key(key), Some(v));
    let state = || async {
        h.client
            .get_microvm_image_version()
            .image_identifier("held")
            .image_version("1")
            .send()
            .await
            .expect("GetMicrovmImageVersion")
            .state()
            .clone()
    };
    assert_eq!(
        post(json!({"fault": "holdBuilds", "hold": true})).await.0,
        200
    );
    h.client
        .create_microvm_image()
        .name("held")
        .base_image_arn("arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1")
        .build_role_arn("arn:aws:iam::000000000000:role/rayito-m0-build-us-east-1")
        .code_artifact(CodeArtifact::Uri("s3://nowhere/a.zip".into()))
        .send()
        .await
        .expect("CreateMicrovmImage");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state().await != MicrovmImageVersionState::InProgress {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(state().await, MicrovmImageVersionState::InProgress, "held");
    assert_eq!(post(json!({"fault": "clear"})).await.0, 200);
    while state().await != MicrovmImageVersionState::Failed {
        assert!(std::time::Instant::now() < deadline, "released by clear");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (status, _, _) = post(json!({"fault": "holdBuilds"})).await;
    assert_eq!(status, 400, "hold is required");
}

#[tokio::test]
async fn admin_endpoint_accepts_proxy_stalls() {
    let h = Harness::start().await;
    let faults = format!("{}/_emulator/faults", h.emulator.endpoint_url());
    let key = h.emulator.access_key();
    let post = |v: Value| call(&faults, Method::POST, Auth::Key(key), Some(v));
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

/// EFS routes take a signature scoped to `elasticfilesystem` only, and the
/// admin endpoint's `throttle` fault names EFS operations too (`clear`
/// forgets them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn efs_calls_need_their_own_scope_and_take_admin_throttles() {
    let h = Harness::start().await;
    let key = h.emulator.access_key();
    let url = format!("{}/2015-02-01/file-systems", h.emulator.endpoint_url());
    let (status, headers, body) = call(&url, Method::GET, Auth::Key(key), None).await;
    assert_eq!(status, 403);
    assert_eq!(headers["x-amzn-errortype"], "InvalidSignatureException");
    assert_eq!(
        body["message"],
        "Credential should be scoped to correct service: 'elasticfilesystem'."
    );

    let faults = format!("{}/_emulator/faults", h.emulator.endpoint_url());
    let post = |v: Value| call(&faults, Method::POST, Auth::Key(key), Some(v));
    let throttle = json!({"fault": "throttle", "operation": "DescribeFileSystems", "count": 1});
    assert_eq!(post(throttle.clone()).await.0, 200);
    assert_eq!(
        post(json!({"fault": "throttle", "operation": "DescribeNothing", "count": 1}))
            .await
            .0,
        400
    );
    let efs = efs_client(&h.emulator, &key.secret);
    let err = efs
        .describe_file_systems()
        .send()
        .await
        .expect_err("throttled");
    assert_eq!(
        err.raw_response().map(|r| r.status().as_u16()),
        Some(429),
        "{err:?}"
    );
    efs.describe_file_systems()
        .send()
        .await
        .expect("then served");
    assert_eq!(post(throttle).await.0, 200);
    assert_eq!(post(json!({"fault": "clear"})).await.0, 200);
    efs.describe_file_systems()
        .send()
        .await
        .expect("clear forgot the throttle");
}
