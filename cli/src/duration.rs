//! Durations people type: `300` (seconds), `90s`, `10m`, `2h`, `1h30m`.

use std::time::Duration;

/// What a duration argument looks like (the usage error's text).
const EXPECTED: &str =
    "expected a duration: seconds (300) or a number with a unit, s, m or h (90s, 10m, 2h, 1h30m)";

/// Parses `text` (a clap value parser): plain digits are seconds, else
/// numbers each followed by `s`, `m` or `h`, added up.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| EXPECTED.to_owned());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            _ => return Err(EXPECTED.to_owned()),
        };
        let n: u64 = digits.parse().map_err(|_| EXPECTED.to_owned())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(|| EXPECTED.to_owned())?;
    }
    if !digits.is_empty() || text.is_empty() {
        return Err(EXPECTED.to_owned());
    }
    Ok(Duration::from_secs(total))
}

/// A duration for people: `45s`, `12m`, `3h05m`, `2d4h`.
pub(crate) fn human(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h{:02}m", secs / 3_600, secs % 3_600 / 60),
        _ => format!("{}d{}h", secs / 86_400, secs % 86_400 / 3_600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_units_add_up_and_anything_else_is_refused() {
        assert_eq!(parse("300"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5_400)));
        for bad in ["", "m", "1.5h", "10x", "-3", "5m3", "99999999999999999999h"] {
            assert_eq!(parse(bad), Err(EXPECTED.to_owned()), "{bad:?}");
        }
    }

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(human(Duration::from_secs(45)), "45s");
        assert_eq!(human(Duration::from_secs(725)), "12m");
        assert_eq!(human(Duration::from_secs(3 * 3_600 + 300)), "3h05m");
        assert_eq!(human(Duration::from_secs(2 * 86_400 + 4 * 3_600)), "2d4h");
    }
}
