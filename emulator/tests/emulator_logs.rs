//! The read side of CloudWatch Logs on the emulator's control-plane port,
//! through the real `aws-sdk-cloudwatchlogs` client: what `template logs`
//! and a failed build read (DescribeLogStreams by last event, then the
//! newest events of a stream), and the errors the client maps.

use std::time::Duration;

use aws_sdk_cloudwatchlogs as cwl;
use aws_sdk_cloudwatchlogs::config::retry::RetryConfig;
use aws_sdk_cloudwatchlogs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_cloudwatchlogs::error::ProvideErrorMetadata as _;
use aws_sdk_cloudwatchlogs::types::OrderBy;
use rayito_emulator::{Emulator, EmulatorConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const GROUP: &str = "/rayito/my-template";

fn client_with_secret(emu: &Emulator, secret: &str) -> cwl::Client {
    let conf = cwl::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            &emu.access_key().id,
            secret,
            None,
            None,
            "test",
        ))
        .endpoint_url(emu.endpoint_url())
        .retry_config(RetryConfig::disabled())
        .build();
    cwl::Client::from_conf(conf)
}

fn client(emu: &Emulator) -> cwl::Client {
    client_with_secret(emu, &emu.access_key().secret)
}

async fn start() -> Emulator {
    Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts")
}

fn parts<E: cwl::error::ProvideErrorMetadata>(
    e: &cwl::error::SdkError<E, cwl::config::http::HttpResponse>,
) -> (u16, String, String) {
    let status = e.raw_response().map_or(0, |r| r.status().as_u16());
    (
        status,
        e.code().unwrap_or("").to_owned(),
        e.message().unwrap_or("").to_owned(),
    )
}

fn lines(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("#{i} line")).collect()
}

