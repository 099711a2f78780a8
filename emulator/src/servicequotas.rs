//! The read side of Service Quotas on the control-plane port, what the
//! SDK's quota report reads: awsJson1.1, `POST /` with `X-Amz-Target:
//! ServiceQuotasV20190624.ListServiceQuotas`, SigV4 with the signing name
//! `servicequotas` (checked by the guard). The code `lambda` lists the
//! MicroVMs quotas at the region's defaults, or at the values a test set
//! ([`crate::Faults::applied_quota`]); `MaxResults` and `NextToken` page
//! it as AWS does.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::guard::Signed;
use super::registry::Shared;

/// The `X-Amz-Target` prefix of Service Quotas' operations.
pub(crate) const TARGET_PREFIX: &str = "ServiceQuotasV20190624.";
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
/// The regions whose accounts start with more memory and builds.
const LARGE_REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"];

/// The MicroVMs quotas of code `lambda`: code, name, default, and the
/// default of the large regions (AWS's quota page).
const QUOTAS: &[(&str, &str, f64, f64)] = &[
    ("L-535CA9B6", "RunMicrovm requests per second", 5.0, 5.0),
    ("L-91B95582", "RunMicrovm burst", 5.0, 5.0),
    ("L-118C44B3", "ResumeMicrovm requests per second", 5.0, 5.0),
    ("L-25EEC0A4", "ResumeMicrovm burst", 5.0, 5.0),
    ("L-90045317", "SuspendMicrovm requests per second", 2.0, 2.0),
    ("L-139F9A48", "SuspendMicrovm burst", 2.0, 2.0),
    (
        "L-74787B8A",
        "TerminateMicrovm requests per second",
        10.0,
        10.0,
    ),
    ("L-2CCA0501", "TerminateMicrovm burst", 10.0, 10.0),
    ("L-CE98C9E3", "GetMicrovm requests per second", 100.0, 100.0),
    ("L-C9C2110E", "GetMicrovm burst", 100.0, 100.0),
    (
        "L-7712260B",
        "CreateMicrovmAuthToken requests per second",
        50.0,
        50.0,
    ),
    ("L-D65D9F16", "CreateMicrovmAuthToken burst", 50.0, 50.0),
    (
        "L-B78D2ECC",
        "CreateMicrovmShellAuthToken requests per second",
        5.0,
        5.0,
    ),
    ("L-9A5E43A5", "CreateMicrovmShellAuthToken burst", 5.0, 5.0),
    (
        "L-CD1C0CC4",
        "MicroVM memory for ARM_64 (GB)",
        400.0,
        1024.0,
    ),
    ("L-72E0D058", "Concurrent MicroVM image builds", 5.0, 10.0),
    ("L-942E56BE", "MicroVM images", 100.0, 100.0),
    ("L-F8BECE9C", "Versions per MicroVM image", 50.0, 50.0),
];

/// Whether a request is a Service Quotas call: the guard checks its
/// signature for `servicequotas`.
pub(crate) fn is_call(method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    method == Method::POST && uri.path() == "/" && operation(headers).is_some()
}

/// The operation a request names, when it is a Service Quotas one.
pub(crate) fn operation(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
}

fn error(name: &'static str, message: impl Into<String>) -> Response {
    let mut resp = (
        StatusCode::BAD_REQUEST,
        json!({"__type": name, "message": message.into()}).to_string(),
    )
        .into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    headers.insert("x-amzn-errortype", HeaderValue::from_static(name));
    resp
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListInput {
    service_code: String,
    max_results: Option<usize>,
    next_token: Option<String>,
}

/// One Service Quotas call, already known to name `operation`.
pub(crate) fn handle(
    shared: &Arc<Shared>,
    signed: &Signed,
    operation: &str,
    body: &[u8],
) -> Response {
    if let Err(e) = signed.check() {
        return e.into_response();
    }
    if operation != "ListServiceQuotas" {
        return error(
            "UnknownOperationException",
            format!("the emulator serves ListServiceQuotas of Service Quotas, not {operation}"),
        );
    }
    let Ok(input) = serde_json::from_slice::<ListInput>(body) else {
        return error(
            "ValidationException",
            "the request body is not a JSON object with ServiceCode",
        );
    };
    if input.service_code != "lambda" {
        return error(
            "NoSuchResourceException",
            format!(
                "the emulator lists the quotas of code lambda only, not {}",
                input.service_code
            ),
        );
    }
    let size = input.max_results.unwrap_or(100);
    if !(1..=100).contains(&size) {
        return error(
            "ValidationException",
            "MaxResults must be between 1 and 100",
        );
    }
    let from = match input.next_token.as_deref().map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return error(
                "InvalidPaginationTokenException",
                "Invalid pagination token",
            );
        }
    };
    let region = &shared.settings.region;
    let account = &shared.settings.account_id;
    let set = shared.faults.applied_quotas();
    let listed: Vec<Value> = QUOTAS
        .iter()
        .filter_map(|(code, name, default, large)| {
            let default = if LARGE_REGIONS.contains(&region.as_str()) {
                *large
            } else {
                *default
            };
            let value = match set.get(*code) {
                Some(None) => return None,
                Some(Some(value)) => *value,
                None => default,
            };
            Some(json!({
                "ServiceCode": "lambda",
                "ServiceName": "AWS Lambda",
                "QuotaArn": format!("arn:aws:servicequotas:{region}:{account}:lambda/{code}"),
                "QuotaCode": code,
                "QuotaName": name,
                "Value": value,
                "Unit": "None",
                "Adjustable": true,
                "GlobalQuota": false,
            }))
        })
        .collect();
    let page: Vec<Value> = listed.iter().skip(from).take(size).cloned().collect();
    let mut answer = json!({ "Quotas": page });
    if from + size < listed.len() {
        answer["NextToken"] = json!((from + size).to_string());
    }
    let mut resp = (StatusCode::OK, answer.to_string()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp
}
