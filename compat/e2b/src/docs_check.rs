//! `docs/e2b-compat.md` transcribes the warning reasons and the missing
//! features; this keeps the tables and the code in step.

use crate::unimplemented::Missing;

/// The rows `| `a` | text |` of the table under `heading`.
fn rows(heading: &str) -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/e2b-compat.md"
    ))
    .expect("docs/e2b-compat.md");
    let section = doc.split(heading).nth(1).expect("the section exists");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_owned(), cells[1].to_owned())
        })
        .collect()
}

#[test]
fn the_missing_features_table_is_the_code() {
    let documented = rows("## Unimplemented features");
    let code: Vec<(String, String)> = Missing::ALL
        .iter()
        .map(|m| (format!("`{}`", m.key()), m.reason().to_owned()))
        .collect();
    assert_eq!(documented, code);
}

#[test]
fn the_ignored_options_table_is_the_code() {
    let documented = rows("## Ignored options: one warning each");
    let code: Vec<(String, String)> = crate::warnings::IGNORED
        .iter()
        .map(|(o, r)| (format!("`{o}`"), (*r).to_owned()))
        .collect();
    assert_eq!(documented, code);
}
