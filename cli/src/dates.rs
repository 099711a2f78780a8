//! Times for people: RFC 3339 in UTC to the second (`2026-12-06T10:28:49Z`),
//! and how long ago (`12m`). JSON keeps seconds since the epoch.

use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};

/// `2026-12-06T10:28:49Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// How long ago `t` was (`0s` for a time ahead of this host's clock).
pub(crate) fn age(t: SystemTime) -> String {
    crate::duration::human(SystemTime::now().duration_since(t).unwrap_or_default())
}

/// `2026-12-06T10:28:49Z (12m ago)`, or `-` for no time.
pub(crate) fn with_age(t: Option<SystemTime>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| format!("{} ({} ago)", rfc3339(t), age(t)),
    )
}
