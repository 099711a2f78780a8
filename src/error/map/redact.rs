//! Redaction of server text before the SDK keeps it.
//!
//! AWS error messages can quote the canonical request and string-to-sign of
//! a failed signature check, presigned URL parameters, Authorization and
//! security-token header values, signatures and key ids. All of that is cut
//! or replaced by `[redacted]` before the text is stored in an error.
//!
//! The text is first cut to the bound (2,048 characters), dropping a token
//! the cut fell inside, so that no half secret survives that the patterns
//! no longer recognise; then it is redacted. Every pass is a single scan,
//! so the work is linear in the bound whatever the peer sent (the agent may
//! send a 64 MiB message).

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

/// Names whose value is secret when followed by `:` or `=` (or their
/// URL encodings). The value is replaced together with (never after) its
/// name, including a value that stands alone on the line after `name:`.
/// Names are matched with `_` read as `-`, so the CGI and environment
/// spellings (`HTTP_AUTHORIZATION`, `AWS_SESSION_TOKEN`) are covered too.
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
    "aws-secret-access-key",
    "aws-session-token",
    "signature",
    "credential",
];

/// Authentication schemes that stand before the secret in an unquoted
/// `name=Scheme secret` value: the value then runs over the next word too.
const AUTH_SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "digest",
    "token",
    "negotiate",
    "aws4-hmac-sha256",
];

/// Prefix of the SigV4 query parameters (`X-Amz-Signature=...`).
const AMZ_QUERY_PREFIX: &str = "x-amz-";

/// Access key id prefixes (user, session, role, IAM user ids).
const KEY_ID_PREFIXES: &[&str] = &["AKIA", "ASIA", "AROA", "AIDA"];

/// Removes secrets from AWS text and cuts it at 2,048 characters.
pub fn redact_aws_text(text: &str) -> String {
    let text = cut_to_bound(text, MAX_KEPT_CHARS);
    let text = cut_signing_tail(text);
    let text = redact_named_values(&text);
    let text = redact_alnum_runs(&text);
    let mut text = redact_opaque_runs(&text);
    // A redaction can make the text longer (`a=b` becomes `a=[redacted]`).
    truncate_chars(&mut text, MAX_KEPT_CHARS);
    text
}

/// Makes one line (control characters, newlines included, become spaces),
/// redacts, trims, and cuts at `max_chars`: for text that goes into a
/// one-line message or an identifier field. The line is made before the
/// redaction, so a secret name's value runs to the end of the text: a
/// second pass finds nothing more, and a value that stood on the next
/// line is covered.
pub fn sanitize_remote_text(text: &str, max_chars: usize) -> String {
    let one_line: String = cut_to_bound(text, MAX_KEPT_CHARS)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let redacted = redact_aws_text(&one_line);
    let mut out = redacted.trim().to_owned();
    truncate_chars(&mut out, max_chars);
    // The cut may leave a space at the end: trimmed again, so that a
    // second pass is a no-op.
    out.truncate(out.trim_end().len());
    out
}

/// `text` up to the bound (a token the cut falls inside dropped, as
/// everywhere), when it holds nothing the redaction would remove; `None`
/// when it does, or when nothing could be looked at. Only the returned
/// prefix may be shown.
pub(crate) fn secret_free_prefix(text: &str) -> Option<&str> {
    let window = cut_to_bound(text, MAX_KEPT_CHARS);
    let checked =
        redact_aws_text(window) == window && (window.len() == text.len() || !window.is_empty());
    checked.then_some(window)
}

/// Cuts `text` to `max_chars` characters like [`cut_to_bound`]: a token
/// the cut falls inside goes whole, so the cut never leaves a fragment
/// that a second pass would read differently.
fn truncate_chars(text: &mut String, max_chars: usize) {
    let kept = cut_to_bound(text, max_chars).len();
    text.truncate(kept);
}

/// The bytes a secret token can be made of (the widest run class below).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-')
}

/// `text` cut to `max_chars` characters. When the cut falls inside a token
/// (a run of [`is_token_byte`]), the token's start is dropped too: its tail
/// is gone, so the patterns could no longer tell a secret from a word.
fn cut_to_bound(text: &str, max_chars: usize) -> &str {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text;
    };
    let bytes = text.as_bytes();
    if !is_token_byte(bytes[cut]) {
        return &text[..cut];
    }
    let start = bytes[..cut]
        .iter()
        .rposition(|b| !is_token_byte(*b))
        .map_or(0, |p| p + 1);
    // Token bytes are ASCII: `start` is a char boundary.
    &text[..start]
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

