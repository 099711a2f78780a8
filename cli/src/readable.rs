//! The text forms of `sandbox list`, `info` and `metrics`, for people: a
//! table with a header, times in RFC 3339 (UTC, to the second) with how
//! long ago, sizes in binary units. `--output json` keeps its own forms
//! (seconds since the epoch, bytes).

use std::fmt::Write as _;

use rayito::{SandboxInfo, SandboxMetrics, SandboxSummary};

use crate::dates;

/// The columns of `sandbox list`.
const LIST_HEADER: [&str; 5] = ["SANDBOX ID", "STATE", "AGE", "TEMPLATE", "METADATA"];

/// `sandbox list` as a table: one row per sandbox under a header, columns
/// padded to their widest cell. The template is its name (the JSON form
/// has the ARN); metadata is `-` when the listing did not read it (only
/// `--metadata` does: it asks each sandbox's agent).
pub(crate) fn list(rows: &[SandboxSummary]) -> String {
    let mut cells: Vec<[String; 5]> = vec![LIST_HEADER.map(str::to_owned)];
    for row in rows {
        cells.push([
            row.sandbox_id.clone(),
            row.state.as_str().to_owned(),
            row.started_at.map_or_else(|| "-".to_owned(), dates::age),
            template_name(&row.template).to_owned(),
            metadata(row.metadata.as_ref()),
        ]);
    }
    table(&cells)
}

/// Rows of cells as lines, each column as wide as its widest cell plus
/// two spaces (the last one unpadded).
fn table(cells: &[[String; 5]]) -> String {
    let mut widths = [0usize; 5];
    for row in cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The name in an image ARN (`...:microvm-image:web` is `web`), else the
/// text as it is.
fn template_name(template: &str) -> &str {
    template
        .rsplit_once(":microvm-image:")
        .map_or(template, |(_, name)| name)
}

/// `k=v,k2=v2`, or `-`.
fn metadata(metadata: Option<&std::collections::BTreeMap<String, String>>) -> String {
    match metadata {
        Some(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".to_owned(),
    }
}

/// `sandbox info`: `key: value` lines, the same keys as the JSON form,
/// times in RFC 3339 with their age, the lifetime as a duration.
pub(crate) fn info(info: &SandboxInfo) -> String {
    let max = info.max_duration;
    let lines = [
        ("sandbox_id", info.sandbox_id.clone()),
        ("state", info.state.as_str().to_owned()),
        (
            "state_reason",
            info.state_reason.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        ("template", info.image_arn.clone()),
        ("template_version", info.image_version.clone()),
        ("started_at", dates::with_age(info.started_at)),
        ("terminated_at", dates::with_age(info.terminated_at)),
        (
            "max_duration",
            format!("{} ({} s)", crate::duration::human(max), max.as_secs()),
        ),
    ];
    lines
        .iter()
        .map(|(key, value)| format!("{key}: {value}\n"))
        .collect()
}

/// One metrics sample on one line:
/// `2026-12-06T10:28:49Z  cpu 12.5% of 2 CPUs  mem 120.0 MiB / 1.9 GiB  disk 1.2 GiB / 9.8 GiB`
/// (`mem` adds `(cache N)` when the agent reports it).
pub(crate) fn metrics(m: &SandboxMetrics) -> String {
    let cache = if m.mem_cache_bytes == 0 {
        String::new()
    } else {
        format!(" (cache {})", bytes(m.mem_cache_bytes))
    };
    format!(
        "{}  cpu {:.1}% of {} CPU{}  mem {} / {}{cache}  disk {} / {}",
        dates::rfc3339(m.timestamp),
        m.cpu_used_pct,
        m.cpu_count,
        if m.cpu_count == 1 { "" } else { "s" },
        bytes(m.mem_used_bytes),
        bytes(m.mem_total_bytes),
        bytes(m.disk_used_bytes),
        bytes(m.disk_total_bytes),
    )
}

/// A size in binary units with one decimal (`512 B`, `1.5 KiB`, `2.0 GiB`).
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(2 * 1024 * 1024 * 1024), "2.0 GiB");
    }

    #[test]
    fn a_table_pads_every_column_but_the_last() {
        let cells = [
            ["ID", "STATE", "AGE", "TEMPLATE", "METADATA"].map(str::to_owned),
            ["microvm-1", "RUNNING", "5s", "web", "-"].map(str::to_owned),
        ];
        assert_eq!(
            table(&cells),
            "ID         STATE    AGE  TEMPLATE  METADATA\nmicrovm-1  RUNNING  5s   web       -\n"
        );
        assert_eq!(
            template_name("arn:aws:lambda:us-east-1:1:microvm-image:web"),
            "web"
        );
    }
}
