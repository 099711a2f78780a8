//! RFC 3339 dates as the AWS SDK's date type writes and reads them (the
//! pool file's and the log stream names' dates): the same text on both
//! sides of the edge, without a date library of our own.

use std::time::SystemTime;

use aws_sdk_lambdamicrovms::primitives::{DateTime, DateTimeFormat};

/// `2026-12-01T19:00:00Z` (fractions of a second when `t` has them); the
/// epoch's text when `t` cannot be written.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    DateTime::from(t)
        .fmt(DateTimeFormat::DateTime)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// The time of an RFC 3339 text, `None` when it is not one (or not a date
/// that exists).
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let t = DateTime::from_str(text, DateTimeFormat::DateTime).ok()?;
    SystemTime::try_from(t).ok()
}

/// Whether `text` is an RFC 3339 date that exists.
#[cfg(feature = "logs")]
pub(crate) fn is_rfc3339(text: &str) -> bool {
    DateTime::from_str(text, DateTimeFormat::DateTime).is_ok()
}

/// The civil date (year, month, day) of a count of days since 1970-01-01,
/// proleptic Gregorian (Howard Hinnant's algorithm): the dates S3 policies
/// and image descriptions write.
#[cfg(any(feature = "templates", feature = "s3"))]
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
