//! `.dockerignore` with Docker's semantics (moby's `patternmatcher` and
//! `ignorefile`), which differ from `.gitignore`'s:
//!
//! - A line is a comment when it starts with `#` (before trimming); other
//!   lines are trimmed, blank ones skipped; a UTF-8 BOM is stripped.
//! - `!` makes an exception (re-includes); a `!` alone is refused.
//! - Patterns are cleaned like Go's `filepath.Clean` and anchored at the
//!   context root: `/foo`, `./foo` and `foo/` all mean `foo`. There is no
//!   "match at any depth" for a bare name: `*.pyc` matches only at the root,
//!   `**/*.pyc` everywhere.
//! - `*` and `?` never match `/`; `[...]` is a class (`[^...]` negates,
//!   `!` is an ordinary member); `\` escapes the next character; `**`
//!   matches any number of path segments, and `**/` zero or more
//!   directories, so `dir/**` matches what is under `dir` but not `dir`.
//! - A path is matched when the pattern matches it or one of its parent
//!   directories; the last pattern that matches decides.
//!
//! Bad patterns are refused when the file is read (Docker refuses them when
//! it first matches): an unterminated `[`, a class that starts with `-` or
//! `]` unescaped, a range running backwards, a trailing `\`.

use crate::SandboxError;

/// One element of a compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`: one character other than `/`.
    One,
    /// `*`: any run of characters without `/`.
    Star,
    /// `**` not followed by `/`: anything.
    Anything,
    /// `**/`: zero or more whole directories (`(.*/)?`).
    Directories,
    /// `[...]`.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    tokens: Vec<Token>,
}

/// Why a pattern was refused (our text, never the pattern).
type Refusal = &'static str;

impl Pattern {
    fn compile(cleaned: &str) -> Result<Self, Refusal> {
        let chars: Vec<char> = cleaned.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    if chars.get(i + 2) == Some(&'/') {
                        tokens.push(Token::Directories);
                        i += 3;
                    } else {
                        tokens.push(Token::Anything);
                        i += 2;
                    }
                }
                '*' => {
                    tokens.push(Token::Star);
                    i += 1;
                }
                '?' => {
                    tokens.push(Token::One);
                    i += 1;
                }
                '\\' => {
                    let c = *chars.get(i + 1).ok_or("a pattern ends with \\")?;
                    tokens.push(Token::Literal(c));
                    i += 2;
                }
                '[' => {
                    let (token, next) = class(&chars, i + 1)?;
                    tokens.push(token);
                    i = next;
                }
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Ok(Self { tokens })
    }

    /// Whether the whole of `path` matches. Dynamic programming over
    /// (token, position): linear in pattern length times path length, so
    /// no pattern can make matching exponential.
    fn matches(&self, path: &str) -> bool {
        let s: Vec<char> = path.chars().collect();
        let n = s.len();
        // after[j] = tokens[k+1..] match s[j..]; start with the empty tail.
        let mut after: Vec<bool> = (0..=n).map(|j| j == n).collect();
        for token in self.tokens.iter().rev() {
            let mut here = vec![false; n + 1];
            match token {
                Token::Literal(literal) => {
                    for (j, c) in s.iter().enumerate() {
                        here[j] = c == literal && after[j + 1];
                    }
                }
                Token::One => {
                    for (j, c) in s.iter().enumerate() {
                        here[j] = *c != '/' && after[j + 1];
                    }
                }
                Token::Class { negated, ranges } => {
                    for (j, c) in s.iter().enumerate() {
                        let inside = ranges.iter().any(|(lo, hi)| lo <= c && c <= hi);
                        here[j] = inside != *negated && after[j + 1];
                    }
                }
                Token::Star => {
                    here[n] = after[n];
                    for j in (0..n).rev() {
                        here[j] = after[j] || (s[j] != '/' && here[j + 1]);
                    }
                }
                Token::Anything => {
                    here[n] = after[n];
                    for j in (0..n).rev() {
                        here[j] = after[j] || here[j + 1];
                    }
                }
                Token::Directories => {
                    // (.*/)? : skip nothing, or up to and including some `/`.
                    let mut slash_then_rest = false;
                    for j in (0..=n).rev() {
                        if j < n && s[j] == '/' && after[j + 1] {
                            slash_then_rest = true;
                        }
                        here[j] = after[j] || slash_then_rest;
                    }
                }
            }
            after = here;
        }
        after[0]
    }
}

