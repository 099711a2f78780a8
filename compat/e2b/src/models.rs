//! E2B's methods on the code interpreter's models and the watch handle,
//! as extension traits over the SDK's types (which are re-exported, not
//! copied).

use futures_util::FutureExt as _;
use futures_util::StreamExt as _;
use rayito::{
    Execution, ExecutionError, ExecutionResult, FilesystemEvent, Logs, SandboxError, WatchHandle,
};
use serde_json::{Map, Value, json};

/// `to_json()` of `Execution`, `Logs`, `ExecutionError` and `Result`: the
/// JSON E2B's models serialize to (the same field names).
pub trait ToJson {
    /// The value as a JSON text.
    fn to_json(&self) -> String;
}

fn error_value(error: &ExecutionError) -> Value {
    json!({"name": error.name, "value": error.value, "traceback": error.traceback})
}

fn logs_value(logs: &Logs) -> Value {
    json!({"stdout": logs.stdout, "stderr": logs.stderr})
}

/// A result as E2B's `Result.__dict__`: the formats it has, plus
/// `is_main_result` and `extra`.
fn result_value(result: &ExecutionResult) -> Value {
    let mut map = Map::new();
    let formats = [
        ("text", &result.text),
        ("html", &result.html),
        ("markdown", &result.markdown),
        ("latex", &result.latex),
        ("json", &result.json),
        ("javascript", &result.javascript),
        ("png", &result.png),
        ("jpeg", &result.jpeg),
        ("svg", &result.svg),
        ("pdf", &result.pdf),
        ("chart", &result.chart),
        ("data", &result.data),
    ];
    for (name, value) in formats {
        if let Some(value) = value {
            map.insert(name.to_owned(), Value::String(value.clone()));
        }
    }
    map.insert("is_main_result".to_owned(), json!(result.is_main_result));
    if !result.extra.is_empty() {
        map.insert("extra".to_owned(), json!(result.extra));
    }
    Value::Object(map)
}

impl ToJson for Execution {
    fn to_json(&self) -> String {
        json!({
            "results": self.results.iter().map(result_value).collect::<Vec<_>>(),
            "logs": logs_value(&self.logs),
            "error": self.error.as_ref().map(error_value),
            "execution_count": self.execution_count,
        })
        .to_string()
    }
}

impl ToJson for Logs {
    fn to_json(&self) -> String {
        logs_value(self).to_string()
    }
}

impl ToJson for ExecutionError {
    fn to_json(&self) -> String {
        error_value(self).to_string()
    }
}

impl ToJson for ExecutionResult {
    fn to_json(&self) -> String {
        result_value(self).to_string()
    }
}

/// `Context.from_json(data)`: the context id in E2B's JSON fields (`id`,
/// `language`, `cwd`). The SDK's contexts are named by id
/// ([`crate::RunCodeOpts::context`] takes it), so the id is what a context
/// read back from JSON is used for.
///
/// # Errors
/// `InvalidArgument` (`data`) when it is not a JSON object with `id` and
/// `language` strings.
pub fn context_from_json(data: &str) -> Result<String, SandboxError> {
    let refuse = || {
        SandboxError::invalid_argument(
            "data",
            "a context is a JSON object with the strings id and language (and cwd); pass one",
        )
    };
    let value: Value = serde_json::from_str(data).map_err(|_| refuse())?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    match (text("id"), text("language")) {
        (Some(id), Some(_)) => Ok(id),
        _ => Err(refuse()),
    }
}

/// `watch_handle.get_new_events()`: the events that arrived since the last
/// call, without waiting.
pub trait GetNewEvents {
    /// Every event already received, oldest first (empty when none).
    ///
    /// # Errors
    /// The watch's failure, when it ended with one.
    fn get_new_events(&mut self) -> Result<Vec<FilesystemEvent>, SandboxError>;
}

impl GetNewEvents for WatchHandle {
    fn get_new_events(&mut self) -> Result<Vec<FilesystemEvent>, SandboxError> {
        let mut events = Vec::new();
        while let Some(Some(event)) = self.next().now_or_never() {
            events.push(event?);
        }
        Ok(events)
    }
}
