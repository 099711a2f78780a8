//! Command lines of the git helpers: every argument single-quoted, so no
//! caller text is ever read by the shell; the program is the literal `git`
//! (left bare so that a failed command's message names it).

use crate::error::SandboxError;

/// `s` as one single-quoted shell word (`'` becomes `'\''`).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `git [-C <repo>] <args...>`, every part after `git` quoted.
pub(crate) fn git(repo: Option<&str>, args: &[&str]) -> String {
    let mut line = String::from("git");
    if let Some(repo) = repo {
        line.push_str(" '-C' ");
        line.push_str(&quote(repo));
    }
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line
}

/// Checks a text argument: not empty, no NUL, no newline (git reads none of
/// them in a name, path, URL or config key). Names the argument.
pub(crate) fn text(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    if value.is_empty() {
        return Err(SandboxError::invalid_argument(
            argument,
            "must not be empty",
        ));
    }
    if value.contains(['\0', '\n', '\r']) {
        return Err(SandboxError::invalid_argument(
            argument,
            "must not contain a NUL or a line break",
        ));
    }
    Ok(())
}

/// As [`text`] for an optional argument (`None` is fine).
pub(crate) fn opt_text(argument: &'static str, value: Option<&str>) -> Result<(), SandboxError> {
    value.map_or(Ok(()), |v| text(argument, v))
}

/// A value that may be empty or span lines (a commit message, a config
/// value): only NUL is refused (it cannot travel in an argument).
pub(crate) fn free_text(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    if value.contains('\0') {
        return Err(SandboxError::invalid_argument(
            argument,
            "must not contain a NUL",
        ));
    }
    Ok(())
}

/// A branch, remote or ref name: [`text`], and not starting with `-` (git
/// would read it as an option).
pub(crate) fn name(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    text(argument, value)?;
    if value.starts_with('-') {
        return Err(SandboxError::invalid_argument(
            argument,
            "must not start with '-'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_is_single_quoted() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$(x) `y` \"z\""), "'$(x) `y` \"z\"'");
        assert_eq!(
            git(Some("/home/user/r"), &["status", "--porcelain=1", "-b"]),
            "git '-C' '/home/user/r' 'status' '--porcelain=1' '-b'"
        );
        assert_eq!(git(None, &["init"]), "git 'init'");
    }

    #[test]
    fn text_arguments_are_checked_by_name() {
        let err = text("path", "").unwrap_err();
        assert_eq!(err.to_string(), "invalid path: must not be empty");
        let err = text("url", "a\nb").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid url: must not contain a NUL or a line break"
        );
        let err = name("branch", "-f").unwrap_err();
        assert_eq!(err.to_string(), "invalid branch: must not start with '-'");
        assert!(free_text("message", "two\nlines").is_ok());
        assert!(free_text("message", "a\0").is_err());
        assert!(opt_text("path", None).is_ok());
    }
}
