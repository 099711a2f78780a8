//! Cost (feature `cost`): what Lambda MicroVMs cost, two ways that are
//! never mixed. `billed` is Cost Explorer's bill by usage type (AWS
//! Lambda's `GetCostAndUsage`, $0.01 per request, cached per instance);
//! `estimated` is the running sandboxes' time at the documented prices,
//! free, and never a bill. On the local backend only the estimate exists.
//! docs/quotas.md ("Cost") is the guide.

mod billed;
mod estimate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

pub use billed::{BilledCost, BilledLine};
pub use estimate::{
    COMPUTE_PRICE_USD_PER_GB_SECOND, COMPUTE_PRICE_USD_PER_VCPU_SECOND, CostEstimate, PRICE_SOURCE,
    SandboxCostEstimate,
};

use crate::error::SandboxError;

/// How long a billed answer is kept by one [`UsageCost`] (Cost Explorer
/// updates about once a day).
pub const CACHE_TTL: Duration = Duration::from_secs(86_400);
/// Windows one [`UsageCost`] keeps at most.
const CACHE_MAX_ENTRIES: usize = 64;
/// What one Cost Explorer request costs (us-east-1, per page).
pub const COST_EXPLORER_REQUEST_PRICE_USD: f64 = 0.01;

/// The reason `billed` is empty on the local backend (pinned, docs/quotas.md).
pub const LOCAL_NOT_BILLED: &str = "the local backend has no bill: Cost Explorer reads an AWS account's; the estimate prices the local sandboxes' time at AWS's rates";
/// The reason `billed` is empty when the query did not ask for it (pinned).
pub const BILLED_NOT_ASKED: &str =
    "not asked: Cost Explorer charges $0.01 per request; ask with CostQuery::billed(true)";

/// The periods Cost Explorer groups by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum Granularity {
    /// One period per day.
    Daily,
    /// One period per calendar month.
    #[default]
    Monthly,
}

impl Granularity {
    fn as_str(self) -> &'static str {
        match self {
            Self::Daily => "DAILY",
            Self::Monthly => "MONTHLY",
        }
    }
}

/// What [`UsageCost::report`] reads. By default the estimate only (free);
/// [`CostQuery::billed`] adds Cost Explorer's bill (paid).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct CostQuery {
    billed: bool,
    start: Option<String>,
    end: Option<String>,
    granularity: Granularity,
    region: Option<String>,
    refresh: bool,
}

impl CostQuery {
    /// The estimate only, for the current month's window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to read the bill from Cost Explorer ($0.01 per request on
    /// a cache miss).
    pub fn billed(mut self, billed: bool) -> Self {
        self.billed = billed;
        self
    }

    /// The window's first day (`YYYY-MM-DD`, UTC, included); by default
    /// the 1st of the current month.
    pub fn start(mut self, day: impl Into<String>) -> Self {
        self.start = Some(day.into());
        self
    }

    /// The window's end (`YYYY-MM-DD`, excluded); by default tomorrow.
    pub fn end(mut self, day: impl Into<String>) -> Self {
        self.end = Some(day.into());
        self
    }

    /// Daily or monthly periods (monthly by default).
    pub fn granularity(mut self, granularity: Granularity) -> Self {
        self.granularity = granularity;
        self
    }

    /// Only the bill of this AWS region (by default the whole account).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Ask Cost Explorer again even when the window is cached (paid).
    pub fn refresh(mut self, refresh: bool) -> Self {
        self.refresh = refresh;
        self
    }
}

/// The window of a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CostPeriod {
    /// First day, included (`YYYY-MM-DD`).
    pub start: String,
    /// Last day, excluded (`YYYY-MM-DD`).
    pub end: String,
}

/// The bill (when asked and available) and the estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CostReport {
    /// Cost Explorer's bill of the window; `None` with the reason in
    /// `billed_unavailable`.
    pub billed: Option<BilledCost>,
    /// Why `billed` is `None`.
    pub billed_unavailable: Option<String>,
    /// The running sandboxes' estimate (now, not the window's).
    pub estimated: CostEstimate,
    /// The currency of every amount (`USD`).
    pub currency: &'static str,
    /// The bill's window.
    pub period: CostPeriod,
}

type CacheKey = (String, String, Granularity, Option<String>);

/// Billed and estimated cost of one client: get one from
/// [`Client::cost`](crate::Client::cost). Making it calls nothing; its
/// clones share one cache of billed answers ([`CACHE_TTL`], at most 64
/// windows): keep one for the life of a process to pay for fewer requests.
#[derive(Clone)]
pub struct UsageCost {
    client: crate::Client,
    cache: Arc<Mutex<HashMap<CacheKey, (Instant, BilledCost)>>>,
}

crate::secret::redacted_debug!(non_exhaustive UsageCost);

impl crate::Client {
    /// The billed and estimated cost of this client's account (feature
    /// `cost`).
    pub fn cost(&self) -> UsageCost {
        UsageCost {
            client: self.clone(),
            cache: Arc::default(),
        }
    }
}

