//! The quota-alerts stack's function (extras §6, §7): on its schedule it
//! measures the memory allocated to MicroVMs against the region's memory
//! quota, publishes the fraction as the metric
//! `Rayito/Dashboard` `MemoryAllocatedFraction` (dimension `Region`), and
//! publishes to SNS when the level *rises* (`ok` → `warning` → `critical`),
//! once per crossing, not on every run.
//!
//! - The quota: Service Quotas' `ListServiceQuotas` (code `lambda`, every
//!   page), quota [`MEMORY_QUOTA_CODE`]; when it is not listed, the region's
//!   default ([`memory_quota_default`]).
//! - The use: `ListMicrovms` (every page), the RUNNING, SUSPENDING and
//!   SUSPENDED ones, each at its image version's memory
//!   (`GetMicrovmImageVersion`, once per version per environment); a
//!   version that cannot be read leaves its sandboxes `unresolved`.
//! - The state: one DynamoDB row (`check` = `memory`) keeps the level to
//!   remember: the highest reached until the use is back to `ok`, so a use
//!   that hovers around a threshold alerts once. It is written *after* the
//!   publish: a failed publish fails the run, and the next run tries again.
//!
//! The message names the region and the figures, never a sandbox, image
//! or account id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_lambdamicrovms::types::MicrovmState;
use serde_json::{Value, json};

use crate::Failure;
use crate::signed::{SignedPost, form, query_error_code};

/// The value of `RAYITO_EVENTS_FUNCTION` that runs this function.
pub const FUNCTION: &str = "quota-alerts";
/// Service Quotas' code of the regional MicroVMs memory quota (GB).
pub const MEMORY_QUOTA_CODE: &str = "L-CD1C0CC4";
/// The metric's namespace (the function's role may write this one only).
pub const METRIC_NAMESPACE: &str = "Rayito/Dashboard";
/// The metric: allocated memory over the quota (0 to 1, past 1 over it).
pub const METRIC_NAME: &str = "MemoryAllocatedFraction";
/// The metric's one dimension, valued with the region.
pub const REGION_DIMENSION: &str = "Region";
/// The state table's key attribute.
pub const STATE_KEY_ATTRIBUTE: &str = "check";
/// The one row's key.
pub const STATE_KEY: &str = "memory";
/// The remembered level's attribute.
pub const LEVEL_ATTRIBUTE: &str = "level";
/// When the row was written (seconds since the epoch).
pub const UPDATED_ATTRIBUTE: &str = "updatedAt";
/// The longest subject SNS takes for email is 100 characters.
pub const SUBJECT_MAX_CHARS: usize = 100;

/// The environment the template sets.
pub mod env {
    /// The topic alerts go to.
    pub const TOPIC_ARN: &str = "RAYITO_ALERTS_TOPIC_ARN";
    /// The state table.
    pub const STATE_TABLE: &str = "RAYITO_ALERTS_STATE_TABLE";
    /// The warning threshold, percent of the quota.
    pub const WARNING_PERCENT: &str = "RAYITO_ALERTS_WARNING_PERCENT";
    /// The critical threshold, percent of the quota.
    pub const CRITICAL_PERCENT: &str = "RAYITO_ALERTS_CRITICAL_PERCENT";
}

/// The regions whose accounts start with the larger memory quota.
const LARGE_REGIONS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-2", "ap-northeast-1"];
/// ListMicrovms' page size (its maximum) and the pages read at most.
const MICROVM_PAGE: i32 = 50;
const MAX_MICROVM_PAGES: usize = 1000;
/// ListServiceQuotas' page size (its maximum) and the pages read at most.
const QUOTA_PAGE: u32 = 100;
const MAX_QUOTA_PAGES: usize = 50;
/// MiB in a GB as the quota counts them.
const MIB_PER_GB: f64 = 1024.0;

/// The memory quota's default in `region` (GB): 1024 in us-east-1,
/// us-east-2, us-west-2 and ap-northeast-1, 400 elsewhere (the same
/// figures as `rayito::quotas`).
pub fn memory_quota_default(region: &str) -> f64 {
    if LARGE_REGIONS.contains(&region) {
        1024.0
    } else {
        400.0
    }
}

/// How close the use is to the quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Below the warning threshold.
    Ok,
    /// At or above the warning threshold.
    Warning,
    /// At or above the critical threshold.
    Critical,
}

impl Level {
    /// Its spelling in the state row, the log line and the answer.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }

