//! `rayito sandbox logs ID`: the sandbox's CloudWatch Logs stream
//! (docs/sandbox-logs.md), once or followed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveTime, SecondsFormat, Utc};
use clap::Args;
use rayito::logs::{DEFAULT_LIMIT, LogEvent, LogsQuery, MAX_LIMIT};
use serde_json::json;

use crate::Format;
use crate::commands::{Backend, Failure};

/// How often `--follow` asks for new events.
const FOLLOW_EVERY: Duration = Duration::from_secs(2);

impl LogsArgs {
    /// The sandbox whose logs are read.
    pub fn id(&self) -> Option<String> {
        self.id.peek()
    }
}

/// `sandbox logs` arguments.
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    id: crate::ids::SandboxId,
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
    let id = args.id.resolve()?;
    let client = backend.client().await?;
    let mut query = LogsQuery::default().limit(args.limit);
    if let Some(group) = args.log_group {
        query = query.log_group(group);
    }
    if let Some(since) = args.since {
        query = query.since(since);
    }
    let mut reader = client.open_sandbox_logs(&id, &query).await?;
    if reader.used_fallback() {
        crate::output::note(&format!(
            "warning: no stream of sandbox {} under its expected name in {}; reading {}, the most recent stream of exactly its pattern (fallback scan)",
            id,
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
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Millis, true)
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

/// Milliseconds since the epoch of `YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|±HH:MM]`
/// (`t` or a space may stand for `T`; no zone is UTC). chrono's numeric
/// fields also take other widths and signs, so the shape is checked here
/// and the calendar left to chrono.
fn parse_iso_ms(text: &str) -> Option<i64> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let (date, time) = match text.split_once(['T', 't', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let shape: Vec<&str> = date.split('-').collect();
    if shape.len() != 3 || !digits(shape[0], 4) || !digits(shape[1], 2) || !digits(shape[2], 2) {
        return None;
    }
    let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    let Some(time) = time else {
        return Some(date.and_time(NaiveTime::MIN).and_utc().timestamp_millis());
    };
    // The zone: `Z`, `±HH:MM`, or none (UTC).
    let (clock, zone) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, "+00:00")
    } else if let Some(at) = time.rfind(['+', '-']) {
        time.split_at(at)
    } else {
        (time, "+00:00")
    };
    let (zh, zm) = zone[1..].split_once(':')?;
    if !digits(zh, 2) || !digits(zm, 2) {
        return None;
    }
    let offset: FixedOffset = zone.parse().ok()?;
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let fields: Vec<&str> = hms.split(':').collect();
    if !(2..=3).contains(&fields.len()) || fields.iter().any(|f| !digits(f, 2)) {
        return None;
    }
    if frac.is_some_and(|f| f.is_empty() || f.len() > 9 || !digits(f, f.len())) {
        return None;
    }
    let format = if fields.len() == 2 {
        "%H:%M"
    } else {
        "%H:%M:%S%.f"
    };
    let time = NaiveTime::parse_from_str(clock, format).ok()?;
    let at = date.and_time(time).and_local_timezone(offset).single()?;
    Some(at.timestamp_millis())
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
