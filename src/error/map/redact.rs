//! Redaction of server text before the SDK keeps it.
//!
//! AWS error messages can quote the canonical request and string-to-sign of
//! a failed signature check, presigned URL parameters, Authorization and
//! security-token header values, signatures and key ids. All of that is cut
//! or replaced by `[redacted]` before the text is stored in an error; the
//! result is then cut at 2,048 characters. Redaction runs first so that a
//! cut never leaves a half secret that the patterns no longer recognise.

/// The most characters of server text an error keeps.
pub const MAX_KEPT_CHARS: usize = 2_048;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Phrases after which AWS quotes signing material; everything after the
/// first one is dropped.
const SIGNING_TAIL_MARKERS: &[&str] = &[
    "canonical request",
    "canonical string",
    "canonicalrequest",
    "string-to-sign",
    "string to sign",
    "stringtosign",
];

/// Names whose value is secret when followed by `:` or `=`. The value is
/// replaced together with (never after) its name, including a value that
/// stands alone on the line after `name:`.
const SECRET_NAMES: &[&str] = &[
    "x-amz-security-token",
    "security-token",
    "x-amz-session-token",
    "session-token",
    "sessiontoken",
    "authorization",
    "x-aws-proxy-auth",
    "x-access-token",
    "access-token",
    "secret-access-key",
    "secretaccesskey",
    "aws_secret_access_key",
    "aws_session_token",
    "signature",
    "credential",
];

/// Prefix of the SigV4 query parameters (`X-Amz-Signature=...`).
const AMZ_QUERY_PREFIX: &str = "x-amz-";

/// Access key id prefixes (user, session, role, IAM user ids).
const KEY_ID_PREFIXES: &[&str] = &["AKIA", "ASIA", "AROA", "AIDA"];

/// Removes secrets from AWS text and cuts it at 2,048 characters.
pub fn redact_aws_text(text: &str) -> String {
    let text = cut_signing_tail(text);
    let text = redact_named_values(&text);
    let text = redact_alnum_runs(&text);
    let mut text = redact_opaque_runs(&text);
    truncate_chars(&mut text, MAX_KEPT_CHARS);
    text
}

/// Redacts, replaces control characters (newlines included) by spaces,
/// trims, and cuts at `max_chars`: for text that goes into a one-line
/// message or an identifier field.
pub fn sanitize_remote_text(text: &str, max_chars: usize) -> String {
    let redacted = redact_aws_text(text);
    let mut one_line: String = redacted
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned();
    truncate_chars(&mut one_line, max_chars);
    one_line
}

fn truncate_chars(text: &mut String, max_chars: usize) {
    if let Some((idx, _)) = text.char_indices().nth(max_chars) {
        text.truncate(idx);
    }
}

fn cut_signing_tail(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let first = SIGNING_TAIL_MARKERS
        .iter()
        .filter_map(|m| lower.find(m).map(|pos| pos + m.len()))
        .min();
    match first {
        // `end` is right after an ASCII marker, so it is a char boundary.
        Some(end) => format!("{} {REDACTED}", &text[..end]),
        None => text.to_owned(),
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The length of a secret name starting at `at`, if one starts there.
fn secret_name_at(lower: &[u8], at: usize) -> Option<usize> {
    if at > 0 && is_word_byte(lower[at - 1]) {
        return None;
    }
    let rest = &lower[at..];
    if let Some(name) = SECRET_NAMES.iter().find(|n| rest.starts_with(n.as_bytes())) {
        return Some(name.len());
    }
    if rest.starts_with(AMZ_QUERY_PREFIX.as_bytes()) {
        let name_len = rest[AMZ_QUERY_PREFIX.len()..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        let end = AMZ_QUERY_PREFIX.len() + name_len;
        // Only the query-parameter form: headers like x-amz-date are harmless
        // and the security-token header is one of the secret names.
        if name_len > 0 && rest.get(end) == Some(&b'=') {
            return Some(end);
        }
    }
    None
}

/// The byte range of the value after a secret name ending at `name_end`.
fn value_after(bytes: &[u8], name_end: usize) -> Option<(usize, usize)> {
    let mut i = name_end;
    while i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
        i += 1;
    }
    while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
        i += 1;
    }
    let sep = *bytes.get(i)?;
    if sep != b':' && sep != b'=' {
        return None;
    }
    i += 1;
    while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t' || bytes[i] == b'"') {
        i += 1;
    }
    if sep == b':' {
        // A value standing alone on the next line belongs to this name.
        if bytes.get(i) == Some(&b'\r') {
            i += 1;
        }
        if bytes.get(i) == Some(&b'\n') {
            i += 1;
            while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
                i += 1;
            }
        }
    }
    let start = i;
    let end = if sep == b':' {
        bytes[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
            .map_or(bytes.len(), |p| start + p)
    } else {
        bytes[start..]
            .iter()
            .position(|b| {
                b.is_ascii_whitespace()
                    || matches!(b, b'&' | b'"' | b'\'' | b',' | b';' | b'<' | b'>' | b')')
            })
            .map_or(bytes.len(), |p| start + p)
    };
    (end > start).then_some((start, end))
}

