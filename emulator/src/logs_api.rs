//! The read side of CloudWatch Logs on the control-plane port, what
//! `template logs` and a failed build read: awsJson1.1, `POST /` with
//! `X-Amz-Target: Logs_20140328.<Operation>`, SigV4 with the signing name
//! `logs` (checked by the guard). DescribeLogStreams and GetLogEvents over
//! [`super::logs::LogStore`]; any other Logs target answers
//! UnknownOperationException.
//!
//! Errors are awsJson's: HTTP 400, `x-amzn-errortype`, and the body
//! `{"__type": <Name>, "message": ...}` (the guard's signature errors keep
//! the control plane's 403s).

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api_error::ApiError;
use super::guard::Signed;
use super::logs::{LogEvent, LogStream};
use super::registry::Shared;

/// The `X-Amz-Target` prefix of CloudWatch Logs' operations.
const TARGET_PREFIX: &str = "Logs_20140328.";

/// awsJson1.1's content type.
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// DescribeLogStreams' `limit`: at most, and by default.
const MAX_STREAMS: i64 = 50;

/// GetLogEvents' `limit`: at most, and by default.
const MAX_EVENTS: i64 = 10_000;

/// GetLogEvents answers at most this many bytes of events, each counted as
/// its message's UTF-8 bytes plus 26 (CloudWatch's accounting).
const MAX_EVENT_BYTES: usize = 1_048_576;
const EVENT_OVERHEAD: usize = 26;

/// Whether a request is a CloudWatch Logs call (`POST /` with a Logs
/// target): the guard checks its signature for `logs`.
pub(crate) fn is_logs_call(method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    method == Method::POST
        && uri.path() == "/"
        && target(headers).is_some_and(|t| t.starts_with(TARGET_PREFIX))
}

fn target(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-amz-target").and_then(|v| v.to_str().ok())
}

/// One awsJson1.1 error.
#[derive(Debug)]
struct LogsError {
    name: &'static str,
    message: String,
}

impl LogsError {
    fn new(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            name,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new("InvalidParameterException", message)
    }

    /// The message AWS's model validation gives a number out of range.
    fn out_of_range(member: &str, value: i64, min: i64, max: i64) -> Self {
        let rule = if value < min {
            format!("greater than or equal to {min}")
        } else {
            format!("less than or equal to {max}")
        };
        Self::invalid(format!(
            "1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: Member must have value {rule}"
        ))
    }

    fn group_not_found() -> Self {
        Self::new(
            "ResourceNotFoundException",
            "The specified log group does not exist.",
        )
    }

    fn stream_not_found() -> Self {
        Self::new(
            "ResourceNotFoundException",
            "The specified log stream does not exist.",
        )
    }

    fn bad_token() -> Self {
        Self::invalid("The specified nextToken is invalid.")
    }
}

impl IntoResponse for LogsError {
    fn into_response(self) -> Response {
        let mut resp = (
            StatusCode::BAD_REQUEST,
            json!({"__type": self.name, "message": self.message}).to_string(),
        )
            .into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        headers.insert("x-amzn-errortype", HeaderValue::from_static(self.name));
        resp
    }
}

