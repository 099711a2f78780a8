//! `rayito sandbox logs ID`: the sandbox's CloudWatch Logs stream
//! (docs/sandbox-logs.md), once or followed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use rayito::logs::{DEFAULT_LIMIT, LogEvent, LogsQuery, MAX_LIMIT};
use serde_json::json;

use crate::Format;
use crate::commands::{Backend, Failure};

/// How often `--follow` asks for new events.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// `sandbox logs` arguments.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The sandbox id.
    id: String,
    /// The log group (default `/rayito/<template name>`).
    #[arg(long)]
    log_group: Option<String>,
    /// The most events printed (1 to 100000; with --follow, per poll).
    #[arg(long, default_value_t = DEFAULT_LIMIT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_LIMIT as u64))]
    limit: usize,
    /// Only events since: a duration back from now (`30s`, `30m`, `2h`,
    /// `1d`) or an ISO-8601 time (`2026-12-01T10:00:00Z`; without a zone,
    /// UTC).
    #[arg(long, value_parser = parse_since)]
    since: Option<SystemTime>,
    /// Keep printing new events until stopped.
    #[arg(long, short = 'f')]
    follow: bool,
    /// One JSON object per line: `{timestamp, message, stream}`.
    #[arg(long)]
    json: bool,
}

/// Runs `sandbox logs`; exit 0, or the failure (no logs: exit 1).
pub(crate) async fn run(backend: &Backend, format: Format, args: LogsArgs) -> Result<i32, Failure> {
    let client = backend.client().await?;
    let mut query = LogsQuery::default().limit(args.limit);
    if let Some(group) = args.log_group {
        query = query.log_group(group);
    }
    if let Some(since) = args.since {
        query = query.since(since);
    }
    let mut reader = client.open_sandbox_logs(&args.id, &query).await?;
    if reader.used_fallback() {
        crate::output::note(&format!(
            "warning: no stream of sandbox {} under its expected name in {}; reading {}, the most recent stream of exactly its pattern (fallback scan)",
            args.id,
            reader.log_group(),
            reader.stream()
        ));
    }
    let json = args.json || format == Format::Json;
    loop {
        for event in reader.read(args.limit).await? {
            print_event(&event, json);
        }
        if !args.follow {
            return Ok(0);
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

fn print_event(event: &LogEvent, json: bool) {
    let at = iso_ms(event.timestamp);
    if json {
        outln!(
            "{}",
            json!({ "timestamp": at, "message": event.message, "stream": event.stream })
        );
    } else {
        outln!("{at} {}", event.message);
    }
}

/// `2026-12-01T10:00:00.123Z`.
pub(crate) fn iso_ms(t: SystemTime) -> String {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1_000 % 60,
        rest % 1_000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

/// `--since`: `<n>s|m|h|d` back from now, or ISO-8601 (zone-less = UTC).
pub(crate) fn parse_since(text: &str) -> Result<SystemTime, String> {
    parse_since_at(text, SystemTime::now())
}

fn parse_since_at(text: &str, now: SystemTime) -> Result<SystemTime, String> {
    const BAD: &str = "expected a duration back from now (30s, 30m, 2h, 1d) or an ISO-8601 time (2026-12-01T10:00:00Z; without a zone, UTC)";
    if let Some(unit) = text.chars().last().filter(|c| "smhd".contains(*c))
        && let Ok(n) = text[..text.len() - 1].parse::<u64>()
    {
        let secs = match unit {
            's' => Some(n),
            'm' => n.checked_mul(60),
            'h' => n.checked_mul(3_600),
            _ => n.checked_mul(86_400),
        };
        return secs
            .and_then(|s| now.checked_sub(Duration::from_secs(s)))
            .filter(|t| *t >= UNIX_EPOCH)
            .ok_or_else(|| "the duration reaches back before 1970".to_owned());
    }
    let ms = parse_iso_ms(text).ok_or_else(|| BAD.to_owned())?;
    u64::try_from(ms)
        .ok()
        .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .ok_or_else(|| "the time is before 1970".to_owned())
}

/// Milliseconds since the epoch of `YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|±HH:MM]`.
fn parse_iso_ms(text: &str) -> Option<i64> {
    let num = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (date, time) = match text.split_once(['T', 't', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d) = (num(y)?, num(m)?, num(d)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d).checked_mul(86_400_000)?;
    let Some(time) = time else {
        return Some(ms);
    };
    // The zone: `Z`, `±HH:MM`, or none (UTC).
    let (clock, offset_ms) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let (c, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (zh, zm) = zone[1..].split_once(':')?;
        if zh.len() != 2 || zm.len() != 2 {
            return None;
        }
        let (zh, zm) = (num(zh)?, num(zm)?);
        if zh > 23 || zm > 59 {
            return None;
        }
        (c, sign * (zh * 3_600_000 + zm * 60_000))
    } else {
        (time, 0)
    };
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let fields: Vec<&str> = hms.split(':').collect();
    if !(2..=3).contains(&fields.len()) || fields.iter().any(|f| f.len() != 2) {
        return None;
    }
    let h = num(fields[0])?;
    let min = num(fields[1])?;
    let s = fields.get(2).map_or(Some(0), |f| num(f))?;
    if h > 23 || min > 59 || s > 59 {
        return None;
    }
    let milli = match frac {
        None => 0,
        Some(f) if f.len() > 9 || num(f).is_none() => return None,
        Some(f) => num(&format!("{f:0<3}")[..3])?,
    };
    ms = ms.checked_add(h * 3_600_000 + min * 60_000 + s * 1_000 + milli)?;
    ms.checked_sub(offset_ms)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn timestamps_print_as_iso_with_milliseconds_in_utc() {
        assert_eq!(iso_ms(at(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_ms(at(1_796_083_200_123)), "2026-12-01T00:00:00.123Z");
        assert_eq!(iso_ms(at(951_782_400_000 - 1)), "2000-02-28T23:59:59.999Z");
    }

    #[test]
    fn since_takes_durations_and_iso_times() {
        let now = at(1_796_083_200_000);
        assert_eq!(
            parse_since_at("30m", now),
            Ok(at(1_796_083_200_000 - 1_800_000))
        );
        assert_eq!(
            parse_since_at("2h", now),
            Ok(at(1_796_083_200_000 - 7_200_000))
        );
        assert_eq!(
            parse_since_at("1d", now),
            Ok(at(1_796_083_200_000 - 86_400_000))
        );
        assert_eq!(
            parse_since_at("45s", now),
            Ok(at(1_796_083_200_000 - 45_000))
        );
        for (text, ms) in [
            ("2026-12-01", 1_796_083_200_000),
            ("2026-12-01T10:00", 1_796_119_200_000),
            ("2026-12-01T10:00:00", 1_796_119_200_000),
            ("2026-12-01T10:00:00Z", 1_796_119_200_000),
            ("2026-12-01T10:00:00.5Z", 1_796_119_200_500),
            ("2026-12-01T12:00:00+02:00", 1_796_119_200_000),
            ("2026-12-01T08:30:00-01:30", 1_796_119_200_000),
        ] {
            assert_eq!(parse_since_at(text, now), Ok(at(ms)), "{text}");
        }
        for bad in [
            "",
            "30",
            "m",
            "-5m",
            "30x",
            "2026-13-01",
            "2026-02-30",
            "2026-12-01T25:00",
            "2026-12-01T10",
            "2026/12/01",
            "yesterday",
            "2026-12-01T10:00:00+2",
            "99999999999999999999d",
        ] {
            assert!(parse_since_at(bad, now).is_err(), "{bad}");
        }
    }
}