fn redact_named_values(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let lower = lower.as_bytes();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < lower.len() {
        if let Some(name_len) = secret_name_at(lower, i)
            && let Some((start, end)) = value_after(bytes, i + name_len)
        {
            // Every index here sits next to an ASCII byte: char boundaries.
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = end;
            i = end;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Replaces maximal runs of bytes matching `in_run` for which `secret`
/// says yes.
fn redact_runs(text: &str, in_run: fn(u8) -> bool, secret: fn(&str) -> bool) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if in_run(bytes[i]) {
            let start = i;
            while i < bytes.len() && in_run(bytes[i]) {
                i += 1;
            }
            // Runs are ASCII-only, so both ends are char boundaries.
            let run = &text[start..i];
            if secret(run) {
                out.push_str(&text[copied..start]);
                out.push_str(REDACTED);
                copied = i;
            }
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Signatures (16+ hex digits) and access key ids.
fn redact_alnum_runs(text: &str) -> String {
    redact_runs(
        text,
        |b| b.is_ascii_alphanumeric(),
        |run| {
            let hex = run.len() >= 16 && run.bytes().all(|b| b.is_ascii_hexdigit());
            let key_id = run.len() >= 16
                && KEY_ID_PREFIXES.iter().any(|p| run.starts_with(p))
                && run
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            hex || key_id
        },
    )
}

/// Long opaque tokens (session tokens, JWEs, base64 secrets) even without a
/// name, e.g. a header value standing alone on its own line: 40+ characters
/// of base64/base64url mixing upper and lower case. (Digits are not
/// required: 32 random bytes in base64url lack a digit once in ~1,500.)
fn redact_opaque_runs(text: &str) -> String {
    redact_runs(
        text,
        |b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-'),
        |run| {
            run.len() >= 40
                && run.bytes().any(|b| b.is_ascii_uppercase())
                && run.bytes().any(|b| b.is_ascii_lowercase())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_canonical_request_and_string_to_sign_tails() {
        let text = "The request signature we calculated does not match the signature you provided. \
                    The Canonical String for this request should have been\n'POST\n/2025-09-09/microvms\n\nhost:x\n'\n\
                    The String-to-Sign should have been\n'AWS4-HMAC-SHA256\n20250101T000000Z\n'";
        assert_eq!(
            redact_aws_text(text),
            "The request signature we calculated does not match the signature you provided. \
             The Canonical String [redacted]"
        );
        assert_eq!(
            redact_aws_text("bad string-to-sign: 'AWS4-HMAC-SHA256\nabc'"),
            "bad string-to-sign [redacted]"
        );
    }

    #[test]
    fn redacts_sigv4_query_parameters() {
        let url = "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=abc%2F20250101&X-Amz-Date=20250101T000000Z&X-Amz-Expires=60&X-Amz-Security-Token=tok&X-Amz-Signature=sig ok";
        assert_eq!(
            redact_aws_text(url),
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=[redacted]&X-Amz-Credential=[redacted]&X-Amz-Date=[redacted]&X-Amz-Expires=[redacted]&X-Amz-Security-Token=[redacted]&X-Amz-Signature=[redacted] ok"
        );
    }

    #[test]
    fn redacts_authorization_values() {
        assert_eq!(
            redact_aws_text(
                "Authorization: AWS4-HMAC-SHA256 Credential=x/y, Signature=z\nnext line"
            ),
            "Authorization: [redacted]\nnext line"
        );
        assert_eq!(
            redact_aws_text("header \"authorization\": \"Bearer abc\""),
            "header \"authorization\": \"[redacted]"
        );
        assert_eq!(
            redact_aws_text("Authorization header requires 'Credential' parameter"),
            "Authorization header requires 'Credential' parameter"
        );
    }

    #[test]
    fn redacts_security_token_header_values_inline_and_on_their_own_line() {
        assert_eq!(
            redact_aws_text("x-amz-security-token:FQoGZXIvYXdzEJr\nhost:h"),
            "x-amz-security-token:[redacted]\nhost:h"
        );
        assert_eq!(
            redact_aws_text("X-Amz-Security-Token:\nFQoGZXIvYXdzEJr\nhost:h"),
            "X-Amz-Security-Token:\n[redacted]\nhost:h"
        );
        assert_eq!(
            redact_aws_text("x-aws-proxy-auth: eyJhbGciOi.abc.def\nx-access-token: q1w2e3"),
            "x-aws-proxy-auth: [redacted]\nx-access-token: [redacted]"
        );
        // A session token alone on a line, its name nowhere near.
        let token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDx7";
        assert_eq!(
            redact_aws_text(&format!("headers were\n{token}\nend")),
            "headers were\n[redacted]\nend"
        );
    }

    #[test]
    fn redacts_hex_signatures_and_key_ids() {
        assert_eq!(
            redact_aws_text("sig 0123456789abcdef0123 and short beef12 kept"),
            "sig [redacted] and short beef12 kept"
        );
        assert_eq!(
            redact_aws_text(
                "key AKIAIOSFODNN7EXAMPLE/20250101/us-east-1 ASIAXXXXXXXXXXXXXXXX, AROAABCDEFGHIJKLMNOP AIDAABCDEFGHIJKLMNOP"
            ),
            "key [redacted]/20250101/us-east-1 [redacted], [redacted] [redacted]"
        );
        // Request ids (UUIDs) survive: no hex run reaches 16.
        assert_eq!(
            redact_aws_text("request 3f2c1e4a-9b7d-4e2f-8a1c-0d9e8f7a6b5c"),
            "request 3f2c1e4a-9b7d-4e2f-8a1c-0d9e8f7a6b5c"
        );
    }

    #[test]
    fn cuts_at_2048_chars_after_redacting() {
        let long = "é".repeat(5_000);
        let out = redact_aws_text(&long);
        assert_eq!(out.chars().count(), MAX_KEPT_CHARS);
        // A signature straddling the cut is redacted, not half kept.
        let text = format!(
            "{}{}",
            "a ".repeat(1_020),
            "0123456789abcdef0123456789abcdef"
        );
        let out = redact_aws_text(&text);
        assert!(
            out.ends_with("[redacted]") || !out.contains("0123"),
            "{out}"
        );
        assert!(out.chars().count() <= MAX_KEPT_CHARS);
    }

    #[test]
    fn opaque_tokens_need_no_digit_but_plain_words_survive() {
        let token = "qwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUiOpAsDf_-";
        assert_eq!(redact_aws_text(&format!("t {token} e")), "t [redacted] e");
        let arn =
            "arn:aws:lambda-microvms:us-east-1:123456789012:image/python-3-12-with-extra-packages";
        assert_eq!(redact_aws_text(arn), arn);
    }

    #[test]
    fn sanitize_makes_one_line() {
        assert_eq!(sanitize_remote_text("  a\nb\tc\u{7}  ", 100), "a b c");
        assert_eq!(sanitize_remote_text("abcdef", 3), "abc");
    }
}
