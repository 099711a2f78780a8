//! Sandbox metrics: a snapshot (`HealthService.Metrics`) and the agent's
//! sampled history (`MetricsHistory`), on a handle or by id with the access
//! token. See docs/metrics.md.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{PROXY_TOKEN_TTL, Sandbox, proxy_minter};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::client::Client;
use crate::secret::Secret;
use crate::state::SandboxState;
use crate::transport::{AGENT_PORT, AgentConn};

/// The refusals of [`MetricsHistoryQuery`] (the reason part of
/// `invalid <argument>: <reason>`).
pub(crate) mod msg {
    /// `start` or `end` before 1970.
    pub(crate) const BEFORE_1970: &str = "the time must not be before 1970 (UNIX_EPOCH)";
    /// `start` after `end`.
    pub(crate) const START_AFTER_END: &str = "start must not be after end; swap them or drop one";
    /// `max_points` of 0.
    pub(crate) const MAX_POINTS_ZERO: &str =
        "max_points must be at least 1; pass None for every sample";
}

/// One reading of a sandbox's resources.
///
/// `cpu_used_pct` is the share of all `cpu_count` CPUs in percent (0 to
/// 100); memory and disk are bytes. `mem_cache_bytes` is the page cache
/// (0 from agents that do not report it).
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxMetrics {
    /// CPU use in percent of all CPUs (0..=100).
    pub cpu_used_pct: f64,
    /// Memory in use, without the page cache.
    pub mem_used_bytes: u64,
    /// Memory available to the sandbox.
    pub mem_total_bytes: u64,
    /// Page cache (0 on old agents).
    pub mem_cache_bytes: u64,
    /// Used bytes of the filesystem holding the sandbox root.
    pub disk_used_bytes: u64,
    /// Size of that filesystem.
    pub disk_total_bytes: u64,
    /// CPUs the sandbox may use.
    pub cpu_count: u32,
    /// When the reading was taken (the agent's clock).
    pub timestamp: SystemTime,
}

impl SandboxMetrics {
    /// From the agent's message; a time before 1970 (a hostile or broken
    /// peer) reads as 1970, a CPU share outside 0..=100 is clamped.
    fn from_pb(m: &pb::MetricsResponse) -> Self {
        let ms = u64::try_from(m.timestamp_unix_ms).unwrap_or(0);
        let cpu = if m.cpu_used_pct.is_finite() {
            m.cpu_used_pct.clamp(0.0, 100.0)
        } else {
            0.0
        };
        Self {
            cpu_used_pct: cpu,
            mem_used_bytes: m.mem_used_bytes,
            mem_total_bytes: m.mem_total_bytes,
            mem_cache_bytes: m.mem_cache_bytes,
            disk_used_bytes: m.disk_used_bytes,
            disk_total_bytes: m.disk_total_bytes,
            cpu_count: m.cpu_count,
            timestamp: UNIX_EPOCH
                .checked_add(Duration::from_millis(ms))
                .unwrap_or(UNIX_EPOCH),
        }
    }
}

/// Which part of the history [`Sandbox::get_metrics_history`] returns.
///
/// Both bounds are inclusive; `None` is unbounded. `max_points` reduces
/// the series to that many points (each the last sample of its segment,
/// with the segment's mean CPU); `None` returns every sample.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsHistoryQuery {
    /// The earliest sample time (inclusive).
    pub start: Option<SystemTime>,
    /// The latest sample time (inclusive).
    pub end: Option<SystemTime>,
    /// At most this many points (at least 1).
    pub max_points: Option<u32>,
}

impl MetricsHistoryQuery {
    /// Every sample the agent keeps (up to 8 h).
    pub fn new() -> Self {
        Self::default()
    }

    crate::setters::setters! {
        /// Samples at or after `start`.
        start: Some SystemTime;
        /// Samples at or before `end`.
        end: Some SystemTime;
        /// At most `max_points` points.
        max_points: Some u32;
    }

    /// The wire request, or the refusal naming the argument (no I/O).
    fn to_request(&self) -> Result<pb::MetricsHistoryRequest, SandboxError> {
        let start = self.start.map(|t| unix_ms("start", t)).transpose()?;
        let end = self.end.map(|t| unix_ms("end", t)).transpose()?;
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(SandboxError::invalid_argument(
                "start",
                msg::START_AFTER_END,
            ));
        }
        if self.max_points == Some(0) {
            return Err(SandboxError::invalid_argument(
                "max_points",
                msg::MAX_POINTS_ZERO,
            ));
        }
        Ok(pb::MetricsHistoryRequest {
            start_unix_ms: start.unwrap_or(0),
            end_unix_ms: end.unwrap_or(0),
            max_points: self.max_points.unwrap_or(0),
        })
    }
}

/// Checks `query` (no I/O).
pub(crate) fn check_query(query: &MetricsHistoryQuery) -> Result<(), SandboxError> {
    query.to_request().map(drop)
}

