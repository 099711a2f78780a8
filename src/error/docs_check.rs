//! `docs/errors.md` transcribes the kind table, the sandbox code table and
//! every message template; these tests fail when the page and the code
//! differ.

use super::codes::SandboxCode;
use super::kind::{ErrorInfo, ErrorKind};
use super::messages;

const DOC: &str = include_str!("../../docs/errors.md");

/// The rows of the first table after `heading`, split into trimmed cells.
fn table_after(heading: &str) -> Vec<Vec<String>> {
    let start = DOC
        .find(heading)
        .unwrap_or_else(|| panic!("docs/errors.md has no `{heading}`"));
    DOC[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .map(|l| {
            l.trim()
                .trim_start_matches('|')
                .trim_end_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

fn unquote(cell: &str) -> &str {
    cell.trim_matches('`')
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The most specific E2B class of the kind in `rayito-e2b` (the kind table
/// of docs/errors.md; `compat/e2b/tests/exceptions.rs` holds the same
/// column to `rayito_e2b::exceptions::class_of`).
fn e2b_class(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Sandbox => "SandboxException",
        ErrorKind::Timeout => "TimeoutException",
        ErrorKind::InvalidArgument => "InvalidArgumentException",
        ErrorKind::NotFound => "NotFoundException",
        ErrorKind::FileNotFound => "FileNotFoundException",
        ErrorKind::SandboxNotFound => "SandboxNotFoundException",
        ErrorKind::SandboxNotReady => "SandboxUnreachableException",
        ErrorKind::SandboxState => "SandboxNotRunningException",
        ErrorKind::SandboxLifetime => "SandboxException",
        ErrorKind::CommandExit => "CommandExitException",
        ErrorKind::DiskFull => "NotEnoughSpaceException",
        ErrorKind::RateLimit => "RateLimitException",
        ErrorKind::Authentication => "AuthenticationException",
        ErrorKind::QuotaExceeded => "QuotaExceededException (rayito's)",
        ErrorKind::Capacity => "ServiceBusyException",
        ErrorKind::Unimplemented | ErrorKind::LifecycleUnsupported => {
            "UnimplementedError (rayito's)"
        }
        ErrorKind::Build => "BuildException",
        ErrorKind::Template => "TemplateException",
        ErrorKind::PoolClosed => "SandboxException",
        ErrorKind::Stack => "SandboxException",
        ErrorKind::SandboxIndex => "SandboxException",
        ErrorKind::IndexWrite => "SandboxException",
        ErrorKind::Persistence => "SandboxException",
        ErrorKind::Transfer => "SandboxException",
        ErrorKind::FileUpload => "FileUploadException",
        ErrorKind::Secret => "SecretException",
        ErrorKind::SecretNotFound => "SecretNotFoundException",
        // E2B has no class of its own for these (the reference's
        // WebhookException is rayito-only): a SandboxException.
        ErrorKind::Mount
        | ErrorKind::Volume
        | ErrorKind::VolumeMount
        | ErrorKind::VolumeNotFound
        | ErrorKind::Webhook
        // The reference's AgentException is rayito-only (E2B has none): a
        // SandboxException.
        | ErrorKind::Agent => "SandboxException",
        ErrorKind::GitAuth => "GitAuthException",
        ErrorKind::GitUpstream => "GitUpstreamException",
    }
}

#[test]
fn kind_table_matches_the_code() {
    let rows = table_after("## Kinds");
    assert_eq!(rows.len(), ErrorKind::ALL.len(), "one row per kind");
    for (row, kind) in rows.iter().zip(ErrorKind::ALL) {
        let info = kind.info();
        let parents: Vec<String> = kind
            .parents()
            .iter()
            .map(|p| format!("`{}`", p.as_str()))
            .collect();
        let variant = unquote(&row[4]);
        let variant_name = variant.split([' ', '{']).next().unwrap_or_default();
        let expected = [
            format!("`{}`", kind.as_str()),
            parents.join(", "),
            yes_no(info.retryable).to_owned(),
            yes_no(info.retry_with_larger_limits).to_owned(),
            format!("{kind:?}"),
            info.summary.to_owned(),
            e2b_class(*kind).to_owned(),
        ];
        let got = [
            row[0].clone(),
            row[1].clone(),
            row[2].clone(),
            row[3].clone(),
            variant_name.to_owned(),
            row[5].clone(),
            row[6].clone(),
        ];
        assert_eq!(got, expected, "row of {}", kind.as_str());
    }
}

#[test]
fn sandbox_code_table_matches_the_code() {
    let rows = table_after("### Sandbox codes");
    assert_eq!(rows.len(), SandboxCode::VALUES.len());
    for (row, token) in rows.iter().zip(SandboxCode::VALUES) {
        let info = ErrorInfo::for_sandbox_code(&SandboxCode::from(*token)).expect("known code");
        assert_eq!(
            row,
            &[
                format!("`{token}`"),
                yes_no(info.retryable).to_owned(),
                yes_no(info.retry_with_larger_limits).to_owned(),
                info.summary.to_owned(),
            ],
            "row of {token}"
        );
    }
}

#[test]
fn kind_code_table_matches_the_code() {
    let rows = table_after("### Codes that change `classify()`");
    assert_eq!(rows.len(), super::kind::KIND_CODE_ROWS.len());
    for (row, (kind, code, info)) in rows.iter().zip(super::kind::KIND_CODE_ROWS) {
        assert_eq!(
            row,
            &[
                format!("`{}`", kind.as_str()),
                format!("`{code}`"),
                yes_no(info.retryable).to_owned(),
                yes_no(info.retry_with_larger_limits).to_owned(),
                info.summary.to_owned(),
            ],
            "row of {} {code}",
            kind.as_str()
        );
        assert_eq!(info.kind, kind.as_str());
    }
}

#[test]
fn template_table_matches_the_code() {
    let rows = table_after("## Message templates");
    let doc: Vec<(String, String)> = rows
        .iter()
        .map(|r| (unquote(&r[0]).to_owned(), unquote(&r[1]).to_owned()))
        .collect();
    let code: Vec<(String, String)> = messages::ALL
        .iter()
        .map(|t| (t.id.to_owned(), t.text.to_owned()))
        .collect();
    assert_eq!(doc, code);
}

#[test]
fn every_placeholder_is_a_documented_name() {
    const NAMES: &[&str] = &[
        "operation",
        "detail",
        "aws_code",
        "retry_after",
        "cause",
        "feature",
        "grpc_code",
        "http_status",
        "code",
        "program",
        "exit_code",
        "signal",
        "status",
        "within",
        "argument",
        "reason",
        "what",
        "waited",
        "state",
        "setting",
        "requested",
        "cap",
        "sandbox_id",
        "remedy",
        "see",
        "attempts",
        "pages",
        "max",
        "seconds",
        "role",
        "profile",
        "step",
        "exit",
        "limit",
        "stack",
        "again",
        "deploy",
        "resource",
        "output",
        "transfer",
        "subject",
        "action",
        "list",
        "index",
        "field",
        "count",
        "gateway",
        "header",
        "rate",
        "path",
        "variant",
        "interval",
        "names",
        "other",
        "name",
        "reasons",
        "events",
        "minutes",
        "sandbox",
        "type",
        "why",
    ];
    for t in messages::ALL {
        for p in t.placeholders() {
            assert!(NAMES.contains(&p), "{}: unknown placeholder {p}", t.id);
        }
    }
}
