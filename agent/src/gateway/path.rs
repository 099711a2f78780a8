//! Safe paths and allow rules (docs/extras §1.2, the SDK's rule too): what
//! an allow rule may name and which inbound request targets a route
//! forwards. A path is compared as sent, never normalised, so a rule can
//! only match a path that means the same thing to every server.

/// Characters a safe path may hold raw (RFC 3986 `pchar` and `/`, without
/// `;`, which some servers treat as a parameter separator).
fn raw_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:@!$&'()*+,=/%".contains(&b)
}

/// `%XY` decoded, or `None` for a malformed escape.
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// One segment decoded once, or `None` when an escape is malformed.
fn decode(segment: &str) -> Option<Vec<u8>> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Whether one decoded segment is harmless: UTF-8, no control byte, no
/// separator a server might split on after decoding, not a dot segment.
fn segment_ok(segment: &str) -> bool {
    let Some(decoded) = decode(segment) else {
        return false;
    };
    std::str::from_utf8(&decoded).is_ok()
        && !decoded
            .iter()
            .any(|&b| b < 0x20 || b == 0x7f || b"/\\%;".contains(&b))
        && decoded != b"."
        && decoded != b".."
}

/// Whether `path` is safe: absolute, only safe raw characters, no empty
/// segment but the last, every segment harmless once decoded.
pub(crate) fn is_safe(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    if !path.bytes().all(raw_ok) {
        return false;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    segments.iter().enumerate().all(|(i, s)| {
        if s.is_empty() {
            i == last
        } else {
            segment_ok(s)
        }
    })
}

/// One allow rule: a method and an exact path or a prefix (`/v1/*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    method: String,
    path: Pattern,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    /// The rule's path without its final `*` (ends with `/`).
    Prefix(String),
}

impl Rule {
    /// The rule for `method` and `path`, or `None` when the path is not a
    /// safe one (with an optional final `/*`).
    pub(crate) fn new(method: &str, path: &str) -> Option<Rule> {
        let pattern = match path.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => Pattern::Prefix(prefix.to_owned()),
            _ => Pattern::Exact(path.to_owned()),
        };
        let checked = match &pattern {
            Pattern::Exact(p) | Pattern::Prefix(p) => p,
        };
        is_safe(checked).then(|| Rule {
            method: method.to_owned(),
            path: pattern,
        })
    }

    /// Whether a request with `method` and (already safe) `path` matches.
    fn matches(&self, method: &str, path: &str) -> bool {
        self.method == method
            && match &self.path {
                Pattern::Exact(p) => p == path,
                Pattern::Prefix(p) => path.len() > p.len() && path.starts_with(p.as_str()),
            }
    }
}

/// Whether a request line's method and path (the query is not looked at)
/// are allowed by one of `rules`. An unsafe path never is.
pub(crate) fn allowed(rules: &[Rule], method: &str, path: &str) -> bool {
    is_safe(path) && rules.iter().any(|r| r.matches(method, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_paths() {
        for ok in [
            "/",
            "/v1/chat/completions",
            "/v1/",
            "/a%20b",
            "/caf%C3%A9",
            "/x:y@z!$&'()*+,=",
            "/~user/-._",
        ] {
            assert!(is_safe(ok), "{ok}");
        }
        for bad in [
            "",
            "v1",
            "//x",
            "/a//b",
            "/a/../b",
            "/a/./b",
            "/..",
            "/%2e%2e/x",
            "/%2E",
            "/a%2Fb",
            "/a%2fb",
            "/a%5Cb",
            "/a%25b",
            "/a%3Bb",
            "/a;b",
            "/a\\b",
            "/a%0Ab",
            "/a%7F",
            "/a%00",
            "/a%zz",
            "/a%4",
            "/%C3",
            "/a b",
            "/a?b",
            "/a#b",
            "http://evil/x",
        ] {
            assert!(!is_safe(bad), "{bad}");
        }
    }

    #[test]
    fn rules_match_exactly_or_by_prefix() {
        let rules = [
            Rule::new("POST", "/v1/chat/completions").unwrap(),
            Rule::new("GET", "/v1/models/*").unwrap(),
        ];
        assert!(allowed(&rules, "POST", "/v1/chat/completions"));
        assert!(!allowed(&rules, "GET", "/v1/chat/completions"));
        assert!(!allowed(&rules, "POST", "/v1/chat/completions/"));
        assert!(!allowed(&rules, "POST", "/v1/chat"));
        assert!(allowed(&rules, "GET", "/v1/models/gpt"));
        assert!(allowed(&rules, "GET", "/v1/models/a/b"));
        assert!(!allowed(&rules, "GET", "/v1/models/"));
        assert!(!allowed(&rules, "GET", "/v1/models"));
        assert!(!allowed(&rules, "GET", "/v1/models/../../admin"));
        assert!(!allowed(&rules, "GET", "/v1/models/%2e%2e/admin"));
        assert!(!allowed(&rules, "GET", "/v1/models/a%2Fb"));
        assert!(!allowed(&rules, "get", "/v1/models/a"));
    }

    #[test]
    fn unsafe_rules_are_refused() {
        assert!(Rule::new("GET", "/a/../b").is_none());
        assert!(Rule::new("GET", "relative").is_none());
        assert!(Rule::new("GET", "/a/*/../b").is_none());
        // A star elsewhere than after a final slash is a literal character.
        let literal = [Rule::new("GET", "/a*").unwrap()];
        assert!(allowed(&literal, "GET", "/a*"));
        assert!(!allowed(&literal, "GET", "/ab"));
        let all = [Rule::new("GET", "/*").unwrap()];
        assert!(allowed(&all, "GET", "/anything/at/all"));
        assert!(!allowed(&all, "GET", "/"));
    }
}
