//! What `sandbox mounts ID` and `sandbox volumes ID` print: one row per
//! mount path, its state and its last error class, as JSON
//! (`{"sandbox_id", "<field>": [{"path", "state", "last_error_class"}]}`)
//! or as text (`PATH<TAB>STATE<TAB>last error: CLASS|none`, a note when
//! there is none).

use serde_json::json;

use crate::{Format, output};

/// One mount path's row.
pub(crate) struct Row<'a> {
    pub(crate) path: &'a str,
    pub(crate) state: &'static str,
    pub(crate) last_error_class: Option<&'a str>,
}

/// Prints `rows` of `sandbox_id` under `field` (`mounts`, `volumes`);
/// `none` names what the sandbox has none of (`S3 mount`, `EFS volume`).
pub(crate) fn print(format: Format, sandbox_id: &str, field: &str, none: &str, rows: &[Row<'_>]) {
    match format {
        Format::Json => {
            let rows: Vec<_> = rows
                .iter()
                .map(|r| {
                    json!({
                        "path": r.path,
                        "state": r.state,
                        "last_error_class": r.last_error_class,
                    })
                })
                .collect();
            output::json(&json!({ "sandbox_id": sandbox_id, field: rows }));
        }
        Format::Text if rows.is_empty() => {
            output::note(&format!("sandbox {sandbox_id} has no {none}"));
        }
        Format::Text => {
            for r in rows {
                outln!(
                    "{}\t{}\tlast error: {}",
                    r.path,
                    r.state,
                    r.last_error_class.unwrap_or("none")
                );
            }
        }
    }
}