/// Appends to `streams` in this order, a few milliseconds apart, so that
/// their last events are ordered the same way.
async fn append_in_order(emu: &Emulator, streams: &[&str]) {
    for (i, stream) in streams.iter().enumerate() {
        emu.append_log_lines(GROUP, stream, lines(i..i + 1));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn streams_are_listed_by_last_event_newest_first_with_a_limit() {
    let emu = start().await;
    let logs = client(&emu);
    // By name: a, b, c. By last event: c, a, b (b written last).
    append_in_order(&emu, &["c", "a", "b"]).await;

    let page = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .order_by(OrderBy::LastEventTime)
        .descending(true)
        .limit(2)
        .send()
        .await
        .expect("describe");
    let names: Vec<&str> = page
        .log_streams()
        .iter()
        .filter_map(|s| s.log_stream_name())
        .collect();
    assert_eq!(names, ["b", "a"]);
    let first = &page.log_streams()[0];
    let last_event = first.last_event_timestamp().expect("lastEventTimestamp");
    assert!(
        first
            .first_event_timestamp()
            .is_some_and(|t| t <= last_event)
    );
    assert!(first.creation_time().is_some_and(|t| t <= last_event));
    assert_eq!(
        first.arn(),
        Some("arn:aws:logs:us-east-1:000000000000:log-group:/rayito/my-template:log-stream:b")
    );
    let token = page.next_token().expect("a next page").to_owned();
    let rest = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .order_by(OrderBy::LastEventTime)
        .descending(true)
        .limit(2)
        .next_token(token)
        .send()
        .await
        .expect("the next page");
    let names: Vec<&str> = rest
        .log_streams()
        .iter()
        .filter_map(|s| s.log_stream_name())
        .collect();
    assert_eq!(names, ["c"]);
    assert_eq!(rest.next_token(), None, "the last page");

    // Oldest first, and by name (the default order).
    let oldest = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .order_by(OrderBy::LastEventTime)
        .send()
        .await
        .unwrap();
    let names: Vec<&str> = oldest
        .log_streams()
        .iter()
        .filter_map(|s| s.log_stream_name())
        .collect();
    assert_eq!(names, ["c", "a", "b"]);
    let by_name = logs
        .describe_log_streams()
        .log_group_identifier(format!(
            "arn:aws:logs:us-east-1:000000000000:log-group:{GROUP}:*"
        ))
        .log_stream_name_prefix("")
        .send()
        .await
        .unwrap();
    let names: Vec<&str> = by_name
        .log_streams()
        .iter()
        .filter_map(|s| s.log_stream_name())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[tokio::test]
async fn events_are_the_newest_m_oldest_first_and_page_both_ways() {
    let emu = start().await;
    let logs = client(&emu);
    let stream = "2026/12/01[1]build-1";
    emu.append_log_lines(GROUP, stream, lines(0..10));

    let newest = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name(stream)
        .limit(3)
        .send()
        .await
        .expect("get");
    let got: Vec<&str> = newest.events().iter().filter_map(|e| e.message()).collect();
    assert_eq!(got, ["#7 line", "#8 line", "#9 line"]);
    let e = &newest.events()[0];
    assert!(e.timestamp().is_some() && e.ingestion_time().is_some());

    let older = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name(stream)
        .limit(3)
        .next_token(newest.next_backward_token().unwrap())
        .send()
        .await
        .expect("older");
    let got: Vec<&str> = older.events().iter().filter_map(|e| e.message()).collect();
    assert_eq!(got, ["#4 line", "#5 line", "#6 line"]);

    // From the head, forward, until the token comes back unchanged.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..10 {
        let page = logs
            .get_log_events()
            .log_group_name(GROUP)
            .log_stream_name(stream)
            .limit(4)
            .start_from_head(true)
            .set_next_token(token.clone())
            .send()
            .await
            .unwrap();
        seen.extend(
            page.events()
                .iter()
                .filter_map(|e| e.message().map(str::to_owned)),
        );
        let next = page.next_forward_token().map(str::to_owned);
        if next == token {
            break;
        }
        token = next;
    }
    assert_eq!(seen, lines(0..10));

    // A line appended later is read from the last forward token.
    emu.append_log_lines(GROUP, stream, lines(10..11));
    let tail = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name(stream)
        .set_next_token(token)
        .send()
        .await
        .unwrap();
    let got: Vec<&str> = tail.events().iter().filter_map(|e| e.message()).collect();
    assert_eq!(got, ["#10 line"]);

    // Without a limit: every event (up to 10,000), oldest first.
    let all = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name(stream)
        .send()
        .await
        .unwrap();
    assert_eq!(all.events().len(), 11);
}

#[tokio::test]
async fn unknown_groups_and_streams_and_bad_arguments_are_the_models_errors() {
    let emu = start().await;
    let logs = client(&emu);
    emu.append_log_lines(GROUP, "s", lines(0..1));

    let err = logs
        .describe_log_streams()
        .log_group_name("/rayito/missing")
        .order_by(OrderBy::LastEventTime)
        .descending(true)
        .limit(1)
        .send()
        .await
        .expect_err("no such group");
    assert_eq!(
        parts(&err),
        (
            400,
            "ResourceNotFoundException".to_owned(),
            "The specified log group does not exist.".to_owned()
        )
    );
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception())
    );
    let err = logs
        .get_log_events()
        .log_group_name("/rayito/missing")
        .log_stream_name("s")
        .send()
        .await
        .expect_err("no such group");
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception())
    );
    let err = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name("missing")
        .send()
        .await
        .expect_err("no such stream");
    assert_eq!(parts(&err).2, "The specified log stream does not exist.");

    let invalid = |e: &cwl::error::SdkError<_, _>| parts(e);
    let err = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .limit(51)
        .send()
        .await
        .expect_err("limit above 50");
    assert_eq!(
        invalid(&err),
        (
            400,
            "InvalidParameterException".to_owned(),
            "1 validation error detected: Value '51' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 50".to_owned()
        )
    );
    let err = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .limit(0)
        .send()
        .await
        .expect_err("limit 0");
    assert_eq!(
        parts(&err).2,
        "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1"
    );
    let err = logs
        .get_log_events()
        .log_group_name(GROUP)
        .log_stream_name("s")
        .limit(10_001)
        .send()
        .await
        .expect_err("limit above 10,000");
    assert_eq!(
        parts(&err).2,
        "1 validation error detected: Value '10001' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 10000"
    );
    let err = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .order_by(OrderBy::LastEventTime)
        .log_stream_name_prefix("s")
        .send()
        .await
        .expect_err("prefix with LastEventTime");
    assert_eq!(
        parts(&err),
        (
            400,
            "InvalidParameterException".to_owned(),
            "Cannot order by LastEventTime with a logStreamNamePrefix.".to_owned()
        )
    );
    for token in ["x", "f/12a"] {
        let err = logs
            .get_log_events()
            .log_group_name(GROUP)
            .log_stream_name("s")
            .next_token(token)
            .send()
            .await
            .expect_err("a token the emulator never gave");
        assert_eq!(parts(&err).2, "The specified nextToken is invalid.");
    }
    let err = logs
        .describe_log_streams()
        .log_group_name(GROUP)
        .next_token("not-a-token")
        .send()
        .await
        .expect_err("a token the emulator never gave");
    assert_eq!(parts(&err).2, "The specified nextToken is invalid.");

    // Writes are not emulated.
    let err = logs
        .create_log_group()
        .log_group_name("/rayito/new")
        .send()
        .await
        .expect_err("not served");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (400, "UnknownOperationException")
    );
}

#[tokio::test]
async fn calls_must_be_signed_with_the_key_for_logs() {
    let emu = start().await;
    emu.append_log_lines(GROUP, "s", lines(0..1));
    let err = client_with_secret(&emu, "not-the-secret")
        .describe_log_streams()
        .log_group_name(GROUP)
        .send()
        .await
        .expect_err("a wrong secret");
    assert_eq!(
        (parts(&err).0, parts(&err).1.as_str()),
        (403, "InvalidSignatureException")
    );

    // Signed by the key, but for `lambda` (what AccessKey::sign does).
    let url = emu.endpoint_url();
    let body = format!(r#"{{"logGroupName":"{GROUP}"}}"#);
    let headers = emu
        .access_key()
        .sign("POST", &format!("{url}/"), body.as_bytes(), "us-east-1")
        .unwrap();
    let (status, text) = post_logs(&emu, &headers, &body).await;
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("Credential should be scoped to correct service: 'logs'."),
        "{text}"
    );
    assert!(!text.contains("#0 line"), "{text}");

    // No signature at all.
    let (status, text) = post_logs(&emu, &[], &body).await;
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("MissingAuthenticationTokenException"),
        "{text}"
    );
}

/// POSTs a DescribeLogStreams body with `headers` added; status and text.
async fn post_logs(emu: &Emulator, headers: &[(String, String)], body: &str) -> (u16, String) {
    let addr = emu.endpoint_url().trim_start_matches("http://").to_owned();
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-amz-json-1.1\r\n\
         X-Amz-Target: Logs_20140328.DescribeLogStreams\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut out))
        .await
        .expect("an answer")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
