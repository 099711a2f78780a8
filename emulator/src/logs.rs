//! The emulator's CloudWatch Logs store: log groups of streams of events,
//! in memory, written by local builds (group `/rayito/<image>`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogEvent {
    /// Milliseconds since the epoch.
    pub(crate) timestamp_ms: i64,
    /// The line.
    pub(crate) message: String,
}

/// One stream: its events, and when it was created and last written.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogStream {
    pub(crate) created_ms: i64,
    pub(crate) last_event_ms: i64,
    pub(crate) events: Vec<LogEvent>,
}

/// Every group, by name, of streams by name.
#[derive(Debug, Default)]
pub(crate) struct LogStore {
    groups: Mutex<BTreeMap<String, BTreeMap<String, LogStream>>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl LogStore {
    /// Appends `lines` to `group`/`stream`, creating both as needed.
    pub(crate) fn append(
        &self,
        group: &str,
        stream: &str,
        lines: impl IntoIterator<Item = String>,
    ) {
        let now = now_ms();
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let entry = groups
            .entry(group.to_owned())
            .or_default()
            .entry(stream.to_owned())
            .or_insert_with(|| LogStream {
                created_ms: now,
                ..LogStream::default()
            });
        for message in lines {
            entry.events.push(LogEvent {
                timestamp_ms: now,
                message,
            });
            entry.last_event_ms = now;
        }
    }

    /// A copy of `group`'s streams, `None` when the group does not exist.
    pub(crate) fn streams(&self, group: &str) -> Option<BTreeMap<String, LogStream>> {
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        groups.get(group).cloned()
    }
}
