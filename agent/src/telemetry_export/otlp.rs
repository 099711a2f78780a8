//! The OTLP/HTTP metrics body: `ExportMetricsServiceRequest` of
//! opentelemetry-proto (`collector/metrics/v1`), only the fields the
//! exporter sets, with OTLP's own field numbers (so any OTLP receiver
//! decodes it; the agent test decodes it with the `opentelemetry-proto`
//! crate's types). Each sample becomes one data point of each of the seven
//! gauges; the resource carries the sandbox's facts.

use super::plan::{Names, Plan};
use crate::metrics::Sample;

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `opentelemetry.proto.metrics.v1.ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `opentelemetry.proto.metrics.v1.ScopeMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<Scope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Scope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `opentelemetry.proto.metrics.v1.Metric`, a gauge.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(message, optional, tag = "5")]
    pub gauge: Option<Gauge>,
}

/// `opentelemetry.proto.metrics.v1.Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<DataPoint>,
}

/// `opentelemetry.proto.metrics.v1.NumberDataPoint`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DataPoint {
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Value", tags = "4, 6")]
    pub value: Option<Value>,
}

/// `NumberDataPoint.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Value {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

/// `opentelemetry.proto.common.v1.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.AnyValue` (strings and integers).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AnyValue {
    #[prost(oneof = "Any", tags = "1, 3")]
    pub value: Option<Any>,
}

/// `AnyValue.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Any {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(int64, tag = "3")]
    Int(i64),
}

/// The instrumentation scope's name.
pub(crate) const SCOPE: &str = "rayito-agent";

/// The seven gauges: name suffix (after `<style>.sandbox.`), unit,
/// description, and the value of a sample.
#[allow(clippy::type_complexity)]
const GAUGES: [(&str, &str, &str, fn(&Sample) -> Value); 7] = [
    (
        "cpu.used_pct",
        "%",
        "CPU used, percent of all the sandbox's CPUs",
        |s| Value::AsDouble(s.cpu_used_pct),
    ),
    ("memory.used_bytes", "By", "memory used", |s| {
        int(s.mem_used_bytes)
    }),
    ("memory.total_bytes", "By", "memory in all", |s| {
        int(s.mem_total_bytes)
    }),
    ("memory.cache_bytes", "By", "page cache", |s| {
        int(s.mem_cache_bytes)
    }),
    ("disk.used_bytes", "By", "disk used", |s| {
        int(s.disk_used_bytes)
    }),
    ("disk.total_bytes", "By", "disk in all", |s| {
        int(s.disk_total_bytes)
    }),
    ("cpu.count", "1", "CPUs", |s| int(u64::from(s.cpu_count))),
];

/// How many points one sample makes.
pub(crate) const POINTS_PER_SAMPLE: u64 = GAUGES.len() as u64;

fn int(v: u64) -> Value {
    Value::AsInt(i64::try_from(v).unwrap_or(i64::MAX))
}

fn attr(key: &str, value: Any) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
    }
}

/// The prefix of every gauge name.
fn prefix(names: Names) -> &'static str {
    match names {
        Names::Rayito => "rayito.sandbox.",
        Names::E2b => "e2b.sandbox.",
    }
}

/// The request for `samples` (oldest first): the resource of `plan` and
/// `sandbox_id`, one point per sample in each gauge.
pub(crate) fn request(plan: &Plan, sandbox_id: &str, samples: &[Sample]) -> ExportRequest {
    let resource = Resource {
        attributes: vec![
            attr("service.name", Any::String(plan.service_name.clone())),
            attr("sandbox_id", Any::String(sandbox_id.to_owned())),
            attr("image_arn", Any::String(plan.image_arn.clone())),
            attr("image_version", Any::String(plan.image_version.clone())),
            attr(
                "image_memory_mib",
                Any::Int(i64::from(plan.image_memory_mib)),
            ),
        ],
    };
    let metrics = GAUGES
        .iter()
        .map(|(suffix, unit, description, value)| Metric {
            name: format!("{}{suffix}", prefix(plan.names)),
            description: (*description).to_owned(),
            unit: (*unit).to_owned(),
            gauge: Some(Gauge {
                data_points: samples
                    .iter()
                    .map(|s| DataPoint {
                        time_unix_nano: u64::try_from(s.timestamp_unix_ms)
                            .unwrap_or(0)
                            .saturating_mul(1_000_000),
                        value: Some(value(s)),
                    })
                    .collect(),
            }),
        })
        .collect();
    ExportRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(Scope {
                    name: SCOPE.to_owned(),
                    version: crate::AGENT_VERSION.to_owned(),
                }),
                metrics,
            }],
        }],
    }
}