impl UsageCost {
    /// The estimate, and the bill when `query` asks for it.
    ///
    /// # Errors
    /// `InvalidArgument` (`start`, `end`) for a day that is not
    /// `YYYY-MM-DD` or a window that does not end after it starts; the
    /// failures of [`UsageCost::billed`] and [`UsageCost::estimate`].
    pub async fn report(&self, query: CostQuery) -> Result<CostReport, SandboxError> {
        boxed!(Result<CostReport, SandboxError>, {
            let (start, end) = window(&query, SystemTime::now())?;
            let (billed, billed_unavailable) = if self.client.is_local() {
                (None, Some(LOCAL_NOT_BILLED.to_owned()))
            } else if query.billed {
                (Some(self.billed(&query).await?), None)
            } else {
                (None, Some(BILLED_NOT_ASKED.to_owned()))
            };
            Ok(CostReport {
                billed,
                billed_unavailable,
                estimated: self.estimate().await?,
                currency: "USD",
                period: CostPeriod { start, end },
            })
        })
    }

    /// Cost Explorer's bill of Lambda MicroVMs in `query`'s window, by
    /// usage type. Paid: $0.01 per request (page) on a cache miss; a
    /// cached window is free.
    ///
    /// # Errors
    /// `InvalidArgument` (`start`, `end`) as in [`UsageCost::report`];
    /// `Unimplemented` (`cost_billed`) on the local backend;
    /// `Authentication` without `ce:GetCostAndUsage`; `RateLimit` when
    /// throttled.
    pub async fn billed(&self, query: &CostQuery) -> Result<BilledCost, SandboxError> {
        boxed!(Result<BilledCost, SandboxError>, {
            let (start, end) = window(query, SystemTime::now())?;
            let backend = self.client.backend();
            let config = match (&backend.sdk_config, self.client.is_local()) {
                (Some(config), false) => config,
                _ => {
                    return Err(SandboxError::unimplemented(
                        "cost_billed",
                        LOCAL_NOT_BILLED,
                        Some("docs/quotas.md"),
                    ));
                }
            };
            let key = (
                start.clone(),
                end.clone(),
                query.granularity,
                query.region.clone(),
            );
            if !query.refresh
                && let Some(hit) = self.cached(&key)
            {
                return Ok(hit);
            }
            let answer = crate::aws::costexplorer::CostExplorerApi::new(
                config,
                &backend.root_certificates,
            )?
                .lambda_cost(
                    &start,
                    &end,
                    query.granularity.as_str(),
                    query.region.as_deref(),
                )
                .await?;
            let cost = billed::fold(&answer, start, end, query.region.clone());
            self.keep(key, cost.clone());
            Ok(cost)
        })
    }

    /// The estimate of the running sandboxes: each one's time since it
    /// started at the compute price of its memory. Free (ListMicrovms and
    /// GetMicrovmImageVersion, once per version per process).
    ///
    /// # Errors
    /// A ListMicrovms page failed (mapped).
    pub async fn estimate(&self) -> Result<CostEstimate, SandboxError> {
        boxed!(Result<CostEstimate, SandboxError>, {
            let counted = crate::quotas::inventory::counted(&self.client).await?;
            Ok(estimate::build(&counted, SystemTime::now()))
        })
    }

    fn cached(&self, key: &CacheKey) -> Option<BilledCost> {
        let cache = self.cache.lock().ok()?;
        let (at, cost) = cache.get(key)?;
        (at.elapsed() < CACHE_TTL).then(|| cost.clone())
    }

    fn keep(&self, key: CacheKey, cost: BilledCost) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        while cache.len() >= CACHE_MAX_ENTRIES {
            let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), cost));
    }
}

/// `YYYY-MM-DD` of `t` (UTC).
fn day_of(t: SystemTime) -> String {
    crate::aws::time::rfc3339(t)[..10].to_owned()
}

/// Whether `day` is a `YYYY-MM-DD` that exists.
fn is_day(day: &str) -> bool {
    day.len() == 10 && crate::aws::time::parse_rfc3339(&format!("{day}T00:00:00Z")).is_some()
}

/// The window of `query` at `now`: its days, or the 1st of the month to
/// tomorrow.
fn window(query: &CostQuery, now: SystemTime) -> Result<(String, String), SandboxError> {
    let today = day_of(now);
    let start = match &query.start {
        Some(day) if is_day(day) => day.clone(),
        Some(_) => {
            return Err(SandboxError::invalid_argument(
                "start",
                "expected a day YYYY-MM-DD",
            ));
        }
        None => format!("{}01", &today[..8]),
    };
    let end = match &query.end {
        Some(day) if is_day(day) => day.clone(),
        Some(_) => {
            return Err(SandboxError::invalid_argument(
                "end",
                "expected a day YYYY-MM-DD",
            ));
        }
        None => day_of(now + Duration::from_secs(86_400)),
    };
    if start >= end {
        return Err(SandboxError::invalid_argument(
            "end",
            "the window must end after it starts (end is excluded)",
        ));
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_window_is_the_month_to_tomorrow() {
        // 2026-12-06T23:35:00Z
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_600_100);
        assert_eq!(day_of(now), "2026-12-06");
        assert_eq!(
            window(&CostQuery::new(), now).unwrap(),
            ("2026-12-01".to_owned(), "2026-12-07".to_owned())
        );
        let err = window(&CostQuery::new().start("2026-12-07").end("2026-12-07"), now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid end: the window must end after it starts (end is excluded)"
        );
        let err = window(&CostQuery::new().start("2026-13-01"), now).unwrap_err();
        assert_eq!(err.to_string(), "invalid start: expected a day YYYY-MM-DD");
    }
}
