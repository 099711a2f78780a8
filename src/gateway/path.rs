//! The safe-path rule of an allow rule (the same rule the agent applies to
//! every request path): a rule that breaks it could never match a request
//! the agent lets through, so it is refused before any call.
//!
//! Safe: absolute; raw bytes only `A-Za-z0-9-._~:@!$&'()*+,=/%` (RFC 3986's
//! unreserved, `:`, `@` and the sub-delims but `;`, which some servers strip
//! as a path parameter before routing); no empty segment but the last; each
//! segment, percent-decoded once, valid UTF-8 with no control byte (below
//! 0x20, or 0x7F), none of `/ \ % ;` (they change how a decoding upstream
//! splits the path, or add a second layer of encoding), and not `.` or
//! `..`. A malformed escape is unsafe.

/// Whether `b` may appear raw in a path.
fn raw_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b':'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b'='
                | b'/'
                | b'%'
        )
}

/// Whether a decoded byte is refused inside a segment.
fn decoded_refused(b: u8) -> bool {
    b < 0x20 || b == 0x7F || matches!(b, b'/' | b'\\' | b'%' | b';')
}

/// Whether `path` is safe (module docs).
pub(crate) fn is_safe(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    if !path.bytes().all(raw_ok) {
        return false;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    segments.iter().enumerate().all(|(i, segment)| {
        if segment.is_empty() {
            return i == last;
        }
        match decode_once(segment) {
            Some(decoded) => decoded != "." && decoded != "..",
            None => false,
        }
    })
}

/// `segment` percent-decoded once; `None` for a malformed escape, a
/// refused byte or bytes that are not UTF-8.
fn decode_once(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes.get(i + 1..i + 3)?;
        let text = std::str::from_utf8(hex).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let value = u8::from_str_radix(text, 16).ok()?;
        if decoded_refused(value) {
            return None;
        }
        out.push(value);
        i += 3;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::is_safe;

    #[test]
    fn safe_paths() {
        for path in [
            "/",
            "/v1/chat/completions",
            "/v1/",
            "/v1/*",
            "/model/anthropic.claude-3%3A0/converse",
            "/a~b_c.d-e/f:g@h!$&'()*+,=",
            "/caf%C3%A9",
            "/%2E%2E%2Ex",
            "/...",
            "/%41",
        ] {
            assert!(is_safe(path), "{path}");
        }
    }

    #[test]
    fn unsafe_paths() {
        for path in [
            "",
            "v1/x",
            "//x",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/../b",
            "/%2e",
            "/%2E%2e",
            "/a/%2e%2e/b",
            "/a%2Fb",
            "/a%2fb",
            "/a%5Cb",
            "/a%25b",
            "/a%3Bb",
            "/a;b",
            "/a\\b",
            "/a b",
            "/a?b",
            "/a#b",
            "/a\"b",
            "/%",
            "/%4",
            "/%zz",
            "/%4g",
            "/%00",
            "/%1F",
            "/%7F",
            "/%FF",
            "/%C3",
            "/é",
            "/a\nb",
        ] {
            assert!(!is_safe(path), "{path:?}");
        }
    }
}