/// Milliseconds since 1970 of `t` (saturating far in the future).
fn unix_ms(argument: &'static str, t: SystemTime) -> Result<i64, SandboxError> {
    let since = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| SandboxError::invalid_argument(argument, msg::BEFORE_1970))?;
    Ok(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

async fn snapshot(conn: &AgentConn, timeout: Duration) -> Result<SandboxMetrics, SandboxError> {
    let m = conn.metrics(timeout).await?;
    Ok(SandboxMetrics::from_pb(&m))
}

async fn history(
    conn: &AgentConn,
    request: pb::MetricsHistoryRequest,
    timeout: Duration,
) -> Result<Vec<SandboxMetrics>, SandboxError> {
    let response = conn.metrics_history(request, timeout).await?;
    Ok(response
        .samples
        .iter()
        .map(SandboxMetrics::from_pb)
        .collect())
}

/// The sandbox's resources (a borrowed view: `sandbox.metrics()`).
#[derive(Debug, Clone, Copy)]
pub struct Metrics<'a> {
    sandbox: &'a Sandbox,
}

impl<'a> Metrics<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self { sandbox }
    }

    /// The sandbox's resources now: CPU over the agent's 100 ms window,
    /// memory, disk (HealthService.Metrics).
    ///
    /// # Errors
    /// `Unimplemented` (feature `get_metrics`) from an agent without
    /// metrics; the RPC's failures (`SandboxState` while suspended, ...).
    pub async fn current(&self) -> Result<SandboxMetrics, SandboxError> {
        let sandbox = self.sandbox;
        boxed!(Result<SandboxMetrics, SandboxError>, {
            snapshot(sandbox.conn(), sandbox.request_timeout()).await
        })
    }

    /// The agent's sampled history (one sample per 5 s, 8 h kept, none
    /// while suspended), oldest first, within `query`.
    ///
    /// # Errors
    /// `InvalidArgument` before any call: `start` or `end` before 1970,
    /// `start` after `end`, `max_points` 0. `Unimplemented` (feature
    /// `get_metrics_history`) from an agent without it; the RPC's failures.
    pub async fn history(
        &self,
        query: MetricsHistoryQuery,
    ) -> Result<Vec<SandboxMetrics>, SandboxError> {
        let sandbox = self.sandbox;
        boxed!(Result<Vec<SandboxMetrics>, SandboxError>, {
            let request = query.to_request()?;
            history(sandbox.conn(), request, sandbox.request_timeout()).await
        })
    }
}

impl Sandbox {
    /// Deprecated spelling of [`Metrics::current`].
    ///
    /// # Errors
    /// As [`Metrics::current`].
    #[deprecated(note = "use `sandbox.metrics().current()`")]
    pub async fn get_metrics(&self) -> Result<SandboxMetrics, SandboxError> {
        self.metrics().current().await
    }

    /// Deprecated spelling of [`Metrics::history`].
    ///
    /// # Errors
    /// As [`Metrics::history`].
    #[deprecated(note = "use `sandbox.metrics().history(query)`")]
    pub async fn get_metrics_history(
        &self,
        query: MetricsHistoryQuery,
    ) -> Result<Vec<SandboxMetrics>, SandboxError> {
        self.metrics().history(query).await
    }

    /// As [`Metrics::current`] for the sandbox `sandbox_id`, without a
    /// handle, on the default backend (a shortcut of
    /// [`Client::get_metrics_by_id`]).
    ///
    /// # Errors
    /// As [`Client::get_metrics_by_id`]; the implicit client's failures.
    pub async fn get_metrics_by_id(
        sandbox_id: &str,
        access_token: impl Into<Secret>,
    ) -> Result<SandboxMetrics, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<SandboxMetrics, SandboxError>, {
            check_by_id(sandbox_id, &access_token)?;
            super::SandboxBuilder::new()
                .client()
                .await?
                .get_metrics_by_id(sandbox_id, access_token)
                .await
        })
    }

    /// As [`Metrics::history`] for the sandbox `sandbox_id`, without a
    /// handle, on the default backend (a shortcut of
    /// [`Client::get_metrics_history_by_id`]).
    ///
    /// # Errors
    /// As [`Client::get_metrics_history_by_id`]; the implicit client's
    /// failures.
    pub async fn get_metrics_history_by_id(
        sandbox_id: &str,
        access_token: impl Into<Secret>,
        query: MetricsHistoryQuery,
    ) -> Result<Vec<SandboxMetrics>, SandboxError> {
        let access_token: Secret = access_token.into();
        boxed!(Result<Vec<SandboxMetrics>, SandboxError>, {
            super::lifecycle::check_sandbox_id(sandbox_id)?;
            check_query(&query)?;
            check_by_id(sandbox_id, &access_token)?;
            super::SandboxBuilder::new()
                .client()
                .await?
                .get_metrics_history_by_id(sandbox_id, access_token, query)
                .await
        })
    }
}

