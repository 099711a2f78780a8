//! A Lambda Function URL event (payload format 2.0) as an HTTP request to
//! the router, and the router's answer as the Function URL's response:
//! a base64 body decoded, `cookies` back into one `Cookie` header, a
//! `Set-Cookie` out into `cookies`, a text answer as text and anything
//! else as base64.

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderName, HeaderValue, Request, Response, header};
use http_body_util::BodyExt as _;
use serde_json::{Map, Value, json};

/// The largest answer body turned into an event (a Function URL's
/// response payload is limited to 6 MB).
const MAX_RESPONSE_BYTES: usize = 6 * 1000 * 1000;

/// What the Function URL says about the request besides HTTP: put in the
/// request's extensions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestContext {
    /// `requestContext.requestId`.
    pub request_id: String,
    /// `requestContext.http.sourceIp`.
    pub source_ip: String,
    /// `requestContext.domainName`: the Function URL's host.
    pub domain: String,
}

/// Why an event is not a Function URL request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAnEvent(pub &'static str);

impl std::fmt::Display for NotAnEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a Function URL event: {}", self.0)
    }
}

impl std::error::Error for NotAnEvent {}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

/// The request a Function URL event (payload 2.0) stands for, with its
/// [`RequestContext`] in the extensions.
///
/// # Errors
/// [`NotAnEvent`] when the method, path, a header or a base64 body is not
/// one.
pub fn request_from_event(event: &Value) -> Result<Request<Body>, NotAnEvent> {
    let method = text(event, &["requestContext", "http", "method"]).ok_or(NotAnEvent("method"))?;
    let path = text(event, &["rawPath"]).unwrap_or("/");
    let query = text(event, &["rawQueryString"]).unwrap_or("");
    let uri = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .map_err(|_| NotAnEvent("method or path"))?;
    let headers = request.headers_mut();
    if let Some(map) = event.get("headers").and_then(Value::as_object) {
        for (name, value) in map {
            let Some(value) = value.as_str() else {
                continue;
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| NotAnEvent("header"))?;
            let value = HeaderValue::from_str(value).map_err(|_| NotAnEvent("header"))?;
            headers.append(name, value);
        }
    }
    if let Some(cookies) = event.get("cookies").and_then(Value::as_array) {
        let joined: Vec<&str> = cookies.iter().filter_map(Value::as_str).collect();
        if !joined.is_empty() {
            let value =
                HeaderValue::from_str(&joined.join("; ")).map_err(|_| NotAnEvent("cookie"))?;
            headers.insert(header::COOKIE, value);
        }
    }
    let body = text(event, &["body"]).unwrap_or("");
    let body = if event.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        STANDARD
            .decode(body)
            .map_err(|_| NotAnEvent("base64 body"))?
    } else {
        body.as_bytes().to_vec()
    };
    *request.body_mut() = Body::from(body);
    request.extensions_mut().insert(RequestContext {
        request_id: text(event, &["requestContext", "requestId"])
            .unwrap_or_default()
            .to_owned(),
        source_ip: text(event, &["requestContext", "http", "sourceIp"])
            .unwrap_or("unknown")
            .to_owned(),
        domain: text(event, &["requestContext", "domainName"])
            .unwrap_or_default()
            .to_owned(),
    });
    Ok(request)
}

/// Whether a content type is sent as text.
fn is_text(content_type: Option<&HeaderValue>) -> bool {
    let Some(ct) = content_type.and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let ct = ct.to_ascii_lowercase();
    ct.starts_with("text/")
        || ct.starts_with("application/json")
        || ct.starts_with("application/javascript")
        || ct.starts_with("image/svg+xml")
}