fn reply(value: Value) -> Response {
    let mut resp = (StatusCode::OK, value.to_string()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp
}

/// `POST /`: a CloudWatch Logs call, or an unknown operation.
pub(crate) async fn handle(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(operation) = super::servicequotas::operation(&headers) {
        return super::servicequotas::handle(&shared, &signed, operation, &body);
    }
    let Some(operation) = target(&headers).and_then(|t| t.strip_prefix(TARGET_PREFIX)) else {
        // Not Logs: STS's GetCallerIdentity is the other call on `POST /`.
        if target(&headers).is_none() && super::sts::is_get_caller_identity(&body) {
            if let Err(e) = signed.check() {
                return e.into_response();
            }
            return super::sts::answer(&shared.settings.account_id);
        }
        return ApiError::unknown_operation().into_response();
    };
    if let Err(e) = signed.check() {
        return e.into_response();
    }
    let result = match operation {
        "DescribeLogStreams" => parse(&body).and_then(|input| describe_log_streams(&shared, input)),
        "GetLogEvents" => parse(&body).and_then(|input| get_log_events(&shared, input)),
        _ => Err(LogsError::new(
            "UnknownOperationException",
            format!(
                "the emulator serves DescribeLogStreams and GetLogEvents of CloudWatch Logs, not {operation}"
            ),
        )),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, LogsError> {
    let body = if body.is_empty() {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|_| {
        LogsError::new(
            "SerializationException",
            "the request body is not a JSON object of the operation's members",
        )
    })
}

/// The group a call names (`logGroupName`, or `logGroupIdentifier`: a
/// name or the group's ARN).
fn group_name(
    shared: &Shared,
    name: Option<String>,
    identifier: Option<String>,
) -> Result<String, LogsError> {
    match (name, identifier) {
        (Some(_), Some(_)) => Err(LogsError::invalid(
            "LogGroup name and LogGroup ARN are mutually exclusive parameters.",
        )),
        (None, None) => Err(LogsError::invalid(
            "Either logGroupName or logGroupIdentifier must be given.",
        )),
        (Some(name), None) => Ok(name),
        (None, Some(id)) => {
            let s = &shared.settings;
            let prefix = format!("arn:aws:logs:{}:{}:log-group:", s.region, s.account_id);
            match id.strip_prefix(&prefix) {
                Some(rest) => Ok(rest.strip_suffix(":*").unwrap_or(rest).to_owned()),
                None if id.starts_with("arn:") => Err(LogsError::group_not_found()),
                None => Ok(id),
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribeLogStreamsInput {
    log_group_name: Option<String>,
    log_group_identifier: Option<String>,
    log_stream_name_prefix: Option<String>,
    order_by: Option<String>,
    descending: Option<bool>,
    next_token: Option<String>,
    limit: Option<i64>,
}

const STREAMS_TOKEN: &str = "rayito-emulator-streams:";

fn describe_log_streams(
    shared: &Shared,
    input: DescribeLogStreamsInput,
) -> Result<Response, LogsError> {
    let limit = input.limit.unwrap_or(MAX_STREAMS);
    if !(1..=MAX_STREAMS).contains(&limit) {
        return Err(LogsError::out_of_range("limit", limit, 1, MAX_STREAMS));
    }
    let by_last_event = match input.order_by.as_deref() {
        None | Some("LogStreamName") => false,
        Some("LastEventTime") => true,
        Some(_) => {
            return Err(LogsError::invalid(
                "1 validation error detected: Value at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: [LogStreamName, LastEventTime]",
            ));
        }
    };
    if by_last_event && input.log_stream_name_prefix.is_some() {
        return Err(LogsError::invalid(
            "Cannot order by LastEventTime with a logStreamNamePrefix.",
        ));
    }
    let start = match &input.next_token {
        None => 0,
        Some(token) => decode_offset(token).ok_or_else(LogsError::bad_token)?,
    };
    let group = group_name(shared, input.log_group_name, input.log_group_identifier)?;
    let streams = shared
        .logs
        .streams(&group)
        .ok_or_else(LogsError::group_not_found)?;
    let prefix = input.log_stream_name_prefix.unwrap_or_default();
    let mut listed: Vec<(String, LogStream)> = streams
        .into_iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .collect();
    // Names are unique: ties on the last event fall back to them.
    if by_last_event {
        listed.sort_by(|(an, a), (bn, b)| a.last_event_ms.cmp(&b.last_event_ms).then(an.cmp(bn)));
    }
    if input.descending.unwrap_or(false) {
        listed.reverse();
    }
    let limit = usize::try_from(limit).unwrap_or(1);
    let end = start.saturating_add(limit).min(listed.len());
    let page = listed.get(start..end).unwrap_or_default();
    let s = &shared.settings;
    let items: Vec<Value> = page
        .iter()
        .map(|(name, stream)| {
            let mut item = json!({
                "logStreamName": name,
                "creationTime": stream.created_ms,
                "arn": format!("arn:aws:logs:{}:{}:log-group:{group}:log-stream:{name}", s.region, s.account_id),
                "storedBytes": 0,
            });
            if let (Some(first), Some(last)) = (stream.events.first(), stream.events.last()) {
                item["firstEventTimestamp"] = json!(first.timestamp_ms);
                item["lastEventTimestamp"] = json!(last.timestamp_ms);
                item["lastIngestionTime"] = json!(last.timestamp_ms);
            }
            item
        })
        .collect();
    let mut out = json!({ "logStreams": items });
    if end < listed.len() {
        out["nextToken"] = json!(URL_SAFE_NO_PAD.encode(format!("{STREAMS_TOKEN}{end}")));
    }
    Ok(reply(out))
}

fn decode_offset(token: &str) -> Option<usize> {
    let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.strip_prefix(STREAMS_TOKEN)?.parse().ok()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetLogEventsInput {
    log_group_name: Option<String>,
    log_group_identifier: Option<String>,
    log_stream_name: Option<String>,
    start_time: Option<i64>,
    end_time: Option<i64>,
    next_token: Option<String>,
    limit: Option<i64>,
    start_from_head: Option<bool>,
}

/// Where a GetLogEvents page starts: reading forward from an index, or
/// backward from one (the page ends just before it).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cursor {
    Forward(usize),
    Backward(usize),
}

impl Cursor {
    /// `f/<56 digits>` or `b/<56 digits>`, the shape of AWS's tokens.
    fn token(self) -> String {
        match self {
            Cursor::Forward(i) => format!("f/{i:056}"),
            Cursor::Backward(i) => format!("b/{i:056}"),
        }
    }

    fn parse(token: &str) -> Option<Cursor> {
        let (direction, digits) = token.split_once('/')?;
        if digits.is_empty() || digits.len() > 56 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Only digits: a failure is an overflow, an index past any stream.
        let index = digits.parse::<usize>().unwrap_or(usize::MAX);
        match direction {
            "f" => Some(Cursor::Forward(index)),
            "b" => Some(Cursor::Backward(index)),
            _ => None,
        }
    }
}

fn get_log_events(shared: &Shared, input: GetLogEventsInput) -> Result<Response, LogsError> {
    let limit = input.limit.unwrap_or(MAX_EVENTS);
    if !(1..=MAX_EVENTS).contains(&limit) {
        return Err(LogsError::out_of_range("limit", limit, 1, MAX_EVENTS));
    }
    let Some(stream_name) = input.log_stream_name else {
        return Err(LogsError::invalid(
            "1 validation error detected: Value null at 'logStreamName' failed to satisfy constraint: Member must not be null",
        ));
    };
    let cursor = match &input.next_token {
        Some(token) => Cursor::parse(token).ok_or_else(LogsError::bad_token)?,
        None if input.start_from_head.unwrap_or(false) => Cursor::Forward(0),
        None => Cursor::Backward(usize::MAX),
    };
    let group = group_name(shared, input.log_group_name, input.log_group_identifier)?;
    let streams = shared
        .logs
        .streams(&group)
        .ok_or_else(LogsError::group_not_found)?;
    let stream = streams
        .get(&stream_name)
        .ok_or_else(LogsError::stream_not_found)?;
    let events: Vec<&LogEvent> = stream
        .events
        .iter()
        .filter(|e| input.start_time.is_none_or(|t| e.timestamp_ms >= t))
        .filter(|e| input.end_time.is_none_or(|t| e.timestamp_ms < t))
        .collect();
    let limit = usize::try_from(limit).unwrap_or(1);
    let (lo, hi) = page(&events, cursor, limit);
    let items: Vec<Value> = events[lo..hi]
        .iter()
        .map(|e| {
            json!({
                "timestamp": e.timestamp_ms,
                "message": e.message,
                "ingestionTime": e.timestamp_ms,
            })
        })
        .collect();
    Ok(reply(json!({
        "events": items,
        "nextForwardToken": Cursor::Forward(hi).token(),
        "nextBackwardToken": Cursor::Backward(lo).token(),
    })))
}

/// The events `[lo, hi)` of the page at `cursor`: at most `limit` events
/// and [`MAX_EVENT_BYTES`] (at least one event when there is one), read forward or backward from its index
/// (clamped to the events there are).
fn page(events: &[&LogEvent], cursor: Cursor, limit: usize) -> (usize, usize) {
    let size = |e: &LogEvent| e.message.len().saturating_add(EVENT_OVERHEAD);
    let mut bytes = 0usize;
    // The first event always fits: a page never stalls on a long line.
    let mut fits = |e: &LogEvent| {
        let first = bytes == 0;
        bytes = bytes.saturating_add(size(e));
        first || bytes <= MAX_EVENT_BYTES
    };
    match cursor {
        Cursor::Forward(start) => {
            let lo = start.min(events.len());
            let hi = events[lo..]
                .iter()
                .take(limit)
                .take_while(|e| fits(e))
                .count()
                + lo;
            (lo, hi)
        }
        Cursor::Backward(end) => {
            let hi = end.min(events.len());
            let taken = events[..hi]
                .iter()
                .rev()
                .take(limit)
                .take_while(|e| fits(e))
                .count();
            (hi - taken, hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: usize, message_len: usize) -> Vec<LogEvent> {
        (0..n)
            .map(|i| LogEvent {
                timestamp_ms: i64::try_from(i).unwrap(),
                message: "x".repeat(message_len),
            })
            .collect()
    }

    #[test]
    fn pages_go_forward_and_backward_and_stop_at_the_ends() {
        let owned = events(10, 1);
        let all: Vec<&LogEvent> = owned.iter().collect();
        assert_eq!(page(&all, Cursor::Forward(0), 4), (0, 4));
        assert_eq!(page(&all, Cursor::Forward(8), 4), (8, 10));
        assert_eq!(page(&all, Cursor::Forward(10), 4), (10, 10));
        assert_eq!(page(&all, Cursor::Forward(usize::MAX), 4), (10, 10));
        assert_eq!(page(&all, Cursor::Backward(usize::MAX), 4), (6, 10));
        assert_eq!(page(&all, Cursor::Backward(3), 4), (0, 3));
        assert_eq!(page(&all, Cursor::Backward(0), 4), (0, 0));
    }

    #[test]
    fn a_page_holds_at_most_a_mebibyte() {
        // 100 events of 100,000 bytes: 10 fit in 1,048,576 bytes.
        let owned = events(100, 100_000);
        let all: Vec<&LogEvent> = owned.iter().collect();
        assert_eq!(page(&all, Cursor::Forward(0), 10_000), (0, 10));
        assert_eq!(page(&all, Cursor::Backward(100), 10_000), (90, 100));
        let huge = events(3, 2 * MAX_EVENT_BYTES);
        let all: Vec<&LogEvent> = huge.iter().collect();
        assert_eq!(page(&all, Cursor::Forward(0), 10_000), (0, 1));
        assert_eq!(page(&all, Cursor::Backward(3), 10_000), (2, 3));
    }

    #[test]
    fn tokens_round_trip_and_junk_is_refused() {
        for c in [
            Cursor::Forward(0),
            Cursor::Backward(7),
            Cursor::Forward(123_456),
        ] {
            assert_eq!(Cursor::parse(&c.token()), Some(c));
        }
        assert_eq!(Cursor::Forward(5).token().len(), 58);
        for bad in [
            "",
            "f/",
            "x/1",
            "f/-1",
            "f/1a",
            "f1",
            &format!("f/{}", "9".repeat(57)),
        ] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
        // Far beyond any stream: clamped when read, never an overflow.
        assert_eq!(
            Cursor::parse(&format!("f/{}", "9".repeat(56))),
            Some(Cursor::Forward(usize::MAX))
        );
    }
}