/// A connection to the agent of the RUNNING sandbox `sandbox_id` for one
/// call: GetMicrovm first (terminal: `SandboxNotFound`; another state:
/// `SandboxState`), then one proxy token.
pub(super) async fn open_running(
    client: &Client,
    sandbox_id: &str,
    access_token: Secret,
) -> Result<AgentConn, SandboxError> {
    let backend = client.backend();
    let control = backend.control.clone();
    let vm = control.get_microvm(sandbox_id.to_owned()).await?;
    if vm.state.is_terminal() {
        return Err(SandboxError::sandbox_not_found(&vm.id));
    }
    match vm.state {
        SandboxState::Running => {}
        SandboxState::Suspending | SandboxState::Suspended => {
            return Err(SandboxError::sandbox_state("suspended", REMEDY_SUSPENDED));
        }
        SandboxState::Pending => {
            return Err(SandboxError::sandbox_state("pending", REMEDY_PENDING));
        }
        _ => {
            return Err(SandboxError::sandbox_state("not running", REMEDY_PENDING));
        }
    }
    let minter = proxy_minter(control, vm.id.clone(), vec![AGENT_PORT], PROXY_TOKEN_TTL);
    let proxy_token = minter().await?;
    backend.open_agent(
        &vm.endpoint,
        proxy_token,
        access_token,
        minter,
        *client.retry_policy(),
    )
}

/// What a by-id metrics call says of a suspended sandbox.
pub(crate) const REMEDY_SUSPENDED: &str = "resume it first (resume_by_id)";
/// ... of one that is not running yet.
pub(crate) const REMEDY_PENDING: &str = "wait until it is running";

/// The checks of a by-id call with an access token, before any I/O (and
/// before a shortcut builds its client).
pub(crate) fn check_by_id(sandbox_id: &str, access_token: &Secret) -> Result<(), SandboxError> {
    super::lifecycle::check_sandbox_id(sandbox_id)?;
    crate::secret::decode_access_token(access_token).map_err(|_| super::builder::bad_token())?;
    Ok(())
}

/// [`Client::get_metrics_by_id`] (and its shortcuts): checks, then
/// the call over a connection for it.
pub(crate) async fn metrics_by_id(
    client: &Client,
    sandbox_id: &str,
    access_token: Secret,
    timeout: Duration,
) -> Result<SandboxMetrics, SandboxError> {
    check_by_id(sandbox_id, &access_token)?;
    let conn = open_running(client, sandbox_id, access_token).await?;
    snapshot(&conn, timeout).await
}

/// [`Client::get_metrics_history_by_id`] (and its shortcuts): checks
/// (the query's first), then the call over a connection for it.
pub(crate) async fn metrics_history_by_id(
    client: &Client,
    sandbox_id: &str,
    access_token: Secret,
    query: MetricsHistoryQuery,
    timeout: Duration,
) -> Result<Vec<SandboxMetrics>, SandboxError> {
    super::lifecycle::check_sandbox_id(sandbox_id)?;
    check_query(&query)?;
    check_by_id(sandbox_id, &access_token)?;
    let request = query.to_request()?;
    let conn = open_running(client, sandbox_id, access_token).await?;
    history(&conn, request, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_checked_before_any_call() {
        let t = UNIX_EPOCH + Duration::from_secs(10);
        let r = MetricsHistoryQuery::new().start(t).end(t).max_points(3);
        let req = r.to_request().unwrap();
        assert_eq!(
            (req.start_unix_ms, req.end_unix_ms, req.max_points),
            (10_000, 10_000, 3)
        );
        let none = MetricsHistoryQuery::default().to_request().unwrap();
        assert_eq!(
            (none.start_unix_ms, none.end_unix_ms, none.max_points),
            (0, 0, 0)
        );
        let late = MetricsHistoryQuery::new()
            .start(t + Duration::from_millis(1))
            .end(t);
        assert_eq!(
            late.to_request().unwrap_err().to_string(),
            format!("invalid start: {}", msg::START_AFTER_END)
        );
        let zero = MetricsHistoryQuery::new().max_points(0);
        assert_eq!(
            zero.to_request().unwrap_err().to_string(),
            format!("invalid max_points: {}", msg::MAX_POINTS_ZERO)
        );
        let early = MetricsHistoryQuery::new().end(UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(
            early.to_request().unwrap_err().to_string(),
            format!("invalid end: {}", msg::BEFORE_1970)
        );
    }

    #[test]
    fn hostile_agent_values_are_bounded() {
        let m = SandboxMetrics::from_pb(&pb::MetricsResponse {
            cpu_used_pct: f64::NAN,
            timestamp_unix_ms: -5,
            ..Default::default()
        });
        assert_eq!(m.cpu_used_pct, 0.0);
        assert_eq!(m.timestamp, UNIX_EPOCH);
        let m = SandboxMetrics::from_pb(&pb::MetricsResponse {
            cpu_used_pct: 400.0,
            timestamp_unix_ms: i64::MAX,
            ..Default::default()
        });
        assert_eq!(m.cpu_used_pct, 100.0);
    }
}
