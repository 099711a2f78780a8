//! The CloudWatch dashboard of the sandboxes (`rayito dashboard
//! cloudwatch`, and the `DashboardBody` of the `dashboard-cloudwatch`
//! stack): Logs Insights widgets over the log groups under a prefix
//! (`/rayito/` by default) or over named groups, and, when asked, charts
//! of the sandboxes' OTLP metrics and of the memory quota's use (the metric
//! the `quota-alerts` stack publishes). Pure: no AWS call.
//!
//! Widgets carry no `x`/`y`: CloudWatch places each in the next free
//! slot, so leaving the optional ones out leaves no gap.

use serde_json::{Value, json};

use crate::error::SandboxError;

/// The log-group prefix the widgets read by default (the trailing `/`
/// keeps `/rayito-other` out).
pub const DEFAULT_LOG_GROUP_PREFIX: &str = "/rayito/";
/// The dashboard's default time range.
pub const DASHBOARD_START: &str = "-PT6H";
/// The bin of the log charts.
pub const LOG_BIN: &str = "5m";
/// What a log line must match to count as an error.
pub const ERROR_PATTERN: &str = "/(?i)error|exception|traceback|fatal|panic/";
/// The namespace of the memory-quota metric.
pub const QUOTA_METRIC_NAMESPACE: &str = "Rayito/Dashboard";
/// The memory-quota metric: allocated memory over the quota (0 to 1).
pub const QUOTA_METRIC_NAME: &str = "MemoryAllocatedFraction";
/// The warning line of the quota chart.
pub const QUOTA_WARNING_FRACTION: f64 = 0.8;
/// The critical line of the quota chart.
pub const QUOTA_CRITICAL_FRACTION: f64 = 0.95;

const GRID_COLUMNS: u32 = 24;
const HALF_WIDTH: u32 = GRID_COLUMNS / 2;
const HEADER_HEIGHT: u32 = 3;
const CHART_HEIGHT: u32 = 6;
const TOP_ROWS: u32 = 20;
const RECENT_ERROR_ROWS: u32 = 50;
const QUOTA_PERIOD_SECONDS: u32 = 3600;

/// What the dashboard shows.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloudWatchBoard {
    /// The region its widgets read.
    pub region: String,
    /// The log groups' prefix (used when no group is named).
    pub log_group_prefix: String,
    /// Log groups named one by one (instead of the prefix).
    pub log_groups: Vec<String>,
    /// Adds the OTLP charts (CPU, memory, disk of `rayito.sandbox.*`).
    pub include_otlp: bool,
    /// Adds the memory quota chart with its 0.8 and 0.95 lines.
    pub include_quota: bool,
}

impl CloudWatchBoard {
    /// The default dashboard of `region`: the logs under `/rayito/`.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            log_group_prefix: DEFAULT_LOG_GROUP_PREFIX.to_owned(),
            log_groups: Vec::new(),
            include_otlp: false,
            include_quota: false,
        }
    }

    /// The `DashboardBody` as JSON.
    ///
    /// # Errors
    /// `InvalidArgument` (`log_group_prefix`, `log_groups`) for a name with
    /// characters a log group cannot have (it is put in a quoted query).
    pub fn body(&self) -> Result<Value, SandboxError> {
        if !self.log_group_prefix.starts_with('/') || !log_group_chars(&self.log_group_prefix) {
            return Err(SandboxError::invalid_argument(
                "log_group_prefix",
                "a log group prefix starts with '/' and has only letters, digits and '_ . # - /'; pass such a prefix",
            ));
        }
        if self
            .log_groups
            .iter()
            .any(|g| g.is_empty() || !log_group_chars(g))
        {
            return Err(SandboxError::invalid_argument(
                "log_groups",
                "a log group name has only letters, digits and '_ . # - /'; pass such a name",
            ));
        }
        let (source, scope) = if self.log_groups.is_empty() {
            (
                format!(
                    "SOURCE logGroups(namePrefix: ['{}'])",
                    self.log_group_prefix
                ),
                format!("{}*", self.log_group_prefix),
            )
        } else {
            (
                self.log_groups
                    .iter()
                    .map(|g| format!("SOURCE '{g}'"))
                    .collect::<Vec<_>>()
                    .join(" | "),
                self.log_groups.join(", "),
            )
        };
        let mut widgets = log_widgets(&self.region, &source, &scope);
        if self.include_otlp {
            widgets.extend(otlp_widgets(&self.region));
        }
        if self.include_quota {
            widgets.extend(quota_widgets(&self.region));
        }
        Ok(board(widgets))
    }
}

fn log_group_chars(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/_.#-".contains(c))
}

fn board(widgets: Vec<Value>) -> Value {
    json!({ "start": DASHBOARD_START, "widgets": widgets })
}

fn query(source: &str, clauses: &[&str]) -> String {
    format!("{source} | {}", clauses.join("\n| "))
}

fn log_widget(region: &str, title: &str, query: String, view: &str, width: u32) -> Value {
    json!({
        "type": "log",
        "width": width,
        "height": CHART_HEIGHT,
        "properties": { "region": region, "title": title, "query": query, "view": view }
    })
}