/// The Function URL response of an answer.
pub async fn response_to_event(response: Response<Body>) -> Value {
    let (parts, body) = response.into_parts();
    let mut headers = Map::new();
    let mut cookies = Vec::new();
    for name in parts.headers.keys() {
        let values: Vec<&str> = parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if name == header::SET_COOKIE {
            cookies.extend(values.iter().map(|v| Value::String((*v).to_owned())));
        } else {
            headers.insert(name.as_str().to_owned(), Value::String(values.join(", ")));
        }
    }
    let bytes = http_body_util::Limited::new(body, MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes());
    let Ok(bytes) = bytes else {
        return json!({
            "statusCode": 502,
            "headers": { "content-type": "application/json" },
            "body": r#"{"error":{"code":"internal_error","message":"the answer is over 6 MB"}}"#,
            "isBase64Encoded": false,
        });
    };
    let as_text = is_text(parts.headers.get(header::CONTENT_TYPE))
        .then(|| std::str::from_utf8(&bytes).ok())
        .flatten();
    let (body, base64) = match as_text {
        Some(text) => (text.to_owned(), false),
        None => (STANDARD.encode(&bytes), true),
    };
    let mut event = json!({
        "statusCode": parts.status.as_u16(),
        "headers": headers,
        "body": body,
        "isBase64Encoded": base64,
    });
    if !cookies.is_empty() {
        event["cookies"] = Value::Array(cookies);
    }
    event
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::response::IntoResponse as _;
    use axum::routing::any;
    use http::StatusCode;
    use tower::ServiceExt as _;

    use super::*;

    /// Echoes what the router saw: method, URI, cookie, a header, the body,
    /// and the context; answers two cookies and a binary body.
    fn echo() -> Router {
        Router::new().route(
            "/{*rest}",
            any(|req: Request<Body>| async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                let ctx = parts.extensions.get::<RequestContext>().cloned().unwrap();
                let seen = json!({
                    "method": parts.method.as_str(),
                    "uri": parts.uri.to_string(),
                    "cookie": parts.headers.get(header::COOKIE).map(|v| v.to_str().unwrap()),
                    "x-one": parts.headers.get("x-one").map(|v| v.to_str().unwrap()),
                    "body": String::from_utf8_lossy(&body),
                    "request_id": ctx.request_id,
                    "source_ip": ctx.source_ip,
                    "domain": ctx.domain,
                });
                let mut answer = (StatusCode::CREATED, axum::Json(seen)).into_response();
                answer
                    .headers_mut()
                    .append(header::SET_COOKIE, HeaderValue::from_static("a=1"));
                answer
                    .headers_mut()
                    .append(header::SET_COOKIE, HeaderValue::from_static("b=2"));
                answer
            }),
        )
    }

    #[tokio::test]
    async fn an_event_becomes_a_request_and_the_answer_an_event() {
        let event = json!({
            "version": "2.0",
            "rawPath": "/api/v1/x",
            "rawQueryString": "a=1&b=%20",
            "cookies": ["s=1", "t=2"],
            "headers": { "x-one": "uno", "host": "h.lambda-url.us-east-1.on.aws" },
            "requestContext": {
                "domainName": "h.lambda-url.us-east-1.on.aws",
                "requestId": "r-1",
                "http": { "method": "POST", "sourceIp": "198.51.100.1" }
            },
            "body": STANDARD.encode(b"{\"k\":\"v\"}"),
            "isBase64Encoded": true
        });
        let request = request_from_event(&event).unwrap();
        let answer = response_to_event(echo().oneshot(request).await.unwrap()).await;
        assert_eq!(answer["statusCode"], 201);
        assert_eq!(answer["isBase64Encoded"], false);
        assert_eq!(answer["cookies"], json!(["a=1", "b=2"]));
        assert!(answer["headers"].get("set-cookie").is_none());
        let seen: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            seen,
            json!({
                "method": "POST",
                "uri": "/api/v1/x?a=1&b=%20",
                "cookie": "s=1; t=2",
                "x-one": "uno",
                "body": "{\"k\":\"v\"}",
                "request_id": "r-1",
                "source_ip": "198.51.100.1",
                "domain": "h.lambda-url.us-east-1.on.aws",
            })
        );
    }

    #[tokio::test]
    async fn a_binary_answer_goes_as_base64_and_a_bad_event_is_refused() {
        let png = Response::builder()
            .header(header::CONTENT_TYPE, "image/png")
            .body(Body::from(vec![0x89, b'P', b'N', b'G', 0xff]))
            .unwrap();
        let answer = response_to_event(png).await;
        assert_eq!(answer["isBase64Encoded"], true);
        assert_eq!(
            answer["body"],
            STANDARD.encode([0x89, b'P', b'N', b'G', 0xff])
        );
        assert_eq!(
            request_from_event(&json!({ "rawPath": "/" })).unwrap_err(),
            NotAnEvent("method")
        );
        let bad_body = json!({
            "requestContext": { "http": { "method": "GET" } },
            "body": "!!!", "isBase64Encoded": true
        });
        assert_eq!(
            request_from_event(&bad_body).unwrap_err(),
            NotAnEvent("base64 body")
        );
    }
}