/// A character class starting after its `[`: the token and the index
/// after its `]`. Go's `filepath.Match` rules: `^` first negates; a
/// member is a character or `\`-escaped character, never a bare `-` or
/// `]`; `lo-hi` is a range; `]` closes once there is a member.
fn class(chars: &[char], mut i: usize) -> Result<(Token, usize), Refusal> {
    const UNTERMINATED: Refusal = "a [ class is not closed";
    let negated = chars.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let member = |i: &mut usize| -> Result<char, Refusal> {
        match chars.get(*i) {
            None => Err(UNTERMINATED),
            Some('-' | ']') => Err("a [ class has a bare - or ] where a character belongs"),
            Some('\\') => {
                let c = *chars.get(*i + 1).ok_or(UNTERMINATED)?;
                *i += 2;
                Ok(c)
            }
            Some(c) => {
                *i += 1;
                Ok(*c)
            }
        }
    };
    let mut ranges = Vec::new();
    loop {
        match chars.get(i) {
            None => return Err(UNTERMINATED),
            Some(']') if !ranges.is_empty() => {
                return Ok((Token::Class { negated, ranges }, i + 1));
            }
            _ => {}
        }
        let lo = member(&mut i)?;
        let hi = if chars.get(i) == Some(&'-') {
            i += 1;
            member(&mut i)?
        } else {
            lo
        };
        if lo > hi {
            return Err("a [ class has a range that runs backwards");
        }
        ranges.push((lo, hi));
    }
}

/// Go's `filepath.Clean` on a `/`-separated pattern, then a leading `/`
/// dropped (patterns are anchored at the context root anyway).
fn clean(pattern: &str) -> String {
    let rooted = pattern.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if rooted => {}
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    let cleaned = match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    };
    match cleaned.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest.to_owned(),
        _ => cleaned,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    pattern: Pattern,
    exception: bool,
}

/// The rules of a `.dockerignore` file, applied as Docker applies them
/// (see the module documentation).
///
/// ```
/// use rayito::template::DockerIgnore;
///
/// # fn main() -> Result<(), rayito::SandboxError> {
/// let ignore = DockerIgnore::parse("node_modules\n**/*.log\n!keep.log\n")?;
/// assert!(ignore.is_excluded("node_modules/left-pad/index.js"));
/// assert!(ignore.is_excluded("a/b/debug.log"));
/// assert!(!ignore.is_excluded("keep.log"));
/// assert!(!ignore.is_excluded("src/node_modules"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DockerIgnore {
    rules: Vec<Rule>,
}

