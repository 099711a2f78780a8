//! Sandbox logs (feature `logs`): the CloudWatch Logs stream of a sandbox
//! created with [`crate::SandboxLogging::cloudwatch`], found by its exact
//! name and read forward. See docs/sandbox-logs.md.
//!
//! The stream of sandbox `id`, image version `v`, started on UTC day
//! `YYYY/MM/DD`, is `YYYY/MM/DD[v]id` in the group `/rayito/<template
//! name>` (or the group the caller names). It is found by:
//!
//! 1. DescribeLogStreams with that name as the prefix, keeping only the
//!    stream of exactly that name;
//! 2. else, at most 10 pages of 50 streams, the most recently written
//!    first, keeping only names of exactly the pattern with this sandbox's
//!    version and id and a day on or after its start day. Anyone who may
//!    write to the group could create a stream whose name merely ends with
//!    the id; such a name never matches, so it is never read. Using this
//!    fallback logs a warning and sets [`LogReader::used_fallback`].
//!
//! A group that does not exist, or no stream found, is
//! [`SandboxError::no_logs`] (`NotFound`).
//!
//! ```no_run
//! # async fn demo(client: rayito::Client) -> Result<(), rayito::SandboxError> {
//! use rayito::logs::LogsQuery;
//! let logs = client.sandbox_logs("vm-123", &LogsQuery::default()).await?;
//! for event in &logs.events {
//!     println!("{:?} {}", event.timestamp, event.message);
//! }
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::aws::cloudwatch_logs::sandbox::{LogsApi, MAX_EVENTS_PER_PAGE};
use crate::error::SandboxError;
use crate::sandbox::client::Client;
use crate::sandbox::{check_log_group, default_log_group};

/// The events [`Client::sandbox_logs`] reads by default.
pub const DEFAULT_LIMIT: usize = 1_000;

/// The most events one query may ask for.
pub const MAX_LIMIT: usize = 100_000;

/// The most stream pages the fallback scan reads.
const SCAN_PAGES: usize = 10;

/// The most consecutive empty pages with a new token one read follows
/// (a peer that never repeats its token cannot keep a read going).
const MAX_EMPTY_PAGES: usize = 100;

/// The refusal of a `limit` of 0 or above [`MAX_LIMIT`].
pub(crate) const BAD_LIMIT: &str =
    "limit must be 1 to 100,000 events; pass a smaller limit and read again";

/// The refusal of a `since` before 1970.
pub(crate) const BAD_SINCE: &str = "since must not be before 1970 (UNIX_EPOCH)";

/// What [`Client::sandbox_logs`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogsQuery {
    /// The group (default `/rayito/<template name>` of the sandbox's image).
    pub log_group: Option<String>,
    /// The most events read (default [`DEFAULT_LIMIT`], 1 to [`MAX_LIMIT`]).
    pub limit: usize,
    /// Only events at or after this time.
    pub since: Option<SystemTime>,
}

impl Default for LogsQuery {
    fn default() -> Self {
        Self {
            log_group: None,
            limit: DEFAULT_LIMIT,
            since: None,
        }
    }
}

impl LogsQuery {
    crate::setters::setters! {
        /// Reads `log_group` instead of `/rayito/<template name>`.
        log_group: Some impl String;
        /// Reads at most `limit` events.
        limit: usize;
        /// Reads only events at or after `since`.
        since: Some SystemTime;
    }

    /// Refuses a bad value before any call, naming the argument.
    fn check(&self) -> Result<Option<i64>, SandboxError> {
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return Err(SandboxError::invalid_argument("limit", BAD_LIMIT));
        }
        if let Some(group) = &self.log_group {
            check_log_group(group)?;
        }
        self.since
            .map(|t| {
                t.duration_since(UNIX_EPOCH)
                    .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                    .map_err(|_| SandboxError::invalid_argument("since", BAD_SINCE))
            })
            .transpose()
    }
}

/// One line of a sandbox's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEvent {
    /// When it was written.
    pub timestamp: SystemTime,
    /// The line (without its line break).
    pub message: String,
    /// The stream it came from.
    pub stream: String,
}

/// What [`Client::sandbox_logs`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxLogs {
    /// The group read.
    pub log_group: String,
    /// The sandbox's stream.
    pub stream: String,
    /// The stream was found by the fallback scan, not by its expected name.
    pub used_fallback: bool,
    /// The events, oldest first.
    pub events: Vec<LogEvent>,
}

/// A sandbox's stream, read forward batch by batch (to follow it).
#[derive(Debug)]
pub struct LogReader {
    api: LogsApi,
    sandbox_id: String,
    group: String,
    stream: String,
    used_fallback: bool,
    start_ms: Option<i64>,
    /// GetLogEvents' last `nextForwardToken`: where the next read starts.
    token: Option<String>,
}

impl LogReader {
    /// The group read.
    pub fn log_group(&self) -> &str {
        &self.group
    }

    /// The sandbox's stream.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Whether the stream was found by the fallback scan.
    pub fn used_fallback(&self) -> bool {
        self.used_fallback
    }