/// The header and the five Logs Insights widgets (always there).
pub(crate) fn log_widgets(region: &str, source: &str, scope: &str) -> Vec<Value> {
    let errors = format!("filter @message like {ERROR_PATTERN}");
    let per_bin = |what: &str| format!("stats count(*) as {what} by bin({LOG_BIN})");
    let top = format!("limit {TOP_ROWS}");
    vec![
        json!({
            "type": "text",
            "width": GRID_COLUMNS,
            "height": HEADER_HEIGHT,
            "properties": { "markdown": format!(
                "# Rayito\nSandbox logs (Logs Insights over `{scope}`). Each log widget runs its query when the dashboard opens or refreshes, and CloudWatch bills the data it scans: keep the time range short."
            ) }
        }),
        log_widget(
            region,
            "Log lines per interval",
            query(source, &[&per_bin("lines")]),
            "timeSeries",
            HALF_WIDTH,
        ),
        log_widget(
            region,
            "Errors per interval",
            query(source, &[&errors, &per_bin("errors")]),
            "timeSeries",
            HALF_WIDTH,
        ),
        log_widget(
            region,
            "Lines per log group",
            query(
                source,
                &["stats count(*) as lines by @log", "sort lines desc", &top],
            ),
            "table",
            HALF_WIDTH,
        ),
        log_widget(
            region,
            "Noisiest streams",
            query(
                source,
                &[
                    "stats count(*) as lines by @logStream",
                    "sort lines desc",
                    &top,
                ],
            ),
            "table",
            HALF_WIDTH,
        ),
        log_widget(
            region,
            "Recent errors",
            query(
                source,
                &[
                    &errors,
                    "fields @timestamp, @logStream, @message",
                    "sort @timestamp desc",
                    &format!("limit {RECENT_ERROR_ROWS}"),
                ],
            ),
            "table",
            GRID_COLUMNS,
        ),
    ]
}

fn promql(id: &str, metric: &str, label: &str) -> Value {
    json!({
        "id": id,
        "type": "cloudwatch-metrics",
        "language": "PromQL",
        "query": format!("avg({{\"{metric}\"}})"),
        "label": label
    })
}

fn chart(region: &str, title: &str, queries: Vec<Value>) -> Value {
    json!({
        "type": "chart",
        "width": HALF_WIDTH,
        "height": CHART_HEIGHT,
        "properties": {
            "view": "line",
            "title": title,
            "description": "OTLP metrics of the sandboxes (telemetry); mean across sandboxes.",
            "region": region,
            "data": { "queries": queries }
        }
    })
}

/// CPU, memory and disk of the sandboxes exporting OTLP metrics.
pub(crate) fn otlp_widgets(region: &str) -> Vec<Value> {
    vec![
        chart(
            region,
            "CPU in use (%)",
            vec![promql("cpu", "rayito.sandbox.cpu.used_pct", "CPU %")],
        ),
        used_and_total(region, "Memory (bytes)", "memory"),
        used_and_total(region, "Disk (bytes)", "disk"),
    ]
}

/// A chart of `rayito.sandbox.<what>.used_bytes` and `.total_bytes`.
fn used_and_total(region: &str, title: &str, what: &str) -> Value {
    chart(
        region,
        title,
        vec![
            promql(
                "used",
                &format!("rayito.sandbox.{what}.used_bytes"),
                "in use",
            ),
            promql(
                "total",
                &format!("rayito.sandbox.{what}.total_bytes"),
                "total",
            ),
        ],
    )
}

/// Allocated memory over the quota, with the warning and critical lines.
pub(crate) fn quota_widgets(region: &str) -> Vec<Value> {
    vec![json!({
        "type": "metric",
        "width": HALF_WIDTH,
        "height": CHART_HEIGHT,
        "properties": {
            "region": region,
            "title": "Allocated memory / quota",
            "view": "timeSeries",
            "metrics": [[QUOTA_METRIC_NAMESPACE, QUOTA_METRIC_NAME, "Region", region]],
            "stat": "Maximum",
            "period": QUOTA_PERIOD_SECONDS,
            "yAxis": { "left": { "min": 0, "max": 1 } },
            "annotations": { "horizontal": [
                { "label": "Warning", "value": QUOTA_WARNING_FRACTION },
                { "label": "Critical", "value": QUOTA_CRITICAL_FRACTION }
            ] }
        }
    })]
}

/// The body's JSON text as the template holds it: `${AWS::Region}` and
/// `${LogGroupPrefix}` for the stack's region and parameter, and
/// `${OtlpWidgets}` / `${QuotaWidgets}` at the end of `widgets`, each
/// replaced by its fragment (`,{..},{..}`) or nothing.
pub(crate) fn template_parts() -> (String, String, String) {
    let region = "${AWS::Region}";
    let prefix = "${LogGroupPrefix}";
    let base = board(log_widgets(
        region,
        &format!("SOURCE logGroups(namePrefix: ['{prefix}'])"),
        &format!("{prefix}*"),
    ));
    let base = base.to_string();
    let Some(head) = base.strip_suffix("]}") else {
        return (base, String::new(), String::new());
    };
    let fragment =
        |widgets: Vec<Value>| widgets.iter().map(|w| format!(",{w}")).collect::<String>();
    (
        format!("{head}${{OtlpWidgets}}${{QuotaWidgets}}]}}"),
        fragment(otlp_widgets(region)),
        fragment(quota_widgets(region)),
    )
}