/// A byte that glues a name to the word before it (`_` is read as `-`, a
/// separator, by the name scan).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `text` lower-cased with `_` read as `-` after an upper-case letter or a
/// digit, for matching names: one byte for one byte, so indices carry over
/// to the original. The environment's and CGI's spellings
/// (`HTTP_AUTHORIZATION`, `AWS_SESSION_TOKEN`) are upper case; a lower-case
/// `access_token` is an argument's name in our own messages (`invalid
/// access_token: the access token must be ...`), which must survive.
fn name_form(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| match b {
            b'_' if i > 0
                && (bytes[i - 1].is_ascii_uppercase() || bytes[i - 1].is_ascii_digit()) =>
            {
                b'-'
            }
            b => b.to_ascii_lowercase(),
        })
        .collect()
}

fn is_amz_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Finds secret names in one left-to-right scan. The end of the current
/// `x-amz-...` name run is remembered, so that `x-amz-x-amz-x-amz-...`
/// does not rescan the run from every position (that was quadratic).
struct NameScanner<'a> {
    lower: &'a [u8],
    /// The end of the run of name bytes that contains the last position
    /// looked at, with the position the run was measured from.
    amz_run: Option<(usize, usize)>,
}

impl<'a> NameScanner<'a> {
    fn new(lower: &'a [u8]) -> Self {
        Self {
            lower,
            amz_run: None,
        }
    }

    /// The end of the run of `[a-z0-9-]` bytes from `from`.
    fn amz_run_end(&mut self, from: usize) -> usize {
        if let Some((measured_from, end)) = self.amz_run
            && measured_from <= from
            && from <= end
        {
            return end;
        }
        let end = from
            + self.lower[from..]
                .iter()
                .take_while(|b| is_amz_name_byte(**b))
                .count();
        self.amz_run = Some((from, end));
        end
    }

    /// The length of a secret name starting at `at`, if one starts there.
    fn name_at(&mut self, at: usize) -> Option<usize> {
        let lower = self.lower;
        if at > 0 && is_word_byte(lower[at - 1]) {
            return None;
        }
        let rest = &lower[at..];
        if let Some(name) = SECRET_NAMES.iter().find(|n| rest.starts_with(n.as_bytes())) {
            return Some(name.len());
        }
        if rest.starts_with(AMZ_QUERY_PREFIX.as_bytes()) {
            let name_start = at + AMZ_QUERY_PREFIX.len();
            let end = self.amz_run_end(name_start);
            // Only the query-parameter form: headers like x-amz-date are
            // harmless and the security-token header is one of the names.
            if end > name_start && separator_at(lower, end) == Some((b'=', 1)) {
                return Some(end - at);
            }
        }
        None
    }
}

/// The separator at `at` (`:` or `=`, or `%3A` / `%3D` in an encoded
/// URL) with its length in bytes. `lower` is the name form.
fn separator_at(lower: &[u8], at: usize) -> Option<(u8, usize)> {
    match lower.get(at)? {
        b @ (b':' | b'=') => Some((*b, 1)),
        b'%' if lower[at..].starts_with(b"%3d") => Some((b'=', 3)),
        b'%' if lower[at..].starts_with(b"%3a") => Some((b':', 3)),
        _ => None,
    }
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// The end of the blanks from `at`.
fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_blank(bytes[at]) {
        at += 1;
    }
    at
}

/// Whether a secret name with its separator starts at `at` (`lower` is the
/// name form): such a line is the next secret header, whose value its own
/// name redacts. Any other line after an empty value (`<secret> : `
/// included, which looks like a header) is that value.
fn starts_with_secret_name(lower: &[u8], at: usize) -> bool {
    let rest = &lower[at..];
    let name_len = SECRET_NAMES
        .iter()
        .find(|n| rest.starts_with(n.as_bytes()))
        .map(|n| n.len())
        .or_else(|| {
            rest.starts_with(AMZ_QUERY_PREFIX.as_bytes()).then(|| {
                rest.iter()
                    .skip(AMZ_QUERY_PREFIX.len())
                    .take_while(|b| is_amz_name_byte(**b))
                    .count()
                    + AMZ_QUERY_PREFIX.len()
            })
        });
    let Some(name_len) = name_len else {
        return false;
    };
    let mut i = at + name_len;
    while i < lower.len() && (is_blank(lower[i]) || lower[i] == b'"' || lower[i] == b'\'') {
        i += 1;
    }
    separator_at(lower, i).is_some()
}

