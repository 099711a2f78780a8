//! What a failed git command that talked to a remote means: the remote
//! wanted credentials (`GitAuth`), the branch has no upstream
//! (`GitUpstream`), or anything else (the command's own `CommandExit`,
//! with the password redacted).

use crate::error::SandboxError;

/// Text of git's (lower-cased) output that means the remote asked for
/// credentials it did not get, or refused the ones it got.
const AUTH_MARKERS: [&str; 7] = [
    "authentication failed",
    "terminal prompts disabled",
    "could not read username",
    "invalid username or password",
    "access denied",
    "permission denied",
    "not authorized",
];

/// Text of git's (lower-cased) output that means push / pull has no
/// upstream branch to work with.
const UPSTREAM_MARKERS: [&str; 7] = [
    "has no upstream branch",
    "no upstream branch",
    "no upstream configured",
    "no tracking information",
    "set the remote as upstream",
    "set the upstream branch",
    "please specify which branch you want to merge with",
];

/// A git operation that talks to a remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Remote {
    Clone,
    Push,
    Pull,
    /// `remote add` with `fetch`.
    FetchAfterAdd,
}

impl Remote {
    /// The action named in the error's message (`git <action> ...`).
    pub(crate) fn action(self) -> &'static str {
        match self {
            Self::Clone => "clone",
            Self::Push => "push",
            Self::Pull => "pull",
            // `remote add` with `fetch` fails in its fetch.
            Self::FetchAfterAdd => "fetch",
        }
    }

    /// Whether the upstream rules apply (push and pull only).
    fn has_upstream(self) -> bool {
        matches!(self, Self::Push | Self::Pull)
    }
}

/// What failed output means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Auth,
    Upstream,
    Other,
}

/// Applies the rules to a command's stdout and stderr.
pub(crate) fn verdict(op: Remote, stdout: &str, stderr: &str) -> Verdict {
    let text = format!("{stderr}\n{stdout}").to_lowercase();
    if AUTH_MARKERS.iter().any(|m| text.contains(m)) {
        Verdict::Auth
    } else if op.has_upstream() && UPSTREAM_MARKERS.iter().any(|m| text.contains(m)) {
        Verdict::Upstream
    } else {
        Verdict::Other
    }
}

/// The error of a failed git command: for an operation that talks to a
/// remote (`op`), a non-zero exit is classified; anything else keeps its
/// kind. Either way, `secrets` never survive in the error's text.
pub(crate) fn failed(
    err: SandboxError,
    op: Option<Remote>,
    username_only: bool,
    secrets: &[&str],
) -> SandboxError {
    if let (Some(op), SandboxError::CommandExit { stdout, stderr, .. }) = (op, &err) {
        match verdict(op, stdout, stderr) {
            Verdict::Auth => return SandboxError::git_auth(op.action(), username_only),
            Verdict::Upstream => return SandboxError::git_upstream(op.action()),
            Verdict::Other => {}
        }
    }
    err.redact_secrets(secrets)
}