    /// The next events, at most `max` (at least 1): pages of GetLogEvents
    /// until `nextForwardToken` repeats (nothing more for now) or `max`
    /// events were read. Call it again to follow the stream.
    ///
    /// # Errors
    /// [`SandboxError::no_logs`] when the stream or its group was deleted;
    /// a CloudWatch Logs failure (mapped).
    pub async fn read(&mut self, max: usize) -> Result<Vec<LogEvent>, SandboxError> {
        boxed!(Result<Vec<LogEvent>, SandboxError>, {
            let max = max.clamp(1, MAX_LIMIT);
            let mut out = Vec::new();
            let mut empty = 0usize;
            while out.len() < max {
                let want = i32::try_from(max - out.len())
                    .unwrap_or(MAX_EVENTS_PER_PAGE)
                    .min(MAX_EVENTS_PER_PAGE);
                let page = self
                    .api
                    .events(
                        &self.group,
                        &self.stream,
                        self.start_ms,
                        self.token.clone(),
                        want,
                    )
                    .await?
                    .ok_or_else(|| SandboxError::no_logs(&self.sandbox_id, &self.group))?;
                let got = page.events.len();
                // A page never holds more than asked (a hostile peer's
                // extra events are dropped).
                let room = max - out.len();
                out.extend(page.events.into_iter().take(room).map(|(ms, message)| {
                    LogEvent {
                        timestamp: UNIX_EPOCH
                            .checked_add(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
                            .unwrap_or(UNIX_EPOCH),
                        message,
                        stream: self.stream.clone(),
                    }
                }));
                let repeated =
                    page.next_forward_token.is_none() || page.next_forward_token == self.token;
                if page.next_forward_token.is_some() {
                    self.token = page.next_forward_token;
                }
                if repeated {
                    break;
                }
                empty = if got == 0 { empty + 1 } else { 0 };
                if empty >= MAX_EMPTY_PAGES {
                    break;
                }
            }
            Ok(out)
        })
    }
}

impl Client {
    /// Reads the CloudWatch Logs stream of sandbox `sandbox_id` (see
    /// [`crate::logs`]): GetMicrovm (its image, version and start day),
    /// the stream by the exact-name rules, then up to `query.limit`
    /// events from the head.
    ///
    /// # Errors
    /// `InvalidArgument` (`sandbox_id`, `limit`, `log_group`, `since`)
    /// before any call; `SandboxNotFound` when the control plane does not
    /// know the sandbox; [`SandboxError::no_logs`] when the group does not
    /// exist or holds no stream of the sandbox; `Unimplemented` for a
    /// client without an AWS configuration; CloudWatch Logs failures
    /// (mapped).
    pub async fn sandbox_logs(
        &self,
        sandbox_id: &str,
        query: &LogsQuery,
    ) -> Result<SandboxLogs, SandboxError> {
        boxed!(Result<SandboxLogs, SandboxError>, {
            let mut reader = self.open_sandbox_logs(sandbox_id, query).await?;
            let events = reader.read(query.limit).await?;
            Ok(SandboxLogs {
                log_group: reader.group,
                stream: reader.stream,
                used_fallback: reader.used_fallback,
                events,
            })
        })
    }

