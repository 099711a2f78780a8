//! Build logs from CloudWatch Logs (feature `templates`): the newest
//! streams of an image's log group, their last events.

use crate::quiet::Quiet as _;
use aws_sdk_cloudwatchlogs as logs;
use logs::types::OrderBy;

use crate::aws::failure::map_sdk_error;
use crate::error::SandboxError;

/// The most streams and events per stream ever read.
const MAX_STREAMS: i32 = 50;
const MAX_EVENTS: i32 = 10_000;

/// The log reader over one client.
#[derive(Clone, Debug)]
pub(crate) struct BuildLogs {
    client: logs::Client,
}

impl BuildLogs {
    /// The reader over `config`.
    pub(crate) fn new(config: &aws_types::SdkConfig) -> Self {
        Self {
            client: super::client(config),
        }
    }

    /// The last `events` lines of each of the `streams` most recently
    /// written streams of `group`, the oldest stream first. A group that
    /// does not exist (yet) has no lines.
    ///
    /// # Errors
    /// Reading a stream failed (mapped).
    pub(crate) async fn latest(
        &self,
        group: &str,
        streams: i32,
        events: i32,
    ) -> Result<Vec<String>, SandboxError> {
        let described = self
            .client
            .describe_log_streams()
            .log_group_name(group)
            .order_by(OrderBy::LastEventTime)
            .descending(true)
            .limit(streams.clamp(1, MAX_STREAMS))
            .send()
            .quiet()
            .await;
        // No group, no permission to list: no lines (the build's own error
        // still says what failed).
        let Ok(described) = described else {
            return Ok(Vec::new());
        };
        let mut lines = Vec::new();
        for stream in described.log_streams().iter().rev() {
            let Some(name) = stream.log_stream_name() else {
                continue;
            };
            let out = self
                .client
                .get_log_events()
                .log_group_name(group)
                .log_stream_name(name)
                .limit(events.clamp(1, MAX_EVENTS))
                .send()
                .quiet()
                .await
                .map_err(|e| map_sdk_error("GetLogEvents", &e))?;
            lines.extend(
                out.events()
                    .iter()
                    .filter_map(|e| e.message())
                    .map(|m| m.trim_end_matches(['\r', '\n']).to_owned()),
            );
        }
        Ok(lines)
    }
}