/// The password as it may appear in git's output: raw and percent-encoded
/// (as in a URL), the longer first.
pub(crate) fn password_forms(password: &str) -> Vec<String> {
    let encoded = percent_encode(password);
    let mut forms = vec![password.to_owned()];
    if encoded != password {
        forms.push(encoded);
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms
}

/// Every byte but RFC 3986's unreserved ones as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn verdicts() {
        let cases = [
            (
                Remote::Clone,
                "fatal: Authentication failed for 'http://x/'",
                Verdict::Auth,
            ),
            (
                Remote::Clone,
                "fatal: could not read Username for 'http://x': terminal prompts disabled",
                Verdict::Auth,
            ),
            (
                Remote::Push,
                "remote: Invalid username or password.",
                Verdict::Auth,
            ),
            (
                Remote::Pull,
                "ERROR: Permission denied to bob.",
                Verdict::Auth,
            ),
            (
                Remote::FetchAfterAdd,
                "remote: Access denied",
                Verdict::Auth,
            ),
            (Remote::Push, "remote: Not authorized", Verdict::Auth),
            (
                Remote::Push,
                "fatal: The current branch main has no upstream branch.",
                Verdict::Upstream,
            ),
            (
                Remote::Pull,
                "There is no tracking information for the current branch.",
                Verdict::Upstream,
            ),
            (
                Remote::Pull,
                "Please specify which branch you want to merge with.",
                Verdict::Upstream,
            ),
            (
                Remote::Pull,
                "fatal: no upstream configured for branch 'x'",
                Verdict::Upstream,
            ),
            // Upstream rules are for push and pull only.
            (Remote::Clone, "has no upstream branch", Verdict::Other),
            (
                Remote::Clone,
                "fatal: repository 'http://x/' not found",
                Verdict::Other,
            ),
            (
                Remote::Push,
                "! [rejected] main -> main (fetch first)",
                Verdict::Other,
            ),
        ];
        for (op, stderr, want) in cases {
            assert_eq!(verdict(op, "", stderr), want, "{stderr}");
            // stdout counts as much as stderr.
            assert_eq!(verdict(op, stderr, ""), want, "{stderr}");
        }
    }

    #[test]
    fn percent_encoded_forms_longest_first() {
        assert_eq!(password_forms("plain"), ["plain"]);
        assert_eq!(password_forms("p@ss w"), ["p%40ss%20w", "p@ss w"]);
        assert_eq!(percent_encode("a/é"), "a%2F%C3%A9");
    }

    /// A failed command exactly as the agent's end event makes it.
    fn exit(stdout: &str, stderr: &str) -> SandboxError {
        use crate::error::map::agent::{CommandOutput, EndEventData, from_end_event};
        let end = EndEventData {
            status: "exited".into(),
            exit_code: 128,
            signal: None,
            error: None,
        };
        let output = CommandOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated: false,
        };
        from_end_event(end, output, "git clone").unwrap_err()
    }

    #[test]
    fn classified_failures_pin_variant_and_message() {
        let auth = "fatal: Authentication failed for 'http://h/r.git/'";
        let upstream = "fatal: The current branch topic has no upstream branch.";
        let cases = [
            (
                Remote::Clone,
                false,
                auth,
                ErrorKind::GitAuth,
                "git clone needs credentials: the remote asked for them or refused them; pass a username and a password or token",
            ),
            (
                Remote::Push,
                true,
                auth,
                ErrorKind::GitAuth,
                "git push needs a password or token: the username alone was refused; pass the password or token too",
            ),
            (
                Remote::FetchAfterAdd,
                false,
                auth,
                ErrorKind::GitAuth,
                "git fetch needs credentials: the remote asked for them or refused them; pass a username and a password or token",
            ),
            (
                Remote::Push,
                false,
                upstream,
                ErrorKind::GitUpstream,
                "git push found no upstream branch; pass a remote and a branch, or set the upstream (push with set_upstream, or git branch --set-upstream-to)",
            ),
            (
                Remote::Clone,
                false,
                upstream,
                ErrorKind::CommandExit,
                "command git exited with code 128; its stdout and stderr are in the error",
            ),
        ];
        for (op, username_only, stderr, kind, message) in cases {
            let err = failed(exit("", stderr), Some(op), username_only, &[]);
            assert_eq!(err.kind(), kind, "{stderr}");
            assert_eq!(err.to_string(), message);
            // Neither the URL nor git's text is kept in a classified error.
            if kind != ErrorKind::CommandExit {
                assert!(!format!("{err:?}").contains("http://h"), "{err:?}");
            }
        }
        // Not a remote operation: never classified.
        let err = failed(exit("", auth), None, false, &[]);
        assert_eq!(err.kind(), ErrorKind::CommandExit);
    }

    #[test]
    fn a_command_exit_loses_the_password_in_every_text() {
        let err = exit("out hunter%232", "fatal: 'http://h/hunter#2' and hunter#2");
        let forms = password_forms("hunter#2");
        let secrets: Vec<&str> = forms.iter().map(String::as_str).collect();
        let err = failed(err, Some(Remote::Clone), false, &secrets);
        let SandboxError::CommandExit { stdout, stderr, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(stdout.as_str(), "out ***");
        assert_eq!(stderr.as_str(), "fatal: 'http://h/***' and ***");
        assert!(std::error::Error::source(&err).is_none_or(|s| !s.to_string().contains("hunter")));
    }

    #[test]
    fn other_failures_keep_their_kind_without_the_password() {
        let err = crate::error::SandboxError::invalid_argument("path", "hunter2 and p%40ss");
        let out = failed(err, Some(Remote::Push), false, &["hunter2", "p%40ss"]);
        assert_eq!(out.kind(), ErrorKind::InvalidArgument);
        assert_eq!(out.to_string(), "invalid path: *** and ***");
    }
}