    /// Finds the stream of sandbox `sandbox_id` as
    /// [`Client::sandbox_logs`] does, and returns a reader positioned at
    /// its head (at `query.since` when given); `query.limit` is not used.
    ///
    /// # Errors
    /// As [`Client::sandbox_logs`].
    pub async fn open_sandbox_logs(
        &self,
        sandbox_id: &str,
        query: &LogsQuery,
    ) -> Result<LogReader, SandboxError> {
        boxed!(Result<LogReader, SandboxError>, {
            crate::sandbox::lifecycle::check_sandbox_id(sandbox_id)?;
            let start_ms = query.check()?;
            let Some(sdk_config) = self.backend().sdk_config.clone() else {
                return Err(SandboxError::unimplemented(
                    "sandbox_logs",
                    "this client has no AWS configuration to read CloudWatch Logs with",
                    Some("docs/sandbox-logs.md"),
                ));
            };
            let info = self.get_info_by_id(sandbox_id).await?;
            let group = query
                .log_group
                .clone()
                .unwrap_or_else(|| default_log_group(&info.image_arn));
            let day = utc_day(info.started_at.unwrap_or(UNIX_EPOCH));
            let api = LogsApi::new(&sdk_config);
            let (stream, used_fallback) =
                resolve(&api, &group, &day, &info.image_version, sandbox_id).await?;
            if used_fallback {
                tracing::warn!(
                    target: "rayito::logs",
                    sandbox_id,
                    "the sandbox's log stream was not under its expected name; read the most recent stream of exactly its pattern (fallback scan)"
                );
            }
            Ok(LogReader {
                api,
                sandbox_id: sandbox_id.to_owned(),
                group,
                stream,
                used_fallback,
                start_ms,
                token: None,
            })
        })
    }
}

/// The sandbox's stream and whether the fallback scan found it.
async fn resolve(
    api: &LogsApi,
    group: &str,
    day: &str,
    version: &str,
    id: &str,
) -> Result<(String, bool), SandboxError> {
    let expected = stream_name(day, version, id);
    let Some(page) = api.streams_with_prefix(group, &expected).await? else {
        return Err(SandboxError::no_logs(id, group));
    };
    if page.names.contains(&expected) {
        return Ok((expected, false));
    }
    let mut token = None;
    for _ in 0..SCAN_PAGES {
        let Some(page) = api.recent_streams(group, token).await? else {
            return Err(SandboxError::no_logs(id, group));
        };
        if let Some(found) = page
            .names
            .iter()
            .find(|n| is_sandbox_stream(n, day, version, id))
        {
            return Ok((found.clone(), true));
        }
        match page.next_token {
            Some(next) if !page.names.is_empty() => token = Some(next),
            _ => break,
        }
    }
    Err(SandboxError::no_logs(id, group))
}

/// `YYYY/MM/DD[<version>]<id>`.
pub(crate) fn stream_name(day: &str, version: &str, id: &str) -> String {
    format!("{day}[{version}]{id}")
}

/// `YYYY/MM/DD` of `t` in UTC.
pub(crate) fn utc_day(t: SystemTime) -> String {
    let text = crate::aws::time::rfc3339(t);
    text.get(..10).unwrap_or("1970-01-01").replace('-', "/")
}

/// Whether `name` is exactly `YYYY/MM/DD[<version>]<id>` with a real
/// date on or after `start_day` (a name that only ends with the id, or
/// carries another version, never is).
pub(crate) fn is_sandbox_stream(name: &str, start_day: &str, version: &str, id: &str) -> bool {
    let (Some(day), Some(rest)) = (name.get(..10), name.get(10..)) else {
        return false;
    };
    rest == format!("[{version}]{id}") && is_day(day) && day >= start_day
}

/// `YYYY/MM/DD`, a date that exists.
fn is_day(day: &str) -> bool {
    let b = day.as_bytes();
    let shape = b.len() == 10
        && b[4] == b'/'
        && b[7] == b'/'
        && [0, 1, 2, 3, 5, 6, 8, 9]
            .iter()
            .all(|&i| b[i].is_ascii_digit());
    shape && crate::aws::time::is_rfc3339(&format!("{}T00:00:00Z", day.replace('/', "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_pattern_names_of_this_sandbox_match() {
        let ok = |n: &str| is_sandbox_stream(n, "2026/12/01", "3", "vm-1");
        assert!(ok("2026/12/01[3]vm-1"));
        assert!(ok("2026/12/02[3]vm-1"), "a later day");
        assert!(!ok("2026/11/30[3]vm-1"), "before the start day");
        assert!(!ok("2026/12/01[4]vm-1"), "another version");
        assert!(!ok("2026/12/01[3]vm-10"), "another id");
        assert!(!ok("2026/12/01[3]x-vm-1"), "a suffix match");
        assert!(!ok("forged[3]vm-1"), "a forged prefix");
        assert!(!ok("x2026/12/01[3]vm-1"), "a longer prefix");
        assert!(!ok("2026/13/01[3]vm-1"), "no such month");
        assert!(!ok("2026/02/30[3]vm-1"), "no such day");
        assert!(!ok("2026-12-01[3]vm-1"), "dashes");
        assert!(!ok("[3]vm-1"));
        assert!(!ok("2026/12/01"));
        assert!(!ok("2026/1ü/01[3]vm-1"), "never a panic on multibyte text");
    }

    #[test]
    fn the_day_is_utc_and_names_are_built_from_it() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_083_200 + 86_399);
        assert_eq!(utc_day(t), "2026/12/01");
        assert_eq!(stream_name("2026/12/01", "3", "vm"), "2026/12/01[3]vm");
    }

    #[test]
    fn bad_queries_are_refused_naming_the_argument() {
        let err = LogsQuery::default().limit(0).check().unwrap_err();
        assert_eq!(err.to_string(), format!("invalid limit: {BAD_LIMIT}"));
        let err = LogsQuery::default()
            .limit(MAX_LIMIT + 1)
            .check()
            .unwrap_err();
        assert_eq!(err.to_string(), format!("invalid limit: {BAD_LIMIT}"));
        let err = LogsQuery::default()
            .log_group("bad group")
            .check()
            .unwrap_err();
        assert!(err.to_string().starts_with("invalid log_group: "), "{err}");
        let err = LogsQuery::default()
            .since(UNIX_EPOCH - Duration::from_secs(1))
            .check()
            .unwrap_err();
        assert_eq!(err.to_string(), format!("invalid since: {BAD_SINCE}"));
        assert_eq!(
            LogsQuery::default()
                .since(UNIX_EPOCH + Duration::from_millis(1_500))
                .check()
                .unwrap(),
            Some(1_500)
        );
    }
}
