//! Instants as RFC 3339 UTC text (`2026-12-02T10:22:11Z`), the form the
//! tools' JSON carries. chrono does the calendar (rmcp already builds it
//! into this binary).

use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds, UTC).
pub fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_206_931);
        assert_eq!(rfc3339(t), "2026-12-02T10:22:11Z");
        // A leap day; a fraction of a second is cut, not rounded.
        let t = UNIX_EPOCH + Duration::from_millis(951_825_600_900);
        assert_eq!(rfc3339(t), "2000-02-29T12:00:00Z");
    }
}
