//! Sandbox logs from CloudWatch Logs (feature `logs`): the two reads the
//! stream resolution and the event pages need, as plain data. Which
//! stream is the sandbox's is decided above ([`crate::logs`]).

use aws_sdk_cloudwatchlogs as logs;
use logs::types::OrderBy;

use crate::aws::failure::map_sdk_error;
use crate::error::SandboxError;
use crate::quiet::Quiet as _;

/// DescribeLogStreams' largest page.
pub(crate) const STREAMS_PER_PAGE: i32 = 50;

/// GetLogEvents' largest page.
pub(crate) const MAX_EVENTS_PER_PAGE: i32 = 10_000;

/// One page of stream names, and the token of the next one.
#[derive(Debug, Default)]
pub(crate) struct StreamPage {
    pub names: Vec<String>,
    pub next_token: Option<String>,
}

/// One page of events (milliseconds since the epoch, message), and
/// GetLogEvents' `nextForwardToken`.
#[derive(Debug, Default)]
pub(crate) struct EventPage {
    pub events: Vec<(i64, String)>,
    pub next_forward_token: Option<String>,
}

/// One DescribeLogStreams page; `None` when the group does not exist.
///
/// # Errors
/// Any other failure (mapped).
async fn described(
    request: logs::operation::describe_log_streams::builders::DescribeLogStreamsFluentBuilder,
) -> Result<Option<StreamPage>, SandboxError> {
    match request.send().quiet().await {
        Ok(out) => Ok(Some(stream_page(&out))),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(e) => Err(map_sdk_error("DescribeLogStreams", &e)),
    }
}

/// The reader over one client.
#[derive(Clone, Debug)]
pub(crate) struct LogsApi {
    client: logs::Client,
}

impl LogsApi {
    /// The reader over `config` (the client setup of build logs).
    pub(crate) fn new(config: &aws_types::SdkConfig) -> Self {
        Self {
            client: super::client(config),
        }
    }

    /// The streams of `group` whose names start with `prefix` (one page,
    /// by name); `None` when the group does not exist.
    ///
    /// # Errors
    /// Any other failure (mapped).
    pub(crate) async fn streams_with_prefix(
        &self,
        group: &str,
        prefix: &str,
    ) -> Result<Option<StreamPage>, SandboxError> {
        described(
            self.client
                .describe_log_streams()
                .log_group_name(group)
                .log_stream_name_prefix(prefix)
                .limit(STREAMS_PER_PAGE),
        )
        .await
    }

    /// One page of `group`'s streams, the most recently written first
    /// (`orderBy=LastEventTime`, descending); `None` when the group does
    /// not exist.
    ///
    /// # Errors
    /// Any other failure (mapped).
    pub(crate) async fn recent_streams(
        &self,
        group: &str,
        next_token: Option<String>,
    ) -> Result<Option<StreamPage>, SandboxError> {
        described(
            self.client
                .describe_log_streams()
                .log_group_name(group)
                .order_by(OrderBy::LastEventTime)
                .descending(true)
                .limit(STREAMS_PER_PAGE)
                .set_next_token(next_token),
        )
        .await
    }

    /// One page of `stream`'s events read forward: from the head
    /// (`startFromHead`, from `start_ms` when given) or from `token`.
    /// `None` when the group or the stream no longer exists.
    ///
    /// # Errors
    /// Any other failure (mapped).
    pub(crate) async fn events(
        &self,
        group: &str,
        stream: &str,
        start_ms: Option<i64>,
        token: Option<String>,
        limit: i32,
    ) -> Result<Option<EventPage>, SandboxError> {
        let out = self
            .client
            .get_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
            .start_from_head(true)
            .set_start_time(start_ms)
            .set_next_token(token)
            .limit(limit.clamp(1, MAX_EVENTS_PER_PAGE))
            .send()
            .quiet()
            .await;
        match out {
            Ok(out) => Ok(Some(EventPage {
                events: out
                    .events()
                    .iter()
                    .map(|e| {
                        let message = e.message().unwrap_or_default();
                        (
                            e.timestamp().unwrap_or(0),
                            message.trim_end_matches(['\r', '\n']).to_owned(),
                        )
                    })
                    .collect(),
                next_forward_token: out.next_forward_token().map(str::to_owned),
            })),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(map_sdk_error("GetLogEvents", &e)),
        }
    }
}

fn stream_page(
    out: &logs::operation::describe_log_streams::DescribeLogStreamsOutput,
) -> StreamPage {
    StreamPage {
        names: out
            .log_streams()
            .iter()
            .filter_map(|s| s.log_stream_name())
            .map(str::to_owned)
            .collect(),
        next_token: out.next_token().map(str::to_owned),
    }
}
