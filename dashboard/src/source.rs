//! What the API reads that the fleet does not: a sandbox's metrics history
//! (through its agent, which needs the sandbox's access token), and the
//! conversions of the SDK's times into the page's unix seconds.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rayito::{Client, MetricsHistoryQuery, SandboxMetrics};
use serde::Serialize;

/// Where the dashboard finds a sandbox's access token (its metrics need
/// it; the control plane does not hand it out). The CLI reads its cache of
/// the sandboxes it created; a test passes the tokens it holds.
#[derive(Clone)]
pub struct AccessTokens(Arc<Lookup>);

/// A sandbox id to its access token, when known.
type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl fmt::Debug for AccessTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessTokens(..)")
    }
}

impl AccessTokens {
    /// No token for any sandbox: metrics show as unavailable.
    pub fn none() -> Self {
        Self(Arc::new(|_| None))
    }

    /// Tokens from a function of the sandbox id.
    pub fn from_fn(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(lookup))
    }

    /// Tokens from a map of sandbox id to token.
    pub fn from_map(tokens: BTreeMap<String, String>) -> Self {
        Self(Arc::new(move |id| tokens.get(id).cloned()))
    }

    pub(crate) fn get(&self, sandbox_id: &str) -> Option<String> {
        (self.0)(sandbox_id)
    }
}

/// How far back the metrics charts look, and in how many points at most.
const METRICS_WINDOW: Duration = Duration::from_secs(15 * 60);
const METRICS_POINTS: u32 = 120;

/// One sandbox's recent metrics, or why there are none.
#[derive(Debug, Serialize)]
pub(crate) struct MetricsView {
    sandbox_id: String,
    available: bool,
    reason: Option<String>,
    points: Vec<MetricsPoint>,
}

#[derive(Debug, Serialize)]
struct MetricsPoint {
    t: f64,
    cpu_pct: f64,
    cpu_count: u32,
    mem_used_bytes: u64,
    mem_total_bytes: u64,
    disk_used_bytes: u64,
    disk_total_bytes: u64,
}

impl From<&SandboxMetrics> for MetricsPoint {
    fn from(m: &SandboxMetrics) -> Self {
        Self {
            t: unix(m.timestamp),
            cpu_pct: m.cpu_used_pct,
            cpu_count: m.cpu_count,
            mem_used_bytes: m.mem_used_bytes,
            mem_total_bytes: m.mem_total_bytes,
            disk_used_bytes: m.disk_used_bytes,
            disk_total_bytes: m.disk_total_bytes,
        }
    }
}

/// The last 15 minutes of `sandbox_id`'s samples (at most 120 points); an
/// unavailable view (not an error) when no token is known or the sandbox
/// is not running, so the page says why instead of failing.
pub(crate) async fn metrics(
    client: &Client,
    tokens: &AccessTokens,
    sandbox_id: &str,
) -> MetricsView {
    let unavailable = |reason: String| MetricsView {
        sandbox_id: sandbox_id.to_owned(),
        available: false,
        reason: Some(reason),
        points: Vec::new(),
    };
    let Some(token) = tokens.get(sandbox_id) else {
        return unavailable(
            "no access token for this sandbox here: metrics are read through its agent, \
             with the token of the client that created it"
                .to_owned(),
        );
    };
    let query = MetricsHistoryQuery::new()
        .start(SystemTime::now() - METRICS_WINDOW)
        .max_points(METRICS_POINTS);
    match client
        .get_metrics_history_by_id(sandbox_id, token, query)
        .await
    {
        Ok(samples) => MetricsView {
            sandbox_id: sandbox_id.to_owned(),
            available: true,
            reason: None,
            points: samples.iter().map(MetricsPoint::from).collect(),
        },
        Err(err) => unavailable(err.to_string()),
    }
}

/// Seconds since the epoch, as the page's charts take them.
pub(crate) fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