impl DockerIgnore {
    /// Reads the text of a `.dockerignore` file.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` (`.dockerignore`) naming the line of a pattern
    /// Docker refuses (a `!` alone, an unterminated `[`, a bad class, a
    /// trailing `\`).
    pub fn parse(text: &str) -> Result<Self, SandboxError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut rules = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let refuse = |why: Refusal| {
                SandboxError::invalid_argument(
                    ".dockerignore",
                    format!("line {}: {why}", index + 1),
                )
            };
            if line.starts_with('#') {
                continue;
            }
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let (exception, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            if pattern.is_empty() {
                return Err(refuse("a ! needs a pattern after it"));
            }
            let pattern = Pattern::compile(&clean(pattern)).map_err(refuse)?;
            rules.push(Rule { pattern, exception });
        }
        Ok(Self { rules })
    }

    /// Whether any rule is an exception (`!`): then an excluded directory
    /// may still hold included files, and must be walked.
    pub fn has_exceptions(&self) -> bool {
        self.rules.iter().any(|r| r.exception)
    }

    /// Whether `path` (relative to the context root, `/`-separated) is
    /// excluded from the build context.
    pub fn is_excluded(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        let parents: Vec<&str> = path.match_indices('/').map(|(at, _)| &path[..at]).collect();
        let mut excluded = false;
        for rule in &self.rules {
            // A rule can only change the answer if its kind differs from it.
            if rule.exception != excluded {
                continue;
            }
            let hit = rule.pattern.matches(path)
                || parents.iter().any(|parent| rule.pattern.matches(parent));
            if hit {
                excluded = !rule.exception;
            }
        }
        excluded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excluded(patterns: &[&str], path: &str) -> bool {
        DockerIgnore::parse(&patterns.join("\n"))
            .unwrap_or_else(|e| panic!("{patterns:?}: {e}"))
            .is_excluded(path)
    }

    fn exact(pattern: &str, path: &str) -> bool {
        Pattern::compile(&clean(pattern)).unwrap().matches(path)
    }

    /// moby/patternmatcher's `TestMatches` table: (pattern, path, exact
    /// match, match of the path or a parent).
    #[test]
    fn dockers_own_match_cases() {
        // (pattern, text, 0 = fail, 1 = exact, 2 = only through a parent)
        let cases: &[(&str, &str, u8)] = &[
            ("**", "file", 1),
            ("**", "file/", 1),
            ("**/", "file", 1),
            ("**/", "file/", 1),
            ("**", "/", 1),
            ("**/", "/", 1),
            ("**", "dir/file", 1),
            ("**/", "dir/file", 1),
            ("**", "dir/file/", 1),
            ("**/", "dir/file/", 1),
            ("**/**", "dir/file", 1),
            ("**/**", "dir/file/", 1),
            ("dir/**", "dir/file", 1),
            ("dir/**", "dir/file/", 1),
            ("dir/**", "dir/dir2/file", 1),
            ("dir/**", "dir/dir2/file/", 1),
            ("**/dir", "dir", 1),
            ("**/dir", "dir/file", 2),
            ("**/dir2/*", "dir/dir2/file", 1),
            ("**/dir2/*", "dir/dir2/file/", 2),
            ("**/dir2/**", "dir/dir2/dir3/file", 1),
            ("**/dir2/**", "dir/dir2/dir3/file/", 1),
            ("**file", "file", 1),
            ("**file", "dir/file", 1),
            ("**/file", "dir/file", 1),
            ("**file", "dir/dir/file", 1),
            ("**/file", "dir/dir/file", 1),
            ("**/file*", "dir/dir/file", 1),
            ("**/file*", "dir/dir/file.txt", 1),
            ("**/file*txt", "dir/dir/file.txt", 1),
            ("**/file*.txt", "dir/dir/file.txt", 1),
            ("**/file*.txt*", "dir/dir/file.txt", 1),
            ("**/**/*.txt", "dir/dir/file.txt", 1),
            ("**/**/*.txt2", "dir/dir/file.txt", 0),
            ("**/*.txt", "file.txt", 1),
            ("**/**/*.txt", "file.txt", 1),
            ("a**/*.txt", "a/file.txt", 1),
            ("a**/*.txt", "a/dir/file.txt", 1),
            ("a**/*.txt", "a/dir/dir/file.txt", 1),
            ("a/*.txt", "a/dir/file.txt", 0),
            ("a/*.txt", "a/file.txt", 1),
            ("a/*.txt**", "a/file.txt", 1),
            ("a[b-d]e", "ae", 0),
            ("a[b-d]e", "ace", 1),
            ("a[b-d]e", "aae", 0),
            ("a[^b-d]e", "aze", 1),
            (".*", ".foo", 1),
            (".*", "foo", 0),
            ("abc.def", "abcdef", 0),
            ("abc.def", "abc.def", 1),
            ("abc.def", "abcZdef", 0),
            ("abc?def", "abcZdef", 1),
            ("abc?def", "abcdef", 0),
            ("**/foo/bar", "foo/bar", 1),
            ("**/foo/bar", "dir/foo/bar", 1),
            ("**/foo/bar", "dir/dir2/foo/bar", 1),
            ("abc/**", "abc", 0),
            ("abc/**", "abc/def", 1),
            ("abc/**", "abc/def/ghi", 1),
            ("**/.foo", ".foo", 1),
            ("**/.foo", "bar.foo", 0),
            ("a(b)c/def", "a(b)c/def", 1),
            ("a(b)c/def", "a(b)c/xyz", 0),
            ("a.|)$(}+{bc", "a.|)$(}+{bc", 1),
            (
                "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
                "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
                1,
            ),
            (
                "dist/*.whl",
                "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl",
                1,
            ),
            ("a\\\\", "a\\", 1),
            ("a\\*b", "a*b", 1),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(
                exact(pattern, text),
                *want == 1,
                "exact: {pattern:?} {text:?}"
            );
            assert_eq!(
                excluded(&[pattern], text),
                *want != 0,
                "parents: {pattern:?} {text:?}"
            );
        }
    }

    /// Docker's multi-pattern cases and its folder/exception cases.
    #[test]
    fn dockers_exception_cases() {
        assert!(!excluded(
            &["**", "!util/docker/web"],
            "util/docker/web/foo"
        ));
        assert!(excluded(
            &["**", "!util/docker/web", "util/docker/web/foo"],
            "util/docker/web/foo"
        ));
        assert!(!excluded(
            &["**", "!dist/*.whl"],
            "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl"
        ));
        assert!(excluded(&["*"], "fileutils.go"));
        assert!(excluded(&["*.go"], "fileutils.go"));
        assert!(excluded(&["!fileutils.go", "*.go"], "fileutils.go"));
        assert!(!excluded(&["*.go", "!fileutils.go"], "fileutils.go"));
        assert!(!excluded(&["docs", "!docs/README.md"], "docs/README.md"));
        assert!(!excluded(&["docs/", "!docs/README.md"], "docs/README.md"));
        assert!(!excluded(&["docs/*", "!docs/README.md"], "docs/README.md"));
        assert!(excluded(&["docs"], "docs/README.md"));
        assert!(!excluded(&[], "any/path/there"));
        // Anchored at the root, unlike .gitignore.
        assert!(!excluded(&["*.pyc"], "pkg/mod.pyc"));
        assert!(excluded(&["*.pyc"], "mod.pyc"));
        assert!(excluded(&["/build", "./dist/"], "build/x"));
        assert!(excluded(&["./dist/"], "dist/y"));
        assert!(excluded(&["a/../b"], "b/c"));
        // Classes: `^` negates, `!` is a member.
        assert!(excluded(&["[!a]"], "!"));
        assert!(!excluded(&["[!a]"], "b"));
        assert!(excluded(&["[\\]a]"], "]"));
        assert!(excluded(&["[x\\-]"], "-"));
        assert!(!excluded(&["[x\\-]"], "z"));
        assert!(excluded(&["[a-ζ]*"], "α"));
        assert!(!excluded(&["*[a-ζ]"], "A"));
        assert!(excluded(&["a?b"], "a☺b"));
        assert!(!excluded(&["a???b"], "a☺b"));
        assert!(!excluded(&["a*b"], "a/b"));
        assert!(!excluded(&["a?b"], "a/b"));
        assert!(excluded(&["a*b*c*d*e*/f"], "axbxcxdxexxx/f"));
        assert!(!excluded(&["a*b*c*d*e*/f"], "axbxcxdxe/xxx/f"));
        assert!(excluded(&["a*b?c*x"], "abxbbxdbxebxczzx"));
        assert!(!excluded(&["a*b?c*x"], "abxbbxdbxebxczzy"));
    }

    #[test]
    fn the_file_format_is_dockers() {
        let text = "\u{feff}test1\n/test2\n/a/file/here\n\nlastfile\n# this is a comment\n! /inverted/abs/path\n  # not a comment\n";
        let ignore = DockerIgnore::parse(text).unwrap();
        assert_eq!(ignore.rules.len(), 6);
        assert!(ignore.is_excluded("test1") && ignore.is_excluded("test2/x"));
        assert!(ignore.is_excluded("a/file/here") && ignore.is_excluded("lastfile"));
        assert!(ignore.has_exceptions());
        assert!(ignore.is_excluded("# not a comment"));
        assert!(!ignore.is_excluded("# this is a comment"));
        assert!(!DockerIgnore::parse("x\r\ny\r\n").unwrap().has_exceptions());
        assert!(DockerIgnore::parse("x\r\n").unwrap().is_excluded("x"));
    }

    #[test]
    fn dockers_bad_patterns_are_refused_with_their_line() {
        for (bad, why) in [
            ("!", "a ! needs a pattern after it"),
            ("! ", "a ! needs a pattern after it"),
            ("[", "a [ class is not closed"),
            ("[^", "a [ class is not closed"),
            ("[^bc", "a [ class is not closed"),
            ("a[", "a [ class is not closed"),
            (
                "[]a]",
                "a [ class has a bare - or ] where a character belongs",
            ),
            (
                "[-]",
                "a [ class has a bare - or ] where a character belongs",
            ),
            (
                "[x-]",
                "a [ class has a bare - or ] where a character belongs",
            ),
            (
                "[-x]",
                "a [ class has a bare - or ] where a character belongs",
            ),
            (
                "[a-b-c]",
                "a [ class has a bare - or ] where a character belongs",
            ),
            ("\\", "a pattern ends with \\"),
            ("[z-a]", "a [ class has a range that runs backwards"),
            ("[Local-Only]/", "a [ class has a range that runs backwards"),
        ] {
            let e = DockerIgnore::parse(&format!("ok\n{bad}")).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid .dockerignore: line 2: {why}"),
                "{bad:?}"
            );
        }
    }
}