/// The line break at `at` (CR, LF or CRLF): the index after it.
fn after_line_break(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'\r' if bytes.get(at + 1) == Some(&b'\n') => Some(at + 2),
        b'\r' | b'\n' => Some(at + 1),
        _ => None,
    }
}

/// The end of the line that `at` is on.
fn line_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|b| *b == b'\n' || *b == b'\r')
        .map_or(bytes.len(), |p| at + p)
}

/// The end of a value that runs to the end of its line, over folded
/// continuation lines (a line starting with a blank continues the header
/// before it, as HTTP/1 obs-fold does), unless such a line is the next
/// secret header.
fn folded_value_end(bytes: &[u8], lower: &[u8], at: usize) -> usize {
    let mut end = line_end(bytes, at);
    while let Some(next) = after_line_break(bytes, end) {
        let text = skip_blanks(bytes, next);
        if text == next || starts_with_secret_name(lower, text) {
            break;
        }
        end = line_end(bytes, text);
    }
    end
}

/// The end of an unquoted word value after `=`.
fn word_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|b| {
            b.is_ascii_whitespace()
                || matches!(b, b'&' | b'"' | b'\'' | b',' | b';' | b'<' | b'>' | b')')
        })
        .map_or(bytes.len(), |p| at + p)
}

/// The byte range of the value after a secret name ending at `name_end`
/// (`lower` is the name form of `bytes`).
fn value_after(bytes: &[u8], lower: &[u8], name_end: usize) -> Option<(usize, usize)> {
    let mut i = name_end;
    while i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
        i += 1;
    }
    i = skip_blanks(bytes, i);
    let (sep, sep_len) = separator_at(lower, i)?;
    i = skip_blanks(bytes, i + sep_len);
    let quote = bytes.get(i).copied().filter(|b| *b == b'"' || *b == b'\'');
    while i < bytes.len() && (is_blank(bytes[i]) || bytes[i] == b'"' || bytes[i] == b'\'') {
        i += 1;
    }
    // A value standing alone on the next line belongs to this name, unless
    // that line is the next secret header: then this value is empty, and
    // the next header's own value is redacted by its own name.
    if let Some(next) = after_line_break(bytes, i) {
        let text = skip_blanks(bytes, next);
        if starts_with_secret_name(lower, text) {
            return None;
        }
        let end = folded_value_end(bytes, lower, text);
        return (end > text).then_some((text, end));
    }
    let start = i;
    let end = if sep == b':' {
        folded_value_end(bytes, lower, start)
    } else if let Some(quote) = quote {
        // A quoted value runs to its closing quote, spaces and all.
        let line = line_end(bytes, start);
        bytes[start..line]
            .iter()
            .position(|b| *b == quote)
            .map_or(line, |p| start + p)
    } else {
        let first = word_end(bytes, start);
        let word = &lower[start..first];
        let scheme = AUTH_SCHEMES.iter().any(|s| word == s.as_bytes());
        let next = skip_blanks(bytes, first);
        if scheme && next > first {
            word_end(bytes, next)
        } else {
            first
        }
    };
    (end > start).then_some((start, end))
}

fn redact_named_values(text: &str) -> String {
    let lower = name_form(text);
    let lower = lower.as_slice();
    let bytes = text.as_bytes();
    let mut names = NameScanner::new(lower);
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < lower.len() {
        if let Some(name_len) = names.name_at(i)
            && let Some((start, end)) = value_after(bytes, lower, i + name_len)
        {
            // A value running to the end of its line may swallow the next
            // secret name (`x-access-token: a X-Amz-Security-Token:` then
            // the token on the next line): the redaction then runs to the
            // end of that name's value too.
            let mut end = end;
            let mut j = start;
            while j < end {
                if let Some(inner_len) = names.name_at(j)
                    && let Some((_, inner_end)) = value_after(bytes, lower, j + inner_len)
                    && inner_end > end
                {
                    end = inner_end;
                }
                j += 1;
            }
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
            hex || holds_key_id(run)
        },
    )
}

/// Whether an alphanumeric run holds an access key id: a prefix followed by
/// upper-case letters and digits, 16 characters in all at least, anywhere
/// in the run (a key id glued to a word is still one).
fn holds_key_id(run: &str) -> bool {
    let bytes = run.as_bytes();
    KEY_ID_PREFIXES.iter().any(|prefix| {
        run.match_indices(prefix).any(|(at, _)| {
            bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                .count()
                >= 16
        })
    })
}

