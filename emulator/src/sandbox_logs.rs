//! Sandbox logs of the emulator: a MicroVM created with
//! `logging: {cloudWatch: {logGroup}}` gets the stream
//! `YYYY/MM/DD[<imageVersion>]<microvmId>` (the UTC day it started) in
//! that group of [`super::logs::LogStore`], read back through the same
//! DescribeLogStreams and GetLogEvents as build logs. Locally the sandbox
//! has no console for the service to forward, so the stream holds the
//! emulator's own lifecycle lines for it (started, terminated) and the
//! agent's signed event lines (the events pipeline's sink, `super::events`),
//! which is enough for `rayito sandbox logs` to find and read it as on AWS.

use serde_json::Value;

use super::images::build::utc_date;
use super::registry::{Shared, Vm};

/// The group RunMicrovm's `logging` names, when it enables CloudWatch.
pub(crate) fn log_group(logging: Option<&Value>) -> Option<String> {
    logging?
        .get("cloudWatch")?
        .get("logGroup")?
        .as_str()
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
}

/// `YYYY/MM/DD[<imageVersion>]<microvmId>`, the day in UTC.
pub(crate) fn stream_name(started_at: f64, image_version: &str, microvm_id: &str) -> String {
    format!(
        "{}[{image_version}]{microvm_id}",
        utc_date(started_at as i64)
    )
}

/// Appends `line` to `vm`'s stream, when it logs to CloudWatch.
pub(crate) fn record(shared: &Shared, vm: &Vm, line: String) {
    if let Some(group) = &vm.spec.log_group {
        let stream = stream_name(vm.started_at, &vm.spec.image_version, &vm.id);
        shared.logs.append(group, &stream, [line]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_group_comes_from_cloudwatch_logging_only() {
        let cw = json!({"cloudWatch": {"logGroup": "/rayito/py"}});
        assert_eq!(log_group(Some(&cw)).as_deref(), Some("/rayito/py"));
        assert_eq!(log_group(Some(&json!({"disabled": {}}))), None);
        assert_eq!(log_group(Some(&json!({"cloudWatch": {}}))), None);
        assert_eq!(log_group(None), None);
    }

    #[test]
    fn streams_are_named_by_utc_day_version_and_id() {
        assert_eq!(
            stream_name(1_796_083_200.5, "3.0", "vm-1"),
            "2026/12/01[3.0]vm-1"
        );
    }
}
