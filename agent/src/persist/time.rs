//! UTC timestamps as RFC 3339 text (`2026-12-01T20:00:00Z`): a manifest's
//! `created_at` and the metadata service's `Expiration`.

use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};

/// `at` as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds, UTC).
pub(crate) fn format_rfc3339_utc(at: SystemTime) -> String {
    DateTime::<Utc>::from(at).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (UTC only: an offset is refused,
/// as AWS writes these times with `Z`); `None` otherwise.
pub(crate) fn parse_rfc3339_utc(s: &str) -> Option<SystemTime> {
    if !s.ends_with('Z') || s.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|at| SystemTime::from(at.with_timezone(&Utc)))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn timestamps_round_trip() {
        let at = UNIX_EPOCH + Duration::from_secs(1_796_157_845);
        let text = format_rfc3339_utc(at);
        assert_eq!(text, "2026-12-01T20:44:05Z");
        assert_eq!(parse_rfc3339_utc(&text), Some(at));
        assert_eq!(
            parse_rfc3339_utc("2026-12-01T20:44:05.123Z"),
            Some(at + Duration::from_millis(123))
        );
        assert_eq!(format_rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            parse_rfc3339_utc("2000-02-29T00:00:00Z"),
            Some(UNIX_EPOCH + Duration::from_secs(951_782_400))
        );
        for bad in [
            "",
            "2026-12-01 20:44:05Z",
            "2026-12-01T20:44:05+01:00",
            "2026-13-01T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_utc(bad), None, "{bad}");
        }
    }
}