/// Long opaque tokens (session tokens, JWEs, base64 secrets) even without a
/// name, e.g. a header value standing alone on its own line: 40+ characters
/// of base64/base64url mixing upper and lower case. (Digits are not
/// required: 32 random bytes in base64url lack a digit once in ~1,500.)
fn redact_opaque_runs(text: &str) -> String {
    redact_runs(text, is_token_byte, |run| {
        run.len() >= 40
            && run.bytes().any(|b| b.is_ascii_uppercase())
            && run.bytes().any(|b| b.is_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: a header whose value runs to the end of its line swallowed
    /// the next header's name, and that header's value on the next line was
    /// kept; a key id glued to a word was kept.
    #[test]
    fn a_swallowed_header_name_still_redacts_its_value_and_glued_key_ids_go() {
        let text = "x-access-token: a X-Amz-Security-Token:\nFQoGZXIvYXdzsecretvalue\nhost: h";
        let out = redact_aws_text(text);
        assert!(!out.contains("FQoGZXIvYXdzsecretvalue"), "{out}");
        assert!(out.ends_with("\nhost: h"), "{out}");
        let out = redact_aws_text("the key keyAKIAIOSFODNN7EXAMPLE was refused");
        assert_eq!(out, "the key [redacted] was refused");
    }

    /// Issue 41: the value of a secret name that is empty on its line and
    /// continues on the next one was kept when that next line looked like
    /// a header (`<secret> : `); and the adversarial pass's finds: a folded
    /// continuation line, a value after `=` on the next line, a quoted or
    /// scheme-prefixed value after `=`, CGI-style names with underscores,
    /// URL-encoded separators, tabs, CRLF, mixed case and repeated names.
    #[test]
    fn adversarial_shapes_keep_no_secret() {
        const SECRET: &str = "q7w8e9shortsecret";
        let shapes = [
            "x-access-token: a X-Amz-Security-Token:\nq7w8e9shortsecret : ",
            "X-Amz-Security-Token:\nq7w8e9shortsecret : x",
            "X-Amz-Security-Token:\r\nq7w8e9shortsecret: x\r\nhost: h",
            "x-access-token: a X-Amz-Security-Token:\r\n\tq7w8e9shortsecret\t:\t",
            "x-access-token:\tBearer\r\n q7w8e9shortsecret",
            "Authorization: Bearer\n\tq7w8e9shortsecret\nhost: h",
            "x-access-token=\nq7w8e9shortsecret",
            "x-access-token =\r\n  q7w8e9shortsecret : y",
            "authorization=\"Bearer q7w8e9shortsecret\"",
            "authorization='Basic q7w8e9shortsecret'",
            "Authorization=Bearer q7w8e9shortsecret",
            "HTTP_AUTHORIZATION=q7w8e9shortsecret",
            "env X_AMZ_SECURITY_TOKEN=q7w8e9shortsecret set",
            "AWS_SESSION_TOKEN: q7w8e9shortsecret",
            "?X-Amz-Security-Token%3Dq7w8e9shortsecret%26x",
            "X-Access-Token%3aq7w8e9shortsecret",
            "AUTHORIZATION AUTHORIZATION: q7w8e9shortsecret",
            "authorization: \nAuthorization:\nq7w8e9shortsecret: z",
            "X-aMz-SeCuRiTy-ToKeN:\t\t\nq7w8e9shortsecret:",
            "signature = q7w8e9shortsecret",
            "x-access-token:\n\n q7w8e9shortsecret",
        ];
        for shape in shapes {
            let out = redact_aws_text(shape);
            assert!(!out.contains(SECRET), "{shape:?} kept it: {out:?}");
            let out = sanitize_remote_text(shape, 512);
            assert!(
                !out.contains(SECRET),
                "{shape:?} kept it (one line): {out:?}"
            );
        }
        // A real next header after an empty value is still kept.
        assert_eq!(
            redact_aws_text("Authorization:\nX-Amz-Security-Token:\nq1w2e3r4\nhost: h"),
            "Authorization:\nX-Amz-Security-Token:\n[redacted]\nhost: h"
        );
    }

    proptest::proptest! {
        #[test]
        fn no_secret_survives_either_shape(
            before in "[ -~]{0,40}",
            filler in "[a-z ]{0,12}",
            secret in "[a-z0-9]{12,30}",
            word in "[a-z]{1,8}",
            key in "[A-Z0-9]{16}",
            after in "[ -~]{0,40}",
        ) {
            let swallowed = format!(
                "{before}\nx-access-token: {filler} X-Amz-Security-Token:\n{secret}\n{after}"
            );
            let out = redact_aws_text(&swallowed);
            proptest::prop_assert!(!out.contains(&secret), "{}", out);
            let glued = format!("{before} {word}AKIA{key} {after}");
            let out = redact_aws_text(&glued);
            proptest::prop_assert!(!out.contains(&format!("AKIA{key}")), "{}", out);
        }
    }

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
    fn an_argument_named_like_a_header_in_our_own_prose_survives() {
        let ours = "invalid access_token: the access token must be base64url without padding";
        assert_eq!(redact_aws_text(ours), ours);
        assert_eq!(
            redact_aws_text("HTTP_AUTHORIZATION=Bearer q7w8e9shortsecret"),
            "HTTP_AUTHORIZATION=[redacted]"
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
    fn a_value_on_the_next_line_is_never_the_next_header() {
        // `Authorization:` has no value of its own: the next line is the
        // next header, whose value must still be redacted by its own name.
        assert_eq!(
            redact_aws_text("Authorization:\nX-Amz-Security-Token:\nq1w2e3r4\nhost: h"),
            "Authorization:\nX-Amz-Security-Token:\n[redacted]\nhost: h"
        );
        assert_eq!(
            redact_aws_text("authorization: \r\n  x-access-token: q1w2e3\r\nhost: h"),
            "authorization: \r\n  x-access-token: [redacted]\r\nhost: h"
        );
        // A bare value on the next line still belongs to the name (also
        // after a lone CR).
        assert_eq!(
            redact_aws_text("x-access-token:\rq1w2e3\rhost: h"),
            "x-access-token:\r[redacted]\rhost: h"
        );
    }

    #[test]
    fn a_cut_inside_a_token_drops_the_token() {
        // The cut falls inside a key id: its first characters are not kept.
        let text = format!("{}AKIAIOSFODNN7EXAMPLE tail", "a ".repeat(1_020));
        let out = redact_aws_text(&text);
        assert!(!out.contains("AKIA"), "{out}");
        assert!(out.ends_with("a "), "{out}");
        // A cut between tokens keeps everything before it.
        let text = format!("{} {}", "z".repeat(MAX_KEPT_CHARS), "y".repeat(10));
        assert_eq!(redact_aws_text(&text), "z".repeat(MAX_KEPT_CHARS));
    }

    /// Hostile inputs of 16 MiB: each must be redacted in well under a
    /// second even on a loaded 2-core machine in a debug build (the old
    /// name scan took seconds on 64 KiB of `x-amz-`).
    #[test]
    fn redaction_is_linear_on_hostile_input() {
        const SIZE: usize = 16 * 1024 * 1024;
        let units = [
            "x-amz-",
            "X-Amz-a",
            "authorization:",
            "authorization:\n",
            "signature=",
            "\"authorization\"  ",
            "AKIA",
            "0123456789abcdef",
            "aB+/",
            "canonical ",
            "é",
        ];
        for unit in units {
            let text = unit.repeat(SIZE / unit.len());
            let started = std::time::Instant::now();
            let out = sanitize_remote_text(&text, 512);
            let kept = redact_aws_text(&text);
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(5),
                "{took:?} on {unit:?}"
            );
            assert!(out.chars().count() <= 512);
            assert!(kept.chars().count() <= MAX_KEPT_CHARS);
        }
        // The scans themselves are linear too, not only thanks to the cut:
        // 1 MiB through the name pass without any cut.
        for unit in ["x-amz-", "authorization:\n", "x-amz-a-"] {
            let text = unit.repeat((1024 * 1024) / unit.len());
            let started = std::time::Instant::now();
            let _ = redact_named_values(&text);
            let _ = redact_opaque_runs(&redact_alnum_runs(&text));
            let took = started.elapsed();
            assert!(
                took < std::time::Duration::from_secs(5),
                "{took:?} on {unit:?}"
            );
        }
    }

    #[test]
    fn sanitize_is_idempotent_at_the_cut() {
        let once = sanitize_remote_text("abc   def", 4);
        assert_eq!(once, "abc");
        assert_eq!(sanitize_remote_text(&once, 4), once);
    }

    #[test]
    fn sanitize_makes_one_line() {
        assert_eq!(sanitize_remote_text("  a\nb\tc\u{7}  ", 100), "a b c");
        // A cut inside a word drops the word.
        assert_eq!(sanitize_remote_text("abc def", 5), "abc");
        assert_eq!(sanitize_remote_text("abcdef", 3), "");
    }
}
