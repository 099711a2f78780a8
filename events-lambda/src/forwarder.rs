//! The forwarder: a CloudWatch Logs subscription batch (the lines of one
//! sandbox's log stream that carry `"rayito.event.v1 "`), each line
//! checked by [`rayito_events::line::parse`] against the key derived for
//! the stream's sandbox, admitted on the sandbox's `STATE#` row (a
//! conditional write on its revision: two concurrent batches never both
//! move it), then stored as an `EVENT#` row. A bad line is counted by its
//! rejection class, never an error; only a table that keeps failing fails
//! the invocation (Lambda retries it, then the failures queue keeps it).

use std::collections::BTreeMap;
use std::io::Read as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rayito_events::Event;
use rayito_events::admission::admit;
use rayito_events::line::{self, Rejection};
use serde::Deserialize;

use crate::Failure;
use crate::table::{StateRow, Table};

/// How many times admission re-reads a `STATE#` row another writer moved.
const ADMISSION_ATTEMPTS: usize = 3;
/// The largest decompressed subscription payload read (CloudWatch Logs
/// sends at most 1 MiB of events per batch).
const MAX_PAYLOAD: u64 = 8 * 1024 * 1024;

/// One subscription delivery: the log stream and its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogsBatch {
    /// The log group the lines came from.
    pub log_group: String,
    /// The stream (`<date>/[<version>]<sandbox id>` for a sandbox).
    pub log_stream: String,
    /// Each line's text.
    pub messages: Vec<String>,
}

#[derive(Deserialize)]
struct Invocation {
    awslogs: AwsLogs,
}

#[derive(Deserialize)]
struct AwsLogs {
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    #[serde(default)]
    message_type: String,
    log_group: String,
    log_stream: String,
    #[serde(default)]
    log_events: Vec<LogEvent>,
}

#[derive(Deserialize)]
struct LogEvent {
    message: String,
}

/// Decodes a subscription invocation (`{"awslogs": {"data": base64 of the
/// gzipped JSON}}`); a `CONTROL_MESSAGE` (CloudWatch's reachability probe)
/// is a batch with no lines.
///
/// # Errors
/// When the invocation is not a subscription payload.
pub fn decode(invocation: &[u8]) -> Result<LogsBatch, Failure> {
    let bad = |what: &str| Failure::other("decode", what.to_owned());
    let inv: Invocation = serde_json::from_slice(invocation).map_err(|_| bad("not_awslogs"))?;
    let gz = STANDARD
        .decode(inv.awslogs.data)
        .map_err(|_| bad("not_base64"))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .take(MAX_PAYLOAD)
        .read_to_end(&mut json)
        .map_err(|_| bad("not_gzip"))?;
    let payload: Payload = serde_json::from_slice(&json).map_err(|_| bad("not_json"))?;
    let messages = if payload.message_type == "CONTROL_MESSAGE" {
        Vec::new()
    } else {
        payload.log_events.into_iter().map(|e| e.message).collect()
    };
    Ok(LogsBatch {
        log_group: payload.log_group,
        log_stream: payload.log_stream,
        messages,
    })
}

/// What a batch did: events admitted, retried lines already stored, and
/// each rejection class's count (the counters the reference logs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Events admitted and stored.
    pub admitted: u64,
    /// Lines already admitted (a retried batch): stored once.
    pub duplicates: u64,
    /// Lines refused, by [`Rejection::as_str`].
    pub rejected: BTreeMap<&'static str, u64>,
}

impl Report {
    fn reject(&mut self, r: Rejection) {
        *self.rejected.entry(r.as_str()).or_default() += 1;
    }

    /// The report as one JSON log line (counts only, never a line's text).
    pub fn to_log_line(&self) -> String {
        serde_json::json!({
            "forwarder": { "admitted": self.admitted, "duplicates": self.duplicates, "rejected": self.rejected }
        })
        .to_string()
    }
}

/// What [`admit_and_store`] did with an event it did not refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// Admitted and stored.
    Admitted,
    /// Admitted before (a retried batch): stored once.
    Duplicate,
}

/// Forwards one batch: each line parsed for the stream's sandbox, admitted
/// and stored.
///
/// # Errors
/// When the table fails (the invocation is retried whole: admitted lines
/// come back as duplicates).
pub async fn forward(
    table: &Table,
    stack_key: &[u8],
    batch: &LogsBatch,
    now_ms: u64,
) -> Result<Report, Failure> {
    let mut report = Report::default();
    let Some(sandbox_id) = line::stream_sandbox_id(&batch.log_stream) else {
        for _ in &batch.messages {
            report.reject(Rejection::SandboxMismatch);
        }
        return Ok(report);
    };
    for message in &batch.messages {
        // CloudWatch may carry the agent's line with a prefix of its own
        // (a timestamp); the event starts at the marker.
        let text = message
            .find(line::PREFIX)
            .map_or(message.as_str(), |at| &message[at..]);
        let event = match line::parse(text, sandbox_id, stack_key, now_ms) {
            Ok(event) => event,
            Err(r) => {
                report.reject(r);
                continue;
            }
        };
        match admit_and_store(table, &event, now_ms).await? {
            Ok(Stored::Admitted) => report.admitted += 1,
            Ok(Stored::Duplicate) => report.duplicates += 1,
            Err(r) => report.reject(r),
        }
    }
    Ok(report)
}

/// Admits `event` on its sandbox's row and stores it. The outer error is
/// the table's; the inner one the event's refusal.
///
/// # Errors
/// When the table fails.
pub async fn admit_and_store(
    table: &Table,
    event: &Event,
    now_ms: u64,
) -> Result<Result<Stored, Rejection>, Failure> {
    let now_s = now_ms / 1000;
    for _ in 0..ADMISSION_ATTEMPTS {
        let current = table.state(&event.sandbox_id).await?;
        if current
            .as_ref()
            .is_some_and(|c| c.last_event_id == event.event_id)
        {
            // Admitted before (a retried batch): the row may still be
            // missing if the first try failed between the two writes.
            table.put_event(event, now_s).await?;
            return Ok(Ok(Stored::Duplicate));
        }
        let next = match admit(current.as_ref().map(|c| &c.state), event, now_ms) {
            Ok(next) => next,
            Err(r) => return Ok(Err(r)),
        };
        let row = StateRow {
            sandbox_id: event.sandbox_id.clone(),
            state: next,
            last_event_id: event.event_id.clone(),
            image_arn: event.image_arn.clone(),
            image_version: event.image_version.clone(),
            revision: current.map_or(0, |c| c.revision) + 1,
        };
        if table.put_state(&row, now_s).await? {
            table.put_event(event, now_s).await?;
            return Ok(Ok(Stored::Admitted));
        }
    }
    // Every attempt met another writer: refused as the reference counts it.
    Ok(Err(Rejection::InternalError))
}
