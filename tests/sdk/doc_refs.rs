//! Every reference to a section of the project's docs points at a heading
//! that exists: a heading renamed or a section cited from memory fails
//! here, naming the file and the reference.
//!
//! Scanned: every `.rs` and `.md` file of the repository (the SDK, the
//! agent, the proto crate, the CLI, the E2B crate, the docs, the README,
//! the examples and the tests). Two forms are checked:
//!
//! - a citation: a page of `docs/` (or the README), then the heading in
//!   double quotes, after a comma or in parentheses (in Rust comments, a
//!   citation may wrap onto the next comment line). The heading must be
//!   one of the page's headings exactly, case included, once its leading
//!   `#`s are stripped;
//! - a link with an anchor: a page, `#`, then a slug (or `](#slug)` within
//!   a page). The slug must be one of the page's headings under GitHub's
//!   slug rules.
//!
//! A page outside the repository (the shared specs, gRPC's own docs) is
//! not checked; a page of `docs/` that does not exist is a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    crate::sdk_support::repo_root()
}

/// The directories and files scanned, relative to the repository root.
const SCANNED: &[&str] = &[
    "src",
    "agent",
    "proto",
    "cli",
    "compat",
    "mcp",
    "docs",
    "examples",
    "tests",
    "README.md",
    "CONTRIBUTING.md",
];

/// References in files that another change rewrites (issue 21, sections
/// 1-3): each is fixed there, and is listed here until then. An entry
/// whose reference is no longer found fails, so the list only shrinks.
const AWAITING_REWRITE: &[(&str, &str, &str)] = &[];

fn files(at: &Path, out: &mut Vec<PathBuf>) {
    if at.is_file() {
        if matches!(at.extension().and_then(|e| e.to_str()), Some("rs" | "md")) {
            out.push(at.to_owned());
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(at) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "target" || name.starts_with('.') {
            continue;
        }
        files(&entry, out);
    }
}

/// The headings of a markdown text (ATX headings outside fenced code), as
/// written after their `#`s.
fn headings(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        let rest = &line[level..];
        if level > 6 || !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let text = rest.trim().trim_end_matches('#').trim_end();
        out.push(text.to_owned());
    }
    out
}

/// GitHub's anchor for a heading: lower case, every character that is not
/// a letter, a digit, a space, `-` or `_` removed, spaces as `-`; the n-th
/// repeat of a slug gets `-n`.
fn slugs(headings: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    headings
        .iter()
        .map(|h| {
            let base: String = h
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            let n = seen.entry(base.clone()).or_insert(0);
            let slug = if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            *n += 1;
            slug
        })
        .collect()
}

/// A `.rs` file's text with comment markers removed and lines joined, so
/// that a citation wrapped onto the next comment line reads as one; a
/// `.md` file's lines joined. Escaped quotes (`\"` in a string literal)
/// read as quotes.
fn flattened(path: &Path, text: &str) -> String {
    let is_rust = path.extension().is_some_and(|e| e == "rs");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut line = line.trim();
        if is_rust {
            for marker in ["//!", "///", "//"] {
                if let Some(rest) = line.strip_prefix(marker) {
                    line = rest.trim();
                    break;
                }
            }
        }
        out.push_str(line);
        out.push(' ');
    }
    out.replace("\\\"", "\"")
}

/// Where a cited page lives: `docs/NAME.md`, or the README. `None` for a
/// page this repository does not hold (a shared spec, another project's
/// doc), unless it is written under `docs/`.
fn page(cited: &str) -> Result<Option<PathBuf>, String> {
    let name = cited.rsplit('/').next().unwrap_or(cited);
    let candidates = [root().join("docs").join(name), root().join(name)];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(Some(found.clone()));
    }
    if cited.contains("docs/") {
        return Err(format!("{cited} does not exist"));
    }
    Ok(None)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/')
}

/// One reference: the page as cited, and the heading or the anchor.
#[derive(Debug)]
enum Reference {
    Heading(String, String),
    Anchor(String, String),
}

/// The references of a flattened text. `own` is the page itself, for
/// `](#slug)` links within a markdown page.
fn references(text: &str, own: Option<&str>) -> Vec<Reference> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(".md").map(|p| from + p) {
        from = at + 3;
        let start = bytes[..at]
            .iter()
            .rposition(|b| !is_name_byte(*b))
            .map_or(0, |p| p + 1);
        let cited = &text[start..at + 3];
        if start == at {
            continue;
        }
        let rest = &text[at + 3..];
        if let Some(anchor) = rest.strip_prefix('#') {
            let slug: String = anchor
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                .collect();
            if !slug.is_empty() {
                out.push(Reference::Anchor(cited.to_owned(), slug));
            }
            continue;
        }
        // `.md` then an optional closing backtick, then `, "` or ` ("`.
        let rest = rest.strip_prefix('`').unwrap_or(rest);
        let quoted = rest
            .strip_prefix(',')
            .or_else(|| rest.trim_start().strip_prefix('('))
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('"'));
        if let Some(quoted) = quoted
            && let Some(end) = quoted.find('"')
        {
            out.push(Reference::Heading(
                cited.to_owned(),
                quoted[..end].to_owned(),
            ));
        }
    }
    if let Some(own) = own {
        let mut from = 0;
        while let Some(at) = text[from..].find("](#").map(|p| from + p) {
            from = at + 3;
            let slug: String = text[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                .collect();
            out.push(Reference::Anchor(own.to_owned(), slug));
        }
    }
    out
}