    /// A stored level; anything else reads `ok`, so that an odd row never
    /// silences an alert.
    pub fn parse(text: Option<&str>) -> Level {
        match text {
            Some("warning") => Level::Warning,
            Some("critical") => Level::Critical,
            _ => Level::Ok,
        }
    }
}

/// The two thresholds, as fractions: `0 < warning < critical <= 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// The warning threshold.
    pub warning: f64,
    /// The critical threshold.
    pub critical: f64,
}

impl Thresholds {
    /// From the template's percents (`80`, `95`).
    ///
    /// # Errors
    /// A value that is not a number, or not `0 < warning < critical <= 100`:
    /// the function fails on start rather than keep an alert silent.
    pub fn from_percents(warning: &str, critical: &str) -> Result<Self, Failure> {
        let parse = |name: &'static str, v: &str| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite())
                .ok_or_else(|| Failure::other("config", format!("{name} is not a number")))
        };
        let warning = parse(env::WARNING_PERCENT, warning)? / 100.0;
        let critical = parse(env::CRITICAL_PERCENT, critical)? / 100.0;
        if !(0.0 < warning && warning < critical && critical <= 1.0) {
            return Err(Failure::other(
                "config",
                "the thresholds must be 0 < warning < critical <= 100",
            ));
        }
        Ok(Self { warning, critical })
    }

    /// The level of `fraction`.
    pub fn classify(&self, fraction: f64) -> Level {
        if fraction >= self.critical {
            Level::Critical
        } else if fraction >= self.warning {
            Level::Warning
        } else {
            Level::Ok
        }
    }
}

/// Whether going from `previous` to `current` alerts: only a rise.
pub fn should_notify(previous: Level, current: Level) -> bool {
    current > previous
}

/// The level the row keeps after a run: the highest of the two, unless
/// the use is back to `ok`, which resets it.
pub fn level_to_remember(previous: Level, current: Level) -> Level {
    if current == Level::Ok {
        Level::Ok
    } else {
        previous.max(current)
    }
}

/// The memory in use against the quota.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    /// GB allocated by the counted sandboxes whose memory is known.
    pub allocated_gb: f64,
    /// The applied quota, or the region's default when not listed.
    pub quota_gb: f64,
    /// Whether Service Quotas listed the quota.
    pub quota_listed: bool,
    /// `allocated_gb / quota_gb` (infinite for a quota of 0 with memory
    /// allocated).
    pub fraction: f64,
    /// The counted sandboxes.
    pub sandboxes: usize,
    /// Counted sandboxes whose image memory could not be read.
    pub unresolved: usize,
}

/// A figure as people write it: `5`, `0.5`, `1024`.
fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.0}%", fraction * 100.0)
    } else {
        "over 100%".to_owned()
    }
}

/// The alert's subject (at most [`SUBJECT_MAX_CHARS`]).
pub fn subject(level: Level, region: &str, fraction: f64) -> String {
    let mut text = format!(
        "Rayito: MicroVM memory at the {} level ({} of the quota, {region})",
        level.as_str(),
        percent(fraction)
    );
    if text.len() > SUBJECT_MAX_CHARS {
        let mut end = SUBJECT_MAX_CHARS;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The alert's body: the region, the figures and what to do.
pub fn message(level: Level, region: &str, memory: &Memory) -> String {
    let mut lines = vec![
        format!(
            "The memory allocated to MicroVMs in {region} is at the {} level: {} of the quota.",
            level.as_str(),
            percent(memory.fraction)
        ),
        format!(
            "Allocated: {} GB of {} GB ({} sandboxes, RUNNING plus suspended).",
            number(memory.allocated_gb),
            number(memory.quota_gb),
            memory.sandboxes
        ),
    ];
    if memory.unresolved > 0 {
        lines.push(format!(
            "The memory of {} sandboxes could not be read: the real use can be higher.",
            memory.unresolved
        ));
    }
    if !memory.quota_listed {
        lines.push(
            "Service Quotas does not list the quota; the region's default is assumed.".to_owned(),
        );
    }
    lines.push(format!(
        "Request an increase of quota {MEMORY_QUOTA_CODE} before launching more sandboxes, or terminate the ones no longer used: https://{region}.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/{MEMORY_QUOTA_CODE}"
    ));
    lines.join("\n")
}

/// What one run did.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The level measured now.
    pub level: Level,
    /// The level the row held before.
    pub previous: Level,
    /// Whether an alert went out.
    pub notified: bool,
    /// The figures.
    pub memory: Memory,
}

impl Outcome {
    /// The run's one log line (JSON): the levels, the fraction and whether
    /// it notified.
    pub fn to_log_line(&self) -> String {
        json!({ "quota_alerts": {
            "level": self.level.as_str(),
            "previous": self.previous.as_str(),
            "fraction": metric_value(self.memory.fraction),
            "allocated_gb": self.memory.allocated_gb,
            "quota_gb": self.memory.quota_gb,
            "sandboxes": self.memory.sandboxes,
            "unresolved": self.memory.unresolved,
            "notified": self.notified,
        }})
        .to_string()
    }

    /// The invocation's answer.
    pub fn answer(&self) -> Value {
        json!({ "level": self.level.as_str(), "notified": self.notified })
    }
}

/// CloudWatch takes no infinity: a quota of 0 with memory allocated is
/// published as 1000 (a thousand times the quota).
fn metric_value(fraction: f64) -> f64 {
    if fraction.is_finite() {
        fraction
    } else {
        1000.0
    }
}

/// Where the function reads and writes, and its thresholds.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The region watched (the metric's dimension, the quota's default).
    pub region: String,
    /// The SNS topic.
    pub topic_arn: String,
    /// The state table.
    pub state_table: String,
    /// The thresholds.
    pub thresholds: Thresholds,
}

impl Settings {
    /// From the environment the template sets (and `AWS_REGION`).
    ///
    /// # Errors
    /// A variable unset, or thresholds out of order.
    pub fn from_env() -> Result<Self, Failure> {
        let var = |name: &'static str| {
            std::env::var(name).map_err(|_| Failure::other("config", format!("{name} unset")))
        };
        Ok(Self {
            region: var("AWS_REGION")?,
            topic_arn: var(env::TOPIC_ARN)?,
            state_table: var(env::STATE_TABLE)?,
            thresholds: Thresholds::from_percents(
                &std::env::var(env::WARNING_PERCENT).unwrap_or_else(|_| "80".into()),
                &std::env::var(env::CRITICAL_PERCENT).unwrap_or_else(|_| "95".into()),
            )?,
        })
    }
}

/// The check, with its clients (made once per environment).
#[derive(Clone, Debug)]
pub struct QuotaAlerts {
    settings: Settings,
    microvms: aws_sdk_lambdamicrovms::Client,
    quotas: SignedPost,
    sns: SignedPost,
    cloudwatch: SignedPost,
    dynamodb: aws_sdk_dynamodb::Client,
    /// Each image version's memory (MiB), by `<image ARN> <version>`.
    version_memory: Arc<Mutex<HashMap<String, u32>>>,
}

impl QuotaAlerts {
    /// The check of `settings`: `reads` for the MicroVMs API and Service
    /// Quotas, `writes` for SNS, CloudWatch and DynamoDB (one and the same
    /// configuration in the Lambda; two endpoints in the tests).
    ///
    /// # Errors
    /// An HTTPS client could not be built.
    pub fn new(
        settings: Settings,
        reads: &aws_types::SdkConfig,
        writes: &aws_types::SdkConfig,
    ) -> Result<Self, Failure> {
        let region = settings.region.clone();
        Ok(Self {
            microvms: aws_sdk_lambdamicrovms::Client::new(reads),
            quotas: SignedPost::new(reads, "servicequotas", &region, "servicequotas")?,
            sns: SignedPost::new(writes, "sns", &region, "sns")?,
            cloudwatch: SignedPost::new(writes, "monitoring", &region, "monitoring")?,
            dynamodb: aws_sdk_dynamodb::Client::new(writes),
            settings,
            version_memory: Arc::default(),
        })
    }

    /// One run: measure, publish the metric, alert on a rise, keep the
    /// level.
    ///
    /// # Errors
    /// Any read or write failed (the run fails and the schedule's next one
    /// starts over; a state not yet saved alerts again then).
    pub async fn run(&self) -> Result<Outcome, Failure> {
        let memory = self.measure().await?;
        self.put_metric(metric_value(memory.fraction)).await?;
        let level = self.settings.thresholds.classify(memory.fraction);
        let previous = self.last_level().await?;
        let notified = should_notify(previous, level);
        if notified {
            let region = &self.settings.region;
            self.publish(
                &subject(level, region, memory.fraction),
                &message(level, region, &memory),
            )
            .await?;
        }
        self.save_level(level_to_remember(previous, level)).await?;
        Ok(Outcome {
            level,
            previous,
            notified,
            memory,
        })
    }