#[test]
fn every_docs_reference_points_at_a_real_heading() {
    let mut scanned = Vec::new();
    for entry in SCANNED {
        files(&root().join(entry), &mut scanned);
    }
    assert!(scanned.len() > 100, "only {} files found", scanned.len());

    let mut broken = Vec::new();
    let mut awaiting_seen = vec![false; AWAITING_REWRITE.len()];
    let mut checked = 0;
    for path in &scanned {
        let text = std::fs::read_to_string(path).expect("readable");
        let shown = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        let own = path
            .extension()
            .is_some_and(|e| e == "md")
            .then(|| shown.clone());
        for reference in references(&flattened(path, &text), own.as_deref()) {
            let (cited, wanted, is_anchor) = match &reference {
                Reference::Heading(c, h) => (c, h, false),
                Reference::Anchor(c, s) => (c, s, true),
            };
            let resolved = if own.as_deref() == Some(cited.as_str()) {
                Ok(Some(path.clone()))
            } else {
                page(cited)
            };
            let target = match resolved {
                Ok(Some(target)) => target,
                Ok(None) => continue,
                Err(why) => {
                    broken.push(format!("{shown}: {why}"));
                    continue;
                }
            };
            checked += 1;
            let page_headings = headings(&std::fs::read_to_string(&target).expect("readable"));
            let found = if is_anchor {
                slugs(&page_headings).contains(wanted)
            } else {
                page_headings.contains(wanted)
            };
            if found {
                continue;
            }
            let described = if is_anchor {
                format!("{cited}#{wanted}")
            } else {
                format!("{cited}, \"{wanted}\"")
            };
            if let Some(i) = AWAITING_REWRITE
                .iter()
                .position(|(file, p, w)| *file == shown && p == cited && w == wanted)
            {
                awaiting_seen[i] = true;
                continue;
            }
            broken.push(format!("{shown}: {described} is not a heading of {cited}"));
        }
    }
    for (seen, (file, cited, wanted)) in awaiting_seen.iter().zip(AWAITING_REWRITE) {
        if !seen {
            broken.push(format!(
                "{file}: {cited}, \"{wanted}\" is fixed or gone: remove it from AWAITING_REWRITE"
            ));
        }
    }
    assert!(checked > 20, "only {checked} references found");
    assert!(
        broken.is_empty(),
        "broken docs references:\n{}",
        broken.join("\n")
    );
}

#[test]
fn slugs_follow_githubs_rules() {
    let headings: Vec<String> = [
        "Retries (`RetryPolicy`, data only)",
        "Files: the agent's own path (session 4)",
        "`rayito doctor`",
        "Reconnect",
        "Reconnect",
    ]
    .map(str::to_owned)
    .to_vec();
    assert_eq!(
        slugs(&headings),
        [
            "retries-retrypolicy-data-only",
            "files-the-agents-own-path-session-4",
            "rayito-doctor",
            "reconnect",
            "reconnect-1",
        ]
    );
}

#[test]
fn citations_are_read_in_every_form_used() {
    let rust = "/// one (docs/errors.md,\n/// \"Fuzzing the\n/// contract\") two\n\
                const P: &str = \"see docs/aws.md (\\\"The IAM policy\\\")\";\n\
                //! `docs/errors.md` (\"Arguments refused before any I/O\")\n\
                //! [x](docs/local.md#the-proxy) and wire-contract.md, \"Lifecycle\"";
    let found: Vec<String> = references(&flattened(Path::new("a.rs"), rust), None)
        .into_iter()
        .map(|r| format!("{r:?}"))
        .collect();
    assert_eq!(
        found,
        [
            r#"Heading("docs/errors.md", "Fuzzing the contract")"#,
            r#"Heading("docs/aws.md", "The IAM policy")"#,
            r#"Heading("docs/errors.md", "Arguments refused before any I/O")"#,
            r#"Anchor("docs/local.md", "the-proxy")"#,
            r#"Heading("wire-contract.md", "Lifecycle")"#,
        ]
    );
    let md = "See [retries](errors.md#retries) and [below](#the-wire-form).";
    let found: Vec<String> = references(&flattened(Path::new("a.md"), md), Some("docs/x.md"))
        .into_iter()
        .map(|r| format!("{r:?}"))
        .collect();
    assert_eq!(
        found,
        [
            r#"Anchor("errors.md", "retries")"#,
            r#"Anchor("docs/x.md", "the-wire-form")"#,
        ]
    );
}