    /// The memory in use against the quota.
    ///
    /// # Errors
    /// `ListServiceQuotas` or a `ListMicrovms` page failed.
    pub async fn measure(&self) -> Result<Memory, Failure> {
        let applied = self.applied_memory_quota().await?;
        let quota_gb = applied.unwrap_or_else(|| memory_quota_default(&self.settings.region));
        let counted = self.counted().await?;
        let mut allocated_mib = 0.0;
        let mut unresolved = 0;
        for (image, version) in &counted {
            match self.memory_of(image, version).await {
                Some(mib) => allocated_mib += f64::from(mib),
                None => unresolved += 1,
            }
        }
        let allocated_gb = allocated_mib / MIB_PER_GB;
        let fraction = if quota_gb > 0.0 {
            allocated_gb / quota_gb
        } else if allocated_gb > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        Ok(Memory {
            allocated_gb,
            quota_gb,
            quota_listed: applied.is_some(),
            fraction,
            sandboxes: counted.len(),
            unresolved,
        })
    }

    /// The applied memory quota, when Service Quotas lists it.
    async fn applied_memory_quota(&self) -> Result<Option<f64>, Failure> {
        const OP: &str = "ListServiceQuotas";
        let mut next: Option<String> = None;
        for _ in 0..MAX_QUOTA_PAGES {
            let mut input = json!({ "ServiceCode": "lambda", "MaxResults": QUOTA_PAGE });
            if let Some(token) = &next {
                input["NextToken"] = json!(token);
            }
            let headers = [
                ("content-type", "application/x-amz-json-1.1"),
                ("x-amz-target", "ServiceQuotasV20190624.ListServiceQuotas"),
            ];
            let answer = self.quotas.post(OP, &headers, &input.to_string()).await?;
            let page: Option<Value> = serde_json::from_slice(&answer.body).ok();
            if !(200..300).contains(&answer.status) {
                let code = answer
                    .error_type
                    .clone()
                    .or_else(|| {
                        page.as_ref()
                            .and_then(|p| p.get("__type"))
                            .and_then(Value::as_str)
                            .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned())
                    })
                    .filter(|c| c.len() <= 64)
                    .unwrap_or_else(|| format!("http {}", answer.status));
                return Err(Failure::other(OP, code));
            }
            let page = page.ok_or_else(|| Failure::other(OP, "not_json"))?;
            let found = page
                .get("Quotas")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|q| q.get("QuotaCode").and_then(Value::as_str) == Some(MEMORY_QUOTA_CODE))
                .and_then(|q| q.get("Value"))
                .and_then(Value::as_f64);
            if found.is_some() {
                return Ok(found);
            }
            next = page
                .get("NextToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if next.is_none() {
                break;
            }
        }
        Ok(None)
    }

    /// The image and version of each counted sandbox.
    async fn counted(&self) -> Result<Vec<(String, String)>, Failure> {
        let mut counted = Vec::new();
        let mut token = None;
        for _ in 0..MAX_MICROVM_PAGES {
            let out = self
                .microvms
                .list_microvms()
                .max_results(MICROVM_PAGE)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| Failure::aws("ListMicrovms", &e))?;
            counted.extend(
                out.items()
                    .iter()
                    .filter(|i| {
                        matches!(
                            i.state(),
                            MicrovmState::Running
                                | MicrovmState::Suspending
                                | MicrovmState::Suspended
                        )
                    })
                    .map(|i| (i.image_arn().to_owned(), i.image_version().to_owned())),
            );
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        Ok(counted)
    }

    /// One image version's memory, read once per environment; `None` when
    /// it cannot be read.
    async fn memory_of(&self, image: &str, version: &str) -> Option<u32> {
        let key = format!("{image} {version}");
        if let Some(mib) = self.version_memory.lock().ok()?.get(&key) {
            return Some(*mib);
        }
        let out = self
            .microvms
            .get_microvm_image_version()
            .image_identifier(image)
            .image_version(version)
            .send()
            .await
            .ok()?;
        let mib = u32::try_from(out.resources().first()?.minimum_memory_in_mib()).ok()?;
        if let Ok(mut cache) = self.version_memory.lock() {
            cache.insert(key, mib);
        }
        Some(mib)
    }

    async fn put_metric(&self, value: f64) -> Result<(), Failure> {
        const OP: &str = "PutMetricData";
        let value = value.to_string();
        let body = form(&[
            ("Action", OP),
            ("Version", "2010-08-01"),
            ("Namespace", METRIC_NAMESPACE),
            ("MetricData.member.1.MetricName", METRIC_NAME),
            (
                "MetricData.member.1.Dimensions.member.1.Name",
                REGION_DIMENSION,
            ),
            (
                "MetricData.member.1.Dimensions.member.1.Value",
                &self.settings.region,
            ),
            ("MetricData.member.1.Value", &value),
            ("MetricData.member.1.Unit", "None"),
        ]);
        self.query(&self.cloudwatch, OP, &body).await
    }

    async fn publish(&self, subject: &str, message: &str) -> Result<(), Failure> {
        const OP: &str = "Publish";
        let body = form(&[
            ("Action", OP),
            ("Version", "2010-03-31"),
            ("TopicArn", &self.settings.topic_arn),
            ("Subject", subject),
            ("Message", message),
        ]);
        self.query(&self.sns, OP, &body).await
    }

    async fn query(&self, to: &SignedPost, op: &'static str, body: &str) -> Result<(), Failure> {
        let headers = [(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )];
        let answer = to.post(op, &headers, body).await?;
        if (200..300).contains(&answer.status) {
            Ok(())
        } else {
            Err(Failure::other(op, query_error_code(&answer)))
        }
    }

    async fn last_level(&self) -> Result<Level, Failure> {
        let out = self
            .dynamodb
            .get_item()
            .table_name(&self.settings.state_table)
            .key(STATE_KEY_ATTRIBUTE, AttributeValue::S(STATE_KEY.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Failure::aws("GetItem", &e))?;
        let stored = out
            .item()
            .and_then(|i| i.get(LEVEL_ATTRIBUTE))
            .and_then(|v| v.as_s().ok());
        Ok(Level::parse(stored.map(String::as_str)))
    }

    async fn save_level(&self, level: Level) -> Result<(), Failure> {
        self.dynamodb
            .put_item()
            .table_name(&self.settings.state_table)
            .item(STATE_KEY_ATTRIBUTE, AttributeValue::S(STATE_KEY.to_owned()))
            .item(
                LEVEL_ATTRIBUTE,
                AttributeValue::S(level.as_str().to_owned()),
            )
            .item(
                UPDATED_ATTRIBUTE,
                AttributeValue::N(crate::now_s().to_string()),
            )
            .send()
            .await
            .map_err(|e| Failure::aws("PutItem", &e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thresholds = Thresholds {
        warning: 0.8,
        critical: 0.95,
    };

    #[test]
    fn only_a_rise_alerts_and_the_highest_level_is_kept_until_ok() {
        assert_eq!(T.classify(0.79), Level::Ok);
        assert_eq!(T.classify(0.8), Level::Warning);
        assert_eq!(T.classify(0.95), Level::Critical);
        assert_eq!(T.classify(f64::INFINITY), Level::Critical);
        assert!(should_notify(Level::Ok, Level::Warning));
        assert!(should_notify(Level::Warning, Level::Critical));
        assert!(!should_notify(Level::Warning, Level::Warning));
        assert!(!should_notify(Level::Critical, Level::Warning));
        assert_eq!(
            level_to_remember(Level::Critical, Level::Warning),
            Level::Critical
        );
        assert_eq!(level_to_remember(Level::Critical, Level::Ok), Level::Ok);
        assert_eq!(Level::parse(Some("odd")), Level::Ok);
    }

    #[test]
    fn thresholds_out_of_order_are_refused() {
        assert_eq!(
            Thresholds::from_percents("80", "95").unwrap(),
            Thresholds {
                warning: 0.8,
                critical: 0.95
            }
        );
        for (w, c) in [
            ("95", "80"),
            ("80", "80"),
            ("0", "50"),
            ("50", "101"),
            ("x", "9"),
        ] {
            assert!(Thresholds::from_percents(w, c).is_err(), "{w} {c}");
        }
    }

    #[test]
    fn the_subject_fits_and_the_defaults_follow_the_region() {
        assert_eq!(
            subject(Level::Warning, "us-east-1", 0.851),
            "Rayito: MicroVM memory at the warning level (85% of the quota, us-east-1)"
        );
        assert!(subject(Level::Critical, &"x".repeat(200), 1.0).len() <= SUBJECT_MAX_CHARS);
        assert_eq!(memory_quota_default("us-west-2"), 1024.0);
        assert_eq!(memory_quota_default("eu-west-1"), 400.0);
    }
}
